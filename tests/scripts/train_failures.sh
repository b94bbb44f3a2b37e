#!/usr/bin/env bash
# When things go wrong: non-finite losses or gradients are skipped on every rank
# at the same step; too many in a row stop the run; SIGUSR1/SIGTERM (Slurm's
# preemption warning) save a checkpoint and exit 0, and the job resumes; a rank
# that dies ends the whole job within 10 s with a message naming it.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1 # 2 ranks of 2 OpenMP threads on 2 cores spin against each other
kjv_dataset 2000 "$TMP/kjv"
MODEL=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64
       --micro-batch-size 1 --global-batch-size 4 --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine
       --lr-warmup-iters 2 --log-interval 1 --eval-iters 0 --split 98,2,0
       --data-path "$TMP/kjv_text_document" "${GPT2[@]}")


# 1. One rank's gradient turns NaN at iteration 3: both ranks skip it.
check "clean run (2 ranks)" timeout 120 mpirun.openmpi -n 2 "$PLAIT" train "${MODEL[@]}" \
    --train-iters 6 --metrics-file "$TMP/clean.jsonl"
check "run with a NaN gradient on rank 1 at iteration 3 completes" env PLAIT_FAULT_NAN_ITER=3 \
    PLAIT_FAULT_NAN_RANK=1 timeout 120 mpirun.openmpi -n 2 -x PLAIT_FAULT_NAN_ITER -x PLAIT_FAULT_NAN_RANK \
    "$PLAIT" train "${MODEL[@]}" --train-iters 6 --metrics-file "$TMP/nan.jsonl"
check "iteration 3 is reported skipped with no gradient norm" \
    test "$(field "$TMP/nan.jsonl" 3 skipped)/$(field "$TMP/nan.jsonl" 3 grad_norm)" = "true/null"
check "iterations before it equal the clean run" \
    test "$(field "$TMP/nan.jsonl" 2 lm_loss)" = "$(field "$TMP/clean.jsonl" 2 lm_loss)"
check "the schedule did not advance: iteration 4 runs at iteration 3's learning rate" \
    test "$(field "$TMP/nan.jsonl" 4 lr)" = "$(field "$TMP/clean.jsonl" 3 lr)"
check_fails "--max-skipped-steps 0 stops the run, on every rank, naming the flag" \
    "consecutive iterations had a non-finite loss or gradient \(--max-skipped-steps 0\)" \
    env PLAIT_FAULT_NAN_ITER=2 timeout 60 mpirun.openmpi -n 2 -x PLAIT_FAULT_NAN_ITER \
    "$PLAIT" train "${MODEL[@]}" --train-iters 6 --max-skipped-steps 0

# wait_iters FILE N: until the metrics file has N iterations (at most 60 s).
wait_iters() {
    for _ in $(seq 600); do
        [ "$(grep -c lm_loss "$1" 2>/dev/null)" -ge "$2" ] && return 0
        sleep 0.1
    done
    return 1
}

# 2. SIGUSR1 to a single process: finish the iteration, save, exit 0; then resume.
"$PLAIT" train "${MODEL[@]}" --train-iters 100000 --exit-signal-handler --save "$TMP/sig" \
    --metrics-file "$TMP/sig.jsonl" >"$TMP/sig.log" 2>&1 &
pid=$!
check "training reaches iteration 3" wait_iters "$TMP/sig.jsonl" 3
kill -USR1 $pid
wait $pid
rc=$?
check "SIGUSR1: exit status 0" test $rc -eq 0
last=$(grep -c lm_loss "$TMP/sig.jsonl")
check "SIGUSR1: a checkpoint at the last iteration ($last) is the latest" \
    test "$(cat "$TMP/sig/latest_checkpointed_iteration.txt" 2>/dev/null)" = "$last"
# The same flags (a changed --train-iters changes the schedule, which Megatron refuses),
# stopping two iterations later with --exit-interval.
check "the saved job resumes where it stopped" "$PLAIT" train "${MODEL[@]}" --train-iters 100000 \
    --exit-interval $((last + 2)) --load "$TMP/sig" --save "$TMP/sig" --metrics-file "$TMP/sig2.jsonl"
check "the resumed job ran exactly the remaining iterations" \
    test "$(grep -c lm_loss "$TMP/sig2.jsonl")" = 2

# 3. SIGTERM to ONE of two ranks: both stop at the same iteration and save.
timeout 120 mpirun.openmpi -n 2 "$PLAIT" train "${MODEL[@]}" --train-iters 100000 \
    --exit-signal-handler --save "$TMP/term" --metrics-file "$TMP/term.jsonl" >"$TMP/term.log" 2>&1 &
mpid=$!
check "2-rank training reaches iteration 3" wait_iters "$TMP/term.jsonl" 3
victim=$(pgrep -f "^$PLAIT train .*--save $TMP/term" | head -n 1)  # a rank, not mpirun
kill -TERM "$victim"
wait $mpid
rc=$?
check "SIGTERM to one rank: the job exits 0" test $rc -eq 0
check "SIGTERM: the checkpoint is published" test -f "$TMP/term/latest_checkpointed_iteration.txt"

# 4. A rank killed outright ends the whole job within 10 s, naming the rank.
timeout 120 mpirun.openmpi -n 2 "$PLAIT" train "${MODEL[@]}" --train-iters 100000 \
    --metrics-file "$TMP/kill.jsonl" >"$TMP/kill.log" 2>&1 &
mpid=$!
check "2-rank training reaches iteration 3" wait_iters "$TMP/kill.jsonl" 3
victim=$(pgrep -f "^$PLAIT train .*--metrics-file $TMP/kill.jsonl" | tail -n 1)
t0=$(date +%s.%N)
kill -KILL "$victim"
wait $mpid
rc=$?
dt=$(echo "$(date +%s.%N) - $t0" | bc)
echo "# job ended ${dt}s after the kill, status $rc"
check "a killed rank ends the job with a failure status" test $rc -ne 0
check "within 10 s" awk -v d="$dt" 'BEGIN { exit !(d < 10) }'
check "the message names the rank and the signal" grep -qE "rank [0-9]+ .*(signal 9|Killed)" "$TMP/kill.log"
summary train_failures
