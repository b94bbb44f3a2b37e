#!/usr/bin/env bash
# Hugging Face's post-LN BERT in plait (--model bert --transformer-block-type post_ln):
# the model against an independent PyTorch BERT with transformers' modules and names
# (hf_bert.py: logits, MLM + NSP loss and every gradient of the pretraining model and
# of the sequence, token and span heads); TP 2 (with and without sequence parallelism),
# TP 2 x PP 2 and DP 2 with ZeRO 2 give one process's losses; the manifest records the
# block type, and a post-LN checkpoint is refused by a pre-LN run naming the flag.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1
HB=$ROOT/tests/scripts/hf_bert.py
MP=$ROOT/build/testtools/model_parity

# ---- the model against PyTorch
PAR=()
for v in "pre::" "seq::--task sequence" "tok::--task token" "span::--task span"; do
    name=${v%%::*}; flags=${v#*::}
    check "model_parity --post-ln $flags" "$MP" "$TMP/par_$name.safetensors" --model bert --post-ln $flags
    PAR+=("$TMP/par_$name.safetensors")
done

# ---- layouts: losses of 4 iterations equal one process's within 2e-7 relative (fp32
# sums in another order over TP; measured 3e-8)
A=(--model bert --transformer-block-type post_ln --num-layers 2 --hidden-size 64
   --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32 --global-batch-size 4
   --lr 1e-3 --lr-decay-style constant --mock-data --vocab-size 128 --train-iters 4
   --log-interval 1 --eval-iters 0 --hidden-dropout 0 --attention-dropout 0)
lay() { # NAME NP FLAGS...
    local name=$1 np=$2; shift 2
    timeout -k 5 120 mpirun.openmpi -n "$np" "$PLAIT" train "${A[@]}" "$@" \
        --metrics-file "$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1
}
close() {
    paste <(losses "$TMP/$1.jsonl") <(losses "$TMP/$2.jsonl") | awk '
        { c++; d = $1 - $2; if (d < 0) d = -d; if (d > 2e-7 * $2) bad++ }
        END { exit !(c == 4 && !bad) }'
}
check "post-LN bert: one process, saved" lay one 1 --micro-batch-size 2 --make-vocab-size-divisible-by 64 \
    --save "$TMP/c1" --save-interval 4
check "... the banner says post-LN with the exact GELU" grep -q \
    "layers: LayerNorm, GELU (exact), .*post-LN (a norm after each residual and of the embeddings, no final norm)" \
    "$TMP/one.log"
check "TP 2" lay tp2 2 --micro-batch-size 2 --tensor-model-parallel-size 2 --make-vocab-size-divisible-by 32
check "... world 2 = tp 2" layout_is tp2 2 2 1 1
check "TP 2: the losses of one process" close one tp2
check "TP 2 with sequence parallelism" lay sp2 2 --micro-batch-size 2 --tensor-model-parallel-size 2 \
    --sequence-parallel --make-vocab-size-divisible-by 32
check "TP 2 with sequence parallelism: the losses of one process" close one sp2
check "TP 2 x PP 2" lay tp2pp2 4 --micro-batch-size 2 --tensor-model-parallel-size 2 \
    --pipeline-model-parallel-size 2 --make-vocab-size-divisible-by 32
check "... world 4 = tp 2 x pp 2" layout_is tp2pp2 4 2 1 2
check "TP 2 x PP 2: the losses of one process" close one tp2pp2
check "one process, micro-batches of 1" lay one_m1 1 --micro-batch-size 1 --make-vocab-size-divisible-by 64
check "DP 2, ZeRO 2" lay dp2 2 --micro-batch-size 1 --zero-stage 2 --make-vocab-size-divisible-by 64
check "DP 2, ZeRO 2: the losses of one process" close one_m1 dp2

# ---- the manifest and the flags
M=$TMP/c1/iter_0000004/manifest.json
check "the manifest records transformer_block_type post_ln and the exact GELU" bash -c "
    grep -q '\"transformer_block_type\":.*\"post_ln\"' '$M' && grep -q '\"gelu_exact\":.*1' '$M' &&
    grep -q 'encoder.initial_layernorm.weight' '$M' && ! grep -q 'final_layernorm' '$M'"
B=(--model bert --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32
   --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4 --lr 1e-3 --mock-data
   --vocab-size 128 --make-vocab-size-divisible-by 64 --train-iters 4 --eval-iters 0)
check_fails "a pre-LN run refuses the post-LN checkpoint naming --transformer-block-type" \
    "differs from this run's in --transformer-block-type" "$PLAIT" train "${B[@]}" --load "$TMP/c1" --finetune
check "--use-checkpoint-args takes post_ln from the checkpoint" bash -c "
    '$PLAIT' train --micro-batch-size 2 --global-batch-size 4 --lr 1e-3 --mock-data --train-iters 4 \
        --eval-iters 0 --load '$TMP/c1' --finetune --use-checkpoint-args >'$TMP/ua.log' 2>&1 &&
    grep -q 'post-LN (a norm after' '$TMP/ua.log'"
check_fails "post_ln is refused for --model gpt" "--transformer-block-type post_ln is for --model bert" \
    "$PLAIT" train "${B[@]}" --model gpt --transformer-block-type post_ln
check_fails "post_ln is refused with --apply-residual-connection-post-layernorm" \
    "post_ln with --apply-residual-connection-post-layernorm" \
    "$PLAIT" train "${B[@]}" --transformer-block-type post_ln --apply-residual-connection-post-layernorm

# ---- the oracle
OMP_NUM_THREADS=2 /usr/bin/python3 "$HB" parity "${PAR[@]}" | tee "$TMP/py.out"
read -r p f < <(sed -nE 's/^hf_bert.py: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$TMP/py.out")
_pass=$((_pass + ${p:-0})); _fail=$((_fail + ${f:-1}))
summary hf_bert
