#!/usr/bin/env bash
# Fine-tuning data on real text: scripts/derive_kjv_tasks.py derives three
# labelled tasks from data/kjv.txt by documented rules (docs/finetune.md), and
# plait's readers must see exactly what the script wrote:
#  - the testament TSV: examples per label equal the script's counts;
#  - the names CoNLL: sentences and entities (seqeval over the tags) equal;
#  - the cloze SQuAD JSON: every answer matches its context (none skipped),
#    and logits peaked at the gold window positions decode, through the
#    n-best search and get_final_text, to the exact answers (EM = F1 = 100)
#    with NeMo's 384/128/64 and with short 64/16/32 windows (many windows
#    per question, answers split across them);
#  - features and decoding equal squad_features_reference.py (a transcription
#    of run_squad.py with its BERT tokenizer) on seeded random logits: every
#    feature's ids, types, answer positions and max-context flags, every
#    predicted text and every n-best list (nbest_predictions.json's entries:
#    texts and order identical, logits equal, probabilities within 1e-6), on
#    the cloze dev set and on awkward hand-made contexts, n-best 20 and 3; and
#    SQuAD v2.0's decoding (null span, null_score_diff_threshold, score_diff)
#    on the awkward contexts with an unanswerable question each;
#  - the BERT inputs equal finetune_encoding_reference.py (run_classifier.py's
#    pair truncation and padding; first-sub-token labels and plait's window
#    split) with a Python BERT tokenizer: single verses at 24 tokens, verse
#    pairs at 40, the names dev set at 16 (many split sentences) and an awkward
#    CoNLL file at 3 and 8 (words longer than a window);
#  - the TPSA regression set that scripts/derive_smiles_tpsa.py computes with
#    RDKit reads back as the same number of targets with the same mean;
#  - the derivation is deterministic (byte-identical on a second run).
set -u
. "$(dirname "$0")/lib.sh"
TOOL=${PLAIT_TESTTOOLS:-$ROOT/build/testtools}/ft_metrics
PY=/usr/bin/python3
VOCAB=$PLAIT_DATA/bert/vocab.txt
OUT=$TMP/kjv
mkdir -p "$OUT" "$OUT/again"

check derive_runs "$PY" "$ROOT/scripts/derive_kjv_tasks.py" "$PLAIT_DATA/kjv.txt" "$OUT"
"$PY" "$ROOT/scripts/derive_kjv_tasks.py" "$PLAIT_DATA/kjv.txt" "$OUT" >"$OUT/counts.json"
# same NAME GOT WANT: passes when the two texts are equal (diff shown otherwise).
same() { check "$1" diff <(printf '%s\n' "$2") <(printf '%s\n' "$3"); }
count() { "$PY" -c "import json,sys; print(json.load(open('$OUT/counts.json')).get(sys.argv[1], 0))" "$1"; }

for split in train dev; do
    "$TOOL" read-tsv "$OUT/kjv-testament.$split.tsv" >"$OUT/tsv.$split" 2>&1
    same "testament_${split}_counts_match" "$(cat "$OUT/tsv.$split")" \
        "NT $(count testament.$split.NT)
OT $(count testament.$split.OT)"
    "$TOOL" read-conll "$OUT/kjv-names.$split.conll" >"$OUT/conll.$split" 2>&1
    same "names_${split}_counts_match" "$(awk '{print $2, $6}' "$OUT/conll.$split")" \
        "$(count names.$split.sentences) $(count names.$split.entities)"
done
for cfg in "384 128 64" "64 16 32"; do
    # shellcheck disable=SC2086
    "$TOOL" squad-gold "$VOCAB" "$OUT/kjv-cloze.dev.json" $cfg >"$OUT/gold" 2>&1
    same "cloze_gold_spans_decode_exactly_${cfg// /_}" "$(awk '{print $2, $6, $8, $10}' "$OUT/gold")" \
        "$(count cloze.dev.questions) 0 100.000000 100.000000"
    echo "  $cfg: $(cat "$OUT/gold")"
done
REF=$ROOT/tests/scripts/squad_features_reference.py
check squad_features_and_decoding_match_run_squad_tricky_64_16_12 \
    "$PY" "$REF" "$TOOL" "$VOCAB" "$OUT/tricky.json" 64 16 12 --tricky "$OUT/tricky.json"
check squad_features_and_decoding_match_run_squad_tricky_32_8_12 "$PY" "$REF" "$TOOL" "$VOCAB" "$OUT/tricky.json" 32 8 12
# n-best 3: the list is cut at 3 distinct texts and 3 questions get run_squad.py's "empty" entry
check squad_nbest_3_with_empty_fallback_matches_run_squad_tricky_32_8_12 \
    "$PY" "$REF" "$TOOL" "$VOCAB" "$OUT/tricky.json" 32 8 12 3
# SQuAD v2.0 (an unanswerable question added to each context): the null span in the n-best
# lists, the null answer by score_diff against the threshold (6 of 15 questions at -4), and
# no span at all under n-best 2 (4 questions: "" with an infinite score_diff)
check squad_v2_null_answers_match_run_squad_tricky_64_16_12_threshold_-4 \
    "$PY" "$REF" "$TOOL" "$VOCAB" "$OUT/tricky2.json" 64 16 12 20 --tricky "$OUT/tricky2.json" --v2 -4
check squad_v2_without_spans_matches_run_squad_tricky_24_8_16_nbest_2 \
    "$PY" "$REF" "$TOOL" "$VOCAB" "$OUT/tricky2.json" 24 8 16 2 --v2 -1
check squad_features_and_decoding_match_run_squad_cloze_384_128_64 \
    "$PY" "$REF" "$TOOL" "$VOCAB" "$OUT/kjv-cloze.dev.json" 384 128 64
mkdir -p "$OUT/smiles"
"$PY" "$ROOT/scripts/derive_smiles_tpsa.py" "$PLAIT_DATA/smiles/first_5K.smi" "$OUT/smiles" >"$OUT/smiles/stats.json"
for split in train dev; do
    same "tpsa_${split}_targets_read_back" "$("$TOOL" read-targets "$OUT/smiles/smiles-tpsa.$split.tsv" 2>&1)" \
        "$("$PY" -c "import json,sys; s=json.load(open(sys.argv[1]))[sys.argv[2]]; print(s['n'], '%.6f' % s['mean'])" \
            "$OUT/smiles/stats.json" "$split")"
done
ENC=$ROOT/tests/scripts/finetune_encoding_reference.py
"$PY" - "$OUT/kjv-testament.dev.tsv" "$OUT/pairs.tsv" <<'PY'
import sys
rows = [l.split('\t') for l in open(sys.argv[1], encoding='utf-8').read().split('\n')[1:] if l]
with open(sys.argv[2], 'w', encoding='utf-8') as f:
    f.write('a\tb\tlabel\n')
    for i in range(len(rows) - 1):
        f.write(f'{rows[i][0]}\t{rows[i + 1][0]}\t{rows[i][1]}\n')
PY
printf -- '-DOCSTART- O\n\nZ\xc3\xbcrich B-LOC\nis O\nsupercalifragilisticexpialidocious B-MISC\n\xe2\x80\x8b O\nunaffable O\n\n\xe6\x97\xa5\xe6\x9c\xac I-LOC\n\xe2\x80\x9cquoted\xe2\x80\x9d O\nU.S.A. B-LOC\n' >"$OUT/tricky.conll"
check textcls_single_encoding_matches_run_classifier_24 "$PY" "$ENC" "$TOOL" "$VOCAB" textcls "$OUT/kjv-testament.dev.tsv" 24 -1
check textcls_pair_encoding_matches_run_classifier_40 "$PY" "$ENC" "$TOOL" "$VOCAB" textcls "$OUT/pairs.tsv" 40 1
check tokcls_alignment_and_split_match_reference_16 "$PY" "$ENC" "$TOOL" "$VOCAB" tokcls "$OUT/kjv-names.dev.conll" 16
check tokcls_awkward_words_match_reference_3 "$PY" "$ENC" "$TOOL" "$VOCAB" tokcls "$OUT/tricky.conll" 3
check tokcls_awkward_words_match_reference_8 "$PY" "$ENC" "$TOOL" "$VOCAB" tokcls "$OUT/tricky.conll" 8
"$PY" "$ROOT/scripts/derive_kjv_tasks.py" "$PLAIT_DATA/kjv.txt" "$OUT/again" >/dev/null
check derivation_is_deterministic diff -r -q --exclude=again --exclude='*.dev' --exclude='*.train' \
    --exclude=gold --exclude=counts.json --exclude=tricky.json --exclude=tricky2.json --exclude=smiles --exclude=tricky.conll --exclude=pairs.tsv "$OUT" "$OUT/again"
echo "  majority-class baseline (OT) on testament dev: $(count testament.dev.OT) / \
$(($(count testament.dev.OT) + $(count testament.dev.NT)))"
summary finetune_data
