#!/usr/bin/env bash
# MegaMolBART v0.2.0's training samples (src/data/mmb_dataset.h) against its
# rules and RDKit (mmb_dataset/mmb_check.py). The data set is made as
# MegaMolBART's preprocessing makes it (RDKit canonical SMILES, none over 150
# characters, "zinc_id,SMILES" files in train/ val/ test/): train from
# data/smiles/wehi_mols.csv in two files, val from the stereo hard cases of
# smiles_augment/cases.smi, test from CHEMBL2321810.smi.
#   - every encoder and decoder SMILES is the input molecule (RDKit canonical
#     SMILES, stereo included), ids are NeMo's RegExTokenizer's, masks are
#     spans of the tokens, ^/&/padding as collate_fn, at the v0.2.0 config, with
#     augmentation and masking off, and with the decoder masked and cut at 24;
#   - mask statistics against MolBART's own _mask_span and RNGs, and a wrong
#     lambda or mask_prob caught; augmented SMILES as long, in tokens, as
#     MegaMolBART's RDKit ones;
#   - a sample is a function of (seed, index): split runs and single samples
#     equal the whole run, another seed differs, indices past the end wrap;
#   - bad input names file and line.
set -u
. "$(dirname "$0")/lib.sh"
REF=/usr/bin/python3
PY=$ROOT/tests/scripts/mmb_dataset/mmb_check.py
TOOL=${PLAIT_TESTTOOLS:-$ROOT/build/testtools}/mmb_samples
D=$PLAIT_DATA/smiles
for f in "$D/wehi_mols.csv" "$D/CHEMBL2321810.smi"; do [ -f "$f" ] || { echo "missing $f (run scripts/setup.sh)"; exit 1; }; done
for f in "$PLAIT" "$TOOL"; do [ -x "$f" ] || { echo "missing $f (run make)"; exit 1; }; done
"$REF" -c 'import rdkit, torch' 2>/dev/null || { echo "missing python3-rdkit or python3-torch"; exit 1; }

DS=$TMP/ds
check make_dataset_as_megamolbart_preprocess "$REF" - "$D" "$ROOT/tests/scripts/smiles_augment/cases.smi" "$DS" <<'PY'
import csv, os, sys
from rdkit import Chem, RDLogger
RDLogger.DisableLog("rdApp.*")
data, cases, ds = sys.argv[1:4]
def canon(smiles):  # nemo_chem/data/preprocess/preprocess.py _process_file
    m = Chem.MolFromSmiles(smiles)
    s = Chem.MolToSmiles(m, canonical=True) if m else None
    return s if s and len(s) <= 150 else None
def write(path, rows):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("zinc_id,SMILES\n")
        f.writelines(f"{i},{s}\n" for i, s in rows)
wehi = [(i, canon(s)) for s, i in csv.reader(open(f"{data}/wehi_mols.csv"))][:2000]
write(f"{ds}/train/x000.csv", [r for r in wehi[:1000] if r[1]])
write(f"{ds}/train/x001.csv", [r for r in wehi[1000:] if r[1]])
hard = [canon(l.split()[0]) for l in open(cases) if l.strip()]
write(f"{ds}/val/x000.csv", [(f"case{k}", s) for k, s in enumerate(hard) if s])
chembl = [l.split() for l in open(f"{data}/CHEMBL2321810.smi") if l.strip()]
write(f"{ds}/test/x000.csv", [(i, canon(s)) for s, i in chembl if canon(s)])
print(sum(1 for _ in open(f"{ds}/train/x000.csv")) - 1, "+",
      sum(1 for _ in open(f"{ds}/train/x001.csv")) - 1, "train,",
      sum(1 for _ in open(f"{ds}/val/x000.csv")) - 1, "val (stereo cases),",
      sum(1 for _ in open(f"{ds}/test/x000.csv")) - 1, "test")
PY
cat "$TMP/check.out"
# Vocabularies: V from the inputs and 5 random atom orders of each (a
# randomised SMILES can hold ring digits and @/@@ atoms its input lacks), V0
# from the inputs only.
V=$TMP/mmb.vocab V0=$TMP/inputs.vocab
SPLITS=("$DS"/train/x000.csv "$DS"/train/x001.csv "$DS"/val/x000.csv "$DS"/test/x000.csv)
check augment_for_vocab sh -c 'for f in "$@"; do "$0" data smiles-augment --input "$f" --csv-column 1 \
    --skip-header --num 5 --keep-input --seed 3 || exit 1; done | tr "\t" "\n" >"'"$TMP/aug.txt"'"' "$PLAIT" "${SPLITS[@]}"
check build_vocab "$PLAIT" data build-vocab --tokenizer-type SmilesTokenizer --input "$TMP/aug.txt" --output "$V"
check build_vocab_inputs_only "$PLAIT" data build-vocab --tokenizer-type SmilesTokenizer --csv-column 2 \
    --skip-header --input "${SPLITS[@]}" --output "$V0"
N_TRAIN=$(($(wc -l <"$DS/train/x000.csv") + $(wc -l <"$DS/train/x001.csv") - 2))

# MegaMolBART v0.2.0's configuration (tool defaults: seq 512, augment both,
# mask the encoder, p 0.1, lambda 3, seed 42), twice over the train split.
N=$((2 * N_TRAIN))
check samples_v02_config sh -c "'$TOOL' '$DS' train 'x[000..001]' '$V' 0 $N >'$TMP/all.tsv'"
check samples_v02_same_molecule_tokens_masks_padding "$REF" "$PY" check "$TMP/all.tsv" "$V" 512 1 1 1 0
cat "$TMP/check.out"
check augmented_lengths_as_megamolbart_rdkit "$REF" "$PY" lengths "$TMP/all.tsv"
cat "$TMP/check.out"
check mask_statistics_match_molbart "$REF" "$PY" stats "$TMP/all.tsv" 0.1 3 11
cat "$TMP/check.out"
check_fails mask_statistics_catch_lambda_2.5 'standard errors' "$REF" "$PY" stats "$TMP/all.tsv" 0.1 2.5 11
check_fails mask_statistics_catch_mask_prob_0.13 'standard errors' "$REF" "$PY" stats "$TMP/all.tsv" 0.13 3 11
check_fails oracle_sees_masks 'match MegaMolBART' "$REF" "$PY" check "$TMP/all.tsv" "$V" 512 1 0 1 0
awk -F'\t' 'BEGIN{OFS="\t"} NR==5{$6="CCO"} {print}' "$TMP/all.tsv" >"$TMP/tampered.tsv"
check_fails oracle_sees_another_molecule 'is not the input molecule' "$REF" "$PY" check "$TMP/tampered.tsv" "$V" 512 1 1 1 0

check samples_val_stereo_cases sh -c "'$TOOL' '$DS' val x000 '$V' 0 800 map_unknown=1 >'$TMP/val.tsv'"
check samples_val_stereo_same_molecule "$REF" "$PY" check "$TMP/val.tsv" "$V" 512 1 1 1 0
cat "$TMP/check.out"
check samples_test_split sh -c "'$TOOL' '$DS' test x000 '$V' 0 600 seed=5 map_unknown=1 >'$TMP/test.tsv'"
check samples_test_same_molecule "$REF" "$PY" check "$TMP/test.tsv" "$V" 512 1 1 1 0
cat "$TMP/check.out"

check samples_no_augment_no_mask sh -c "'$TOOL' '$DS' train 'x[000..001]' '$V' 0 500 ea=0 em=0 da=0 dm=0 >'$TMP/plain.tsv'"
check no_augment_no_mask_tokens_are_the_input "$REF" "$PY" check "$TMP/plain.tsv" "$V" 512 0 0 0 0
check samples_decoder_masked_cut_at_24 sh -c "'$TOOL' '$DS' train 'x[000..001]' '$V' 0 1000 seq=24 dm=1 p=0.2 >'$TMP/cut.tsv'"
check decoder_masked_cut_at_24_rules "$REF" "$PY" check "$TMP/cut.tsv" "$V" 24 1 1 1 1
cat "$TMP/check.out"
check cut_at_24_happens_on_both_sides awk -F'\t' '$9 {e++} $10 {d++} END {print e, d; exit !(e > 100 && d > 100)}' "$TMP/cut.tsv"

# A sample is a function of (seed, index).
check split_runs_equal_the_whole_run sh -c "'$TOOL' '$DS' train 'x[000..001]' '$V' 0 1500 >'$TMP/a.tsv' &&
    '$TOOL' '$DS' train 'x[000..001]' '$V' 1500 $((N - 1500)) >>'$TMP/a.tsv' && cmp '$TMP/a.tsv' '$TMP/all.tsv'"
check single_sample_equals_its_line sh -c "'$TOOL' '$DS' train 'x[000..001]' '$V' 1234 1 >'$TMP/one.tsv' &&
    sed -n 1235p '$TMP/all.tsv' | cmp - '$TMP/one.tsv'"
check another_seed_other_samples sh -c "'$TOOL' '$DS' train 'x[000..001]' '$V' 0 $N seed=43 >'$TMP/s43.tsv' &&
    ! cmp -s '$TMP/s43.tsv' '$TMP/all.tsv'"
check indices_wrap_with_new_augmentations awk -F'\t' -v n="$N_TRAIN" '
    $1 < n {enc[$1] = $5} $1 >= n {if ($2 != $1 - n) bad++; if ($5 != enc[$1 - n]) diff++; m++}
    END {print m, "wrapped samples,", diff, "with a new encoder SMILES"; exit !(m == n && !bad && diff > 0.9 * m)}' "$TMP/all.tsv"
cat "$TMP/check.out"

# Bad input names file and line.
B=$TMP/bad
mkdir -p "$B/train"
printf 'zinc_id,SMILES\nz1,CCO\nz2,c1ccccc1\nz3,CC(C\nz4,CCN\n' >"$B/train/x000.csv"
printf 'zinc_id,SMILES\nz1,CCO\nz2,C[Te](C)C\n' >"$B/train/x001.csv"
printf 'zinc_id,SMILES\nz1,CCO\nz2\n' >"$B/train/x002.csv"
printf 'zinc_id,SMILES\nz1,CCO\nz2,\n' >"$B/train/x003.csv"
check_fails unparsable_smiles_named_at_validate 'bad/train/x000.csv:4: SMILES' "$TOOL" "$B" train x000 "$V" 0 0 validate=1
check_fails unparsable_smiles_named_at_sample 'bad/train/x000.csv:4: SMILES' "$TOOL" "$B" train x000 "$V" 2 1
check_fails token_outside_vocabulary_named 'bad/train/x001.csv:3: token .\[Te\]. of the input SMILES' \
    "$TOOL" "$B" train x001 "$V" 0 0 validate=1
check_fails token_outside_vocabulary_named_at_sample 'bad/train/x001.csv:3: token .\[Te\]. of the encoder' \
    "$TOOL" "$B" train x001 "$V" 1 1
check_fails missing_column_named 'bad/train/x002.csv:3' "$TOOL" "$B" train x002 "$V" 0 0 validate=1
check_fails empty_smiles_named 'bad/train/x003.csv:3: empty SMILES' "$TOOL" "$B" train x003 "$V" 0 0 validate=1
check_fails augmented_token_outside_vocabulary_named 'val/x000.csv:[0-9]+: token .* of the (en|de)coder SMILES .* is not in the vocabulary \(build it from augmented' \
    "$TOOL" "$DS" val x000 "$V0" 0 800
check samples_map_unknown_as_megamolbart sh -c "'$TOOL' '$DS' val x000 '$V0' 0 800 map_unknown=1 >'$TMP/val0.tsv'"
check map_unknown_ids_are_vocab_get_unk "$REF" "$PY" check "$TMP/val0.tsv" "$V0" 512 1 1 1 0
cat "$TMP/check.out"
check map_unknown_happened awk -F'\t' '{u += $16} END {exit !(u > 0)}' "$TMP/val0.tsv"
check inputs_vocabulary_validates_inputs "$TOOL" "$DS" val x000 "$V0" 0 0 validate=1
check_fails missing_file_named 'ds/train/x002.csv' "$TOOL" "$DS" train 'x[000..002]' "$V" 0 0 validate=1
check_fails bad_range_named "dataset.train 'x\[000..\]'" "$TOOL" "$B" train 'x[000..]' "$V" 0 0 validate=1
check valid_files_validate "$TOOL" "$DS" train 'x[000..001]' "$V" 0 0 validate=1
summary mmb_dataset
