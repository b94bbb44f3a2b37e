#!/usr/bin/env bash
# plait data index against an independent numpy implementation of Megatron's GPT
# data pipeline (gpt_index_reference.py): corpora written by numpy, indices and
# blends compared element for element from plait's .npy caches (numpy.load), the
# printed token windows of the data-parallel sampler compared token for token,
# caches reused on a second run, resume from consumed samples, and bad input.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
REF=$ROOT/tests/scripts/gpt_index_reference.py
W=$TMP/gpt_index
rm -rf "$W"
mkdir -p "$W"
for kind in random short longtail small; do
    "$PY" "$REF" corpus "$W/$kind" "$kind" 11 || { echo "cannot write corpus $kind"; exit 1; }
done

configs=0
elements=0
# compare NAME [--expect-separate yes|no] [--expect-reuse] -- PLAIT_ARGS...
compare() {
    local name=$1; shift
    check "$name" "$PY" "$REF" check --plait "$PLAIT" "$@"
    configs=$((configs + 1))
    local n; n=$(sed -n 's/^compared \([0-9]*\) elements$/\1/p' "$TMP/check.out" | tail -n 1)
    elements=$((elements + ${n:-0}))
    grep '^configuration:' "$TMP/check.out" | sed 's/^/    /'
}

R=$W/random S=$W/short L=$W/longtail M=$W/small
BASE=(--train-iters 200 --global-batch-size 16 --eval-interval 100 --eval-iters 10)

# One dataset, Megatron's default split and cache directory (PREFIX/cache/GPTDataset_indices).
for seed in 1234 7 4294967295; do
    compare "random_default_split_seed_$seed" -- --data-path "$R" --seq-length 64 "${BASE[@]}" \
        --seed "$seed" --print-samples 6 --data-parallel-size 2 --micro-batch-size 2
done
compare random_98_2_0_train_samples -- --data-path "$R" --split 98,2,0 --seq-length 128 \
    --train-samples 5000 --global-batch-size 32 --eval-interval 200 --eval-iters 4 \
    --data-cache-path "$W/c_random" --print-samples 5 --data-parallel-size 4 \
    --consumed-samples 40 --print-split valid
compare random_train_only_seq_longer_than_documents -- --data-path "$R" --split 1 \
    --seq-length 1000 --train-iters 30 --global-batch-size 8 --eval-iters 0 --print-samples 3
compare random_slash_split_gpt2_description -- --data-path "$R" --split 949/50/1 --seq-length 32 \
    "${BASE[@]}" --tokenizer-type GPT2BPETokenizer --vocab-file gpt2-vocab.json \
    --merge-file gpt2-merges.txt --print-samples 2 --print-split test

# Very short documents: many epochs, and the 0.80 rule on both sides of its line.
read -r below at < <("$PY" "$REF" threshold "$S" 90,5,5 4)
compare short_separate_last_epoch_below_080 --expect-separate yes -- --data-path "$S" \
    --split 90,5,5 --seq-length 4 --train-samples "$below" --global-batch-size 1 \
    --eval-interval 1000 --eval-iters 2 --print-samples 8
compare short_joint_last_epoch_at_080 --expect-separate no -- --data-path "$S" \
    --split 90,5,5 --seq-length 4 --train-samples "$at" --global-batch-size 1 \
    --eval-interval 1000 --eval-iters 2 --print-samples 8
compare short_many_epochs -- --data-path "$S" --split 90/5/5 --seq-length 8 --train-iters 500 \
    --global-batch-size 8 --eval-interval 100 --eval-iters 4 --seed 99 --print-samples 10 \
    --data-parallel-size 2 --micro-batch-size 4

# A long tail of document lengths, int32 tokens, samples inside and across long documents.
compare longtail_seq_1024 -- --data-path "$L" --split 80,10,10 --seq-length 1024 \
    --train-iters 50 --global-batch-size 8 --eval-interval 25 --eval-iters 2 --print-samples 4
compare longtail_seq_16_seed_5 -- --data-path "$L" --split 80,10,10 --seq-length 16 \
    --train-iters 400 --global-batch-size 16 --eval-interval 100 --eval-iters 3 --seed 5 \
    --print-samples 8 --data-parallel-size 2

# Blends.
compare blend_weighted_two -- --data-path 0.3 "$R" 0.7 "$M" --split 98,2,0 --seq-length 32 \
    --train-iters 300 --global-batch-size 8 --eval-interval 100 --eval-iters 5 \
    --data-cache-path "$W/c_blend" --print-samples 6 --data-parallel-size 2 \
    --micro-batch-size 2 --consumed-samples 12
compare blend_weighted_three_surplus -- --data-path 2 "$R" 1 "$M" 1 "$L" --split 90,8,2 \
    --seq-length 48 --train-iters 100 --global-batch-size 16 --eval-interval 50 --eval-iters 2 \
    --mid-level-dataset-surplus 0.05 --seed 31 --data-cache-path "$W/c_blend3" --print-samples 5
compare blend_unweighted -- --data-path "$R" "$M" "$S" --split 90/5/5 --seq-length 16 \
    --train-iters 300 --global-batch-size 8 --eval-interval 100 --eval-iters 5 \
    --data-cache-path "$W/c_unweighted" --print-samples 6 --print-split valid
compare blend_single_weighted_no_cache_path -- --data-path 1.0 "$L" --split 80,10,10 \
    --seq-length 512 --train-samples 500 --global-batch-size 4 --eval-interval 50 \
    --eval-iters 3 --seed 7 --print-samples 3
compare blend_many_epochs -- --data-path 0.5 "$S" 0.5 "$M" --split 1,0,0 --seq-length 8 \
    --train-iters 200 --global-batch-size 16 --eval-iters 0 --data-cache-path "$W/c_epochs" \
    --print-samples 10 --data-parallel-size 4

# A matrix of corpora, sequence lengths, splits, seeds, batch shapes and resume points.
SPLITS=("80/15/5" "0,70,30" "1,1,1" "98,2,0" "3")
i=0
for corpus in random short longtail small; do
    for seq in 7 33 257; do
        i=$((i + 1))
        split=${SPLITS[$((i % ${#SPLITS[@]}))]}
        mbs=$((1 + i % 3)) dp=$((1 + i % 4))
        gbs=$((mbs * dp * (1 + i % 2)))
        printed=train
        [ "${split%%,*}" = 0 ] && printed=valid
        compare "matrix_${corpus}_seq${seq}_split_${split//[\/,]/-}" -- --data-path "$W/$corpus" \
            --split "$split" --seq-length "$seq" --train-iters $((15 + 11 * i)) \
            --global-batch-size "$gbs" --micro-batch-size "$mbs" --data-parallel-size "$dp" \
            --eval-interval $((5 + i)) --eval-iters $((i % 3)) --seed $((i * 7919)) \
            --data-cache-path "$W/matrix_$i" --print-samples 4 --print-split "$printed" \
            --consumed-samples $((mbs * dp * (i % 3)))
    done
done
WEIGHTS=("0.5 $R 0.5 $M" "1 $S 3 $L" "0.2 $R 0.3 $M 0.5 $S" "5 $L 1 $R 1 $M 1 $S" "$M $L" "$S $R $L")
i=0
for blend in "${WEIGHTS[@]}"; do
    i=$((i + 1))
    # shellcheck disable=SC2086 # the blend is a list of words
    compare "blend_matrix_$i" -- --data-path $blend --split 90,6,4 --seq-length $((9 * i + 3)) \
        --train-iters $((40 * i)) --global-batch-size 4 --micro-batch-size 2 \
        --data-parallel-size 2 --eval-interval 20 --eval-iters 2 --seed $((101 * i)) \
        --data-cache-path "$W/blend_matrix_$i" --print-samples 3 --consumed-samples $((4 * i))
done

# A second run reuses every cache and builds nothing.
compare random_default_split_reused --expect-reuse -- --data-path "$R" --seq-length 64 \
    "${BASE[@]}" --seed 7 --print-samples 6 --data-parallel-size 2 --micro-batch-size 2
compare blend_weighted_two_reused --expect-reuse -- --data-path 0.3 "$R" 0.7 "$M" --split 98,2,0 \
    --seq-length 32 --train-iters 300 --global-batch-size 8 --eval-interval 100 --eval-iters 5 \
    --data-cache-path "$W/c_blend" --print-samples 6 --data-parallel-size 2 --micro-batch-size 2

# Resume: starting from consumed samples continues the uninterrupted run exactly.
resume_matches() {
    local args=(data index --data-path 0.4 "$R" 0.6 "$M" --split 98,2,0 --seq-length 32
                --train-iters 300 --global-batch-size 8 --eval-interval 100 --eval-iters 5
                --data-parallel-size 2 --micro-batch-size 2 --print-tokens -1)
    "$PLAIT" "${args[@]}" --print-samples 12 | grep '^rank 1 ' | tail -n 8 >"$W/full" &&
    "$PLAIT" "${args[@]}" --print-samples 8 --consumed-samples 8 | grep '^rank 1 ' >"$W/resumed" &&
    [ -s "$W/full" ] && cmp -s "$W/full" "$W/resumed"
}
check resume_from_consumed_samples_continues_the_run resume_matches

# Bad input: the error names the flag or the file, and the value.
IDX=(--seq-length 16 --train-iters 10 --global-batch-size 4)
check_fails unknown_prefix "--data-path '.*nope'.*nope.idx" \
    "$PLAIT" data index --data-path "$W/nope" "${IDX[@]}"
check_fails split_not_a_number "--split '90,x,10'" \
    "$PLAIT" data index --data-path "$R" --split 90,x,10 "${IDX[@]}"
check_fails split_four_weights "--split '1,2,3,4': more than three" \
    "$PLAIT" data index --data-path "$R" --split 1,2,3,4 "${IDX[@]}"
check_fails split_all_zero "--split '0,0,0'" \
    "$PLAIT" data index --data-path "$R" --split 0,0,0 "${IDX[@]}"
check_fails weights_odd "--data-path: 3 values" \
    "$PLAIT" data index --data-path 0.3 "$R" 0.7 "${IDX[@]}"
check_fails weight_negative "weight '-0.3'.*must be positive" \
    "$PLAIT" data index --data-path -0.3 "$R" 0.7 "$M" "${IDX[@]}"
check_fails weight_not_numeric "--data-path: 'x' is not a weight" \
    "$PLAIT" data index --data-path 0.3 "$R" x "$M" "${IDX[@]}"
check_fails no_training_samples "--train-iters 0 / --train-samples 0 request no training samples" \
    "$PLAIT" data index --data-path "$R" --seq-length 16 --global-batch-size 4
check_fails seed_out_of_range "--seed 4294967296" \
    "$PLAIT" data index --data-path "$R" "${IDX[@]}" --seed 4294967296
check_fails batch_not_divisible "--global-batch-size 6 must be a positive multiple" \
    "$PLAIT" data index --data-path "$R" --seq-length 16 --train-iters 10 --global-batch-size 6 \
    --micro-batch-size 4
check_fails empty_split "test split sequences \\[400, 400\\) of 400, holding 0 tokens" \
    "$PLAIT" data index --data-path "$S" --split 98,1.9,0.01 "${IDX[@]}"
check_fails unweighted_member_without_samples "--data-path '.*short': its valid split .* holds no sample" \
    "$PLAIT" data index --data-path "$S" "$R" --split 90,5,5 --seq-length 200 --train-iters 3 \
    --global-batch-size 1 --eval-iters 1
check_fails consumed_past_the_end "--consumed-samples 999999: no samples left" \
    "$PLAIT" data index --data-path "$R" "${IDX[@]}" --print-samples 1 --consumed-samples 999999
corrupt=$(ls "$W"/c_random/*-GPTDataset-train-shuffle_index.npy | head -n 1)
truncate -s 100 "$corrupt"
check_fails corrupt_cache_is_named "$(basename "$corrupt").*delete it to rebuild" \
    "$PLAIT" data index --data-path "$R" --split 98,2,0 --seq-length 128 --train-samples 5000 \
    --global-batch-size 32 --eval-interval 200 --eval-iters 4 --data-cache-path "$W/c_random"

echo "compared $configs configurations, $elements elements"
summary gpt_index_vs_numpy
