#!/usr/bin/env bash
# The end-of-training evaluation as Megatron's pretrain does it (train/trainer.c
# final_evaluations): after the last save, the validation and the test split once each
# when --eval-iters > 0 and the split holds samples, printed as Megatron's block
# (" validation loss at iteration N on test set | lm loss value: ... | lm loss PPL: ... |"
# between rules of dashes); --skip-train evaluates a loaded checkpoint without training or
# saving; none after --exit-interval; pipelined (PP 2) and ZeRO-3 (DP 2) runs under mpirun give one process's test loss.
# ~25 s.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1
PY=/usr/bin/python3
kjv_dataset 400 "$TMP/kjv"
M=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 --micro-batch-size 2
   --global-batch-size 4 --train-iters 6 --lr 1e-3 --log-interval 3 --eval-interval 3
   --eval-iters 2 --data-path "$TMP/kjv_text_document" --split 80,10,10 "${GPT2[@]}" --seed 9)
train() { # NAME NP FLAGS...
    local name=$1 np=$2; shift 2
    rm -f "$TMP/$name.jsonl"
    timeout -k 5 120 mpirun.openmpi -n "$np" "$PLAIT" train "${M[@]}" "$@" \
        --metrics-file "$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1 && grep -q "world $np = " "$TMP/$name.log"
}
# key NAME KEY: the value of KEY in the metrics of run NAME (the one row that has it)
key() { $PY -c '
import json, sys
v = [json.loads(l)[sys.argv[2]] for l in open(sys.argv[1]) if "\"%s\"" % sys.argv[2] in l]
assert len(v) == 1, v
print(repr(v[0]))' "$TMP/$1.jsonl" "$2"; }

check "train 6 iterations with a 80,10,10 split, saving" train full 1 --save "$TMP/ck"
check "the blocks come after the last save: validation set, then test set, each once" bash -c "
    grep -nE 'saved checkpoint at iteration 6|validation loss at iteration 6 on (validation|test) set' '$TMP/full.log' |
    sed -E 's/^[0-9]+://; s/ \\(.*//; s/ \\|.*//' | tr '\n' ';' | grep -qx \
    ' saved checkpoint at iteration 6 to $TMP/ck; validation loss at iteration 6 on validation set; validation loss at iteration 6 on test set;'"
check "Megatron's block: the line between rules of dashes one longer than it" $PY - "$TMP/full.log" <<'PYEOF'
import math, re, sys
lines = open(sys.argv[1]).read().split('\n')
i = next(k for k, l in enumerate(lines) if 'on test set |' in l)
line = lines[i]
m = re.fullmatch(r' validation loss at iteration 6 on test set \| lm loss value: (\S+) \| lm loss PPL: (\S+) \| ', line)
ok = m and lines[i - 1] == lines[i + 1] == '-' * (len(line) + 1)
# PPL = exp(min(20, loss)); the printed loss has 7 digits (~1e-6 relative of ~10 nats),
# so the PPL recomputed from it agrees to 1e-5
ok = ok and abs(float(m.group(2)) / math.exp(min(20, float(m.group(1)))) - 1) < 1e-5
sys.exit(0 if ok else 1)
PYEOF
has_both() { key full test_lm_loss && key full final_valid_lm_loss; }
check "the metrics carry final_valid_lm_loss and test_lm_loss" has_both
check "98,2,0 (no test split): the validation block only" bash -c "
    '$PLAIT' train ${M[*]} --split 98,2,0 > '$TMP/notest.log' 2>&1 &&
    grep -q 'on validation set' '$TMP/notest.log' && ! grep -q 'on test set' '$TMP/notest.log'"
check "--eval-iters 0: no block" bash -c "
    '$PLAIT' train ${M[*]} --eval-iters 0 > '$TMP/noeval.log' 2>&1 && ! grep -q 'validation loss' '$TMP/noeval.log'"

check "--exit-interval 3 (Megatron exits there): no block" bash -c "
    '$PLAIT' train ${M[*]} --exit-interval 3 > '$TMP/exit.log' 2>&1 &&
    grep -q 'validation loss at iteration 3 |' '$TMP/exit.log' && ! grep -q ' set |' '$TMP/exit.log'"

# ---- --skip-train --------------------------------------------------------------------
ls -R "$TMP/ck" > "$TMP/ck.before"
check "--skip-train --load: runs" train skip 1 --load "$TMP/ck" --skip-train
check "... says so, trains no iteration" bash -c \
    "grep -q 'skipping training (--skip-train is on)' '$TMP/skip.log' && ! grep -q '^ iteration ' '$TMP/skip.log'"
check "... its test loss is the trained run's, bit for bit (the same model, the same samples)" \
    test "$(key skip test_lm_loss)" = "$(key full test_lm_loss)"
check "... and it saves nothing" bash -c "ls -R '$TMP/ck' | diff - '$TMP/ck.before'"

# ---- parallel layouts ------------------------------------------------------------------
# The test loss of the same 6 trained iterations under PP 2 and ZeRO-3 x DP 2: within 1e-6
# relative of one process's (pp.sh's bound for validation losses: the same sums in another
# order, six fp32 Adam steps apart).
close() { $PY -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > 1e-6 * abs(b))' "$1" "$2"; }
check "pp 2 (mpirun -n 2): trains and evaluates (world size 2)" train pp2 2 --pipeline-model-parallel-size 2
check "pp 2: the test loss is one process's" close "$(key pp2 test_lm_loss)" "$(key full test_lm_loss)"
check "ZeRO-3, dp 2 (mpirun -n 2): trains and evaluates (world size 2)" train z3 2 --zero-stage 3
check "ZeRO-3: the test loss is one process's" close "$(key z3 test_lm_loss)" "$(key full test_lm_loss)"
summary final_eval
