#!/usr/bin/env bash
# plait's T5 pretraining dataset (src/data/t5_dataset.c over the BERT dataset's
# mapping and masking) against an independent numpy transcription of Megatron
# core's T5MaskedWordPieceDataset (bert_dataset_reference.py, t5=1): a corpus of
# KJV verses as sentences in documents (bert_samples make), the BERT WordPiece
# vocabulary with --vocab-extra-ids sentinels; for each configuration plait's
# cached description and sample_index.npy and every dumped sample (encoder
# input, decoder input, labels, both lengths) are compared with Megatron's.
# Then cache reuse and bad input.
. "$(dirname "$0")/lib.sh"
W=$TMP/t5_dataset
MODE=t5=1
. "$(dirname "$0")/masked_dataset/common.sh"

# pretrain_t5.py's masking (max n-gram 10, whole words, geometric), 100 sentinels.
compare enc128_dec64_first_1500 "$P" n=3000 seq=128 dec=64 count=1500
compare enc512_dec128_as_megatrons_example "$P" n=600 seq=512 dec=128 count=300 seed=3
compare enc32_dec16_seed7_last_800 "$P" n=5000 seq=32 dec=16 seed=7 count=800 first=4200
compare enc4_minimum "$S" "split=1" n=300 seq=4 dec=4 count=300
compare mask_prob_0.3 "$P" n=800 seq=128 dec=96 mask=0.3 count=500 seed=21
compare short_seq_prob_0 "$P" n=800 seq=96 dec=48 short=0 count=500
compare short_seq_prob_1 "$P" n=800 seq=96 dec=48 short=1 count=500 seed=2147483646
compare subwords_ngram_choice_not_geometric "$P" n=800 seq=128 dec=64 wholeword=0 \
    geometric=0 ngram=3 count=500 seed=5
compare geometric_max_ngram_1 "$P" n=800 seq=128 dec=64 ngram=1 count=500
compare valid_split_98_2_0 "$P" "split=98,2,0" which=valid n=300 seq=128 dec=64 count=300
compare num_samples_none_one_epoch "$P" "split=90/5/5" n=-1 seq=64 dec=32 count=400
compare extra_ids_20 "$P" n=400 seq=128 dec=64 extra=20 count=400 seed=9

reuse() {
    "$TOOL" dump "$VOCAB" "$P" t5=1 n=3000 seq=128 dec=64 count=50 >"$W/a.txt" &&
        "$TOOL" dump "$VOCAB" "$P" t5=1 n=3000 seq=128 dec=64 count=50 >"$W/b.txt" &&
        grep -q '^built 0$' "$W/b.txt" && cmp -s <(tail -n +3 "$W/a.txt") <(tail -n +3 "$W/b.txt")
}
check second_run_reuses_the_cache reuse
# T5 and BERT over the same data and seed keep separate caches.
check bert_and_t5_caches_apart grep -q "T5MaskedWordPieceDataset_indices/.*-T5MaskedWordPieceDataset-description.txt" "$W/a.txt"

# Bad input: the error names the flag or the sample, and the value.
check_fails no_extra_ids_refused "has no sentinels: T5 needs --vocab-extra-ids > 0" \
    "$TOOL" dump "$VOCAB" "$P" t5=1 extra=0
check_fails encoder_seq_3_refused "--encoder-seq-length 3" "$TOOL" dump "$VOCAB" "$P" t5=1 seq=3
check_fails decoder_seq_0_refused "--decoder-seq-length 0" "$TOOL" dump "$VOCAB" "$P" t5=1 dec=0
check_fails decoder_too_short_named "T5 sample 0 needs [0-9]* decoder positions, more than --decoder-seq-length 4" \
    "$TOOL" dump "$VOCAB" "$P" t5=1 n=100 seq=128 dec=4 count=1
check_fails too_few_sentinels_named "masked spans, more than the tokenizer's 1 sentinels" \
    "$TOOL" dump "$VOCAB" "$P" t5=1 n=100 seq=256 dec=128 extra=1 count=20
check_fails gpt2_tokenizer_refused "GPT2BPETokenizer: BERT data needs a BERT WordPiece" \
    "$TOOL" dump "$VOCAB" "$P" t5=1 gpt2="$PLAIT_DATA/gpt2"

echo "compared $samples T5 samples with the reference"
summary t5_dataset
