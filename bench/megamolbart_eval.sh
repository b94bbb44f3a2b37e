#!/usr/bin/env bash
# MegaMolBART's reconstruction of held-out molecules, scored with RDKit: the test
# molecules of bench/megamolbart.sh's run (the last 1% of its shuffled set, never
# trained on), each corrupted as in training (a random atom order, span-masked with
# mask_prob 0.1), decoded greedily by `plait seq2seq --mmb` (KV-cached self- and
# cross-attention), then: validity (the fraction of generated SMILES RDKit parses
# and sanitises), reconstruction (the fraction whose canonical SMILES is the input
# molecule's, stereo included) and uniqueness (distinct canonical SMILES among the
# valid ones). plait computes the same figures itself (its molecule checks,
# src/data/smiles_chem.h: --eval-json); RDKit's are the cross-check, and both go into
# bench/results/megamolbart.json with whether they agree.
#   bench/megamolbart_eval.sh [OUT] [N]   (defaults /tmp/plait_megamolbart, all test molecules)
#   RESULT: the training run's JSON to add the figures to (default bench/results/megamolbart.json)
set -eu
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/plait_megamolbart}
N=${2:-0}
total=$(($(wc -l <"$OUT/mols.csv") - 1))
test_lo=$(/usr/bin/python3 -c "print(round(0.99 * $total))") # --split 98,1,1's test range
{ head -n 1 "$OUT/mols.csv"; tail -n +$((test_lo + 2)) "$OUT/mols.csv"; } >"$OUT/test.csv"
OMP_NUM_THREADS=1 build/plait seq2seq --load "$OUT/ckpt" --input "$OUT/test.csv" --mmb \
    --limit "$N" --output "$OUT/recon.tsv" --eval-json "$OUT/plait_eval.json"
/usr/bin/python3 - "$OUT/recon.tsv" "$OUT/plait_eval.json" "${RESULT:-bench/results/megamolbart.json}" <<'EOF'
import json, sys
from rdkit import Chem, RDLogger
RDLogger.DisableLog("rdApp.*")
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
valid, same, canon = 0, 0, set()
for src, enc, gen in rows:
    m = Chem.MolFromSmiles(gen) if gen else None
    if m is None:
        continue
    valid += 1
    c = Chem.MolToSmiles(m)
    canon.add(c)
    same += c == Chem.MolToSmiles(Chem.MolFromSmiles(src))
n = len(rows)
res = {"held_out_molecules": n, "valid_fraction": valid / n, "reconstructed_fraction": same / n,
       "unique_valid_fraction": len(canon) / max(valid, 1)}
mine = json.load(open(sys.argv[2]))
res["plait"] = mine
res["plait_agrees_with_rdkit"] = (mine["molecules"], mine["valid"], mine["reconstructed"],
                                  mine["unique_valid"]) == (n, valid, same, len(canon))
path = sys.argv[3]
out = json.load(open(path))
out["reconstruction"] = res
json.dump(out, open(path, "w"), indent=1)
print(json.dumps(res, indent=1))
for src, enc, gen in rows[:5]:
    print(f"{src}\n  encoder: {enc}\n  decoded: {gen}")
EOF
