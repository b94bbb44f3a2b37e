"""Checks of a checkpoint loaded into another vocabulary padding (reshard.sh), on the
global tensors that ckpt_tensors.py assembles independently of plait.

    python3 reshard_check.py padded SRC_ITER DST_ITER
        DST was loaded from SRC and saved without training. Every tensor that is not
        vocabulary-split equals SRC's bit for bit; the vocabulary tensors' rows below
        both paddings equal SRC's bit for bit; DST's rows past SRC's padding are zero
        (and their Adam moments, DST being a stage-0 checkpoint).
    python3 reshard_check.py bf16 SRC_ITER DST_ITER
        every parameter of DST is SRC's rounded to bfloat16 (nearest, ties to even),
        rounded here with integer arithmetic on the float32 bits.
    python3 reshard_check.py inspect JSON ITER
        plait ckpt inspect --json's description agrees with the directory: layout and
        tensors as the manifest says, each file's size on disk, their total.
    python3 reshard_check.py moments A_ITER B_ITER
        the Adam moments of two stage-0 checkpoints are bit-identical over the rows
        both hold (the vocabulary's padding may differ).
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ckpt_tensors as ct  # noqa: E402


def splits(idir):
    man = json.load(open(os.path.join(idir, 'manifest.json')))
    return {k: v['tp_split'] for k, v in man['tensors'].items()}


def common_rows(a, b):
    n = min(a.shape[0], b.shape[0])
    return a[:n], b[:n]


def padded(src, dst):
    a, _ = ct.whole(src, trim=False)
    b, _ = ct.whole(dst, trim=False)
    kinds = splits(dst)
    bad = []
    for k in a:
        if kinds[k] != 'vocab':
            if not np.array_equal(a[k], b[k]):
                bad.append(k)
            continue
        x, y = common_rows(a[k], b[k])
        if not np.array_equal(x, y):
            bad.append(k + ' (common rows)')
        if b[k].shape[0] > a[k].shape[0]:
            for pre in ('', 'optimizer.exp_avg.', 'optimizer.exp_avg_sq.'):
                t = ct.whole(dst, prefix=pre, trim=False)[0][k] if pre else b[k]
                if np.any(t[a[k].shape[0]:] != 0):
                    bad.append(pre + k + ' (rows past the saved padding not zero)')
    print(f'{len(a)} tensors; rows {a["embedding.word_embeddings.weight"].shape[0]} -> '
          f'{b["embedding.word_embeddings.weight"].shape[0]}; wrong: {bad}')
    return 0 if not bad else 1


def moments(pa, pb):
    bad = []
    for pre in ('optimizer.exp_avg.', 'optimizer.exp_avg_sq.'):
        a, _ = ct.whole(pa, prefix=pre, trim=False)
        b, _ = ct.whole(pb, prefix=pre, trim=False)
        for k in a:
            x, y = common_rows(a[k], b[k])
            if not np.array_equal(x, y):
                bad.append(pre + k)
    print(f'moments differing: {bad}')
    return 0 if not bad else 1


def bf16(src, dst):
    a, _ = ct.whole(src, trim=False)
    b, _ = ct.whole(dst, trim=False)
    bad = []
    for k in a:
        bits = a[k].astype(np.float32).view(np.uint32).astype(np.uint64)
        r = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
        want = r.astype(np.uint32).view(np.float32)
        if not np.array_equal(want, b[k]):
            bad.append(k)
    print(f'{len(a)} tensors; not the bf16 rounding: {bad}')
    return 0 if not bad and set(a) == set(b) else 1


def inspect(js, idir):
    d = json.load(open(js))
    man = json.load(open(os.path.join(idir, 'manifest.json')))
    par = man['parallel']
    bad = []
    if d['layout']['tensor_model_parallel_size'] != par['tensor_model_parallel_size'] or \
            d['layout']['pipeline_model_parallel_size'] != par['pipeline_model_parallel_size']:
        bad.append('layout')
    if [t['name'] for t in d['tensors']] != list(man['tensors']) or \
            any(t['shape'] != man['tensors'][t['name']]['shape'] for t in d['tensors']):
        bad.append('tensors')
    sizes = {f: os.path.getsize(os.path.join(idir, f)) for f in man['files']}
    got = {f['path']: f['bytes'] for f in d['files'] if f.get('verified')}
    if got != sizes or d['total_bytes'] != sum(sizes.values()):
        bad.append('files')
    print(f'{len(d["tensors"])} tensors, {len(got)} files verified; wrong: {bad}')
    return 0 if not bad else 1


if __name__ == '__main__':
    cmds = {'padded': padded, 'moments': moments, 'bf16': bf16, 'inspect': inspect}
    if len(sys.argv) != 4 or sys.argv[1] not in cmds:
        raise SystemExit(__doc__)
    sys.exit(cmds[sys.argv[1]](sys.argv[2], sys.argv[3]))
