#!/usr/bin/env bash
# Checkpoints: a run resumed from iteration 5 produces the same losses, bit for
# bit, as the uninterrupted run; a half-written checkpoint is never taken as the
# latest; a checkpoint of another architecture is refused naming the field.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
kjv_dataset 2000 "$TMP/kjv"
ARCH=(--num-layers 2 --num-attention-heads 4 --seq-length 64)
MODEL=("${ARCH[@]}" --hidden-size 64 --micro-batch-size 2 --global-batch-size 4 --train-iters 10 --lr 1e-3 --min-lr 1e-4
       --lr-decay-style cosine --lr-warmup-iters 2 --log-interval 1 --eval-iters 2
       --eval-interval 5 --data-path "$TMP/kjv_text_document" --split 98,2,0 "${GPT2[@]}")

check "uninterrupted run with checkpoints every 5 iterations" \
    "$PLAIT" train "${MODEL[@]}" --save "$TMP/full" --save-interval 5 --metrics-file "$TMP/full.jsonl"
check "iteration directories and latest file" test -f "$TMP/full/iter_0000005/manifest.json" -a \
    -f "$TMP/full/iter_0000010/mp_rank_00/model_optim.safetensors" -a \
    "$(cat "$TMP/full/latest_checkpointed_iteration.txt")" = 10
mkdir -p "$TMP/resume"
cp -r "$TMP/full/iter_0000005" "$TMP/resume/"
echo 5 > "$TMP/resume/latest_checkpointed_iteration.txt"
mkdir -p "$TMP/resume/iter_0000009.tmp"   # a crashed save: must be ignored
check "resumed run from iteration 5" \
    "$PLAIT" train "${MODEL[@]}" --load "$TMP/resume" --save "$TMP/resume" --metrics-file "$TMP/resumed.jsonl"
bit_exact() { diff <(losses "$TMP/full.jsonl" | tail -n 5) <(losses "$TMP/resumed.jsonl"); }
check "losses after resuming equal the uninterrupted run's, bit for bit" bit_exact
check "resumed run logged iterations 6..10 only" test "$(losses "$TMP/resumed.jsonl" | wc -l)" = 5
check "final parameters equal" cmp "$TMP/full/iter_0000010/mp_rank_00/model_optim.safetensors" \
    "$TMP/resume/iter_0000010/mp_rank_00/model_optim.safetensors"
check_fails "another architecture is refused naming the field" \
    "--hidden-size is 64 in the checkpoint but 128 in this run" \
    "$PLAIT" train "${MODEL[@]:0:6}" --hidden-size 128 "${MODEL[@]:8}" --load "$TMP/full"
printf 'garbage' >> "$TMP/resume/iter_0000010/mp_rank_00/model_optim.safetensors"
check_fails "a corrupted shard is detected by its checksum" "corrupt file" \
    "$PLAIT" train "${MODEL[@]}" --load "$TMP/resume"
check "generate from the checkpoint" "$PLAIT" generate --load "$TMP/full" --prompt "And God said" \
    --max-new-tokens 8 --seed 1
summary train_resume
