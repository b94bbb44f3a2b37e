#!/usr/bin/env bash
# The parallel layer under real launchers: tests/tools/mpi_check as a singleton, under
# OpenMPI's mpirun with 2, 4 and 8 ranks over every (tp, pp) layout, the MPICH build
# (make mpich-build) under MPICH's mpirun with 2 and 4 ranks, and launches that must
# fail: a binary under the other implementation's mpirun (the singleton pitfall) and a
# wrong -n. Every run asserts its world size (mpi_check's first check) and is wrapped
# in a timeout. On this 2-core machine 4 and 8 ranks are oversubscribed: OpenMPI then
# yields when idle (~0.1 ms per collective), MPICH cannot (5-30 ms per collective), so
# MPICH runs few collectives at 4 ranks.
# Environment adapted from shared/reference/mpi-env.sh (copied, not sourced).
source "$(dirname "$0")/lib.sh"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 # running as root in CI
export OMPI_MCA_rmaps_base_oversubscribe=1 # more ranks than the 2 cores
export OMPI_MCA_mpi_yield_when_idle=1      # mpirun sets it when oversubscribed; srun would not
export OMPI_MCA_pml=ob1                    # skip the UCX pml probe: ~0.25 s faster start-up
export GLIBC_TUNABLES=glibc.malloc.hugetlb=1

LIMIT=${MPI_TEST_TIMEOUT:-45} # a launch takes 0.2-5 s; a hang must not eat the budget
OMPI_CHECK=$ROOT/build/testtools/mpi_check
MPICH_CHECK=$ROOT/build-mpich/testtools/mpi_check

# Launcher variables of an enclosing launch must not leak into the singleton runs.
no_launcher() {
    env -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u PMI_SIZE -u PMI_RANK \
        -u SLURM_STEP_NUM_TASKS -u SLURM_PROCID timeout -k 5 "$LIMIT" "$@"
}
ompi() { local n=$1; shift; timeout -k 5 "$LIMIT" mpirun.openmpi -n "$n" "$@"; }
mpich() { local n=$1; shift; timeout -k 5 "$LIMIT" mpirun.mpich -n "$n" "$@"; }

# passes WORLD LAUNCH...: the launch exits 0, its world size was WORLD, nothing failed.
passes() {
    local n=$1 out=$TMP/mpi_run.out t0 rc; shift
    t0=$(date +%s.%N)
    "$@" >"$out" 2>&1
    rc=$?
    awk -v t0="$t0" -v t1="$(date +%s.%N)" -v cmd="$*" \
        'BEGIN { printf "    %.2f s  %s\n", t1 - t0, cmd }' >>"$TMP/timings"
    cat "$out"
    [ "$rc" -eq 0 ] && grep -q "^ok world_size_is_$n " "$out" &&
        grep -qE '^mpi_check: [1-9][0-9]* passed, 0 failed$' "$out"
}

# built BINARY: a missing build is a failure with the command that makes it.
built() {
    [ -x "$1" ] && return 0
    echo "$1 is missing: run make all mpich-build"
    return 1
}

: >"$TMP/timings"
check built_openmpi_mpi_check built "$OMPI_CHECK"
check built_mpich_mpi_check built "$MPICH_CHECK"

# Singletons: no launcher at all, world 1 (grid 1x1x1, DP buckets without MPI calls).
check singleton_openmpi_world_1 passes 1 no_launcher "$OMPI_CHECK" 1
check singleton_mpich_world_1 passes 1 no_launcher "$MPICH_CHECK" 1

# OpenMPI: every (tp, pp) layout, e.g. 4 = tp1 x pp2 x dp2 and tp2 x pp1 x dp2, 8 = 2x2x2.
check openmpi_2_ranks_all_layouts passes 2 ompi 2 "$OMPI_CHECK" 2
check openmpi_4_ranks_all_layouts passes 4 ompi 4 "$OMPI_CHECK" 4
check openmpi_8_ranks_all_layouts passes 8 ompi 8 "$OMPI_CHECK" 8

# MPICH: all layouts at 2 ranks; at 4 ranks (oversubscribed, no yield) two layouts, one step.
check mpich_2_ranks_all_layouts passes 2 mpich 2 "$MPICH_CHECK" 2
check mpich_4_ranks_tp2_pp2_and_dp4 passes 4 mpich 4 "$MPICH_CHECK" 4 --layouts 2x2,1x1 --steps 1

# The same checks under AddressSanitizer + UBSan (build-asan, made by make test / asan-build).
# Leak detection is off: OpenMPI itself leaks at finalize.
ASAN_CHECK=$ROOT/build-asan/testtools/mpi_check
if [ -x "$ASAN_CHECK" ]; then
    check asan_openmpi_4_ranks_tp2_pp2_and_dp4 passes 4 env ASAN_OPTIONS=detect_leaks=0 \
        timeout -k 5 "$LIMIT" mpirun.openmpi -n 4 -x ASAN_OPTIONS "$ASAN_CHECK" 4 --layouts 2x2,1x1,1x4
fi

# Launches that must fail on the world-size assertion.
check_fails singleton_expecting_2_ranks 'world size 1, expected 2' no_launcher "$OMPI_CHECK" 2
check_fails openmpi_binary_under_mpich_mpirun 'world size 1, expected 2' \
    mpich 2 "$OMPI_CHECK" 2
check_fails mpich_binary_under_openmpi_mpirun 'world size 1, expected 2' \
    ompi 2 "$MPICH_CHECK" 2
check_fails openmpi_wrong_rank_count 'world size 2, expected 4' ompi 2 "$OMPI_CHECK" 4
# ... and pl_dist_init names the launcher and the library on its own.
check_fails mismatch_names_launcher_and_library \
    'singleton pitfall.*built against OpenMPI.*mpirun.openmpi' mpich 2 "$OMPI_CHECK" 2

echo "launch times:"
cat "$TMP/timings"
summary mpi
