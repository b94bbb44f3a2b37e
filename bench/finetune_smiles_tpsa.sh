#!/usr/bin/env bash
# Regression fine-tuning on molecules: RDKit's TPSA of data/smiles/first_5K.smi
# (scripts/derive_smiles_tpsa.py: 4,495 train / 498 dev molecules; the 9 dev lines whose
# SMILES also occurs among the train lines are dropped, leaving 489 held-out molecules never
# trained on, in pretraining or fine-tuning). A small BERT is pretrained (MLM +
# binary head, Megatron's BERT dataset) on the other SMILES files shipped in data/smiles
# (wehi_mols.csv and CHEMBL2321810.smi: 11,017 molecules, one a "sentence", grouped into
# documents by tests/tools/bert_samples) with the BERT WordPiece vocabulary lowercased (the
# BERT path of plait finetune takes a WordPiece tokenizer: SmilesTokenizer has no
# [CLS]/[SEP]), then `plait finetune --task regression` trains the head and every layer
# for EPOCHS epochs on the train molecules and evaluates on the dev ones. The test RMSE is
# set against the mean predictor's (the dev targets' RMSE around the train mean).
# Writes bench/results/finetune_smiles_tpsa_prePRE.json and prints the figures.
# PRE 0: no pretraining (the whole model from --seed), the comparison the pretraining
# has to beat.
#   bench/finetune_smiles_tpsa.sh [PRE] [EPOCHS]   (defaults 100, 2; minutes on 2 cores)
set -eu
cd "$(dirname "$0")/.."
PRE=${1:-100}
EPOCHS=${2:-2}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
make -s all >/dev/null
export PLAIT_PEAK_CACHE=$out/peak.json OMP_NUM_THREADS=2
/usr/bin/python3 scripts/derive_smiles_tpsa.py data/smiles/first_5K.smi "$out" >/dev/null
awk -F'\t' 'NR == FNR { if (FNR > 1) seen[$1] = 1; next } FNR == 1 || !($1 in seen)' \
    "$out/smiles-tpsa.train.tsv" "$out/smiles-tpsa.dev.tsv" >"$out/heldout.tsv"
{ sed -E 's/^"([^"]*)".*/\1/' data/smiles/wehi_mols.csv; cut -d' ' -f1 data/smiles/CHEMBL2321810.smi; } \
    >"$out/pre.txt"
build/testtools/bert_samples make data/bert/vocab.txt "$out/pre.txt" "$out/mols" \
    "$(wc -l <"$out/pre.txt")" >/dev/null
MODEL=(--vocab-file data/bert/vocab.txt --num-layers 2 --hidden-size 64
       --num-attention-heads 4 --seq-length 64 --seed 1234)
PRETRAINED=()
t0=$(date +%s)
[ "$PRE" -gt 0 ] && PRETRAINED=(--pretrained-checkpoint "$out/pre") &&
build/plait train --model bert --data-path "$out/mols" --split 949,50,1 "${MODEL[@]}" \
    --micro-batch-size 32 --global-batch-size 32 --train-iters "$PRE" --lr 1e-3 --min-lr 1e-5 \
    --lr-decay-style cosine --lr-warmup-iters $((PRE / 20)) --weight-decay 0.01 --clip-grad 1.0 \
    --eval-interval "$PRE" --eval-iters 5 --log-interval 100 --save "$out/pre" >"$out/pre.log" 2>&1
t1=$(date +%s)
[ "$PRE" -gt 0 ] && { grep "validation loss" "$out/pre.log" | tail -n 1 || true; }
build/plait finetune --task regression --train-data "$out/smiles-tpsa.train.tsv" \
    --valid-data "$out/heldout.tsv" --test-data "$out/heldout.tsv" --header \
    "${PRETRAINED[@]}" "${MODEL[@]}" --micro-batch-size 32 \
    --global-batch-size 32 --epochs "$EPOCHS" --lr 5e-4 --lr-decay-style linear \
    --lr-warmup-fraction 0.05 --weight-decay 0.01 --clip-grad 1.0 --eval-interval 1000 \
    --log-interval 50 --results-dir "$out/ft" >"$out/ft.log" 2>&1
t2=$(date +%s)
grep -E "truncated|validation at|test at" "$out/ft.log" || true
/usr/bin/python3 - "$out" "$PRE" "$EPOCHS" "$((t1 - t0))" "$((t2 - t1))" <<'PYEOF'
import csv, json, sys
import numpy as np
out = sys.argv[1]
rd = lambda p: list(csv.DictReader(open(p), delimiter="\t"))
train = np.array([float(r["tpsa"]) for r in rd(f"{out}/smiles-tpsa.train.tsv")])
rows = rd(f"{out}/ft/test_predictions.tsv")
t = np.array([float(r["target"]) for r in rows]); p = np.array([float(r["prediction"]) for r in rows])
rmse = float(np.sqrt(np.mean((t - p) ** 2)))
base = float(np.sqrt(np.mean((t - train.mean()) ** 2)))  # predicting the train mean
test = [json.loads(l) for l in open(f"{out}/ft/metrics.jsonl") if '"test_rmse"' in l][-1]
assert abs(test["test_rmse"] - rmse) <= 1e-9 * rmse, (test, rmse)
res = {"pretraining_iterations": int(sys.argv[2]), "epochs": int(sys.argv[3]),
       "model": "bert, 2 layers, hidden 64, 4 heads, seq 64, BERT WordPiece lowercased",
       "pretraining_molecules": sum(1 for _ in open(f"{out}/pre.txt")) if int(sys.argv[2]) else 0,
       "train_molecules": len(train), "dev_molecules": len(rows),
       "mean_predictor_rmse": base, "test_rmse": rmse, "test_mae": test["test_mae"],
       "test_r2": test["test_r2"], "test_pearson": test["test_pearson"],
       "test_spearman": test["test_spearman"], "rmse_ratio_to_baseline": rmse / base,
       "pretraining_seconds": int(sys.argv[4]), "finetuning_seconds": int(sys.argv[5])}
json.dump(res, open(f"bench/results/finetune_smiles_tpsa_pre{sys.argv[2]}.json", "w"), indent=1)
print(json.dumps(res, indent=1))
print(f"dev molecules {len(rows)}: RMSE {rmse:.2f} vs the train mean's {base:.2f} "
      f"({rmse / base:.2f} of it); Pearson {test['test_pearson']:.3f}, R2 {test['test_r2']:.3f}")
PYEOF
