#!/usr/bin/env bash
# BART (NeMo's Megatron BART, `plait train --model bart`: T5's model, model/spec.c) on its
# two datasets, dropout on: NeMo's BART denoising over KJV sentences (WordPiece; the
# dataset is checked sample for sample in bart_dataset.sh) and MegaMolBART v0.2's SMILES
# objective (data/mmb_dataset.h, checked in mmb_dataset.sh) on RDKit-canonical molecules
# of the shipped sets with a SMILES vocabulary built from augmented SMILES. Each: one
# process trains and its loss falls; DP 2 with ZeRO 2 (BART) and TP 2 x DP 2 with ZeRO 1
# (MegaMolBART, whose samples are a function of (seed, index)) give one process's losses,
# validation and final parameters (ckpt_tensors.py; train_lib.sh's bounds); a MegaMolBART resume
# at iteration 5 is bit for bit; plait seq2seq --mmb decodes its corruption (sampled, and
# by beam search: beam.sh checks the search itself). Bad SMILES
# input is named by file and line; flags BART does not take are refused.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1
"$ROOT/build/testtools/bert_samples" make "$PLAIT_DATA/bert/vocab.txt" "$PLAIT_DATA/kjv.txt" \
    "$TMP/kjv_sent" 3000 >/dev/null
SMALL=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --micro-batch-size 2
       --global-batch-size 8 --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 2
       --log-interval 1 --eval-iters 2 --eval-interval 5 --seed 7 --train-iters 10)
COMMON=(--model bart --data-path "$TMP/kjv_sent" --vocab-file "$PLAIT_DATA/bert/vocab.txt"
        --split 90,10,0 --seq-length 32 "${SMALL[@]}")
check "bart (NeMo's BART dataset): one process trains 10 iterations" run n_single 1 1 1
check "bart: the loss falls" \
    bash -c "[ \"\$(losses '$TMP/n_single.jsonl' | awk 'NR == 1 { a = \$1 } END { print (\$1 < a - 0.3) }')\" = 1 ]"
check "bart: NeMo's BART mappings are built and cached" \
    bash -c "[ \$(ls '$TMP'/kjv_sent/cache/BARTDataset_indices/*-sample_index.npy | wc -l) = 2 ]"
check "bart: the checkpoint says bart, both stacks of 2 layers, decoder length = encoder's" $PY -c "
import json, sys
m = json.load(open('$TMP/n_single/iter_0000010/manifest.json'))['model']
print(m['architecture'], m['decoder_num_layers'], m['decoder_seq_length'])
sys.exit(m['architecture'] != 'bart' or m['decoder_num_layers'] != 2 or m['decoder_seq_length'] != 32)"
layout_checks bart n_single n_dp2_z2 "2 1 2 1" --zero-stage 2

# MegaMolBART: 1200 molecules as its preprocessing makes them (RDKit canonical SMILES of
# at most 150 characters, "zinc_id,SMILES" with a header), the vocabulary from each
# input and 5 random atom orders of it (plait data smiles-augment / build-vocab).
check "MegaMolBART: molecules and vocabulary" $PY - "$PLAIT_DATA/smiles" "$TMP/mols.csv" <<'PY'
import csv, sys
from rdkit import Chem, RDLogger
RDLogger.DisableLog("rdApp.*")
out = []
for s, _ in csv.reader(open(f"{sys.argv[1]}/wehi_mols.csv")):
    m = Chem.MolFromSmiles(s)
    c = Chem.MolToSmiles(m) if m else None
    if c and len(c) <= 150:
        out.append(c)
with open(sys.argv[2], "w") as f:
    f.write("zinc_id,SMILES\n")
    f.writelines(f"w{i},{s}\n" for i, s in enumerate(out[:1200]))
PY
"$PLAIT" data smiles-augment --input "$TMP/mols.csv" --csv-column 1 --skip-header --num 5 \
    --keep-input --seed 3 2>/dev/null | tr "\t" "\n" >"$TMP/aug.txt"
"$PLAIT" data build-vocab --tokenizer-type SmilesTokenizer --input "$TMP/aug.txt" \
    --output "$TMP/mmb.vocab" >/dev/null 2>&1
COMMON=(--model bart --tokenizer-type SmilesTokenizer --vocab-file "$TMP/mmb.vocab"
        --data-path "$TMP/mols.csv" --split 90,10,0 --seq-length 64 "${SMALL[@]}")
check "MegaMolBART: one process trains 10 iterations" run m_single 1 1 1
check "MegaMolBART: the loss falls" \
    bash -c "[ \"\$(losses '$TMP/m_single.jsonl' | awk 'NR == 1 { a = \$1 } END { print (\$1 < a - 0.3) }')\" = 1 ]"
check "MegaMolBART: the splits are the molecules' ranges, the decoder seq_length + 1" \
    bash -c "grep -q 'MegaMolBART train split: molecules \[0, 1080) of 1200' '$TMP/m_single.log' &&
             grep -q 'decoder 2 layers x 65 tokens' '$TMP/m_single.log'"
layout_checks MegaMolBART m_single m_tp2_dp2_z1 "4 2 2 1" --use-distributed-optimizer

# Resume: the samples are a function of (seed, index), so iteration 5's checkpoint gives the
# uninterrupted run's losses and parameters bit for bit.
dir="$TMP/m_resume"
mkdir -p "$dir" && cp -r "$TMP/m_single/iter_0000005" "$dir/" &&
    echo 5 > "$dir/latest_checkpointed_iteration.txt"
check "MegaMolBART: resumed from iteration 5" \
    "$PLAIT" train "${COMMON[@]}" --make-vocab-size-divisible-by 512 --load "$dir" --save "$dir" \
    --metrics-file "$dir.jsonl"
check "MegaMolBART: losses after resuming equal the uninterrupted run's, and the parameters" \
    bash -c "diff <(grep -o '\"lm_loss\": [^,]*' '$TMP/m_single.jsonl' | tail -n 5) \
                  <(grep -o '\"lm_loss\": [^,]*' '$dir.jsonl' | head -n 5) &&
             $PY '$CK' same '$dir/iter_0000010' '$TMP/m_single/iter_0000010' 0 0"
check "MegaMolBART: plait seq2seq --mmb writes input, corrupted encoder input, decoding" \
    bash -c "'$PLAIT' seq2seq --load '$TMP/m_single' --input '$TMP/mols.csv' --mmb --limit 3 \
             > '$TMP/recon.tsv' && [ \$(wc -l < '$TMP/recon.tsv') = 3 ] &&
             [ \$(awk -F'\t' 'NF == 3' '$TMP/recon.tsv' | wc -l) = 3 ] &&
             diff <(cut -f1 '$TMP/recon.tsv') <(sed -n 2,4p '$TMP/mols.csv' | cut -d, -f2)"
S2S=("$PLAIT" seq2seq --load "$TMP/m_single" --input "$TMP/mols.csv" --mmb --limit 4)
check "plait seq2seq sampling: the same --seed draws the same, another seed or greedy differ" \
    bash -c "$(printf '%q ' "${S2S[@]}") --temperature 1 --seed 5 > '$TMP/t1.tsv' &&
             $(printf '%q ' "${S2S[@]}") --temperature 1 --seed 5 | cmp -s - '$TMP/t1.tsv' &&
             ! $(printf '%q ' "${S2S[@]}") --temperature 1 --seed 6 | cut -f3 | cmp -s - <(cut -f3 '$TMP/t1.tsv') &&
             ! $(printf '%q ' "${S2S[@]}") --seed 5 | cut -f3 | cmp -s - <(cut -f3 '$TMP/t1.tsv')"
check "plait seq2seq --mmb: validity, reconstruction, uniqueness (summary line and --eval-json)" \
    bash -c "$(printf '%q ' "${S2S[@]}") --limit 8 --temperature 1 --seed 5 --eval-json '$TMP/eval.json' \
             > '$TMP/eval.tsv' 2> '$TMP/eval.err' &&
             grep -qE '^molecules 8: valid [0-9]+ \([0-9.]+%\), reconstructed [0-9]+ \([0-9.]+%\), unique [0-9]+ of the valid' '$TMP/eval.err'"
check "  the figures equal RDKit's on the same decodes" \
    /usr/bin/python3 "$ROOT/tests/scripts/smiles_chem/rdkit_check.py" figures "$TMP/eval.tsv" "$TMP/eval.json" 0,2
check "plait seq2seq --mmb --beam-size 3 --num-return 2: two scored hypotheses per molecule" \
    bash -c "$(printf '%q ' "${S2S[@]}") --beam-size 3 --num-return 2 > '$TMP/beam.tsv' &&
             [ \$(awk -F'\t' 'NF == 4 && \$4 < 0' '$TMP/beam.tsv' | wc -l) = 8 ] &&
             diff <(cut -f1 '$TMP/beam.tsv' | uniq) <(cut -f1 '$TMP/t1.tsv')"
sed '5s/.*/w3,C1CC(/' "$TMP/mols.csv" >"$TMP/bad.csv"
check_fails "MegaMolBART: a SMILES that does not parse is named by file and line" "bad.csv:5" \
    "$PLAIT" train "${COMMON[@]/$TMP\/mols.csv/$TMP/bad.csv}"
check_fails "bart: --decoder-seq-length is refused (the dataset sets it)" \
    "--model bart takes no --decoder-seq-length" \
    "$PLAIT" train "${COMMON[@]}" --decoder-seq-length 65
summary bart_train
