#!/usr/bin/env bash
# MegaMolBART's model.data switches (issue 14; train/mmb_args.c):
#   - each switch changes the samples as nemo_chem/data/augment.py says
#     (mmb_samples): encoder_augment false -> the encoder's SMILES is the input
#     as written; decoder_augment false -> the decoder's SMILES is the
#     encoder's, unmasked; encoder_mask false -> no <MASK> in the encoder;
#     decoder_mask true -> masks in the decoder;
#   - MegaMolBART's YAML keys (model.data.encoder_augment, ...) set the flags,
#     the checkpoint's manifest records them, plait seq2seq --mmb rebuilds the
#     training corruption with them (its own flags override);
#   - a resume that differs from the checkpoint's values is refused by flag
#     name; --use-checkpoint-args takes the checkpoint's;
#   - the flags are refused for other models and tokenizers by name.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1
TOOL=${PLAIT_TESTTOOLS:-$ROOT/build/testtools}/mmb_samples
"$PY" -c 'import rdkit' 2>/dev/null || { echo "missing python3-rdkit"; exit 1; }

# 300 molecules as MegaMolBART's preprocessing writes them (RDKit canonical), a
# vocabulary from each and 5 random atom orders of it.
mkdir -p "$TMP/ds/train"
check "molecules and vocabulary" $PY - "$PLAIT_DATA/smiles" "$TMP/ds/train/x000.csv" <<'PY'
import csv, sys
from rdkit import Chem, RDLogger
RDLogger.DisableLog("rdApp.*")
out = []
for s, _ in csv.reader(open(f"{sys.argv[1]}/wehi_mols.csv")):
    m = Chem.MolFromSmiles(s)
    c = Chem.MolToSmiles(m) if m else None
    if c and len(c) <= 60:
        out.append(c)
with open(sys.argv[2], "w") as f:
    f.write("zinc_id,SMILES\n")
    f.writelines(f"w{i},{s}\n" for i, s in enumerate(out[:300]))
PY
MOLS=$TMP/ds/train/x000.csv
"$PLAIT" data smiles-augment --input "$MOLS" --csv-column 1 --skip-header --num 5 \
    --keep-input --seed 3 2>/dev/null | tr "\t" "\n" >"$TMP/aug.txt"
"$PLAIT" data build-vocab --tokenizer-type SmilesTokenizer --input "$TMP/aug.txt" \
    --output "$TMP/mmb.vocab" >/dev/null 2>&1
V=$TMP/mmb.vocab
MASK=$(grep -n '^<MASK>$' "$V" | cut -d: -f1)
MASK=$((MASK - 1))

# The samples (columns: index molecule file:line input enc_smiles dec_smiles
# enc_unmasked enc_masks ... enc_ids(12) ... dec_ids(14)).
G="'$TOOL' '$TMP/ds' train x000 '$V' 0 300 seq=64"
check "samples at v0.2's defaults and with each switch flipped" sh -c "$G >'$TMP/def.tsv' &&
    $G ea=0 >'$TMP/ea0.tsv' && $G da=0 >'$TMP/da0.tsv' && $G em=0 >'$TMP/em0.tsv' && $G dm=1 >'$TMP/dm1.tsv'"
# has_id COLUMN ID FILE: the samples whose id list in COLUMN holds ID
has_id() { awk -F'\t' -v c="$1" -v id="$2" '{ n = split($c, a, " "); for (i = 1; i <= n; i++) if (a[i] == id) { k++; break } } END { print k + 0 }' "$3"; }
check "v0.2 defaults: both sides augmented (most SMILES differ from the input and each other)" \
    awk -F'\t' '$5 != $4 { a++ } $6 != $5 { b++ } END { print a, b; exit !(a > 200 && b > 200) }' "$TMP/def.tsv"
check "v0.2 defaults: the encoder has <MASK>, the decoder none" \
    test "$(has_id 12 $MASK "$TMP/def.tsv")" -gt 100 -a "$(has_id 14 $MASK "$TMP/def.tsv")" = 0
check "encoder_augment false: the encoder's SMILES is the input as written, the decoder's still augmented" \
    awk -F'\t' '$5 != $4 { bad++ } $6 != $4 { b++ } END { print bad + 0, b; exit !(bad == 0 && b > 200) }' "$TMP/ea0.tsv"
check "decoder_augment false: the decoder's SMILES is the encoder's, unmasked" \
    awk -F'\t' '$6 != $5 { bad++ } $5 != $4 { a++ } END { print bad + 0, a; exit !(bad == 0 && a > 200) }' "$TMP/da0.tsv"
check "encoder_mask false: no <MASK> in the encoder's ids" test "$(has_id 12 $MASK "$TMP/em0.tsv")" = 0
check "decoder_mask true: <MASK> in the decoder's ids" test "$(has_id 14 $MASK "$TMP/dm1.tsv")" -gt 100

# Training from MegaMolBART's YAML keys: encoder unaugmented and unmasked.
cat >"$TMP/mmb.yaml" <<'YAML'
model:
  data:
    encoder_augment: False
    encoder_mask: False
    decoder_augment: True
    decoder_mask: False
    canonicalize_input: True
    mask_scheme: span
    mask_prob: 0.2
    span_lambda: 2.5
YAML
COMMON=(--model bart --tokenizer-type SmilesTokenizer --vocab-file "$V" --data-path "$MOLS"
        --split 90,10,0 --seq-length 64 --num-layers 1 --hidden-size 32 --num-attention-heads 2
        --micro-batch-size 2 --global-batch-size 4 --lr 1e-3 --log-interval 1 --eval-iters 1
        --eval-interval 100 --seed 7 --make-vocab-size-divisible-by 128 --save-interval 2
        --lr-decay-iters 100)
train() { # NAME ITERS FLAGS...
    local name=$1 iters=$2; shift 2
    timeout -k 5 120 mpirun.openmpi -n 1 "$PLAIT" train "${COMMON[@]}" --train-iters "$iters" \
        --save "$TMP/m" "$@" >"$TMP/$name.log" 2>&1 || { cat "$TMP/$name.log"; return 1; }
    grep -q "world 1 = tp 1 x dp 1 x pp 1" "$TMP/$name.log"
}
check "YAML model.data keys: bart trains 2 iterations" train yaml 2 --config-file "$TMP/mmb.yaml"
cat >"$TMP/manifest.py" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["data"]["megamolbart"]
got = " ".join(f"{k}={d[k]}" for k in ("encoder_augment", "encoder_mask", "decoder_augment",
                                       "decoder_mask", "canonicalize_input", "mask_prob",
                                       "span_lambda"))
print(got)
sys.exit(got != sys.argv[2])
PY
WANT="encoder_augment=False encoder_mask=False decoder_augment=True decoder_mask=False canonicalize_input=True mask_prob=0.2 span_lambda=2.5"
check "the manifest records the YAML's switches" $PY "$TMP/manifest.py" "$TMP/m/iter_0000002/manifest.json" "$WANT"

# plait seq2seq --mmb: the checkpoint's switches, its own flags over them.
check "seq2seq --mmb takes the checkpoint's switches (stderr names them)" \
    bash -c "'$PLAIT' seq2seq --load '$TMP/m' --input '$MOLS' --mmb --limit 20 --max-new-tokens 2 \
             >'$TMP/s2s.tsv' 2>'$TMP/s2s.err' && grep -q 'encoder_augment 0 encoder_mask 0 mask_prob 0.2 span_lambda 2.5' '$TMP/s2s.err'"
check "  the encoder input is each molecule as written, no <MASK>" \
    bash -c "[ \$(wc -l <'$TMP/s2s.tsv') = 20 ] && awk -F'\t' '\$2 != \$1 { bad++ } END { exit bad > 0 }' '$TMP/s2s.tsv' &&
             ! grep -q '<MASK>' '$TMP/s2s.tsv'"
check "seq2seq --mmb --encoder-mask true --mask-prob 0.5: masked encoder inputs" \
    bash -c "'$PLAIT' seq2seq --load '$TMP/m' --input '$MOLS' --mmb --limit 20 --max-new-tokens 2 \
             --encoder-mask true --mask-prob 0.5 >'$TMP/s2s_m.tsv' 2>/dev/null &&
             [ \$(grep -c '<MASK>' '$TMP/s2s_m.tsv') -gt 10 ]"
check_fails "seq2seq: --encoder-augment without --mmb is refused" "--encoder-augment is MegaMolBART's corruption: give --mmb" \
    "$PLAIT" seq2seq --load "$TMP/m" --input "$MOLS" --encoder-augment false

# Resume: the switches must be the checkpoint's.
check_fails "resume with the defaults is refused, naming the flag and both values" \
    "MegaMolBART's --encoder-augment is false in the checkpoint and true" \
    train resume_bad 4 --load "$TMP/m"
check "resume with --use-checkpoint-args takes the checkpoint's switches" \
    train resume_ck 4 --load "$TMP/m" --use-checkpoint-args
check "  the notes name them" bash -c "grep -q -- '--use-checkpoint-args: --encoder-augment false from the checkpoint' '$TMP/resume_ck.log' &&
    grep -q -- '--use-checkpoint-args: --span-lambda 2.5 from the checkpoint' '$TMP/resume_ck.log'"
check "  iteration 4's manifest keeps them" $PY "$TMP/manifest.py" "$TMP/m/iter_0000004/manifest.json" "$WANT"
check "resume giving --encoder-mask true changes the objective from there (a note)" \
    train resume_change 6 --load "$TMP/m" --use-checkpoint-args --encoder-mask true
check "  the note and the manifest" bash -c "grep -q -- '--encoder-mask true: the checkpoint.s was false' '$TMP/resume_change.log' &&
    $PY -c \"import json; assert json.load(open('$TMP/m/iter_0000006/manifest.json'))['data']['megamolbart']['encoder_mask'] is True\""

# Refused by name elsewhere.
check_fails "--encoder-augment with --model gpt is refused" \
    "--encoder-augment is MegaMolBART.s \(--model bart with --tokenizer-type SmilesTokenizer\), not --model gpt" \
    "$PLAIT" train --model gpt --encoder-augment false --num-layers 1 --hidden-size 32 \
    --num-attention-heads 2 --seq-length 16 --mock-data --vocab-size 64 --train-iters 1 --micro-batch-size 1
check_fails "--span-lambda with --model bart and a BERT vocabulary is refused" \
    "--span-lambda is MegaMolBART's" \
    "$PLAIT" train --model bart --tokenizer-type BertWordPieceLowerCase --vocab-file "$PLAIT_DATA/bert/vocab.txt" \
    --span-lambda 2 --num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 16 \
    --data-path "$TMP/none" --train-iters 1 --micro-batch-size 1
check_fails "--span-lambda 0 is refused with its range" "--span-lambda 0: expected \(0, 30\]" \
    train bad_lambda 2 --span-lambda 0
check_fails "--encoder-mask maybe is refused with its choices" "--encoder-mask must be one of \{true\|false\}" \
    "$PLAIT" train "${COMMON[@]}" --encoder-mask maybe
summary mmb_switches
