#!/usr/bin/env bash
# transformers' T5 layer in plait (--position-embedding-type relative, RMSNorm, no biases,
# --softmax-scale 1, --ffn-activation relu|geglu, tied with the output layer's input scaled
# by hidden^-0.5 or untied) against an independent float64 PyTorch T5 written against
# transformers' module structure (t5_hf_ref.py, via t5_hf_parity.py): logits, loss, every
# gradient and the parameters after 5 AdamW steps; small bias tables (8 buckets, max
# distance 20: the logarithmic buckets within 24 positions) and T5's own (32, 128: the
# float32 boundaries at distance 16), in one process and over 2 tensor-parallel ranks
# (with sequence parallelism), each layout asserting its world size; heads of
# --kv-channels 24 and 12 (T5 v1.1 small's d_kv x heads other than d_model). In training
# (`plait train --model t5` with the flags): DP 2 with ZeRO 1 and ZeRO 3 give one
# process's losses (2e-7 relative: the DP sums' order), full and selective recomputation
# its losses bit for bit; --bf16 (GEGLU and ReLU) trains within bf16's rounding of fp32's
# losses (pipelined: encdec_pp.sh).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1
TOOL=$ROOT/build/testtools/encdec_parity
FILES=()
one() { # NAME FLAGS...
    local name=$1; shift
    check "t5 hf: $name runs" bash -c "'$TOOL' '$TMP/$name.safetensors' $* > '$TMP/$name.log'"
    FILES+=("$TMP/$name.safetensors")
}
two() { # NAME FLAGS...
    local name=$1; shift
    check "t5 hf: $name runs" bash -c "timeout -k 5 120 mpirun.openmpi -n 2 '$TOOL' \
        '$TMP/$name.safetensors' $* > '$TMP/$name.log' 2>&1"
    check "t5 hf: $name ran on 2 tensor-parallel ranks" grep -q "tp 2" "$TMP/$name.log"
    FILES+=("$TMP/$name.safetensors")
}
one relu_untied_kv24 --hf-t5 relu --kv-channels 24
one geglu_tied --hf-t5 geglu --tied --buckets 32 --max-distance 128
two geglu_tied_tp2_sp_kv12 --hf-t5 geglu --tied --buckets 32 --max-distance 128 --sp \
    --kv-channels 12
two relu_untied_tp2 --hf-t5 relu
OMP_NUM_THREADS=2 $PY "$ROOT/tests/scripts/t5_hf_parity.py" "${FILES[@]}" | tee "$TMP/py.out" |
    grep -v '^ok'
read -r p f < <(sed -nE 's/^t5_hf_parity: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$TMP/py.out")
_pass=$((_pass + ${p:-0})); _fail=$((_fail + ${f:-1}))

"$ROOT/build/testtools/bert_samples" make "$PLAIT_DATA/bert/vocab.txt" "$PLAIT_DATA/kjv.txt" \
    "$TMP/kjv_sent" 1000 >/dev/null
T5HF=(--model t5 --data-path "$TMP/kjv_sent" --vocab-file "$PLAIT_DATA/bert/vocab.txt"
      --vocab-extra-ids 100 --split 90,10,0 --encoder-num-layers 2 --decoder-num-layers 2
      --hidden-size 64 --num-attention-heads 4 --encoder-seq-length 32 --decoder-seq-length 16
      --micro-batch-size 2 --global-batch-size 8 --lr 1e-2 --log-interval 1 --eval-iters 0
      --seed 7 --train-iters 4 --normalization RMSNorm --disable-bias-linear
      --position-embedding-type relative --softmax-scale 1 --norm-epsilon 1e-6
      --ffn-activation geglu --untie-embeddings-and-output-weights)
tr() { # NAME NP FLAGS...
    local name=$1 np=$2; shift 2
    timeout -k 5 120 mpirun.openmpi -n "$np" "$PLAIT" train "${T5HF[@]}" "$@" \
        --metrics-file "$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1 &&
        [ "$(losses "$TMP/$name.jsonl" | wc -l)" = 4 ]
}
close() { # A B BOUND: the losses of two runs within BOUND relative (0: the same bits)
    paste <(losses "$TMP/$1.jsonl") <(losses "$TMP/$2.jsonl") | awk -v b="$3" '
        { d = $1 - $2; if (d < 0) d = -d; if ((b == 0 && $1 != $2) || d > b * $2) bad++ }
        END { exit bad > 0 }'
}
check "t5 hf train: one process" tr one 1
check "t5 hf train: DP 2 with ZeRO 1" tr z1 2 --use-distributed-optimizer
check "t5 hf train: ... on 2 data-parallel ranks" layout_is z1 2 1 2 1
check "t5 hf train: DP 2 with ZeRO 3" tr z3 2 --zero-stage 3
check "t5 hf train: ... on 2 data-parallel ranks" layout_is z3 2 1 2 1
check "t5 hf train: ZeRO 1 gives one process's losses" close one z1 2e-7
check "t5 hf train: ZeRO 3 gives one process's losses" close one z3 2e-7
check "t5 hf train: full recomputation, the same bits" tr full 1 --recompute-granularity full \
    --recompute-method uniform --recompute-num-layers 1
check "t5 hf train: ... equal" close one full 0
check "t5 hf train: selective recomputation, the same bits" tr sel 1 --recompute-granularity selective
check "t5 hf train: ... equal" close one sel 0
# --bf16: GEMM inputs and the saved fc1 output in bf16 (the ReLU / GEGLU of the widened
# values, test_kernels_t5); bf16 keeps 8 significant bits (u = 2^-8 ~ 4e-3), so 4 steps'
# losses (~10 nats) move by well under 2% (train_precision.sh's bound), and must move.
near() { close "$1" "$2" 2e-2 && ! close "$1" "$2" 0; }
check "t5 hf train: --bf16 with GEGLU trains" tr bf16 1 --bf16
check "t5 hf train: ... within 2e-2 of fp32's losses, not equal" near one bf16
check "t5 hf train: ReLU in fp32" tr relu 1 --ffn-activation relu
check "t5 hf train: --bf16 with ReLU trains" tr relu_bf16 1 --ffn-activation relu --bf16
check "t5 hf train: ... within 2e-2 of fp32's losses, not equal" near relu relu_bf16
summary t5_hf
