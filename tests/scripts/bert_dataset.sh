#!/usr/bin/env bash
# plait's BERT pretraining dataset (src/data/bert_dataset.c) against an
# independent numpy transcription of Megatron core's (bert_dataset_reference.py):
# a corpus of KJV verses as sentences, tokenized with BERT WordPiece and grouped
# into documents (bert_samples make); for each configuration plait's cached
# description and sample_index.npy (numpy.load) and every dumped sample
# (tokens, types, labels, length, is_random) are compared with Megatron's.
# Then the C++ generators against g++, cache reuse, and bad input.
. "$(dirname "$0")/lib.sh"
W=$TMP/bert_dataset
MODE=
. "$(dirname "$0")/masked_dataset/common.sh"

# Megatron's defaults (split 969,30,1, --mask-prob 0.15, --short-seq-prob 0.1, binary head).
compare default_seq128_first_2500 "$P" n=4000 seq=128 count=2500
compare seq64_seed7_last_1000 "$P" n=3000 seq=64 seed=7 count=1000 first=8448
compare seq512_long_sentences_many_epochs "$P" n=9000 seq=512 seed=2147483646 count=300 first=8500
compare no_binary_head_single_sentence_documents "$P" n=2000 seq=128 binary=0 count=800
compare no_binary_head_seq512 "$P" n=500 seq=512 binary=0 count=400 seed=99
compare short_seq_prob_0 "$P" n=1000 seq=96 short=0 count=600
compare short_seq_prob_1_every_target_short "$P" n=1000 seq=96 short=1 count=600
compare short_seq_prob_0.3_ratio_3 "$P" n=1000 seq=96 short=0.3 count=600 seed=5
compare mask_prob_0.4 "$P" n=1000 seq=128 mask=0.4 count=600
compare mask_prob_0.01_cap_below_one_masks_nothing "$P" n=1000 seq=32 mask=0.01 count=600
compare subword_masking_max_ngram_1 "$P" n=1000 seq=128 wholeword=0 ngram=1 count=600 seed=11
compare whole_words_max_ngram_5 "$P" n=1000 seq=256 ngram=5 count=400 seed=12
compare valid_split_98_2_0 "$P" "split=98,2,0" which=valid n=300 seq=128 count=300
compare test_split_default "$P" which=test n=50 seq=64 count=200 cache="$W/c_test"
compare num_samples_none_one_epoch "$P" "split=90/5/5" n=-1 seq=128 count=300
compare small_corpus_many_epochs "$S" "split=1" n=5000 seq=48 count=400 first=4600
compare seq_5_minimum "$S" "split=1" n=200 seq=5 count=200

# The whole path: plait preprocess --split-sentences (Punkt with no trained parameters
# here; tests/scripts/punkt.sh checks the splitting) writes PREFIX_text_sentence, which
# the dataset reads as Megatron would. Documents: KJV verses 25 at a time.
"$PY" -c '
import json, sys
v = open(sys.argv[1], encoding="utf-8").read().split("\n")[:12000]
with open(sys.argv[2], "w", encoding="utf-8") as f:
    for i in range(0, len(v), 25):
        f.write(json.dumps({"text": " ".join(v[i:i + 25])}) + "\n")
' "$PLAIT_DATA/kjv.txt" "$W/chapters.jsonl"
printf '# no parameters\n' >"$W/punkt.txt"
"$PLAIT" preprocess --input "$W/chapters.jsonl" --output-prefix "$W/pp" --split-sentences \
    --punkt-params "$W/punkt.txt" --tokenizer-type BertWordPieceLowerCase --vocab-file "$VOCAB" \
    --log-interval 0 2>"$W/pp.log" || { echo "preprocess --split-sentences failed"; cat "$W/pp.log"; }
compare preprocess_split_sentences_output "$W/pp_text_sentence" n=1000 seq=128 count=1000

# A second run reuses the cache: built 0 and the same samples.
reuse() {
    "$TOOL" dump "$VOCAB" "$P" n=4000 seq=128 count=50 >"$W/a.txt" &&
        "$TOOL" dump "$VOCAB" "$P" n=4000 seq=128 count=50 >"$W/b.txt" &&
        grep -q '^built 0$' "$W/b.txt" && cmp -s <(tail -n +3 "$W/a.txt") <(tail -n +3 "$W/b.txt")
}
check second_run_reuses_the_cache reuse

# Megatron's mapping uses C++'s std::mt19937 and std::mt19937_64: the reference's
# Python generators against g++'s.
cxx_generators() {
    command -v g++ >/dev/null || { echo "g++ not found: skipped"; return 0; }
    cat >"$W/mt.cpp" <<'CPP'
#include <cstdio>
#include <cstdlib>
#include <random>
int main(int argc, char **argv) {
    int n = std::atoi(argv[1]), seed = std::atoi(argv[2]);
    std::mt19937 a(seed);
    std::mt19937_64 b(seed + 1);
    for (int i = 0; i < n; i++) std::printf(i ? " %lu" : "%lu", (unsigned long)a());
    std::printf("\n");
    for (int i = 0; i < n; i++) std::printf(i ? " %lu" : "%lu", (unsigned long)b());
    std::printf("\n");
}
CPP
    g++ -O1 -o "$W/mt" "$W/mt.cpp" &&
        for seed in 1 1234 2147483646; do
            cmp -s <("$W/mt" 1000 $seed) <("$PY" "$REF" cxx_check 1000 $seed) || return 1
        done
}
check cxx_mt19937_and_mt19937_64_match_the_reference cxx_generators

# Bad input: the error names the flag or the file, and the value.
check_fails seed_0_refused "--seed 0" "$TOOL" dump "$VOCAB" "$P" seed=0
check_fails seq_4_refused "--seq-length 4" "$TOOL" dump "$VOCAB" "$P" seq=4
check_fails mask_prob_1_refused "--mask-prob 1" "$TOOL" dump "$VOCAB" "$P" mask=1
check_fails empty_split_named "--split '99,1,0' gives the valid split no document" \
    "$TOOL" dump "$VOCAB" "$S" "split=99,1,0" which=valid
# The valid split of 1,1,36 over 38 documents is document 1, one sentence: the
# binary head needs two (Megatron would loop over int32-max epochs).
check_fails no_sample_in_documents "documents \\[1, 2\\) give no sample" "$TOOL" dump "$VOCAB" \
    "$S" "split=1,1,36" which=valid n=10
corrupt() {
    local d; d=$(sed -n 's/^files \(.*\) \(.*\)$/\2/p' "$W/a.txt")
    "$PY" -c "import numpy,sys; a=numpy.load(sys.argv[1]); a[7,1]=10**9; numpy.save(sys.argv[1], a)" "$d"
}
corrupt
check_fails corrupt_cached_row_named "sample_index.npy: row .*expected sentences" \
    "$TOOL" dump "$VOCAB" "$P" n=4000 seq=128 first=0 count=10
desc=$(sed -n 's/^files \(.*\) \(.*\)$/\1/p' "$W/a.txt")
echo "{}" >"$desc"
check_fails changed_description_named "description.txt: cached description differs" \
    "$TOOL" dump "$VOCAB" "$P" n=4000 seq=128 count=1
check_fails gpt2_tokenizer_refused "GPT2BPETokenizer: BERT data needs a BERT WordPiece" \
    "$TOOL" dump "$VOCAB" "$P" gpt2="$PLAIT_DATA/gpt2"

echo "compared $samples samples with the reference"
summary bert_dataset
