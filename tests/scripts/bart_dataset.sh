#!/usr/bin/env bash
# plait's BART pretraining dataset (src/data/bart_dataset.c: NeMo's BARTDataset
# over the masked dataset's mapping) against an independent numpy transcription
# of NeMo's BARTDataset.__getitem__ and its own dataset_utils masking
# (bart_dataset_reference: bert_dataset_reference.py bart=1) on KJV sentences in
# documents (bert_samples make): every dumped sample (encoder input, decoder
# input, labels, both lengths), the cached mapping, cache reuse and bad input.
. "$(dirname "$0")/lib.sh"
W=$TMP/bart_dataset
MODE=bart=1
. "$(dirname "$0")/masked_dataset/common.sh"

# NeMo's defaults: max n-gram 10, geometric, whole words, delete_mask_prob 0.
compare seq128_first_1500 "$P" n=3000 seq=128 count=1500
compare seq512_seed3 "$P" n=600 seq=512 count=300 seed=3
compare seq16_last_800_seed7 "$P" n=5000 seq=16 seed=7 count=800 first=4200
compare seq4_minimum_cap_at_least_one "$S" "split=1,0,0" n=300 seq=4 count=300
compare delete_mask_prob_0.3 "$P" n=800 seq=128 delete=0.3 count=500 seed=21
compare delete_mask_prob_1_no_mask_left "$P" n=800 seq=96 delete=1 count=300
compare mask_prob_0.4 "$P" n=800 seq=128 mask=0.4 count=400 seed=2147483646
compare short_seq_prob_0 "$P" n=800 seq=96 short=0 count=400
compare subwords_choice_ngram_3 "$P" n=800 seq=128 wholeword=0 geometric=0 ngram=3 count=500 seed=5
compare choice_ngram_10_whole_words "$P" n=800 seq=256 geometric=0 count=300 seed=6
compare valid_split_98_2_0 "$P" "split=98,2,0" which=valid n=300 seq=128 count=300
compare num_samples_none_one_epoch "$P" "split=90/5/5" n=-1 seq=64 count=400
# NeMo's split rounds each part and shifts the boundaries (Megatron core rounds the
# running fractions): over 2911 documents, 1,1,1 puts the valid split at [971, 1941),
# core at [970, 1941).
compare nemo_split_valid_1_1_1 "$P" "split=1,1,1" which=valid n=200 seq=64 count=200

reuse() {
    "$TOOL" dump "$VOCAB" "$P" bart=1 n=3000 seq=128 count=50 >"$W/a.txt" &&
        "$TOOL" dump "$VOCAB" "$P" bart=1 n=3000 seq=128 count=50 >"$W/b.txt" &&
        grep -q '^built 0$' "$W/b.txt" && cmp -s <(tail -n +3 "$W/a.txt") <(tail -n +3 "$W/b.txt") &&
        grep -q "BARTDataset_indices/.*-BARTDataset-sample_index.npy" "$W/a.txt"
}
check second_run_reuses_the_cache reuse

check_fails seq_3_refused "--seq-length 3: BART needs at least 4" "$TOOL" dump "$VOCAB" "$P" bart=1 seq=3
check_fails delete_prob_2_refused "delete_mask_prob 2: expected a value in \\[0, 1\\]" \
    "$TOOL" dump "$VOCAB" "$P" bart=1 delete=2
check_fails split_of_one_value_refused "--split '1': NeMo's BART dataset takes three values" \
    "$TOOL" dump "$VOCAB" "$P" bart=1 split=1
check_fails gpt2_tokenizer_refused "GPT2BPETokenizer: BERT data needs a BERT WordPiece" \
    "$TOOL" dump "$VOCAB" "$P" bart=1 gpt2="$PLAIT_DATA/gpt2"

echo "compared $samples BART samples with the reference"
summary bart_dataset
