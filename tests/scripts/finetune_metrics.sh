#!/usr/bin/env bash
# Fine-tuning metrics against Python oracles (transcriptions of the outside
# references, none of which is installable here):
#   seqeval_reference.py       seqeval's default-mode entity P/R/F1 (NER)
#   squad_eval_reference.py    the official SQuAD v1.1 evaluate-v1.1.py and v2.0's
#                              evaluate-v2.0.py (exact / f1, HasAns / NoAns)
#   cls_metrics_reference.py   scikit-learn's accuracy / per-class / macro P/R/F1, confusion matrix
#   reg_metrics_reference.py   scikit-learn's MSE / MAE / R², numpy's Pearson r
# Each runs hand-picked tricky cases and seeded random ones through
# build/testtools/ft_metrics and compares every figure.
set -u
. "$(dirname "$0")/lib.sh"
TOOL=${PLAIT_TESTTOOLS:-$ROOT/build/testtools}/ft_metrics
PY=/usr/bin/python3
HERE=$ROOT/tests/scripts

check seqeval_matches_python_transcription "$PY" "$HERE/seqeval_reference.py" "$TOOL" 300
check squad_v11_and_v20_scores_match_official_scripts "$PY" "$HERE/squad_eval_reference.py" "$TOOL"
check classification_metrics_match_sklearn_definitions "$PY" "$HERE/cls_metrics_reference.py" "$TOOL"
check regression_metrics_match_sklearn_definitions "$PY" "$HERE/reg_metrics_reference.py" "$TOOL"

# The tool's inputs are checked, not guessed at.
printf '0 1\n2 0\n' >"$TMP/cls.txt"
check_fails cls_metrics_reject_out_of_range_ids 'expected ids in \[0, 2\)' "$TOOL" cls 2 "$TMP/cls.txt"
printf '{"data": [{"paragraphs": [{"context": "x", "qas": [{"question": "q", "answers": []}]}]}]}' >"$TMP/bad.json"
printf '{}' >"$TMP/pred.json"
check_fails squad_reader_names_missing_id 'bad.json: data\[0\].paragraphs\[0\].qas\[0\]: no "id"' \
    "$TOOL" squad "$TMP/bad.json" "$TMP/pred.json"
printf '{"data": [\n{"paragraphs": [}\n]}' >"$TMP/broken.json"
check_fails squad_reader_names_line_of_bad_json 'broken.json:2:[0-9]+: invalid JSON' \
    "$TOOL" squad "$TMP/broken.json" "$TMP/pred.json"
summary finetune_metrics
