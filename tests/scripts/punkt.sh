#!/usr/bin/env bash
# plait's Punkt sentence splitter (src/data/punkt.c) against NLTK's
# (Debian's python3-nltk 3.8, tests/scripts/punkt_reference.py) with the same
# parameters: NLTK's PunktTrainer trains them (scripts/punkt_params.py) on license
# texts, KJV verses and generated stress text; both split held-out documents
# (other licenses, KJV, git release notes when installed, stress text with
# abbreviations, initials, numbers, ellipses, brackets and quotes after periods,
# non-ASCII, and a document over Megatron's 1,000,000-character chunk), and every
# sentence span must agree; so must 3,000 random strings of words and punctuation;
# the character classes are checked on every code point. NLTK's English model (english.pickle) is not in
# Debian: the agreement measured is of the algorithm, with trained parameters.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
REF=$ROOT/tests/scripts/punkt_reference.py
TOOL=$ROOT/build/testtools/punkt_split
L=/usr/share/common-licenses
W=$TMP/punkt
rm -rf "$W"
mkdir -p "$W"
if ! "$PY" -c "import nltk" 2>/dev/null; then
    echo "python3-nltk is not installed (scripts/setup.sh installs it)"
    _fail=$((_fail + 1))
    summary punkt
    exit 1
fi
head -n 6000 "$PLAIT_DATA/kjv.txt" >"$W/kjv_train.txt"
sed -n 6001,12000p "$PLAIT_DATA/kjv.txt" >"$W/kjv_test.txt"
head -n 9500 "$PLAIT_DATA/kjv.txt" | tr '\n' ' ' >"$W/kjv_whole.txt"
"$PY" "$REF" stress "$W/stress_train.txt" 1 3000
"$PY" "$REF" stress "$W/stress_test.txt" 2 1500
relnotes=()
[ -d /usr/share/doc/git/RelNotes ] &&
    mapfile -t relnotes < <(ls /usr/share/doc/git/RelNotes/*.txt | sort -V | head -n 60)

agree() {
    local name=$1 params=$2; shift 2
    "$PY" "$REF" docs "$W/$name.hex" "$@" >/dev/null &&
        "$TOOL" "$params" "$W/$name.hex" >"$W/$name.plait" &&
        "$PY" "$REF" split "$params" "$W/$name.hex" >"$W/$name.nltk" &&
        "$PY" "$REF" compare "$W/$name.plait" "$W/$name.nltk" "$W/$name.hex"
}
report() { grep -E '^(agreement|DIFFER)' "$TMP/check.out" | sed 's/^/    /'; }

TRAIN=("$L/GPL-3" "$L/Apache-2.0" "$L/MPL-2.0" "$W/kjv_train.txt" "$W/stress_train.txt")
TEST=("$W/stress_test.txt" "$L/GFDL-1.3" "$L/LGPL-2.1" "$L/Artistic" "$L/CC0-1.0" "$L/GPL-2"
      "$W/kjv_test.txt" "${relnotes[@]}")
check params_trained_by_nltk "$PY" "$ROOT/scripts/punkt_params.py" --train "$W/p.txt" "${TRAIN[@]}"
check params_with_all_collocations "$PY" "$ROOT/scripts/punkt_params.py" --train "$W/pc.txt" \
    "${TRAIN[@]}" --all-collocs
check every_sentence_agrees_with_nltk agree held_out "$W/p.txt" "${TEST[@]}"
report
check every_sentence_agrees_with_nltk_all_collocations agree held_out_c "$W/pc.txt" "${TEST[@]}"
report
printf '# none\n' >"$W/none.txt"
check every_sentence_agrees_with_nltk_no_parameters agree held_out_none "$W/none.txt" "${TEST[@]}"
report
# Random strings of words and every character Punkt's expressions treat specially,
# with parameters trained on them (abbreviations and collocations of their words).
"$PY" "$REF" random "$W/random.hex" 7 3000
"$PY" -c '
import sys
with open(sys.argv[2], "w", encoding="utf-8") as out:
    for line in open(sys.argv[1]):
        out.write(bytes.fromhex(line.strip()).decode() + "\n\n")
' "$W/random.hex" "$W/random.txt"
check params_trained_on_random_text "$PY" "$ROOT/scripts/punkt_params.py" --train "$W/pr.txt" \
    "$W/random.txt" "$W/stress_train.txt" --all-collocs
random_agrees() { cp "$W/random.hex" "$W/$1.hex" && agree_hex "$1" "$2"; }
agree_hex() {
    "$TOOL" "$2" "$W/$1.hex" >"$W/$1.plait" &&
        "$PY" "$REF" split "$2" "$W/$1.hex" >"$W/$1.nltk" &&
        "$PY" "$REF" compare "$W/$1.plait" "$W/$1.nltk" "$W/$1.hex"
}
check random_strings_agree_with_nltk random_agrees random_trained "$W/pr.txt"
report
check random_strings_agree_with_nltk_no_parameters random_agrees random_none "$W/none.txt"
report
check chunks_of_a_million_characters_as_megatron agree whole "$W/p.txt" "$W/kjv_whole.txt"
report
# The comparison can fail: parameters that differ give different sentences.
differs() { ! "$PY" "$REF" compare "$W/held_out.plait" "$W/held_out_none.nltk" "$W/held_out.hex"; }
check comparison_detects_other_parameters differs

# plait preprocess --split-sentences equals Megatron's two passes: NLTK's split
# written as JSON lists of sentences, then tokenized sentence by sentence.
"$PY" -c '
import json, sys
docs = [p for p in open(sys.argv[1], encoding="utf-8").read().split("\n\n") if p.strip()]
verses = open(sys.argv[2], encoding="utf-8").read().split("\n")
docs += [" ".join(verses[i:i + 30]) for i in range(0, len(verses), 30)]
with open(sys.argv[3], "w", encoding="utf-8") as f:
    for d in docs:
        f.write(json.dumps({"text": d}) + "\n")
' "$W/stress_test.txt" "$W/kjv_test.txt" "$W/docs.jsonl"
BERT=(--tokenizer-type BertWordPieceLowerCase --vocab-file "$PLAIT_DATA/bert/vocab.txt")
preprocess_matches_megatron() {
    local workers=$1
    "$PY" "$REF" megatron_split "$W/p.txt" "$W/docs.jsonl" "$W/lists.jsonl" &&
        "$PLAIT" preprocess --input "$W/docs.jsonl" --output-prefix "$W/a$workers" \
            --split-sentences --punkt-params "$W/p.txt" --workers "$workers" "${BERT[@]}" \
            --log-interval 0 &&
        "$PLAIT" preprocess --input "$W/lists.jsonl" --output-prefix "$W/b" "${BERT[@]}" \
            --log-interval 0 &&
        cmp "$W/a${workers}_text_sentence.bin" "$W/b_text_document.bin" &&
        cmp "$W/a${workers}_text_sentence.idx" "$W/b_text_document.idx"
}
check preprocess_split_sentences_equals_megatrons_split_then_encode preprocess_matches_megatron 1
check preprocess_split_sentences_with_3_workers preprocess_matches_megatron 3
check_fails keep_newlines_refused "--keep-newlines" "$PLAIT" preprocess --input "$W/docs.jsonl" \
    --output-prefix "$W/c" --split-sentences --punkt-params "$W/p.txt" --keep-newlines "${BERT[@]}"

# Python's character classes (isspace, \w, \d, isupper, islower) over every code point.
classes() { "$TOOL" --classes >"$W/classes.txt" && "$PY" "$REF" classes "$W/classes.txt"; }
check character_classes_are_pythons_on_every_assigned_code_point classes
grep '^classes' "$TMP/check.out" | sed 's/^/    /'

printf 'abbrev\tmr\nbogus line\n' >"$W/bad.txt"
check_fails bad_parameter_line_named "bad.txt:2: expected" "$TOOL" "$W/bad.txt" "$W/whole.hex"
check_fails preprocess_bad_parameters_named "--punkt-params: .*bad.txt:2" "$PLAIT" preprocess \
    --input "$W/docs.jsonl" --output-prefix "$W/c" --split-sentences --punkt-params "$W/bad.txt" \
    "${BERT[@]}"
summary punkt
