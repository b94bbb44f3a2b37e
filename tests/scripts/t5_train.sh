#!/usr/bin/env bash
# T5 (Megatron core's T5Model, `plait train --model t5`, pretrain_t5.py's flags) on
# Megatron's T5 dataset (span corruption with sentinels, checked sample for sample in
# t5_dataset.sh) over KJV verses as sentences in documents, dropout on: TP 2 with and
# without sequence parallelism and DP 2 with ZeRO 1, 2 and 3 each give one process's
# losses, validation and final parameters (parameters assembled from the shards by
# tests/scripts/ckpt_tensors.py, independent of plait; bounds argued in train_lib.sh);
# resuming at iteration 5 gives the uninterrupted run bit for bit; with
# --apply-residual-connection-post-layernorm, TP 2 with sp one process's run; pipelining without
# a split rank (encdec_pp.sh pipelines) and the
# flags T5 does not take are refused by name. The model itself is checked against an
# independent PyTorch T5 in t5.sh.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1
"$ROOT/build/testtools/bert_samples" make "$PLAIT_DATA/bert/vocab.txt" "$PLAIT_DATA/kjv.txt" \
    "$TMP/kjv_sent" 3000 >/dev/null
COMMON=(--model t5 --data-path "$TMP/kjv_sent" --vocab-file "$PLAIT_DATA/bert/vocab.txt"
        --vocab-extra-ids 100 --split 90,10,0 --encoder-num-layers 2 --decoder-num-layers 3
        --hidden-size 64 --num-attention-heads 4 --encoder-seq-length 32
        --decoder-seq-length 16 --micro-batch-size 2 --global-batch-size 8 --lr 1e-3
        --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 2 --log-interval 1
        --eval-iters 2 --eval-interval 5 --seed 7 --train-iters 10)

check "t5: one process trains 10 iterations" run t_single 1 1 1
check "t5: the loss falls" \
    bash -c "[ \"\$(losses '$TMP/t_single.jsonl' | awk 'NR == 1 { a = \$1 } END { print (\$1 < a - 0.3) }')\" = 1 ]"
check "t5: the T5 sample mappings are built and cached" \
    bash -c "[ \$(ls '$TMP'/kjv_sent/cache/T5MaskedWordPieceDataset_indices/*-sample_index.npy | wc -l) = 2 ]"
check "t5: Megatron core's names for both stacks, cross-attention and the output bias" $PY -c "
import json, sys
m = json.load(open('$TMP/t_single/iter_0000010/manifest.json'))
t = m['tensors']
want = ['embedding.word_embeddings.weight', 'embedding.position_embeddings.weight',
        'encoder.layers.1.self_attention.linear_qkv.weight', 'encoder.final_layernorm.weight',
        'decoder.layers.2.mlp.linear_fc2.weight', 'decoder.final_layernorm.bias',
        'lm_head.output_layer.bias']
missing = [w for w in want if w not in t]
cross = [k for k in t if k.startswith('decoder.layers.0.') and 'cross' in k]
extra = [k for k in t if k.startswith(('encoder.layers.2', 'decoder.layers.3', 'output_layer.'))]
print(missing, cross, extra)
sys.exit(bool(missing) or len(cross) < 4 or bool(extra) or
         m['model']['decoder_num_layers'] != 3 or m['model']['num_layers'] != 2)"
layout_checks t5 t_single t_tp2 "2 2 1 1"
layout_checks t5 t_single t_tp2_sp "2 2 1 1" --sequence-parallel
# Megatron's --apply-residual-connection-post-layernorm in both stacks (the decoder's
# cross-attention residual too): TP 2 with sequence parallelism gives one process's run.
RPN=--apply-residual-connection-post-layernorm
check "t5 $RPN trains" run t_rpn 1 1 1 $RPN
losses_differ() { ! diff -q <(losses "$TMP/$1.jsonl") <(losses "$TMP/$2.jsonl") >/dev/null; }
check "t5 $RPN: the losses are not the ordinary pre-norm's" losses_differ t_rpn t_single
layout_checks t5 t_rpn t_rpn_tp2_sp "2 2 1 1" --sequence-parallel $RPN
layout_checks t5 t_single t_dp2_z1 "2 1 2 1" --use-distributed-optimizer
layout_checks t5 t_single t_dp2_z2 "2 1 2 1" --zero-stage 2
layout_checks t5 t_single t_dp2_z3 "2 1 2 1" --zero-stage 3

# Resume: from iteration 5's checkpoint, the uninterrupted run's losses, validation and
# final parameters, bit for bit (the data order and dropout masks are keyed by sample).
dir="$TMP/t_resume"
mkdir -p "$dir" && cp -r "$TMP/t_dp2_z2/iter_0000005" "$dir/" &&
    echo 5 > "$dir/latest_checkpointed_iteration.txt"
check "t5 ZeRO 2: resumed from iteration 5" \
    timeout -k 5 120 mpirun.openmpi -n 2 "$PLAIT" train "${COMMON[@]}" --zero-stage 2 \
    --make-vocab-size-divisible-by 512 --load "$dir" --save "$dir" --metrics-file "$dir.jsonl"
check "t5: losses and validation after resuming equal the uninterrupted run's, bit for bit" \
    bash -c "diff <(grep -o '\"lm_loss\": [^,]*\|\"valid_lm_loss\": [^,]*' '$TMP/t_dp2_z2.jsonl' | tail -n 6) \
                  <(grep -o '\"lm_loss\": [^,]*\|\"valid_lm_loss\": [^,]*' '$dir.jsonl' | head -n 6)"
check "t5: final parameters after resuming equal, bit for bit" \
    $PY "$CK" same "$dir/iter_0000010" "$TMP/t_dp2_z2/iter_0000010" 0 0

# Decoding (plait seq2seq, model/encdec_generate.h): the KV-cached steps (self-attention
# and the encoder output's keys and values) give the training forward's logits at every
# position, teacher-forced, and its greedy tokens, at TP 1 and TP 2 alike.
DEC="$ROOT/build/testtools/encdec_decode_check"
check "t5 decoding: cached steps equal the training forward (TP 1)" \
    bash -c "'$DEC' > '$TMP/dec1.txt'"
check "t5 decoding: TP 2 equals the forward and TP 1's tokens" \
    bash -c "timeout -k 5 60 mpirun.openmpi -n 2 '$DEC' > '$TMP/dec2.txt' &&
             diff <(grep ^source '$TMP/dec1.txt') <(grep ^source '$TMP/dec2.txt')"
printf 'in the beginning god created the heaven\nand the earth\n' >"$TMP/src.txt"
check "plait seq2seq decodes a T5 checkpoint, one line per source" \
    bash -c "'$PLAIT' seq2seq --load '$TMP/t_single' --input '$TMP/src.txt' --max-new-tokens 6 \
             > '$TMP/s2s.txt' && [ \$(wc -l < '$TMP/s2s.txt') = 2 ]"
check "plait seq2seq runs a TP 2 checkpoint on 2 ranks" \
    bash -c "timeout -k 5 60 mpirun.openmpi -n 2 '$PLAIT' seq2seq --load '$TMP/t_tp2' \
             --input '$TMP/src.txt' --max-new-tokens 6 > '$TMP/s2s_tp2.txt' &&
             [ \$(wc -l < '$TMP/s2s_tp2.txt') = 2 ]"
"$PLAIT" train --mock-data --vocab-size 100 --num-layers 1 --hidden-size 16 --num-attention-heads 2 \
    --seq-length 8 --micro-batch-size 1 --global-batch-size 1 --train-iters 1 --lr 1e-3 \
    --save "$TMP/gpt1" >/dev/null 2>&1
check_fails "plait seq2seq refuses a decoder-only checkpoint" "seq2seq decodes an encoder-decoder" \
    "$PLAIT" seq2seq --load "$TMP/gpt1" --input "$TMP/src.txt"

TINY=(--num-layers 1 --hidden-size 8 --num-attention-heads 2 --seq-length 8
      --micro-batch-size 1 --global-batch-size 1 --train-iters 1 --lr 1e-3)
DATA=(--data-path "$TMP/kjv_sent" --vocab-file "$PLAIT_DATA/bert/vocab.txt" --vocab-extra-ids 10)
check_fails "t5: pipelining without a split rank is refused, naming Megatron's split flag" \
    "needs --pipeline-model-parallel-split-rank S" \
    timeout -k 5 60 mpirun.openmpi -n 2 "$PLAIT" train --model t5 "${DATA[@]}" --num-layers 2 \
    --hidden-size 8 --num-attention-heads 2 --seq-length 8 --decoder-seq-length 8 \
    --micro-batch-size 1 --global-batch-size 1 --train-iters 1 --lr 1e-3 \
    --pipeline-model-parallel-size 2
check_fails "t5: --decoder-seq-length is required" "--model t5 needs --decoder-seq-length" \
    "$PLAIT" train --model t5 "${DATA[@]}" "${TINY[@]}"
check_fails "t5: --num-layers and --encoder-num-layers together are refused" \
    "give --num-layers or --encoder-num-layers, not both" \
    "$PLAIT" train --model t5 "${DATA[@]}" "${TINY[@]}" --encoder-num-layers 1 \
    --decoder-seq-length 8
check_fails "the decoder's flags are refused for a decoder-only family" \
    "--decoder-seq-length is for --model t5" \
    "$PLAIT" train --mock-data --vocab-size 100 "${TINY[@]}" --decoder-seq-length 8
check_fails "t5: --mock-data is refused (no encoder-decoder samples)" "--mock-data has no" \
    "$PLAIT" train --model t5 --mock-data --vocab-size 100 "${TINY[@]}" --decoder-seq-length 8
check_fails "t5: a GPT-2 tokenizer is refused, naming the flag" \
    "--model t5: masking needs a WordPiece vocabulary" \
    "$PLAIT" train --model t5 --data-path "$TMP/kjv_sent" "${GPT2[@]}" "${TINY[@]}" \
    --decoder-seq-length 8
summary t5_train
