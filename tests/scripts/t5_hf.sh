#!/usr/bin/env bash
# transformers' T5 layer in plait (--position-embedding-type relative, RMSNorm, no biases,
# --softmax-scale 1, --ffn-activation relu|geglu, tied with the output layer's input scaled
# by hidden^-0.5 or untied) against an independent float64 PyTorch T5 written against
# transformers' module structure (t5_hf_ref.py, via t5_hf_parity.py): logits, loss, every
# gradient and the parameters after 5 AdamW steps; small bias tables (8 buckets, max
# distance 20: the logarithmic buckets within 24 positions) and T5's own (32, 128: the
# float32 boundaries at distance 16), in one process and over 2 tensor-parallel ranks
# (with sequence parallelism), each layout asserting its world size.
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
one relu_untied --hf-t5 relu
one geglu_tied --hf-t5 geglu --tied --buckets 32 --max-distance 128
two geglu_tied_tp2_sp --hf-t5 geglu --tied --buckets 32 --max-distance 128 --sp
two relu_untied_tp2 --hf-t5 relu
OMP_NUM_THREADS=2 $PY "$ROOT/tests/scripts/t5_hf_parity.py" "${FILES[@]}" | tee "$TMP/py.out" |
    grep -v '^ok'
read -r p f < <(sed -nE 's/^t5_hf_parity: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$TMP/py.out")
_pass=$((_pass + ${p:-0})); _fail=$((_fail + ${f:-1}))
summary t5_hf
