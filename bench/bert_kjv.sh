#!/usr/bin/env bash
# BERT pretraining on real text: the King James Bible's 31,102 verses as sentences
# grouped into documents (tests/tools/bert_samples make, WordPiece), Megatron's BERT
# dataset (sentence pairs, whole-word masking), a small BERT for ITERS iterations. The
# validation MLM loss is set against the unigram entropy of the corpus's tokens (the
# loss of a model that knows token frequencies and nothing of context): below it, the
# model uses context. Writes bench/results/bert_kjv.json and prints the figures.
#   bench/bert_kjv.sh [ITERS]   (default 1000; minutes on 2 cores)
#   LAYERS, HIDDEN, HEADS, SEQ, MBS, GBS in the environment change the model and batch
#   (defaults 4, 256, 4, 128, 16, 32).
set -eu
cd "$(dirname "$0")/.."
ITERS=${1:-1000}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
make -s all >/dev/null
build/testtools/bert_samples make data/bert/vocab.txt data/kjv.txt "$out/kjv" 31102 >/dev/null
H=$(/usr/bin/python3 - "$out/kjv" <<'EOF'
import sys
import numpy as np
prefix = sys.argv[1]
code = open(prefix + ".idx", "rb").read()[17]
tokens = np.fromfile(prefix + ".bin", dtype={8: np.uint16, 4: np.int32}[code])
p = np.bincount(tokens)
p = p[p > 0] / tokens.size
print(f"{-(p * np.log(p)).sum():.4f}")
EOF
)
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=2 build/plait train --model bert \
    --data-path "$out/kjv" --vocab-file data/bert/vocab.txt --split 949,50,1 \
    --num-layers "${LAYERS:-4}" --hidden-size "${HIDDEN:-256}" --num-attention-heads "${HEADS:-4}" \
    --seq-length "${SEQ:-128}" --micro-batch-size "${MBS:-16}" --global-batch-size "${GBS:-32}" \
    --train-iters "$ITERS" --lr 1e-3 --min-lr 1e-5 \
    --lr-decay-style cosine --lr-warmup-iters $((ITERS / 20)) --weight-decay 0.01 \
    --clip-grad 1.0 --eval-interval $((ITERS / 10)) --eval-iters 10 --log-interval 50 \
    --seed 1234 --metrics-file "$out/m.jsonl" | tee "$out/log"
/usr/bin/python3 - "$out/m.jsonl" "$H" "$ITERS" \
    "layers ${LAYERS:-4}, hidden ${HIDDEN:-256}, heads ${HEADS:-4}, seq ${SEQ:-128}, batch ${GBS:-32}" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
valid = [(r["iteration"], r["valid_lm_loss"]) for r in rows if "valid_lm_loss" in r]
train = [(r["iteration"], r["lm_loss"], r.get("sop_loss")) for r in rows if "lm_loss" in r]
H = float(sys.argv[2])
res = {"iterations": int(sys.argv[3]), "unigram_entropy_nats": H, "model": sys.argv[4],
       "valid_mlm_loss": valid, "train_mlm_sop": train,
       "final_valid_mlm_loss": valid[-1][1], "below_unigram_entropy": valid[-1][1] < H}
json.dump(res, open("bench/results/bert_kjv.json", "w"), indent=1)
print(f"unigram entropy of the corpus: {H:.4f} nats; validation MLM loss at iteration "
      f"{valid[-1][0]}: {valid[-1][1]:.4f} ({'below' if valid[-1][1] < H else 'NOT below'})")
EOF
