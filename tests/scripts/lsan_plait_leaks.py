#!/usr/bin/python3
"""Reads a LeakSanitizer report (stderr of an ASan build) and prints the leaks that are
plait's own: a leak record whose stack, read from the allocation upwards, reaches a
frame of plait's sources (src/, tools/, tests/) before any frame of the MPI stack
(libmpi, Open MPI's libraries and plug-ins, PMIx, hwloc, libevent; an '<unknown
module>' is a plug-in Open MPI already unloaded). glibc frames are passed through, so
a FILE from fopen or a string from strdup that plait forgot counts as plait's.
Open MPI's own allocations, made at MPI_Init and never freed, are not plait's and are
counted apart. Exit status 1 if plait leaked, else 0. Usage: lsan_plait_leaks.py LOG"""
import re
import sys

MPI = re.compile(r"libmpi|libopen-pal|libopen-rte|libpmix|libhwloc|libevent|mca_|"
                 r"unknown module|libucp|libucs|libfabric|libmunge|libpsm")
PLAIT = re.compile(r"(?:^|[\s/(])(src|tools|tests)/[\w/]+\.c:\d+")

text = open(sys.argv[1], errors="replace").read()
ours, mpi = [], 0
for block in re.split(r"\n(?=(?:Direct|Indirect) leak of )", text):
    if not re.match(r"(Direct|Indirect) leak of ", block):
        continue
    frames = re.findall(r"^\s+#(\d+) (.*)$", block, re.M)
    owner = None
    for num, frame in frames:
        if int(num) == 0:
            continue  # the interceptor (malloc, calloc, strdup, ...)
        if MPI.search(frame):
            owner = "mpi"
            break
        if PLAIT.search(frame):
            owner = "plait"
            break
    if owner == "plait":
        ours.append(block.strip())
    else:
        mpi += 1
for b in ours:
    print(b + "\n")
print(f"# {len(ours)} leak record(s) of plait, {mpi} of the MPI stack or unattributed")
sys.exit(1 if ours else 0)
