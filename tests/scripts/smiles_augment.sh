#!/usr/bin/env bash
# SMILES augmentation (src/data/smiles_graph.h) against RDKit: every SMILES of
# the three shipped sets in data/smiles, a stereo set RDKit makes from them
# (stereoisomers, canonical and doRandom forms, so @/@@ and / \ on chains and
# ring closures occur), a hand-written list of hard cases
# (smiles_augment/cases.smi) and the fuzzer's inputs that RDKit accepts
# (smiles_augment/fuzz_found.smi) are written from random atom orders by
# `plait data smiles-augment`; RDKit must read every output as the same
# molecule (equal canonical isomeric SMILES), and reject the outputs of the
# inputs it rejects. The check is shown to catch a flipped chirality or
# cis/trans mark. The randomisation must randomise (distinct outputs; the root
# atom uniform over the atoms) and be reproducible from --seed.
set -u
. "$(dirname "$0")/lib.sh"
REF=/usr/bin/python3
PY=$ROOT/tests/scripts/smiles_augment/rdkit_check.py
CASES=$ROOT/tests/scripts/smiles_augment/cases.smi
D=$PLAIT_DATA/smiles
for f in "$D/first_5K.smi" "$D/wehi_mols.csv" "$D/CHEMBL2321810.smi"; do
    [ -f "$f" ] || { echo "missing $f (run scripts/setup.sh)"; exit 1; }
done
[ -x "$PLAIT" ] || { echo "missing $PLAIT (run make)"; exit 1; }
"$REF" -c 'import rdkit' 2>/dev/null || { echo "missing RDKit: apt-get install python3-rdkit (scripts/setup.sh)"; exit 1; }
AUG=("$PLAIT" data smiles-augment --keep-input)

check stereo_set_built "$REF" "$PY" stereo "$D" "$TMP/stereo.smi" 3000
cat "$TMP/check.out"

# name input outputs-per-molecule [flags]
agree() {
    local name=$1 in=$2 num=$3; shift 3
    check "augment_$name" "${AUG[@]}" --input "$in" --num "$num" --seed 11 --output "$TMP/$name.tsv" "$@"
    check "rdkit_agrees_$name" "$REF" "$PY" compare "$TMP/$name.tsv"
    cat "$TMP/check.out"
}
agree first_5K "$D/first_5K.smi" 3
agree chembl "$D/CHEMBL2321810.smi" 3
agree wehi "$D/wehi_mols.csv" 3
agree stereo "$TMP/stereo.smi" 5
agree cases "$CASES" 100
agree fuzz_found "$ROOT/tests/scripts/smiles_augment/fuzz_found.smi" 30
agree parse_order "$TMP/stereo.smi" 1 --parse-order

# The oracle is not blind: swapping @ and @@, or / and \ on one side, in the outputs is caught.
"$REF" "$PY" flip chiral "$TMP/stereo.tsv" "$TMP/flipped_chiral.tsv"
check_fails rdkit_check_catches_flipped_chirality 'mismatches' "$REF" "$PY" compare "$TMP/flipped_chiral.tsv"
"$REF" "$PY" flip ez "$TMP/stereo.tsv" "$TMP/flipped_ez.tsv"
check_fails rdkit_check_catches_flipped_cis_trans 'mismatches' "$REF" "$PY" compare "$TMP/flipped_ez.tsv"

# Randomness: the root atom of 5000 outputs of one 20-30-atom molecule is uniform,
# and is the atom MegaMolBART's augmentation starts at with numpy seeded alike.
check mapped_molecule "$REF" "$PY" mapped "$D" "$TMP/mapped.smi"
check augment_mapped "${AUG[@]}" --input "$TMP/mapped.smi" --num 5000 --seed 5 --output "$TMP/mapped.tsv"
check root_atom_uniform_and_megamolbarts "$REF" "$PY" roots "$TMP/mapped.tsv" 5
cat "$TMP/check.out"
check rdkit_agrees_mapped "$REF" "$PY" compare "$TMP/mapped.tsv"

# Reproducible from the seed; another seed gives other strings.
"${AUG[@]}" --input "$CASES" --num 3 --seed 3 --output "$TMP/s3a.tsv" 2>/dev/null
"${AUG[@]}" --input "$CASES" --num 3 --seed 3 --output "$TMP/s3b.tsv" 2>/dev/null
"${AUG[@]}" --input "$CASES" --num 3 --seed 4 --output "$TMP/s4.tsv" 2>/dev/null
check same_seed_same_output cmp "$TMP/s3a.tsv" "$TMP/s3b.tsv"
check other_seed_other_output sh -c "! cmp -s '$TMP/s3a.tsv' '$TMP/s4.tsv'"

# Errors name the file and line, and what was expected.
printf 'CCO\nC1CC\n' >"$TMP/unclosed.smi"
check_fails bad_smiles_names_file_line_and_position 'unclosed.smi:2: SMILES character 2 .*ring bond 1 opened here is never closed' \
    "${AUG[@]}" --input "$TMP/unclosed.smi"
printf 'C(C\n' >"$TMP/paren.smi"
check_fails unbalanced_paren_is_an_input_error "paren.smi:1: .*unclosed '\('" "${AUG[@]}" --input "$TMP/paren.smi"
check bad_input_exits_3 sh -c "'$PLAIT' data smiles-augment --input '$TMP/paren.smi' >/dev/null 2>&1; test \$? -eq 3"
check_fails rejects_jsonl_input 'expected a .smi, .csv' "${AUG[@]}" --input "$TMP/x.jsonl"
check_fails rejects_zero_num 'num must be' "${AUG[@]}" --input "$CASES" --num 0
summary smiles_augment
