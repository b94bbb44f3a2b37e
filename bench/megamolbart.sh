#!/usr/bin/env bash
# MegaMolBART end to end on the shipped molecules (data/smiles: RDKit's wehi_mols.csv,
# first_5K.smi, CHEMBL2321810.smi): made as MegaMolBART's preprocessing makes its ZINC
# files (RDKit canonical SMILES of at most 150 characters, unique, "zinc_id,SMILES"),
# shuffled, the last 1% held out as test; a SMILES vocabulary from each molecule and 5
# random atom orders of it; then `plait train --model bart --tokenizer-type
# SmilesTokenizer` with MegaMolBART v0.2's objective (encoder: a random atom order,
# span-masked with mask_prob 0.1 and lambda 3; decoder: another random atom order,
# unmasked) for ITERS iterations. The losses are set against the unigram entropy of the
# SMILES tokens (what a model that knows token frequencies and nothing else scores).
# Writes bench/results/megamolbart.json; keeps the data, vocabulary and final checkpoint
# in OUT for the decoding evaluation (bench/megamolbart_eval.sh).
#   bench/megamolbart.sh [ITERS] [OUT]   (defaults 2500, /tmp/plait_megamolbart)
#   LAYERS, HIDDEN, HEADS, SEQ, MBS, GBS in the environment change the model and batch
#   (defaults 2, 128, 4, 64, 16, 32); THREADS the OpenMP threads (default 1); MMB_FLAGS
#   more flags for plait train (e.g. MegaMolBART's switches, "--encoder-augment false
#   --decoder-augment false"); RESULT the JSON written (default bench/results/megamolbart.json).
set -eu
cd "$(dirname "$0")/.."
ITERS=${1:-2500}
OUT=${2:-/tmp/plait_megamolbart}
mkdir -p "$OUT"
make -s all >/dev/null
/usr/bin/python3 - data/smiles "$OUT" <<'EOF'
import csv, random, re, sys
import numpy as np
from rdkit import Chem, RDLogger
RDLogger.DisableLog("rdApp.*")
src, out = sys.argv[1:3]
raw = [r[0] for r in csv.reader(open(f"{src}/wehi_mols.csv"))]
raw += [l.split()[0] for l in open(f"{src}/first_5K.smi") if l.strip()]
raw += [l.split()[0] for l in open(f"{src}/CHEMBL2321810.smi") if l.strip()]
mols, seen = [], set()
for s in raw:
    m = Chem.MolFromSmiles(s)
    c = Chem.MolToSmiles(m) if m else None
    if c and len(c) <= 150 and c not in seen:
        seen.add(c)
        mols.append(c)
random.Random(0).shuffle(mols)
with open(f"{out}/mols.csv", "w") as f:
    f.write("zinc_id,SMILES\n")
    f.writelines(f"m{i},{s}\n" for i, s in enumerate(mols))
# MegaMolBART's regex (nemo_chem RegExTokenizer); the unigram entropy of its tokens
rx = re.compile(r"(\[[^\]]+]|Br?|Cl?|N|O|S|P|F|I|b|c|n|o|s|p|\(|\)|\.|=|#|-|\+|\\|\/|:|~|@|\?|>|\*|\$|\%[0-9]{2}|[0-9])")
toks = [t for s in mols for t in rx.findall(s)] + ["&"] * len(mols)
_, n = np.unique(toks, return_counts=True)
p = n / n.sum()
open(f"{out}/unigram.txt", "w").write(f"{-(p * np.log(p)).sum():.4f} {len(mols)}\n")
EOF
build/plait data smiles-augment --input "$OUT/mols.csv" --csv-column 1 --skip-header --num 5 \
    --keep-input --seed 3 | tr "\t" "\n" >"$OUT/aug.txt"
build/plait data build-vocab --tokenizer-type SmilesTokenizer --input "$OUT/aug.txt" \
    --output "$OUT/mmb.vocab"
rm -rf "$OUT/ckpt" "$OUT/m.jsonl"
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=${THREADS:-1} build/plait train --model bart \
    --tokenizer-type SmilesTokenizer --vocab-file "$OUT/mmb.vocab" --data-path "$OUT/mols.csv" \
    --split 98,1,1 --num-layers "${LAYERS:-2}" --hidden-size "${HIDDEN:-128}" \
    --num-attention-heads "${HEADS:-4}" --seq-length "${SEQ:-64}" --micro-batch-size "${MBS:-16}" \
    --global-batch-size "${GBS:-32}" --train-iters "$ITERS" --lr 1e-3 --min-lr 1e-5 \
    --lr-decay-style cosine --lr-warmup-iters $((ITERS / 20)) --weight-decay 0.01 \
    --clip-grad 1.0 --eval-interval $((ITERS / 10)) --eval-iters 5 --log-interval 50 \
    --seed 1234 --save "$OUT/ckpt" --metrics-file "$OUT/m.jsonl" ${MMB_FLAGS:-} | tee "$OUT/log"
/usr/bin/python3 - "$OUT" "$ITERS" "${RESULT:-bench/results/megamolbart.json}" "${MMB_FLAGS:-}" \
    "layers ${LAYERS:-2}+${LAYERS:-2}, hidden ${HIDDEN:-128}, heads ${HEADS:-4}, seq ${SEQ:-64}, batch ${GBS:-32}" <<'EOF'
import json, sys
out, iters, path, flags, model = sys.argv[1:6]
rows = [json.loads(l) for l in open(f"{out}/m.jsonl")]
train = [r["lm_loss"] for r in rows if "lm_loss" in r and "iteration" in r]
valid = [r["valid_lm_loss"] for r in rows if "valid_lm_loss" in r]
final = {k: r[k] for r in rows for k in ("final_valid_lm_loss", "test_lm_loss") if k in r}
H, n = open(f"{out}/unigram.txt").read().split()
res = {"model": model, "flags": flags, "iterations": int(iters), "molecules": int(n),
       "unigram_entropy_nats": float(H), "first_train_loss": train[0],
       "last_train_loss": train[-1], "valid_losses": valid, **final}
json.dump(res, open(path, "w"), indent=1)
print(json.dumps(res, indent=1))
EOF
