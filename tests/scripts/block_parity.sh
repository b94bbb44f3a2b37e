#!/usr/bin/env bash
# One transformer layer (src/nn/block.c) of every spec the families use, against
# PyTorch (float64, from the definitions: tests/scripts/block_parity.py): pre- and
# post-norm, causal / padding / no mask, LayerNorm and RMSNorm, cross-attention to an
# encoder output with its padding, dropout with plait's masks; output, input gradient,
# encoder output gradient and every parameter gradient. Then tensor parallelism (2 and
# 4 ranks, with and without sequence parallelism, Open MPI and MPICH) gives one
# process's tensors within fp32 rounding, and the backward split in its input and
# weight halves (zero-bubble schedules) the whole backward's bytes. Every MPI run
# asserts its world size from the tool's own line.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1
BP=$ROOT/build/testtools/block_parity
PYBP=(/usr/bin/python3 "$ROOT/tests/scripts/block_parity.py")

# name::flags: the layers of GPT/Llama (pre, causal), Megatron's BERT and T5 encoder
# (pre, padding), Hugging Face's BERT and BART encoder (post, padding), the T5 and
# MegaMolBART decoder (pre, causal, cross) and BART's decoder (post, cross), with
# dropout and RMSNorm in some; Megatron's --apply-residual-connection-post-layernorm
# (pre-norm, each residual the norm's output) on BERT's layer and the T5 decoder's.
CASES=("pre_causal::--mask causal"
       "post_causal::--post-norm --mask causal"
       "pre_padding_rms::--mask padding --rms"
       "post_padding_dropout::--post-norm --mask padding --dropout 0.1"
       "pre_cross::--mask causal --cross 20"
       "post_cross_dropout::--post-norm --mask causal --cross 20 --dropout 0.2"
       "none_cross_rms::--mask none --cross 9 --rms"
       "gqa::--groups 2"
       "mqa_padding::--groups 1 --mask padding"
       "respost_padding_dropout::--res-post-norm --mask padding --dropout 0.1"
       "respost_cross_dropout::--res-post-norm --mask causal --cross 20 --dropout 0.2"
       "respost_gqa_rms::--res-post-norm --groups 2 --rms")
FILES=()
for c in "${CASES[@]}"; do
    name=${c%%::*}; flags=${c#*::}
    # shellcheck disable=SC2086
    check "$name: one process writes the layer" timeout -k 5 60 "$BP" "$TMP/$name.st" $flags
    FILES+=("$TMP/$name.st")
done
OMP_NUM_THREADS=2 timeout -k 5 300 "${PYBP[@]}" torch "${FILES[@]}" | tee "$TMP/py.out"
read -r p f < <(sed -nE 's/^block_parity: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$TMP/py.out")
_pass=$((_pass + ${p:-0})); _fail=$((_fail + ${f:-1}))

# tensor parallelism: NAME RUNNER NP TOOL FLAGS... against the one-process file of NAME
n_tp=0
tp_case() {
    local name=$1 runner=$2 np=$3 tool=$4; shift 4
    n_tp=$((n_tp + 1))
    local out="$TMP/tp$n_tp.st"
    check "$name: $runner tp $np $* runs at world $np" bash -c \
        "timeout -k 5 120 $runner -n $np '$tool' '$out' $* | grep -q 'wrote .* (tp $np'"
    "${PYBP[@]}" same "$TMP/$name.st" "$out" >"$TMP/same.out" 2>&1
    local sp sf
    read -r sp sf < <(sed -nE 's/^block_parity: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$TMP/same.out")
    grep -E '^not ok|^ok .*every tensor' "$TMP/same.out" | sed "s|$TMP/||g"
    _pass=$((_pass + ${sp:-0})); _fail=$((_fail + ${sf:-1}))
}
tp_case post_cross_dropout mpirun.openmpi 2 "$BP" --post-norm --mask causal --cross 20 --dropout 0.2
tp_case post_cross_dropout mpirun.openmpi 2 "$BP" --post-norm --mask causal --cross 20 --dropout 0.2 --sp
tp_case post_cross_dropout mpirun.openmpi 4 "$BP" --post-norm --mask causal --cross 20 --dropout 0.2 --sp
tp_case pre_cross mpirun.openmpi 2 "$BP" --mask causal --cross 20 --sp
tp_case post_padding_dropout mpirun.openmpi 2 "$BP" --post-norm --mask padding --dropout 0.1 --sp
tp_case pre_padding_rms mpirun.openmpi 4 "$BP" --mask padding --rms
tp_case mqa_padding mpirun.openmpi 2 "$BP" --groups 1 --mask padding --sp  # k, v shared by 2 ranks
tp_case respost_cross_dropout mpirun.openmpi 2 "$BP" --res-post-norm --mask causal --cross 20 \
    --dropout 0.2 --sp
tp_case respost_padding_dropout mpirun.openmpi 4 "$BP" --res-post-norm --mask padding --dropout 0.1
if [ -x "$ROOT/build-mpich/testtools/block_parity" ]; then
    tp_case post_cross_dropout mpirun.mpich 2 "$ROOT/build-mpich/testtools/block_parity" \
        --post-norm --mask causal --cross 20 --dropout 0.2 --sp
    tp_case respost_padding_dropout mpirun.mpich 2 "$ROOT/build-mpich/testtools/block_parity" \
        --res-post-norm --mask padding --dropout 0.1 --sp
fi
check_fails "--res-post-norm with --post-norm is refused by name" \
    "apply-residual-connection-post-layernorm is for pre-norm" \
    "$BP" "$TMP/refused.st" --res-post-norm --post-norm

# The backward in two halves (zero-bubble schedules: pl_block_bwd_input, then
# pl_block_bwd_weight) writes the bytes of the whole backward.
split_same() { # RUNNER NP FLAGS...
    local runner=$1 np=$2; shift 2
    local pre=(); [ "$np" -gt 1 ] && pre=("$runner" -n "$np")
    timeout -k 5 120 "${pre[@]}" "$BP" "$TMP/whole.st" "$@" >/dev/null &&
        timeout -k 5 120 "${pre[@]}" "$BP" "$TMP/halves.st" "$@" --split | grep -q "(tp $np" &&
        cmp "$TMP/whole.st" "$TMP/halves.st"
}
check "split backward = whole backward, bit for bit: pre-norm" split_same - 1 --mask causal
check "split backward, bit for bit: post-norm, cross-attention, dropout" split_same - 1 \
    --post-norm --mask causal --cross 20 --dropout 0.2
check "split backward, bit for bit: grouped-query, bf16, dropout" split_same - 1 --groups 2 \
    --bf16 --dropout 0.1
check "split backward, bit for bit: tp 4, sp, multi-query (shared k, v)" split_same \
    mpirun.openmpi 4 --groups 1 --sp
check "split backward, bit for bit: tp 4, sp, post-norm, cross-attention, dropout" split_same \
    mpirun.openmpi 4 --post-norm --mask causal --cross 20 --dropout 0.2 --sp
check "split backward, bit for bit: residual after the norm, cross-attention, dropout" \
    split_same - 1 --res-post-norm --mask causal --cross 20 --dropout 0.2
check "split backward, bit for bit: tp 2, sp, residual after the norm, padding, dropout" \
    split_same mpirun.openmpi 2 --res-post-norm --mask padding --dropout 0.1 --sp
summary block_parity
