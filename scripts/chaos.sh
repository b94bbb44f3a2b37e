#!/usr/bin/env bash
# make chaos (issue 18; not part of make test): plait under kill -9, full disks, dead and
# frozen ranks, and failing allocations. Prints figures for docs/reliability.md and ends
# "chaos: N passed, N failed". About 15 minutes on the 2-core test machine.
#
# 1. kill -9 at random moments: CHAOS_KILLS_SP single-process, CHAOS_KILLS_DP DP 2 and
#    CHAOS_KILLS_Z3 ZeRO-3 (mpirun -n 2) runs of 12 iterations that save every iteration,
#    each killed once after a random delay (uniform from half the start-up to 0.1 s after
#    an uninterrupted run logs its last iteration, so kills land in start-up, steps and
#    saves; in MPI runs alternately one random rank, or every
#    process of the job at once as a power cut would), then resumed with the same
#    command and --load. Each resumed run must finish; its losses must be bit-identical
#    to an uninterrupted run's for every iteration it ran, and its final checkpoint
#    (every file of iter_0000012) byte-identical to the uninterrupted run's.
# 2. Full disks: tmpfs mounts of 8 sizes, 150 to 1200 KiB (as root), into which
#    4-iteration runs save every iteration (~110 KiB a checkpoint, all kept): each run either finishes or fails with exit status 1 naming ENOSPC, and
#    the newest published checkpoint then still resumes to the end elsewhere.
# 3. Rank death and freeze timing (mpirun -n 2): kill -9 of rank 1, and SIGSTOP of rank 1
#    with --distributed-timeout-minutes 0.05 (3 s), CHAOS_RANK_TRIALS times each: the
#    time from the signal to the job's end, the exit status, the first error line.
# 4. Allocation faults: tests/scripts/alloc_faults.sh with every CHAOS_ALLOC_STRIDE-th N
#    (default 8; 1 = every N, about an hour here under load) under ASan with the hook's
#    live-block count, then every 40th N with LeakSanitizer as well.
# CHAOS_SEED makes the kill moments reproducible; CHAOS_PARTS (e.g. "1 3") runs a subset.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PLAIT=${PLAIT:-$ROOT/build/plait}
SEED=${CHAOS_SEED:-$$}
PARTS=${CHAOS_PARTS:-"1 2 3 4"}
KILLS_SP=${CHAOS_KILLS_SP:-20} KILLS_DP=${CHAOS_KILLS_DP:-16} KILLS_Z3=${CHAOS_KILLS_Z3:-16}
RANK_TRIALS=${CHAOS_RANK_TRIALS:-3}
TMP=$(mktemp -d /tmp/plait-chaos.XXXXXX)
MOUNTS=()
cleanup() {
    local m; for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT
export OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_pml=ob1
RANDOM=$SEED
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok $1"; }
bad() { fail=$((fail + 1)); echo "not ok $1"; }
now() { date +%s.%N; }
echo "# chaos: seed $SEED, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
T0=$(now)

TINY=(--mock-data --vocab-size 100 --num-layers 2 --hidden-size 16 --num-attention-heads 2
      --seq-length 16 --micro-batch-size 1 --lr 1e-3 --log-interval 1 --eval-iters 0
      --train-iters 12 --lr-decay-iters 16 --lr-warmup-iters 2 --save-interval 1)
# losses FILE: "iteration loss" per line of a metrics file
losses() { sed -nE 's/^\{"iteration": ([0-9]+), "consumed_samples": [0-9]+, "lm_loss": ([^,]*),.*/\1 \2/p' "$1"; }

# launch KIND DIR METRICS LOG [more flags]: starts a run in the background, sets PID.
launch() {
    local kind=$1 dir=$2 metrics=$3 log=$4; shift 4
    local flags=("${TINY[@]}" --save "$dir" --metrics-file "$metrics" "$@")
    [ -f "$dir/latest_checkpointed_iteration.txt" ] && flags+=(--load "$dir")
    case $kind in
        sp) setsid "$PLAIT" train "${flags[@]}" >"$log" 2>&1 & ;;
        dp) setsid mpirun.openmpi -n 2 "$PLAIT" train "${flags[@]}" >"$log" 2>&1 & ;;
        z3) setsid mpirun.openmpi -n 2 "$PLAIT" train "${flags[@]}" --zero-stage 3 >"$log" 2>&1 & ;;
    esac
    PID=$!
}
# finish PID SECS: waits for the job, killing its process group after SECS; sets RC.
finish() {
    timeout "$2" tail -s 0.05 --pid="$1" -f /dev/null || kill -9 -- -"$1" 2>/dev/null
    wait "$1" 2>/dev/null; RC=$?
}
# ranks PID: the plait processes of the job started as PID (itself when single-process)
ranks() { pgrep -s "$1" -f "plait train" | grep -vx "$(pgrep -s "$1" -x mpirun.openmpi || echo none)"; }

if [[ " $PARTS " == *" 1 "* ]]; then
    echo "# part 1: kill -9 at random moments"
    for kind in sp dp z3; do
        case $kind in sp) n=$KILLS_SP ;; dp) n=$KILLS_DP ;; z3) n=$KILLS_Z3 ;; esac
        ref=$TMP/$kind-ref
        t=$(now)
        launch $kind "$ref" "$ref.jsonl" "$ref.log"
        until [ -s "$ref.jsonl" ] || ! kill -0 $PID 2>/dev/null; do sleep 0.01; done
        start=$(echo "$(now) - $t" | bc) # start-up: until the first metrics line
        until [ "$(grep -c lm_loss "$ref.jsonl")" -ge 12 ] || ! kill -0 $PID 2>/dev/null; do
            sleep 0.01
        done
        last=$(echo "$(now) - $t" | bc) # the last iteration logged (its save follows)
        finish $PID 300; rc=$RC
        dur=$(echo "$(now) - $t" | bc)
        if [ "$rc" -ne 0 ] || [ "$(cat "$ref/latest_checkpointed_iteration.txt" 2>/dev/null)" != 12 ]; then
            bad "$kind: the uninterrupted run (exit $rc)"; tail -5 "$ref.log"; continue
        fi
        lo=$(echo "scale=3; $start / 2" | bc)
        hi=$(echo "scale=3; $last + 0.1" | bc)
        echo "# $kind: uninterrupted run ${dur}s (iterations 1 and 12 logged at ${start}s and" \
             "${last}s); killing $n runs at uniform moments in [${lo}, ${hi}]s"
        good=0 where_save=0 where_none=0 restarts=0 where_end=0
        for i in $(seq "$n"); do
            d=$TMP/$kind-$i
            delay=$(echo "scale=3; $lo + ($hi - $lo) * $RANDOM / 32768" | bc)
            launch $kind "$d" "$d.killed.jsonl" "$d.killed.log"
            if [ $((i % 4)) = 3 ]; then
                # every 4th kill waits for a save in progress: an iter_N.tmp being written
                # (a save takes ~1% of the run, so uniform moments seldom land in one)
                delay=save
                until compgen -G "$d/iter_*.tmp" >/dev/null || ! kill -0 $PID 2>/dev/null; do :; done
            else
                sleep "$delay"
            fi
            if [ $kind = sp ] || [ $((i % 2)) = 0 ]; then
                kill -9 -- -"$PID" 2>/dev/null # the whole process group: a power cut
                how=all
            else
                victim=$(ranks "$PID" | shuf -n 1 --random-source=<(yes "$RANDOM"))
                [ -n "$victim" ] && kill -9 "$victim" 2>/dev/null
                how=rank
            fi
            finish $PID 60
            at=$(cat "$d/latest_checkpointed_iteration.txt" 2>/dev/null || echo none)
            [ "$at" = none ] && where_none=$((where_none + 1))
            [ "$at" = 12 ] && where_end=$((where_end + 1))
            { compgen -G "$d/iter_*.tmp" || compgen -G "$d/iter_*.old"; } >/dev/null &&
                where_save=$((where_save + 1))
            # resume (again if a resumed run itself fails, at most 3 times)
            ok_run=0
            for attempt in 1 2 3; do
                launch $kind "$d" "$d.resumed$attempt.jsonl" "$d.resumed$attempt.log"
                finish $PID 120; rc=$RC
                restarts=$((restarts + 1))
                [ "$rc" -eq 0 ] && { ok_run=$attempt; break; }
            done
            why=""
            [ "$ok_run" = 0 ] && why="the resumed run failed: $(grep -m1 error "$d.resumed3.log")"
            if [ -z "$why" ]; then
                # every loss a resumed run logged equals the uninterrupted run's
                cat "$d".resumed*.jsonl 2>/dev/null | losses /dev/stdin | sort -u >"$d.got"
                losses "$ref.jsonl" | sort -u >"$d.want"
                extra=$(comm -23 "$d.got" "$d.want" | head -1)
                [ -n "$extra" ] && why="loss differs: iteration ${extra}; expected $(grep "^${extra%% *} " "$d.want")"
            fi
            if [ -z "$why" ] && ! diff -r "$ref/iter_0000012" "$d/iter_0000012" >/dev/null 2>&1; then
                why="iter_0000012 differs from the uninterrupted run's"
            fi
            if [ -z "$why" ]; then
                good=$((good + 1))
            else
                bad "$kind kill $i (after ${delay}s, $how, checkpoint at $at): $why"
                cp -r "$d"* "$ROOT/build/" 2>/dev/null
            fi
            rm -rf "$d" "$d".*
        done
        echo "# $kind: $good of $n killed runs resumed bit-identical ($where_none killed before" \
             "any checkpoint, $where_end after the last, $where_save left a save's temporary" \
             "or aside copy)"
        [ "$good" -eq "$n" ] && ok "$kind: $n kill -9s, every one resumed bit-identical"
    done
fi

if [[ " $PARTS " == *" 2 "* ]]; then
    echo "# part 2: full disks"
    if [ "$(id -u)" != 0 ]; then
        echo "# skipped: not root (tmpfs mounts)"
    else
        clean=0 finished=0 nospace=0 total=0
        for kb in 150 300 450 600 750 900 1050 1200; do
            m=$TMP/disk$kb; mkdir -p "$m"
            mount -t tmpfs -o size=${kb}k tmpfs "$m" && MOUNTS+=("$m") || { bad "mount ${kb}k"; continue; }
            total=$((total + 1))
            "$PLAIT" train "${TINY[@]}" --train-iters 4 --save "$m/c" >"$m.log" 2>&1
            rc=$?
            if [ "$rc" -eq 0 ]; then
                finished=$((finished + 1)); clean=$((clean + 1))
            elif [ "$rc" -eq 1 ] && grep -q "No space left on device" "$m.log"; then
                nospace=$((nospace + 1))
                at=$(cat "$m/c/latest_checkpointed_iteration.txt" 2>/dev/null || echo none)
                if [ "$at" = none ]; then
                    clean=$((clean + 1))
                else
                    cp -r "$m/c" "$TMP/copy$kb"
                    if "$PLAIT" train "${TINY[@]}" --train-iters 4 --load "$TMP/copy$kb" \
                        --save "$TMP/copy$kb" >"$m.resume.log" 2>&1; then
                        clean=$((clean + 1))
                    else
                        bad "disk ${kb}k: the checkpoint of iteration $at does not resume"
                    fi
                fi
            else
                bad "disk ${kb}k: exit $rc: $(grep -m1 error "$m.log")"
            fi
            umount "$m"
        done
        echo "# disks of 150..1200 KiB: $total runs, $finished finished, $nospace stopped on ENOSPC;" \
             "$clean clean (finished, or the newest checkpoint resumed)"
        [ "$clean" -eq "$total" ] && ok "full disks: every run finished or stopped cleanly with a loadable checkpoint"
        bash "$ROOT/tests/scripts/disk_full.sh" | tail -1
    fi
fi

if [[ " $PARTS " == *" 3 "* ]]; then
    echo "# part 3: rank death and freeze (mpirun -n 2)"
    for sig in KILL STOP; do
        for i in $(seq "$RANK_TRIALS"); do
            d=$TMP/rank-$sig-$i
            # a model whose steps take ~10 ms, so the job is mid-run when the signal comes
            flags=(--train-iters 100000 --save-interval 100000 --lr-decay-iters 100000
                   --hidden-size 128 --seq-length 128 --num-layers 4)
            [ $sig = STOP ] && flags+=(--distributed-timeout-minutes 0.05)
            launch dp "$d" "$d.jsonl" "$d.log" "${flags[@]}"
            for _ in $(seq 300); do
                c=$(grep -c lm_loss "$d.jsonl" 2>/dev/null); [ "${c:-0}" -ge 3 ] && break; sleep 0.1
            done
            victim=""
            for p in $(ranks "$PID"); do
                tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 && victim=$p
            done
            t=$(now)
            kill -$sig "$victim"
            finish $PID 60; rc=$RC
            took=$(echo "$(now) - $t" | bc)
            first=$(grep -m1 -E "error|noticed that process" "$d.log" | cut -c1-200)
            echo "# SIG$sig rank 1 (trial $i): job over after ${took}s, exit $rc; first error: $first"
            [ -z "$victim" ] && { echo "# no rank 1 found; the log:"; tail -5 "$d.log"; }
            limit=10; [ $sig = STOP ] && limit=8
            if [ "$(echo "$took < $limit" | bc)" = 1 ] && [ "$rc" -ne 0 ]; then
                ok "SIG$sig of rank 1 ends the job within ${limit}s (trial $i)"
            else
                bad "SIG$sig of rank 1 (trial $i): ${took}s, exit $rc"
            fi
            kill -9 -- -"$PID" 2>/dev/null
            rm -rf "$d"
        done
    done
fi

if [[ " $PARTS " == *" 4 "* ]]; then
    echo "# part 4: allocation faults"
    t=$(now)
    st=${CHAOS_ALLOC_STRIDE:-8}
    if ALLOC_FAULT_STRIDE=$st ALLOC_FAULT_LSAN=0 bash "$ROOT/tests/scripts/alloc_faults.sh" \
        >"$TMP/af1.out" 2>&1; then ok "every ${st}th N: ASan, live blocks"; else bad "every ${st}th N: ASan, live blocks"; fi
    grep -E "^#|^not ok|alloc_faults:" "$TMP/af1.out"
    if ALLOC_FAULT_STRIDE=40 bash "$ROOT/tests/scripts/alloc_faults.sh" >"$TMP/af40.out" 2>&1; then
        ok "every 40th N: LeakSanitizer"; else bad "every 40th N: LeakSanitizer"; fi
    grep -E "^#|^not ok|alloc_faults:" "$TMP/af40.out"
    echo "# allocation faults: $(echo "$(now) - $t" | bc)s"
fi

echo "# chaos took $(echo "$(now) - $T0" | bc)s"
echo "chaos: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
