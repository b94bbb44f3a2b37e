# Shared by bert_dataset.sh, t5_dataset.sh and bart_dataset.sh (sourced after
# lib.sh, with W set to the suite's scratch directory and MODE to the dataset
# key of bert_samples / bert_dataset_reference.py: "", "t5=1" or "bart=1").
# Writes the corpora P (all 31,102 KJV verses as sentences in documents) and S
# (the first 400), and defines compare NAME PREFIX KEY=VALUE...: plait's dump
# checked against the reference, the count of compared samples in $samples.
PY=/usr/bin/python3
REF=$ROOT/tests/scripts/bert_dataset_reference.py
TOOL=${BERT_SAMPLES:-$ROOT/build/testtools/bert_samples} # BERT_SAMPLES: e.g. the ASan build's
VOCAB=$PLAIT_DATA/bert/vocab.txt
rm -rf "$W"
mkdir -p "$W"
P=$W/kjv
"$TOOL" make "$VOCAB" "$PLAIT_DATA/kjv.txt" "$P" 31102 || { echo "cannot write the corpus"; exit 1; }
S=$W/kjv_small
"$TOOL" make "$VOCAB" "$PLAIT_DATA/kjv.txt" "$S" 400 || { echo "cannot write the corpus"; exit 1; }

samples=0
compare_run() {
    local prefix=$1; shift
    # shellcheck disable=SC2086 # MODE is empty for BERT
    "$TOOL" dump "$VOCAB" "$prefix" $MODE "$@" >"$W/dump.txt" &&
        "$PY" "$REF" check --dump "$W/dump.txt" --prefix "$prefix" --vocab "$VOCAB" $MODE "$@"
}
compare() {
    local name=$1; shift
    check "$name" compare_run "$@"
    local n; n=$(sed -n 's/^compared \([0-9]*\) samples.*/\1/p' "$TMP/check.out")
    samples=$((samples + ${n:-0}))
    grep -E '^(configuration|compared)' "$TMP/check.out" | sed 's/^/    /'
}
