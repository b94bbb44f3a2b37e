#!/usr/bin/env bash
# Allocation fault injection (issue 18, style.md habit 5): PLAIT_FAIL_ALLOC_AT=N makes the
# N-th call of the allocation hook (src/base/alloc.c) fail, and every later one. For N
# from 1 up to the number of calls a short single-process run makes, each run must end
# with a clean error: a nonzero exit status below 124 (no signal, no timeout), a
# "plait: error:" line that says memory ran out ("memory" or "cannot allocate"), no
# AddressSanitizer or UBSan report, every hook block freed ("0 blocks live at exit"),
# and no leak of plait's own under LeakSanitizer (tests/scripts/lsan_plait_leaks.py sets
# Open MPI's own start-up allocations apart).
#
# Three runs (tiny model, --mock-data): `train` 2 iterations; `save` 2 iterations and a
# checkpoint; `load` resuming that checkpoint to iteration 3 with one evaluation. In
# `make test` every ALLOC_FAULT_STRIDE-th N (default: 6, 235, 290: 17 runs, 50-90 s);
# `make chaos` runs every 8th N, and every 40th with LeakSanitizer (scripts/chaos.sh). Knobs:
#   ALLOC_FAULT_STRIDE  1 = every N; unset = a few per run
#   ALLOC_FAULT_PLAIT   the build to inject into (default build-asan/plait)
#   ALLOC_FAULT_LSAN    0 = skip LeakSanitizer (the live-block count still checks the hook)
source "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=1
unset PLAIT_TEST_GEMM_PEAK # (lib.sh's) each run measures the peak: the same allocations swept
AP=${ALLOC_FAULT_PLAIT:-$ROOT/build-asan/plait}
LEAKS="$ROOT/tests/scripts/lsan_plait_leaks.py"
if [ ! -x "$AP" ]; then
    echo "# skipped: $AP is missing (make asan-build)"
    summary alloc_faults
    exit $?
fi
if [ "${ALLOC_FAULT_LSAN:-1}" = 1 ]; then
    export ASAN_OPTIONS=fast_unwind_on_malloc=0:malloc_context_size=40
    export LSAN_OPTIONS=exitcode=0 # Open MPI's leaks would set it; lsan_plait_leaks.py decides
else
    export ASAN_OPTIONS=detect_leaks=0
fi
TINY=(--mock-data --vocab-size 100 --num-layers 1 --hidden-size 16 --num-attention-heads 2
      --seq-length 16 --micro-batch-size 1 --lr 1e-3 --log-interval 1 --lr-decay-iters 8)

# verdict LOG RC: empty if the injected failure ended cleanly, else why not.
verdict() {
    local log=$1 rc=$2
    if [ "$rc" -eq 0 ]; then echo "exit status 0"; return; fi
    if [ "$rc" -ge 124 ]; then echo "exit status $rc (signal or timeout)"; return; fi
    grep -q "ERROR: AddressSanitizer" "$log" && { echo "AddressSanitizer report"; return; }
    grep -q "runtime error:" "$log" && { echo "UBSan report"; return; }
    grep -q "^plait: error: " "$log" || { echo "no 'plait: error:' line"; return; }
    grep -qE "^plait: error: .*(memory|cannot allocate)" "$log" ||
        { echo "the error does not say memory ran out: $(grep -m1 '^plait: error' "$log")"; return; }
    grep -q "plait: allocations: [0-9]* calls, 0 blocks live at exit" "$log" ||
        { echo "hook blocks live at exit: $(grep 'plait: allocations' "$log")"; return; }
    if [ "${ALLOC_FAULT_LSAN:-1}" = 1 ] && ! /usr/bin/python3 "$LEAKS" "$log" >"$log.leaks"; then
        echo "LeakSanitizer: $(tail -1 "$log.leaks")"; return
    fi
}

# sweep NAME DEFAULT_STRIDE SETUP ARGS...: counts the run's allocation calls C (a clean
# run: exit 0, nothing live), then injects a failure at N = 1, 1 + stride, ..., C.
# SETUP is a command run before each run (fresh directories).
sweep() {
    local name=$1 stride=${ALLOC_FAULT_STRIDE:-$2} setup=$3; shift 3
    eval "$setup"
    PLAIT_ALLOC_REPORT=1 timeout 120 "$AP" train "$@" >"$TMP/$name.count" 2>&1
    local rc=$?
    local calls
    calls=$(sed -nE 's/^plait: allocations: ([0-9]+) calls, 0 blocks live at exit$/\1/p' \
        "$TMP/$name.count")
    check "$name: the run without faults exits 0 with every hook block freed ($calls calls)" \
        test "$rc" -eq 0 -a -n "$calls"
    [ -n "$calls" ] || return
    local ns n bad=0 runs=0 first=""
    ns=$(seq 1 "$stride" "$calls"; echo "$calls")
    for n in $(echo "$ns" | sort -nu); do
        eval "$setup"
        PLAIT_FAIL_ALLOC_AT=$n timeout 120 "$AP" train "$@" >"$TMP/$name.log" 2>&1
        rc=$?
        runs=$((runs + 1))
        local why
        why=$(verdict "$TMP/$name.log" "$rc")
        if [ -n "$why" ]; then
            bad=$((bad + 1))
            [ -z "$first" ] && first="N=$n: $why" && cp "$TMP/$name.log" "$TMP/$name.first-bad.log"
        fi
    done
    echo "# $name: $runs injected failures (N = 1..$calls, stride $stride), $bad not clean"
    check "$name: every injected failure ends cleanly${first:+ (first bad: $first)}" test "$bad" -eq 0
}

# Every run starts without the GEMM peak cache (lib.sh's PLAIT_PEAK_CACHE), so each makes
# the same allocations as the counting run (a cache present changes their sequence).
NOCACHE="rm -f '$PLAIT_PEAK_CACHE'"
sweep train 6 "rm -rf '$TMP/ck'; $NOCACHE" "${TINY[@]}" --train-iters 2
sweep save 235 "rm -rf '$TMP/ck'; $NOCACHE" "${TINY[@]}" --train-iters 2 --save "$TMP/ck"
rm -rf "$TMP/base" && timeout 60 "$ROOT/build/plait" train "${TINY[@]}" --train-iters 2 \
    --save "$TMP/base" >/dev/null 2>&1
check "a checkpoint to resume from" test -f "$TMP/base/latest_checkpointed_iteration.txt"
sweep load 290 "$NOCACHE" "${TINY[@]}" --train-iters 3 --load "$TMP/base" --eval-iters 1 --eval-interval 3

summary alloc_faults
