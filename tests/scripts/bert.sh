#!/usr/bin/env bash
# BERT (Megatron core's BertModel, --model bert) in plait train: every layout gives one
# process's MLM losses, binary-head (sentence-order) losses, validation and final
# parameters - TP 2 with sequence parallelism (the vocab-parallel output bias, the
# replicated heads computed whole on every rank), PP 2 (token types on the first stage,
# the heads and the tied copy of the word embeddings on the last; the padding mask on
# every stage), DP 2 with ZeRO 1 and 3, interleaved pipelining and 3D - with dropout
# on, on plait's mock BERT samples (every sample padded to its own length, token types,
# masked positions, is_random, keyed by the global sample index), and TP 2 x DP 2 on
# Megatron's BERT dataset over KJV sentences. Parameters are
# compared after assembling the shards with tests/scripts/ckpt_tensors.py (independent
# of plait); the heads' names are Megatron core's. --bert-no-binary-head drops the
# pooler, the binary head and the token types, as pretrain_bert.py does.
# --apply-residual-connection-post-layernorm: one process, TP 2 with sp, PP 2 ZB-H1.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1 # up to 8 ranks share 2 cores
COMMON=(--model bert --mock-data --vocab-size 1000 --num-layers 4 --hidden-size 64
        --num-attention-heads 8 --seq-length 32 --micro-batch-size 2 --global-batch-size 8
        --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 2 --log-interval 1
        --eval-iters 2 --eval-interval 5 --seed 7 --train-iters 10)
sop() { grep '"sop_loss"' "$1" | sed -E 's/.*"sop_loss": ([^,}]*).*/\1/'; }
# The binary head's losses within 2e-5 relative, as the MLM losses (pp.sh's argument).
same_sop() {
    paste <(sop "$TMP/$1.jsonl") <(sop "$TMP/$2.jsonl") | awk -v n=10 '
        { c++; d = $1 - $2; if (d < 0) d = -d; if (d > 2e-5 * $2) bad++ }
        END { exit !(c == n && !bad) }'
}
bert_checks() { # SINGLE NAME "NP TP DP PP" FLAGS...
    local single=$1 name=$2
    layout_checks bert "$@"
    check "bert: $name: binary-head losses equal one process's" same_sop "$single" "$name"
}

check "bert: one process trains 10 iterations" run b_single 1 1 1
check "bert: the MLM loss falls (mock samples: each masked position sees its token)" \
    bash -c "[ \"\$(losses '$TMP/b_single.jsonl' | awk 'NR == 1 { a = \$1 } END { print (\$1 < a - 0.05) }')\" = 1 ]"
check "bert: the binary head's loss is logged every iteration" \
    bash -c "[ \"\$(grep -c '\"sop_loss\": [0-9]' '$TMP/b_single.jsonl')\" = 10 ]"
check "bert: the progress line carries Megatron's 'lm loss' and 'sop loss' fields" \
    grep -qE "\| lm loss: [0-9.E+-]+ \| sop loss: [0-9.E+-]+ \|" "$TMP/b_single.log"
check "bert: Megatron core's names for the heads and the encoder" $PY -c "
import json, sys
m = json.load(open('$TMP/b_single/iter_0000010/manifest.json'))['tensors']
want = ['embedding.tokentype_embeddings.weight', 'encoder.layers.3.mlp.linear_fc2.weight',
        'encoder.final_layernorm.weight', 'lm_head.dense.weight', 'lm_head.layer_norm.bias',
        'output_layer.bias', 'pooler.dense.weight', 'binary_head.weight', 'binary_head.bias']
missing = [w for w in want if w not in m]
print(missing); sys.exit(bool(missing) or any(k.startswith('decoder.') for k in m))"
bert_checks b_single b_tp2_sp "2 2 1 1" --sequence-parallel
bert_checks b_single b_pp2 "2 1 1 2"
bert_checks b_single b_dp2_z1 "2 1 2 1" --use-distributed-optimizer
bert_checks b_single b_dp2_z2 "2 1 2 1" --zero-stage 2
bert_checks b_single b_dp2_z3 "2 1 2 1" --zero-stage 3
bert_checks b_single b_pp2_zb "2 1 1 2" --pipeline-schedule zb-h1
bert_checks b_single b_pp2_gpipe "2 1 1 2" --pipeline-schedule gpipe
bert_checks b_single b_pp2_vp2 "2 1 1 2" --num-layers-per-virtual-pipeline-stage 1
bert_checks b_single b_3d "8 2 2 2" --sequence-parallel --use-distributed-optimizer
# Resume: 3D with ZeRO 1 from iteration 5 gives the uninterrupted run's losses and final
# parameters bit for bit (the mock samples and dropout masks are keyed by sample index).
dir="$TMP/b_resume"
mkdir -p "$dir" && cp -r "$TMP/b_3d/iter_0000005" "$dir/" && echo 5 > "$dir/latest_checkpointed_iteration.txt"
check "bert 3D: resumed from iteration 5" \
    timeout -k 5 300 mpirun.openmpi -n 8 "$PLAIT" train "${COMMON[@]}" \
    --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --sequence-parallel \
    --use-distributed-optimizer --make-vocab-size-divisible-by 256 --load "$dir" --save "$dir" \
    --metrics-file "$dir.jsonl"
check "bert 3D: MLM and binary-head losses after resuming equal the uninterrupted run's, bit for bit" \
    bash -c "diff <(grep -o '\"lm_loss\": [^,]*\|\"sop_loss\": [^,}]*' '$TMP/b_3d.jsonl' | tail -n 10) \
                  <(grep -o '\"lm_loss\": [^,]*\|\"sop_loss\": [^,}]*' '$dir.jsonl')"
check "bert 3D: final parameters after resuming equal, bit for bit" \
    $PY "$CK" same "$dir/iter_0000010" "$TMP/b_3d/iter_0000010" 0 0

# Megatron's BERT dataset (data/bert_dataset.h, checked against Megatron in
# bert_dataset.sh) on KJV verses as sentences grouped into documents: one process and
# TP 2 x DP 2 with sequence parallelism give the same losses, validation and parameters.
MOCK=("${COMMON[@]}")
"$ROOT/build/testtools/bert_samples" make "$PLAIT_DATA/bert/vocab.txt" "$PLAIT_DATA/kjv.txt" \
    "$TMP/kjv_sent" 3000 >/dev/null
COMMON=(--data-path "$TMP/kjv_sent" --vocab-file "$PLAIT_DATA/bert/vocab.txt" --split 90,10,0
        "${MOCK[@]:0:2}" "${MOCK[@]:5}") # the same run without --mock-data --vocab-size 1000
check "bert on Megatron's BERT dataset: one process trains" run b_real 1 1 1
check "bert on Megatron's BERT dataset: the mappings are built and cached" \
    bash -c "[ \$(ls '$TMP'/kjv_sent/cache/BERTMaskedWordPieceDataset_indices/*-sample_index.npy | wc -l) = 2 ]"
bert_checks b_real b_real_tp2_dp2 "4 2 2 1" --sequence-parallel
COMMON=("${MOCK[@]}")

check "bert --bert-no-binary-head trains" run b_nobin 1 1 1 --bert-no-binary-head
check "bert --bert-no-binary-head: no pooler, binary head or token types, no sop loss" $PY -c "
import json, sys
m = json.load(open('$TMP/b_nobin/iter_0000010/manifest.json'))['tensors']
bad = [k for k in m if k.startswith(('pooler.', 'binary_head.', 'embedding.tokentype'))]
sys.exit(bool(bad) or 'sop_loss' in open('$TMP/b_nobin.jsonl').read())"
bert_checks_nobin() { layout_checks bert b_nobin b_nobin_tp2 "2 2 1 1" --bert-no-binary-head; }
bert_checks_nobin
# Megatron's --apply-residual-connection-post-layernorm (each residual its norm's output):
# TP 2 with sequence parallelism gives one process's run; the manifest records it and a
# run without it refuses the checkpoint naming the flag; PP 2 under ZB-H1 (the backward
# in its input and weight halves) equals one process too.
RPN=--apply-residual-connection-post-layernorm
check "bert $RPN trains" run b_rpn 1 1 1 $RPN
losses_differ() { ! diff -q <(losses "$TMP/$1.jsonl") <(losses "$TMP/$2.jsonl") >/dev/null; }
check "bert $RPN: the losses are not the ordinary pre-norm's" losses_differ b_rpn b_single
layout_checks bert b_rpn b_rpn_tp2_sp "2 2 1 1" --sequence-parallel $RPN
layout_checks bert b_rpn b_rpn_pp2_zb "2 1 1 2" --pipeline-schedule zb-h1 $RPN # split backward
check "bert $RPN: the manifest records it" grep -qE \
    '"apply_residual_connection_post_layernorm":[[:space:]]*1' "$TMP/b_rpn/iter_0000010/manifest.json"
check_fails "bert: a $RPN checkpoint is refused without the flag, naming it" \
    "architecture differs from this run's in $RPN" \
    timeout -k 5 120 "$PLAIT" train "${COMMON[@]}" --make-vocab-size-divisible-by 512 \
    --load "$TMP/b_rpn" --train-iters 11
check_fails "--bert-no-binary-head is refused for another family" "for --model bert" \
    "$PLAIT" train --mock-data --vocab-size 100 --num-layers 1 --hidden-size 8 \
    --num-attention-heads 2 --seq-length 8 --micro-batch-size 1 --global-batch-size 1 \
    --train-iters 1 --lr 1e-3 --bert-no-binary-head
check_fails "bert with a GPT-2 tokenizer is refused, naming the flag" \
    "masking needs a WordPiece vocabulary: --tokenizer-type BertWordPieceLowerCase" \
    "$PLAIT" train --model bert --data-path "$TMP/kjv_sent" "${GPT2[@]}" --num-layers 1 \
    --hidden-size 8 --num-attention-heads 2 --seq-length 8 --micro-batch-size 1 \
    --global-batch-size 1 --train-iters 1 --lr 1e-3
check_fails "plait generate refuses a BERT checkpoint" "needs a causal model" \
    "$PLAIT" generate --load "$TMP/b_single" --prompt "a b" --max-new-tokens 2
summary bert
