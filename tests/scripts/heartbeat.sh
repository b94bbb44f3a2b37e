#!/usr/bin/env bash
# Heartbeats name the frozen rank (issue 18; src/parallel/heartbeat.h): ranks of a
# training job are stopped with SIGSTOP after iteration 3, and the first line of the
# collective watchdog (--distributed-timeout-minutes) must come from a rank that was
# not stopped and name exactly the stopped ranks ("no heartbeat from rank R"), at DP 2,
# TP 2 x PP 2 and PP 2 x DP 2 (two ranks stopped), with exit status 5 within the
# timeout + 3 s. A healthy job with heartbeats completes (their shut-down is collective)
# with the losses of the same job without them (PLAIT_HEARTBEAT=0). A rank stuck in
# compute (MPMD: it alone evaluates at length) is named alive but outside MPI. Under
# MPICH as well when build-mpich/plait exists.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1
# status_is CODE COMMAND...: passes if the command exits with exactly CODE.
status_is() {
    local want=$1; shift
    "$@"; local rc=$?
    echo "# exit status $rc, expected $want"
    [ "$rc" -eq "$want" ]
}
MOCK=(--mock-data --vocab-size 100 --num-layers 2 --hidden-size 16 --num-attention-heads 2
      --seq-length 16 --micro-batch-size 1 --lr 1e-3 --log-interval 1 --eval-iters 0 --seed 3)

# wait_iters FILE N: until the metrics file has N iterations (at most 40 s).
wait_iters() {
    for _ in $(seq 400); do
        [ "$(grep -c lm_loss "$1" 2>/dev/null || true)" -ge "$2" ] && return 0
        sleep 0.1
    done
    return 1
}

# frozen NAME MPIRUN BIN RANKVAR NP MINUTES "RANKS" FLAGS...: NP ranks train; after
# iteration 3 the world ranks RANKS are stopped; checks the verdict.
frozen() {
    local name=$1 mpirun=$2 bin=$3 rankvar=$4 np=$5 minutes=$6 ranks=$7; shift 7
    local limit mpid pid r t0 rc dt first stopped=() list
    limit=$(echo "$minutes * 60 + 3" | bc)
    timeout 90 "$mpirun" -n "$np" "$bin" train "${MOCK[@]}" "$@" --train-iters 1000000 \
        --distributed-timeout-minutes "$minutes" --metrics-file "$TMP/$name.jsonl" \
        >"$TMP/$name.log" 2>&1 &
    mpid=$!
    check "$name: training reaches iteration 3" wait_iters "$TMP/$name.jsonl" 3
    for _ in $(seq 50); do # the ranks' processes, by their launcher's rank variable
        stopped=()
        for pid in $(pgrep -f "^$bin train .*--metrics-file $TMP/$name.jsonl"); do
            r=$(tr '\0' '\n' </proc/"$pid"/environ 2>/dev/null | sed -n "s/^$rankvar=//p")
            for k in $ranks; do [ "$r" = "$k" ] && stopped+=("$pid"); done
        done
        [ ${#stopped[@]} -eq "$(wc -w <<<"$ranks")" ] && break
        sleep 0.1
    done
    check "$name: the processes of ranks $ranks are found" test ${#stopped[@]} -eq "$(wc -w <<<"$ranks")"
    t0=$(date +%s.%N)
    [ ${#stopped[@]} -gt 0 ] && kill -STOP "${stopped[@]}"
    wait $mpid
    rc=$?
    dt=$(echo "$(date +%s.%N) - $t0" | bc)
    [ ${#stopped[@]} -gt 0 ] && kill -KILL "${stopped[@]}" 2>/dev/null
    echo "# $name: stopped ranks $ranks (${#stopped[@]} processes); the job ended ${dt}s later, status $rc"
    check "$name: world size $np" grep -q "world $np = " "$TMP/$name.log"
    check "$name: exit status 5" test "$rc" -eq 5
    check "$name: within the timeout + 3 s ($limit s)" awk -v d="$dt" -v l="$limit" 'BEGIN { exit !(d < l) }'
    # the first line: from a rank that ran (a resumed one blames itself, and comes later)
    first=$(grep -m 1 "^plait: error: rank" "$TMP/$name.log")
    echo "# $first"
    if [ "$(wc -w <<<"$ranks")" -eq 1 ]; then list="rank $ranks"; else list="ranks $(sed 's/ /, /g' <<<"$ranks")"; fi
    check "$name: it comes from a rank that was not stopped" \
        grep -qvE "^plait: error: rank ($(echo "$ranks" | tr ' ' '|')):" <<<"$first"
    check "$name: it names the operation and exactly the stopped ranks ($list)" \
        grep -qE "^plait: error: rank [0-9]+: MPI_[A-Za-z_]+ on communicator [a-z]+ .*has not completed after [0-9.]+ s \(--distributed-timeout-minutes $minutes\); no heartbeat from $list for [0-9.]+ s( or more)? \(frozen or dead\); ending the job$" \
        <<<"$first"
}

frozen dp2 mpirun.openmpi "$PLAIT" OMPI_COMM_WORLD_RANK 2 0.05 "1"
frozen tp2pp2 mpirun.openmpi "$PLAIT" OMPI_COMM_WORLD_RANK 4 0.08 "2" \
    --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --global-batch-size 4
frozen pp2dp2 mpirun.openmpi "$PLAIT" OMPI_COMM_WORLD_RANK 4 0.08 "1 3" \
    --pipeline-model-parallel-size 2 --global-batch-size 4
if [ -x "$ROOT/build-mpich/plait" ]; then
    frozen mpich_dp2 mpirun.mpich "$ROOT/build-mpich/plait" PMI_RANK 2 0.05 "1"
    check "a healthy 2-rank MPICH job with heartbeats completes (exit 0)" \
        timeout 60 mpirun.mpich -n 2 "$ROOT/build-mpich/plait" train "${MOCK[@]}" --train-iters 6 \
        --distributed-timeout-minutes 0.05
else
    echo "# not run: MPICH (build-mpich/plait does not exist; make mpich-build)"
fi

# A rank alive but stuck outside MPI: an MPMD launch where rank 1 alone evaluates 10^6
# batches at iteration 3 (pure DP evaluation has no collective until its end) while
# rank 0 waits in the next gradient all-reduce. Its beats keep coming, so it is named as
# alive but outside MPI, not as silent.
stuck() {
    timeout 60 mpirun.openmpi -n 1 "$PLAIT" train "${MOCK[@]}" --train-iters 100 --eval-iters 0 \
        --distributed-timeout-minutes 0.05 : -n 1 "$PLAIT" train "${MOCK[@]}" --train-iters 100 \
        --eval-interval 3 --eval-iters 1000000 --distributed-timeout-minutes 0.05 \
        >"$TMP/stuck.log" 2>&1
}
check "a rank stuck in compute: the job ends with exit status 5" status_is 5 stuck
check "... world size 2" grep -q "world 2 = " "$TMP/stuck.log"
first=$(grep -m 1 "^plait: error: rank" "$TMP/stuck.log")
echo "# $first"
check "... rank 0 names rank 1 as alive but outside MPI" grep -qE "^plait: error: rank 0: MPI_[A-Za-z_]+ on communicator dp \(2 ranks\) has not completed after [0-9.]+ s \(--distributed-timeout-minutes 0.05\); alive but outside MPI: rank 1 for [0-9.]+ s \(stuck in compute or I/O\); ending the job$" <<<"$first"

# A healthy job: heartbeats on and off give the same losses, both exit 0.
healthy() { # NAME ENV...
    local name=$1; shift
    env "$@" timeout 90 mpirun.openmpi -n 4 "$PLAIT" train "${MOCK[@]}" --train-iters 6 \
        --tensor-model-parallel-size 2 --global-batch-size 4 --distributed-timeout-minutes 0.08 \
        --metrics-file "$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1 && grep -q "world 4 = " "$TMP/$name.log"
}
check "a healthy TP 2 x DP 2 job with heartbeats completes" healthy beats PLAIT_HEARTBEAT=1
check "... and without them (PLAIT_HEARTBEAT=0)" healthy nobeats PLAIT_HEARTBEAT=0
check "... with the same 6 losses" cmp <(losses "$TMP/beats.jsonl") <(losses "$TMP/nobeats.jsonl")
check "... 6 of them" test "$(losses "$TMP/beats.jsonl" | wc -l)" -eq 6
summary heartbeat
