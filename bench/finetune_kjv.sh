#!/usr/bin/env bash
# Fine-tuning on a held-out task: the KJV testament task (scripts/derive_kjv_tasks.py:
# a verse is OT or NT by its line, 27,992 train / 3,110 dev verses; the dev split is
# never trained on). A small BERT is pretrained on the KJV's sentences (Megatron's BERT
# dataset, PRE iterations), then `plait finetune` trains its classification head and
# every layer for EPOCHS epochs on the train verses and evaluates on the dev verses.
# The test accuracy is set against the majority-class baseline of the dev split (OT,
# 2,314 / 3,110 = 74.4%). Writes bench/results/finetune_kjv.json and prints the figures.
#   bench/finetune_kjv.sh [PRE] [EPOCHS]   (defaults 300, 1; minutes on 2 cores)
set -eu
cd "$(dirname "$0")/.."
PRE=${1:-300}
EPOCHS=${2:-1}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
make -s all >/dev/null
export PLAIT_PEAK_CACHE=$out/peak.json OMP_NUM_THREADS=2
/usr/bin/python3 scripts/derive_kjv_tasks.py data/kjv.txt "$out" >/dev/null
build/testtools/bert_samples make data/bert/vocab.txt data/kjv.txt "$out/kjv" 31102 >/dev/null
MODEL=(--vocab-file data/bert/vocab.txt --num-layers 2 --hidden-size 128
       --num-attention-heads 4 --seq-length 64 --seed 1234)
build/plait train --model bert --data-path "$out/kjv" --split 949,50,1 "${MODEL[@]}" \
    --micro-batch-size 32 --global-batch-size 32 --train-iters "$PRE" --lr 1e-3 --min-lr 1e-5 \
    --lr-decay-style cosine --lr-warmup-iters $((PRE / 20)) --weight-decay 0.01 --clip-grad 1.0 \
    --eval-interval "$PRE" --eval-iters 5 --log-interval 100 --save "$out/pre" >"$out/pre.log" 2>&1
grep "validation loss" "$out/pre.log" | tail -n 1 || true
build/plait finetune --train-data "$out/kjv-testament.train.tsv" \
    --valid-data "$out/kjv-testament.dev.tsv" --test-data "$out/kjv-testament.dev.tsv" --header \
    --pretrained-checkpoint "$out/pre" "${MODEL[@]}" --micro-batch-size 32 \
    --global-batch-size 32 --epochs "$EPOCHS" --lr 5e-4 --lr-decay-style linear \
    --lr-warmup-fraction 0.05 --weight-decay 0.01 --clip-grad 1.0 --eval-interval 250 \
    --log-interval 100 --results-dir "$out/ft" >"$out/ft.log" 2>&1
grep -E "validation at|test at" "$out/ft.log" || true
/usr/bin/python3 - "$out/ft" "$PRE" "$EPOCHS" <<'PYEOF'
import csv, json, sys
d = sys.argv[1]
rows = list(csv.DictReader(open(f"{d}/test_predictions.tsv"), delimiter="\t"))
truth = [r["label"] for r in rows]
acc = sum(r["label"] == r["prediction"] for r in rows) / len(rows)
major = max(set(truth), key=truth.count)
base = truth.count(major) / len(truth)
test = [json.loads(l) for l in open(f"{d}/metrics.jsonl") if '"test_acc"' in l][-1]
assert abs(test["test_acc"] - acc) < 1e-12, (test, acc)
res = {"pretraining_iterations": int(sys.argv[2]), "epochs": int(sys.argv[3]),
       "model": "bert, 2 layers, hidden 128, 4 heads, seq 64", "dev_examples": len(rows),
       "majority_class": major, "majority_baseline_accuracy": base, "test_accuracy": acc,
       "test_macro_f1": test["test_f1"], "margin_points": 100 * (acc - base)}
json.dump(res, open("bench/results/finetune_kjv.json", "w"), indent=1)
print(f"dev verses {len(rows)}: accuracy {acc:.4f} vs majority ('{major}') {base:.4f}: "
      f"{100 * (acc - base):+.1f} points; macro-F1 {test['test_f1']:.4f}")
PYEOF
