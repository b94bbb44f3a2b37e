#!/usr/bin/env bash
# plait's molecule checks (src/data/smiles_chem.h) against RDKit (Debian's python3-rdkit):
#   - the valence table equals RDKit's GetValenceList for all 118 elements;
#   - valid/invalid verdicts equal RDKit's (MolFromSmiles with default sanitisation) on
#     every SMILES of the three shipped sets, an adversarial list (smiles_chem/
#     adversarial.smi: bad valences, unkekulizable aromatics, unclosed rings, charges,
#     nitro/azide/perhalate forms RDKit's cleanUp accepts) and smiles_augment's hard cases
#     and fuzz finds;
#   - identity: distinct RDKit-canonical molecules get distinct keys (ring stereo plait
#     does not keep is printed, the documented class); every valid molecule's three
#     randomised SMILES (plait data smiles-augment) have its key; RDKit's canonical and two
#     random SMILES of every shipped molecule share one key; ring cis/trans isomers
#     (smiles_chem/ring_stereo.smi) one key each and distinct; 200 stereoisomers (RDKit's
#     EnumerateStereoisomers, 3 writings each) have one key each and distinct keys apart;
#   - every shipped molecule is identified with RDKit's canonical (aromatic) and Kekulé
#     SMILES of it (Kekulé and aromatic writings are one molecule);
#   - a flipped @/@@ is a different molecule (the check can fail);
#   - validity / reconstruction / uniqueness (data/smiles_eval.h) equal RDKit's figures.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
CHK=$ROOT/tests/scripts/smiles_chem/rdkit_check.py
TOOL=$ROOT/build/testtools/smiles_chem
D=$PLAIT_DATA/smiles
"$PY" -c 'import rdkit' 2>/dev/null || { echo "missing RDKit: apt-get install python3-rdkit"; exit 1; }
[ -x "$TOOL" ] || { echo "missing $TOOL (run make)"; exit 1; }

check "valence table = RDKit's GetValenceList" "$PY" "$CHK" valences "$ROOT/src/data/smiles_sanitize.c"
cat "$TMP/check.out"
check "inputs: shipped sets, adversarial list, hard cases; RDKit's stereo and random sets" \
    "$PY" "$CHK" inputs "$D" "$ROOT/tests/scripts/smiles_chem/adversarial.smi" \
    "$ROOT/tests/scripts/smiles_augment/cases.smi" "$ROOT/tests/scripts/smiles_augment/fuzz_found.smi" \
    "$TMP/all.smi" "$TMP/stereo.smi" 600
cat "$TMP/check.out"
check "plait's verdicts and keys" sh -c "'$TOOL' '$TMP/all.smi' > '$TMP/all.tsv' &&
    '$TOOL' '$TMP/stereo.smi' > '$TMP/stereo.tsv' && '$TOOL' '$TMP/stereo.smi.rand' > '$TMP/rand.tsv'"
check "valid/invalid verdicts equal RDKit's on every line" "$PY" "$CHK" verdicts "$TMP/all.smi" "$TMP/all.tsv"
cat "$TMP/check.out"
check "adversarial list alone: verdicts equal RDKit's" sh -c "'$TOOL' '$ROOT/tests/scripts/smiles_chem/adversarial.smi' > '$TMP/adv.tsv' &&
    '$PY' '$CHK' verdicts '$ROOT/tests/scripts/smiles_chem/adversarial.smi' '$TMP/adv.tsv'"
cat "$TMP/check.out"
check "adversarial list holds valid, invalid and syntax cases" sh -c \
    "grep -q '^valid' '$TMP/adv.tsv' && grep -q '^invalid.*kekulize' '$TMP/adv.tsv' &&
     grep -q '^invalid.*valence' '$TMP/adv.tsv' && grep -q '^invalid.*non-ring atom' '$TMP/adv.tsv' &&
     grep -q '^syntax.*never closed' '$TMP/adv.tsv'"
check "distinct RDKit molecules have distinct keys" "$PY" "$CHK" identity "$TMP/all.smi" "$TMP/all.tsv"
cat "$TMP/check.out"

# plait's own randomised SMILES of every valid line: 3 each, each must have its input's key
paste "$TMP/all.smi" "$TMP/all.tsv" | awk -F'\t' '$2 == "valid" { print $1 }' >"$TMP/valid.smi"
"$PLAIT" data smiles-augment --input "$TMP/valid.smi" --num 3 --keep-input --seed 5 2>/dev/null >"$TMP/aug.tsv"
for k in 1 2 3 4; do
    cut -f$k "$TMP/aug.tsv" >"$TMP/a$k.smi"
    "$TOOL" "$TMP/a$k.smi" >"$TMP/a$k.tsv"
done
for k in 2 3 4; do
    check "randomised SMILES $((k - 1)) of every valid molecule has its key" \
        "$PY" "$CHK" same_key "$TMP/a1.smi" "$TMP/a1.tsv" "$TMP/a$k.tsv"
    cat "$TMP/check.out"
done
check "RDKit's canonical and random SMILES of every shipped molecule: one key each, distinct apart" \
    "$PY" "$CHK" stereo "$TMP/stereo.smi.rand" "$TMP/rand.tsv"
cat "$TMP/check.out"
for col in 1 2; do
    cut -f1,$((col + 1)) "$TMP/stereo.smi.forms" >"$TMP/forms$col.tsv"
    check "every shipped molecule is its RDKit $([ $col = 1 ] && echo canonical aromatic || echo Kekulé) SMILES (reconstruction = RDKit's)" \
        sh -c "'$TOOL' --pairs '$TMP/forms$col.tsv' > '$TMP/forms$col.json' &&
               '$PY' '$CHK' figures '$TMP/forms$col.tsv' '$TMP/forms$col.json'"
    cat "$TMP/check.out"
done
check "stereoisomers: one key each over 3 writings, distinct isomers distinct" \
    "$PY" "$CHK" stereo "$TMP/stereo.smi" "$TMP/stereo.tsv"
cat "$TMP/check.out"
check "ring cis/trans (smiles_chem/ring_stereo.smi): one key per isomer over 3 RDKit writings, isomers distinct" \
    sh -c "'$PY' '$CHK' groups '$ROOT/tests/scripts/smiles_chem/ring_stereo.smi' '$TMP/ring.smi' &&
           '$TOOL' '$TMP/ring.smi' > '$TMP/ring.tsv' && '$PY' '$CHK' stereo '$TMP/ring.smi' '$TMP/ring.tsv'"
cat "$TMP/check.out"
check "  cis and trans 1,4-dimethylcyclohexane differ" sh -c \
    "[ \"\$(sed -n 1p '$TMP/ring.tsv')\" != \"\$(sed -n 4p '$TMP/ring.tsv')\" ] && grep -q 'Rx*[0-9]*-[0-9]*:cis' '$TMP/ring.tsv'"
printf 'C[C@H](F)Cl\nC[C@@H](F)Cl\nF[C@H](C)Cl\nF/C=C/F\nF/C=C\\F\nF\\C=C\\F\n' >"$TMP/flip.smi"
"$TOOL" "$TMP/flip.smi" | cut -f2 >"$TMP/flip.keys"
check "a flipped @/@@ is another molecule; swapping two neighbours flips it back" sh -c \
    "[ \"\$(sed -n 1p '$TMP/flip.keys')\" != \"\$(sed -n 2p '$TMP/flip.keys')\" ] &&
     [ \"\$(sed -n 2p '$TMP/flip.keys')\" = \"\$(sed -n 3p '$TMP/flip.keys')\" ]"
check "trans != cis; F/C=C/F = F\\\\C=C\\\\F" sh -c \
    "[ \"\$(sed -n 4p '$TMP/flip.keys')\" != \"\$(sed -n 5p '$TMP/flip.keys')\" ] &&
     [ \"\$(sed -n 4p '$TMP/flip.keys')\" = \"\$(sed -n 6p '$TMP/flip.keys')\" ]"
# The figures (data/smiles_eval.h) against RDKit's on pairs with known answers: 300
# randomised inputs (reconstructed), 50 unparsable outputs, 50 outputs of one other molecule.
head -n 400 "$TMP/valid.smi" >"$TMP/v400.smi"
"$PLAIT" data smiles-augment --input "$TMP/v400.smi" --num 1 --keep-input --seed 9 2>/dev/null |
    awk -F'\t' 'NR <= 300 { print } NR > 300 && NR <= 350 { print $1 "\tC1CC(" } NR > 350 { print $1 "\tCCO" }' \
    >"$TMP/pairs.tsv"
check "validity / reconstruction / uniqueness of 400 pairs equal RDKit's" sh -c \
    "'$TOOL' --pairs '$TMP/pairs.tsv' > '$TMP/pairs.json' && '$PY' '$CHK' figures '$TMP/pairs.tsv' '$TMP/pairs.json'"
cat "$TMP/check.out"
check "  and they are 350 valid, 300 reconstructed" grep -q '"valid": 350, "reconstructed": 300' "$TMP/pairs.json"
summary smiles_chem
