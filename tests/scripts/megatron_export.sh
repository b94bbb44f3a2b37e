#!/usr/bin/env bash
# plait ckpt export --format megatron (src/ckpt/megatron_export.c, pickle_write.c,
# torch_write.c): small GPT and Llama (2 query groups) runs, trained 2 iterations in one
# process, written as Megatron-LM torch checkpoints in their layout and in others: GPT TP 1,
# GPT TP 2 x PP 2 in bf16 (the tied output layer's copy on the last stage), Llama resharded
# to TP 2 x PP 2 by plait ckpt reshard, Llama TP 2 (from TP 1) as a release. The outside oracle (megatron_export_check.py): python3-torch's torch.load reads
# every file: Megatron's dict, args, names, shapes, and each tensor bit for bit plait's
# slice by Megatron's tensor-parallel rules (numpy reading plait's safetensors); and the
# fp32 exports equal, key for key and bit for bit, what torch_import.sh's megatron_write.py
# makes in Megatron core's layout from plait's Hugging Face export (Llama's q/k/v grouping
# rebuilt from q_proj/k_proj/v_proj by that independent code). Round trip:
# plait's Megatron import of each fp32 export holds the original tensors bit for bit.
# Refused with a message: an existing iteration (left as it was), a plait save directory as
# --out (its latest file untouched), a BERT, a model Megatron core's
# layer does not run (--apply-residual-connection-post-layernorm), PP not dividing the
# layers, TP not dividing the query groups (Megatron core has no shared k/v), an unknown --format, Megatron's flags with --format hf.
source "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=1
CHECK=$ROOT/tests/scripts/megatron_export_check.py
SAME=$ROOT/tests/scripts/ckpt_tensors.py
GPT=(--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 32
     --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 2 --lr 1e-3
     --log-interval 1 --mock-data --vocab-size 100 --make-vocab-size-divisible-by 8
     --train-iters 2 --eval-iters 0 --save-interval 2)

# train NAME FLAGS...: one process (world size 1, checked in the manifest), 2 iterations
train() {
    local name=$1; shift
    timeout -k 5 60 "$PLAIT" train "${GPT[@]}" "$@" --save "$TMP/$name" >"$TMP/$name.log" 2>&1 &&
        grep -qE '"data_parallel_size":[[:space:]]*1' "$TMP/$name/iter_0000002/manifest.json"
}
exp() { local from=$1 to=$2; shift 2; "$PLAIT" ckpt export "$TMP/$from" --format megatron --out "$TMP/$to" "$@"; }
imp() { "$PLAIT" ckpt import "$TMP/$1" --format megatron --out "$TMP/$2" --vocab-size 100; }

check "gpt and llama (2 query groups) trained 2 iterations, one process" bash -c "
    $(declare -f train); GPT=(${GPT[*]}); PLAIT='$PLAIT'; TMP='$TMP'
    train g && train l --model llama --group-query-attention --num-query-groups 2"
check "llama resharded to TP 2 x PP 2 (plait ckpt reshard)" \
    "$PLAIT" ckpt reshard "$TMP/l" --out "$TMP/l22" --tensor-model-parallel-size 2 \
    --pipeline-model-parallel-size 2 --weights-only
check "gpt exported in its layout (TP 1), fp32" exp g gm
check "... latest_checkpointed_iteration.txt names iteration 2" \
    test "$(cat "$TMP/gm/latest_checkpointed_iteration.txt" 2>/dev/null)" = 2
check "gpt exported as TP 2 x PP 2 in bf16" exp g gm22 --tensor-model-parallel-size 2 \
    --pipeline-model-parallel-size 2 --bf16
check "llama exported in its resharded layout (TP 2 x PP 2)" exp l22 lm22
check "llama exported as TP 2 (from TP 1), a release" \
    exp l lm2 --tensor-model-parallel-size 2 --release
check "... latest_checkpointed_iteration.txt says release" \
    test "$(cat "$TMP/lm2/latest_checkpointed_iteration.txt" 2>/dev/null)" = release
check_fails "llama as TP 4 over its 2 query groups is refused (Megatron core splits groups over TP)" \
    "TP 4 does not divide the model's 2 query groups" exp l lm4 --tensor-model-parallel-size 4
check "gpt and llama exported as Hugging Face directories too (the second oracle's input)" bash -c "
    '$PLAIT' ckpt export '$TMP/g' --out '$TMP/g_hf' && '$PLAIT' ckpt export '$TMP/l' --out '$TMP/l_hf'"
check "no temporary directory left behind" bash -c "! ls -d '$TMP'/*m*/*.tmp 2>/dev/null | grep -q ."

/usr/bin/python3 "$CHECK" "$TMP/g/iter_0000002" "$TMP/gm" 1 1 fp32 :: \
    "$TMP/g/iter_0000002" "$TMP/gm22" 2 2 bf16 :: "$TMP/l22/iter_0000002" "$TMP/lm22" 2 2 fp32 :: \
    "$TMP/l/iter_0000002" "$TMP/lm2" 2 1 fp32 :: vs "$TMP/g_hf" "$TMP/gm" 1 1 :: \
    vs "$TMP/l_hf" "$TMP/lm22" 2 2 :: vs "$TMP/l_hf" "$TMP/lm2" 2 1 >"$TMP/py.out" 2>&1
grep FAIL "$TMP/py.out" | head -20; tail -1 "$TMP/py.out"
read -r p f < <(sed -nE 's/^megatron_export_check: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$TMP/py.out")
_pass=$((_pass + ${p:-0})); _fail=$((_fail + ${f:-1}))

for pair in g:gm l22:lm22 l:lm2; do
    src=${pair%%:*} out=${pair#*:}
    it=iter_0000002
    check "round trip: $out imported by plait's Megatron import holds $src's tensors bit for bit" \
        bash -c "'$PLAIT' ckpt import '$TMP/$out' --format megatron --out '$TMP/${out}_back' \
                     --vocab-size 100 >/dev/null &&
                 /usr/bin/python3 '$SAME' same '$TMP/$src/$it' '$TMP/${out}_back/release' 0 0"
done

sum_before=$(md5sum "$TMP/gm/iter_0000002/mp_rank_00/model_optim_rng.pt")
check_fails "an existing iteration is refused" "iter_0000002 exists: plait ckpt export never overwrites" \
    exp g gm
check "... and left as it was" \
    test "$sum_before" = "$(md5sum "$TMP/gm/iter_0000002/mp_rank_00/model_optim_rng.pt")"
check_fails "a plait save directory as --out is refused" "holds a plait checkpoint" \
    exp g g --release
check "... its latest file untouched" test "$(cat "$TMP/g/latest_checkpointed_iteration.txt")" = 2
check "gpt with --apply-residual-connection-post-layernorm trained" train post \
    --apply-residual-connection-post-layernorm
check_fails "... its export refused: Megatron core's layer ignores the flag" \
    "cannot be written in Megatron core's names.*apply_residual_connection_post_layernorm" \
    exp post post_m
check "... and nothing written" test ! -e "$TMP/post_m/iter_0000002"
check "a BERT trained one iteration" bash -c "timeout -k 5 60 '$PLAIT' train --model bert --mock-data \
    --vocab-size 1000 --num-layers 2 --hidden-size 32 --num-attention-heads 2 --seq-length 32 \
    --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 2 --lr 1e-3 \
    --train-iters 1 --eval-iters 0 --save-interval 1 --save '$TMP/b' >'$TMP/b.log' 2>&1"
check_fails "... its export refused naming the family" "a BERT model: the Megatron export writes GPT and Llama" \
    exp b b_m
check_fails "PP 3 over 4 layers is refused" "PP dividing the 4 layers" \
    exp g g3 --pipeline-model-parallel-size 3
check_fails "an unknown --format is refused" "--format xyz: expected hf" \
    "$PLAIT" ckpt export "$TMP/g" --format xyz --out "$TMP/xyz"
check_fails "Megatron's layout flags with --format hf are refused" "are --format megatron's" \
    "$PLAIT" ckpt export "$TMP/g" --out "$TMP/hfx" --release
summary megatron_export
