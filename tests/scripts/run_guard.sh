#!/usr/bin/env bash
# Run-time guards (issue 18): flags Megatron's scheduler asserts are refused before
# anything runs; a non-finite learning rate stops the run naming the iteration; a
# token id outside the vocabulary stops it naming the dataset, document and id; the
# exit codes tell these apart; a frozen rank ends the job within
# --distributed-timeout-minutes, naming the operation. Tiny models, every command
# under `timeout`.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1
TINY=(--num-layers 1 --hidden-size 16 --num-attention-heads 2 --seq-length 16
      --micro-batch-size 1 --lr 1e-3 --log-interval 1 --eval-iters 0)
MOCK=(--mock-data --vocab-size 100 "${TINY[@]}")

# wait_iters FILE N: until the metrics file has N iterations (at most 30 s).
wait_iters() {
    for _ in $(seq 300); do
        [ "$(grep -c lm_loss "$1" 2>/dev/null)" -ge "$2" ] && return 0
        sleep 0.1
    done
    return 1
}
# status_is CODE COMMAND...: passes if the command exits with exactly CODE.
status_is() {
    local want=$1; shift
    "$@"; local rc=$?
    echo "# exit status $rc, expected $want"
    [ "$rc" -eq "$want" ]
}

# 1. Megatron's scheduler asserts, as usage errors (exit 2) before training starts.
check_fails "--lr-decay-iters 0 is refused (lr_decay_steps > 0)" \
    "--lr-decay-iters 0: the decay must be positive" \
    timeout 20 "$PLAIT" train "${MOCK[@]}" --train-iters 4 --lr-decay-iters 0
check "... with exit status 2" status_is 2 \
    timeout 20 "$PLAIT" train "${MOCK[@]}" --train-iters 4 --lr-decay-iters 0
check_fails "--lr-decay-samples 0 is refused" "--lr-decay-samples 0: the decay must be positive" \
    timeout 20 "$PLAIT" train "${MOCK[@]}" --train-samples 4 --lr-decay-samples 0
check_fails "warmup equal to the decay is refused (lr_warmup_steps < lr_decay_steps)" \
    "--lr-warmup-iters 4 must be in \[0, 4\)" \
    timeout 20 "$PLAIT" train "${MOCK[@]}" --train-iters 4 --lr-warmup-iters 4
check_fails "... also for a constant schedule, as Megatron" "--lr-warmup-iters 6 must be in" \
    timeout 20 "$PLAIT" train "${MOCK[@]}" --train-iters 8 --lr-decay-iters 6 \
    --lr-warmup-iters 6 --lr-decay-style constant
check_fails "--lr-warmup-fraction 1 is refused" "--lr-warmup-fraction 1: the warmup must be shorter" \
    timeout 20 "$PLAIT" train "${MOCK[@]}" --train-iters 4 --lr-warmup-fraction 1
check_fails "--lr-warmup-init above --lr is refused (init_lr <= max_lr)" \
    "--lr-warmup-init 0.01 is above --lr 0.001" \
    timeout 20 "$PLAIT" train "${MOCK[@]}" --train-iters 4 --lr-warmup-iters 2 --lr-warmup-init 1e-2
check_fails "--lr 0x10 is refused (C's hexadecimal float; Python's float() refuses it)" \
    "--lr expects a decimal number, got '0x10'" \
    timeout 20 "$PLAIT" train "${MOCK[@]}" --train-iters 4 --lr 0x10
check "warmup one iteration shorter than the decay trains (exit 0)" status_is 0 \
    timeout 20 "$PLAIT" train "${MOCK[@]}" --train-iters 4 --lr-warmup-iters 3

# 2. A learning rate that turns non-finite mid-run (DeepSpeed's OneCycle with a negative
#    decay_lr_rate divides by 1 + rate x steps = 0 at iteration 4) stops the run there,
#    exit 4, before anything trains or saves with it.
cat >"$TMP/onecycle.json" <<'EOF'
{"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
 "scheduler": {"type": "OneCycle", "params": {"cycle_min_lr": 1e-4, "cycle_max_lr": 1e-3,
   "cycle_first_step_size": 1, "cycle_second_step_size": 1, "decay_step_size": 1,
   "decay_lr_rate": -1}}}
EOF
check_fails "an infinite learning rate stops the run naming the iteration" \
    "iteration 4: the learning rate is inf; stopping" \
    timeout 20 "$PLAIT" train "${MOCK[@]}" --train-iters 8 --deepspeed_config "$TMP/onecycle.json" \
    --save "$TMP/inf" --save-interval 1 --metrics-file "$TMP/inf.jsonl"
check "... with exit status 4" status_is 4 \
    timeout 20 "$PLAIT" train "${MOCK[@]}" --train-iters 8 --deepspeed_config "$TMP/onecycle.json"
check "... after iterations 1-3 only (no metrics line for 4)" \
    test "$(grep -c '"lm_loss"' "$TMP/inf.jsonl")" = 3
check "... and the last checkpoint is iteration 3's" \
    test "$(cat "$TMP/inf/latest_checkpointed_iteration.txt")/$(ls -d "$TMP"/inf/iter_0000004 2>/dev/null)" = 3/
check "too many skipped steps stop the run with exit status 4 (was 2, the usage code)" status_is 4 \
    env PLAIT_FAULT_NAN_ITER=2 timeout 20 "$PLAIT" train "${MOCK[@]}" --train-iters 6 \
    --max-skipped-steps 0

# A save on a signal exits 0: SIGUSR1 to mpirun itself (Open MPI forwards it to every rank).
timeout 60 mpirun.openmpi -n 2 "$PLAIT" train "${MOCK[@]}" --train-iters 100000 --exit-signal-handler \
    --save "$TMP/usr1" --metrics-file "$TMP/usr1.jsonl" >"$TMP/usr1.log" 2>&1 &
mpid=$!
check "SIGUSR1 to mpirun: 2-rank training reaches iteration 3" wait_iters "$TMP/usr1.jsonl" 3
kill -USR1 "$(pgrep -f "^mpirun.openmpi -n 2 $PLAIT train .*--metrics-file $TMP/usr1.jsonl")"
wait $mpid
rc=$?
check "SIGUSR1 to mpirun: world size 2, exit status 0" \
    test "$(grep -c "world 2 = " "$TMP/usr1.log")/$rc" = 1/0
check "SIGUSR1 to mpirun: the checkpoint of the last iteration is published" \
    test "$(cat "$TMP/usr1/latest_checkpointed_iteration.txt" 2>/dev/null)" = "$(grep -c lm_loss "$TMP/usr1.jsonl")"

# 3. Token ids outside the vocabulary. mkdata PREFIX BAD: an int32 Megatron dataset of 24
#    documents of 40 GPT-2 ids (pads, -1, in document 2), document 7 holding BAD throughout.
mkdata() {
    $PY - "$1" "$2" <<'EOF'
import struct, sys, random
prefix, bad = sys.argv[1], int(sys.argv[2])
rng = random.Random(7)
docs = [[rng.randrange(50257) for _ in range(40)] for _ in range(24)]
docs[2][10:14] = [-1] * 4
docs[7] = [bad] * 40
with open(prefix + ".bin", "wb") as f:
    for d in docs:
        f.write(struct.pack("<%di" % len(d), *d))
with open(prefix + ".idx", "wb") as f:
    f.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", 4))
    f.write(struct.pack("<Q", len(docs)) + struct.pack("<Q", len(docs) + 1))
    f.write(struct.pack("<%di" % len(docs), *[len(d) for d in docs]))
    f.write(struct.pack("<%dq" % len(docs), *[160 * i for i in range(len(docs))]))
    f.write(struct.pack("<%dq" % (len(docs) + 1), *range(len(docs) + 1)))
EOF
}
mkdata "$TMP/good" 50256
mkdata "$TMP/high" 60000
mkdata "$TMP/neg" -2
DATA=("${TINY[@]}" "${GPT2[@]}" --split 100,0,0 --train-iters 16 --global-batch-size 4)
check "in-vocabulary ids and Megatron's pad -1 train (exit 0)" status_is 0 \
    timeout 30 "$PLAIT" train "${DATA[@]}" --data-path "$TMP/good" --metrics-file "$TMP/good.jsonl"
check "... every loss finite" awk '/"lm_loss"/ { n++; if ($0 ~ /nan|inf|null/) bad++ }
    END { exit !(n == 16 && !bad) }' "$TMP/good.jsonl"
check_fails "id 60000 stops the run naming the prefix, document 7, the id and the vocabulary" \
    "$TMP/high: token id 60000 in document 7 \(token [0-9]+ of it\), train sample [0-9]+ .*outside the vocabulary \[0, 50257\) of the tokenizer" \
    timeout 30 "$PLAIT" train "${DATA[@]}" --data-path "$TMP/high"
check "... with exit status 3 (bad input)" status_is 3 \
    timeout 30 "$PLAIT" train "${DATA[@]}" --data-path "$TMP/high"
check_fails "id -2 (below Megatron's pad) stops it too" "$TMP/neg: token id -2 in document 7" \
    timeout 30 "$PLAIT" train "${DATA[@]}" --data-path "$TMP/neg"
timeout 60 mpirun.openmpi -n 2 "$PLAIT" train "${DATA[@]}" --data-path "$TMP/high" \
    >"$TMP/high2.log" 2>&1
rc=$?
check "2 ranks (world size 2): the rank that reads the id ends the job, naming the document" \
    grep -qE "^plait: error: rank [01]: $TMP/high: token id 60000 in document 7" "$TMP/high2.log"
check "... world size 2" grep -q "world 2 = " "$TMP/high2.log"
check "... exit status 3 through mpirun" test "$rc" -eq 3

# 4. A frozen rank (SIGSTOP) of a 2-rank job with --distributed-timeout-minutes 0.05
#    (3 s): the other rank's watchdog ends the job within the timeout + 3 s, exit 5.
check_fails "--distributed-timeout-minutes 0 is refused" "--distributed-timeout-minutes 0 must be positive" \
    timeout 20 "$PLAIT" train "${MOCK[@]}" --train-iters 4 --distributed-timeout-minutes 0
# frozen NAME MPIRUN PLAIT RANKVAR: the test above under one MPI (RANKVAR: the launcher's
# environment variable holding a process's world rank).
frozen() {
    local name=$1 mpirun=$2 bin=$3 rankvar=$4
    timeout 60 "$mpirun" -n 2 "$bin" train "${MOCK[@]}" --train-iters 100000 \
        --distributed-timeout-minutes 0.05 --metrics-file "$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1 &
    local mpid=$!
    check "$name: 2-rank training reaches iteration 3" wait_iters "$TMP/$name.jsonl" 3
    local victim vrank t0 rc dt first
    victim=$(pgrep -f "^$bin train .*--metrics-file $TMP/$name.jsonl" | tail -n 1)
    vrank=$(tr '\0' '\n' </proc/"$victim"/environ | sed -n "s/^$rankvar=//p")
    t0=$(date +%s.%N)
    kill -STOP "$victim"
    wait $mpid
    rc=$?
    dt=$(echo "$(date +%s.%N) - $t0" | bc)
    kill -KILL "$victim" 2>/dev/null
    echo "# $name: job ended ${dt}s after rank $vrank was stopped, status $rc"
    check "$name: world size 2" grep -q "world 2 = " "$TMP/$name.log"
    check "$name: the frozen job ends with exit status 5" test "$rc" -eq 5
    check "$name: within the timeout (3 s) + 3 s" awk -v d="$dt" 'BEGIN { exit !(d < 6) }'
    # The first line comes from the rank that waited (Open MPI's kill resumes the frozen
    # one with SIGCONT, which may then print the same verdict about itself).
    first=$(grep -m 1 "^plait: error: rank" "$TMP/$name.log")
    echo "# $first"
    check "$name: the message names the operation, communicator, timeout and the waiting rank" \
        grep -qE "^plait: error: rank $((1 - vrank)): MPI_[A-Za-z_]+ on communicator [a-z]+ \(2 ranks\) has not completed after [0-9.]+ s \(--distributed-timeout-minutes 0.05\)" \
        <<<"$first"
}
frozen openmpi mpirun.openmpi "$PLAIT" OMPI_COMM_WORLD_RANK
frozen mpich mpirun.mpich "$ROOT/build-mpich/plait" PMI_RANK
check "a healthy 2-rank run with the same timeout completes (exit 0)" status_is 0 \
    timeout 60 mpirun.openmpi -n 2 "$PLAIT" train "${MOCK[@]}" --train-iters 20 \
    --distributed-timeout-minutes 0.05
# 5. Absurd model sizes are refused in well under a second, before the parameter table is
#    built (before, --num-layers 100000000 spent minutes in a quadratic registry lookup):
#    too many tensors, more memory than the machine has, a count past 2^63. `timeout 5`
#    proves the speed (a registry of 10^8 layers would take minutes and hundreds of GiB).
check_fails "--num-layers 100000000 is refused at once, naming the tensor count" \
    "--num-layers 100000000: the model would have 1200000005 parameter tensors" \
    timeout 5 "$PLAIT" train "${MOCK[@]}" --num-layers 100000000 --train-iters 1
check "... with exit status 2" status_is 2 \
    timeout 5 "$PLAIT" train "${MOCK[@]}" --num-layers 100000000 --train-iters 1
check_fails "--num-layers 1000000 (3.3e9 parameters) is refused against the machine's memory" \
    "the model is too large for this machine: 1000000 layers, 3.28e.09 parameters" \
    timeout 5 "$PLAIT" train "${MOCK[@]}" --num-layers 1000000 --train-iters 1
check_fails "--hidden-size 4000000000 is refused: more than 2^63 parameters" \
    "the model is too large to count: --num-layers 1, --hidden-size 4000000000" \
    timeout 5 "$PLAIT" train "${MOCK[@]}" --hidden-size 4000000000 --train-iters 1
check "a 300-layer model still trains (the index finds every tensor)" status_is 0 \
    timeout 30 "$PLAIT" train "${MOCK[@]}" --num-layers 300 --train-iters 1

summary run_guard
