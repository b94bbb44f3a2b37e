#!/usr/bin/env bash
# plait's T5 (model/encdec.h: Megatron core's T5Model) against an independent float64
# PyTorch T5 (t5_parity.py): logits, loss, every gradient and the parameters after 5
# AdamW steps, in one process and split over 2 and 4 tensor-parallel ranks (with and
# without sequence parallelism: the decoder's cross-attention reads the encoder output
# whole, the encoder output's gradient is summed over the TP group once), each layout
# asserting its world size; and with --apply-residual-connection-post-layernorm, in one
# process and at TP 2 with sequence parallelism.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1
TOOL=$ROOT/build/testtools/encdec_parity
FILES=()
case_run() { # NAME NP FLAGS...
    local name=$1 np=$2; shift 2
    check "t5: $name runs" bash -c "timeout -k 5 120 mpirun.openmpi -n $np '$TOOL' \
        '$TMP/$name.safetensors' $* > '$TMP/$name.log' 2>&1"
    check "t5: $name ran on $np tensor-parallel ranks" grep -q "tp $np" "$TMP/$name.log"
    FILES+=("$TMP/$name.safetensors")
}
check "t5: one process runs" bash -c "'$TOOL' '$TMP/t5_1.safetensors' > '$TMP/t5_1.log'"
FILES+=("$TMP/t5_1.safetensors")
case_run t5_tp2 2
case_run t5_tp2_sp 2 --sp
case_run t5_tp4_sp 4 --sp
# Megatron's --apply-residual-connection-post-layernorm (the cross-attention's residual too)
check "t5 --res-post-norm: one process runs" bash -c "'$TOOL' '$TMP/t5_rpn.safetensors' --res-post-norm \
    > '$TMP/t5_rpn.log'"
FILES+=("$TMP/t5_rpn.safetensors")
case_run t5_rpn_tp2_sp 2 --sp --res-post-norm
OMP_NUM_THREADS=2 $PY "$ROOT/tests/scripts/t5_parity.py" "${FILES[@]}" | tee "$TMP/py.out" |
    grep -v '^ok'
read -r p f < <(sed -nE 's/^t5_parity: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$TMP/py.out")
_pass=$((_pass + ${p:-0})); _fail=$((_fail + ${f:-1}))
summary t5
