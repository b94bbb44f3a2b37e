#!/usr/bin/env bash
# One error line per failure under mpirun, naming the rank (tools/cmd_train.c): a bad
# flag and a missing data file (every rank fails alike) print one "plait: error: rank 0:"
# line at -n 2 and -n 4; a flag or a file only one rank sees (MPMD launches give rank 1
# other arguments) is printed once, by that rank; the exit status is the error's. Every
# launch runs under timeout, and its world size is asserted (the banner of a good run, or
# the launcher's count of processes). ~20 s.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1
M=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 --micro-batch-size 2
   --global-batch-size 8 --train-iters 2 --lr 1e-3 --eval-iters 0)
G=(--tokenizer-type GPT2BPETokenizer --merge-file "$PLAIT_DATA/gpt2/vocab.bpe")
# errors NAME: the number of "plait: error" lines of $TMP/NAME.log
errors() { grep -c '^plait: error' "$TMP/$1.log"; }
launch() { # NAME MPIRUN-ARGS...: runs, keeps the exit status in $TMP/NAME.rc
    local name=$1; shift
    timeout -k 5 90 mpirun.openmpi "$@" >"$TMP/$name.log" 2>&1
    echo $? > "$TMP/$name.rc"
}
# The world size: mpirun starts NP processes, which the good run's banner confirms.
check "a good 4-rank run has world size 4" bash -c \
    "timeout -k 5 90 mpirun.openmpi -n 4 '$PLAIT' train ${M[*]} --mock-data --vocab-size 100 2>&1 |
     grep -q 'world 4 = tp 1 x dp 4 x pp 1'"
for np in 2 4; do
    launch flag$np -n $np "$PLAIT" train "${M[@]}" --mock-data --bogus-flag
    check "-n $np, a bad flag on every rank: one error line" test "$(errors flag$np)" = 1
    check "-n $np, ... naming rank 0, exit status 2 (usage)" bash -c \
        "grep -q \"^plait: error: rank 0: plait train: unknown flag '--bogus-flag'\" '$TMP/flag$np.log' &&
         test \$(cat '$TMP/flag$np.rc') = 2"
    launch data$np -n $np "$PLAIT" train "${M[@]}" "${G[@]}" --vocab-file "$PLAIT_DATA/gpt2/encoder.json" \
        --data-path "$TMP/missing"
    check "-n $np, a missing data file: one error line" test "$(errors data$np)" = 1
    check "-n $np, ... naming rank 0 and the file" \
        grep -q "^plait: error: rank 0: --data-path '$TMP/missing': $TMP/missing.idx: cannot open" \
        "$TMP/data$np.log"
done
launch mpmd_flag -n 1 "$PLAIT" train "${M[@]}" --mock-data --vocab-size 100 : -n 1 "$PLAIT" train "${M[@]}" \
    --mock-data --vocab-size 100 --bogus
check "a bad flag on rank 1 only: one error line, by rank 1" bash -c \
    "test \$(grep -c '^plait: error' '$TMP/mpmd_flag.log') = 1 &&
     grep -q \"^plait: error: rank 1: plait train: unknown flag '--bogus'\" '$TMP/mpmd_flag.log'"
launch mpmd_file -n 1 "$PLAIT" train "${M[@]}" --mock-data "${G[@]}" --vocab-file "$PLAIT_DATA/gpt2/encoder.json" \
    : -n 1 "$PLAIT" train "${M[@]}" --mock-data "${G[@]}" --vocab-file "$TMP/nothere.json"
check "a vocabulary file missing on rank 1 only: one error line, by rank 1" bash -c \
    "test \$(grep -c '^plait: error' '$TMP/mpmd_file.log') = 1 &&
     grep -q '^plait: error: rank 1: $TMP/nothere.json: cannot open' '$TMP/mpmd_file.log' &&
     test \$(cat '$TMP/mpmd_file.rc') != 0"
summary mpi_errors
