#!/usr/bin/env bash
# Pipelined encoder-decoders (train/encdec_pipe.c, docs/pipeline.md): T5 with
# --pipeline-model-parallel-split-rank gives one process's losses, validation and final
# parameters (within the bounds train_lib.sh argues: only the order of additions changes)
# at PP 2 (split 1), TP 2 x PP 2 with sequence parallelism, PP 2 x DP 2 with ZeRO 0, 1,
# 2 and 3, PP 4 (a middle decoder stage) and with Megatron core's
# --encoder-pipeline-model-parallel-size 2 (3 stages, GPipe); so does BART on
# MegaMolBART's SMILES objective at TP 2 x PP 2. Full recomputation and ZB-H1 at PP 4
# give the 1F1B run bit for bit; the decoder's copies of the embeddings stay
# bit-identical to the originals; the first iteration's loss is one process's bit for
# bit (the same forward, operation for operation); a PP 2 checkpoint resumes at PP 1 and
# a PP 1 one at PP 2, also through plait ckpt reshard; plait seq2seq decodes pipelined
# checkpoints as the one-process one. transformers' T5 layer (relative position bias
# tables, tied copies on each stack's later stages) at PP 2 and PP 4 equals one process and
# TP 2 x PP 4 the unpipelined TP 2 run, the copies equal to their originals; what is not
# supported is refused by name.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1
"$ROOT/build/testtools/bert_samples" make "$PLAIT_DATA/bert/vocab.txt" "$PLAIT_DATA/kjv.txt" \
    "$TMP/kjv_sent" 3000 >/dev/null
SPLIT=(--pipeline-model-parallel-split-rank 1)
COMMON=(--model t5 --data-path "$TMP/kjv_sent" --vocab-file "$PLAIT_DATA/bert/vocab.txt"
        --vocab-extra-ids 100 --split 90,10,0 --encoder-num-layers 2 --decoder-num-layers 2
        --hidden-size 32 --num-attention-heads 4 --encoder-seq-length 32
        --decoder-seq-length 16 --micro-batch-size 2 --global-batch-size 8 --lr 1e-3
        --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 2 --log-interval 1
        --eval-iters 2 --eval-interval 5 --seed 7 --train-iters 10)
first_loss_equal() { [ "$(losses "$TMP/$1.jsonl" | head -n 1)" = "$(losses "$TMP/$2.jsonl" | head -n 1)" ]; }

check "t5: one process trains 10 iterations" run t_single 1 1 1
layout_checks t5 t_single t_pp2 "2 1 1 2" "${SPLIT[@]}"
check "t5 pp 2: the first iteration's loss is one process's bit for bit" first_loss_equal t_single t_pp2
check "t5 pp 2: the banner names the split and the stage's stack" \
    grep -q "pipeline split: the encoder on stages 0..0, the decoder on 1..1" "$TMP/t_pp2.log"
layout_checks t5 t_single t_tp2_pp2 "4 2 1 2" "${SPLIT[@]}" --sequence-parallel
layout_checks t5 t_single t_pp2_dp2 "4 1 2 2" "${SPLIT[@]}"
layout_checks t5 t_single t_pp2_dp2_z1 "4 1 2 2" "${SPLIT[@]}" --use-distributed-optimizer
layout_checks t5 t_single t_pp2_dp2_z2 "4 1 2 2" "${SPLIT[@]}" --zero-stage 2
layout_checks t5 t_single t_pp2_dp2_z3 "4 1 2 2" "${SPLIT[@]}" --zero-stage 3
# 4 stages, the decoder on 3: a middle decoder stage passes both tensors on, and the last
# stage's output layer is a third copy of the word embeddings (Megatron's group 0, S, P-1)
check "t5 with 3 decoder layers: one process" run t_single3 1 1 1 --decoder-num-layers 3
layout_checks t5 t_single3 t_pp4 "4 1 1 4" "${SPLIT[@]}" --decoder-num-layers 3
# Full recomputation reruns each stage's layers (2 a group, capped to a decoder stage's 1
# as a stack's count is capped to its layers): the run bit for bit.
check "t5 pp 4 with full recomputation of 2 layers a group runs" run t_pp4_rc 4 1 4 \
    "${SPLIT[@]}" --decoder-num-layers 3 --recompute-granularity full \
    --recompute-method uniform --recompute-num-layers 2
check "t5 pp 4: full recomputation gives its losses bit for bit" \
    diff <(losses "$TMP/t_pp4.jsonl") <(losses "$TMP/t_pp4_rc.jsonl")
# ZB-H1: each backward in its input half (the encoder output's gradient among the inputs')
# and its weight half, later: 1F1B's run bit for bit (the same sums in the same order)
check "t5 pp 4 under zb-h1 runs" run t_pp4_zb 4 1 4 "${SPLIT[@]}" --decoder-num-layers 3 \
    --pipeline-schedule zb-h1
check "t5 pp 4: zb-h1 gives 1f1b's losses bit for bit" \
    diff <(losses "$TMP/t_pp4.jsonl") <(losses "$TMP/t_pp4_zb.jsonl")
check "t5 pp 4: zb-h1 gives 1f1b's final parameters bit for bit" \
    $PY "$CK" same "$TMP/t_pp4_zb/iter_0000010" "$TMP/t_pp4/iter_0000010" 0 0
# Megatron core 0.9's flag: 2 encoder stages before --pipeline-model-parallel-size 1 decoder stage
EPP=--encoder-pipeline-model-parallel-size
check "t5 $EPP 2 (GPipe) runs" run t_epp2 3 1 1 $EPP 2 --pipeline-schedule gpipe
check "t5 $EPP 2: 3 stages, the encoder on 2" bash -c "grep -q 'world 3 = tp 1 x dp 1 x pp 3' \
    '$TMP/t_epp2.log' && grep -q 'the encoder on stages 0..1, the decoder on 2..2' '$TMP/t_epp2.log'"
check "t5 $EPP 2: losses and validation equal one process's" same_losses t_single t_epp2
ckpt_both t_epp2 t_single
check "t5 $EPP 2: final parameters equal one process's" ckpt_passed t_epp2 same
check "t5 $EPP 2: replicas and the copies identical" ckpt_passed t_epp2 replicas

# Resuming across layouts: the manifest's global slices, the copies filled from their originals.
resume() { # NAME FROM NP PP FLAGS...: iteration 5 of run FROM, trained on to 10
    local name=$1 from=$2 np=$3 pp=$4; shift 4
    rm -rf "$TMP/$name" && mkdir -p "$TMP/$name" && cp -r "$TMP/$from/iter_0000005" "$TMP/$name/" &&
        echo 5 > "$TMP/$name/latest_checkpointed_iteration.txt" &&
        timeout -k 5 120 mpirun.openmpi -n "$np" "$PLAIT" train "${COMMON[@]}" \
            --pipeline-model-parallel-size "$pp" "$@" --make-vocab-size-divisible-by 512 \
            --load "$TMP/$name" --save "$TMP/$name" --save-interval 5 \
            --metrics-file "$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1 &&
        grep -q "world $np = tp 1 x dp 1 x pp $pp" "$TMP/$name.log"
}
later_losses() { # the resumed run's 5 losses against one process's last 5
    paste <(losses "$TMP/t_single.jsonl" | tail -n 5) <(losses "$TMP/$1.jsonl") | awk '
        { c++; d = $1 - $2; if (d < 0) d = -d; if (d > 2e-5 * $2) bad++ }
        END { exit !(c == 5 && !bad) }'
}
check "t5: a PP 2 checkpoint resumes on one process" resume t_res_pp1 t_pp2 1 1
check "t5: ... its losses are one process's" later_losses t_res_pp1
check "t5: ... its final parameters are one process's" same_params t_res_pp1 t_single
check "t5: a one-process checkpoint resumes at PP 2" resume t_res_pp2 t_single 2 2 "${SPLIT[@]}"
check "t5: ... its losses are one process's" later_losses t_res_pp2
ckpt_both t_res_pp2 t_single
check "t5: ... its final parameters are one process's" ckpt_passed t_res_pp2 same
check "t5: ... the decoder's copies equal their originals" ckpt_passed t_res_pp2 replicas
# plait ckpt reshard writes the PP 2 layout offline (the split recorded in the manifest):
# resuming from it is resuming from the one-process checkpoint at PP 2, bit for bit.
check "ckpt reshard writes a one-process T5 checkpoint at PP 2, split rank 1" \
    bash -c "'$PLAIT' ckpt reshard '$TMP/t_single' --ckpt-step 5 --out '$TMP/t_rs' \
                 --tensor-model-parallel-size 1 --pipeline-model-parallel-size 2 \
                 --pipeline-model-parallel-split-rank 1 >/dev/null &&
             '$PLAIT' ckpt inspect '$TMP/t_rs' | grep -q 'PP 2 x DP 1, ZeRO stage 0, the decoder from stage 1'"
check "t5: the resharded checkpoint resumes at PP 2" resume t_res_rs t_rs 2 2 "${SPLIT[@]}"
check "t5: ... as the one-process checkpoint does, bit for bit" \
    diff <(losses "$TMP/t_res_rs.jsonl") <(losses "$TMP/t_res_pp2.jsonl")
check_fails "ckpt reshard of T5 to PP 2 without a split rank is refused, naming the flag" \
    "--pipeline-model-parallel-split-rank 0 must be in 1..1" \
    "$PLAIT" ckpt reshard "$TMP/t_single" --out "$TMP/t_rs_bad" --tensor-model-parallel-size 1 \
    --pipeline-model-parallel-size 2

printf 'in the beginning god created the heaven\nand the earth\n' >"$TMP/src.txt"
check "plait seq2seq decodes a PP 2 checkpoint as the one-process one" \
    bash -c "'$PLAIT' seq2seq --load '$TMP/t_pp2' --input '$TMP/src.txt' --max-new-tokens 6 \
                 > '$TMP/s2s_pp2.txt' &&
             '$PLAIT' seq2seq --load '$TMP/t_single' --input '$TMP/src.txt' --max-new-tokens 6 \
                 > '$TMP/s2s_1.txt' &&
             [ \$(wc -l < '$TMP/s2s_pp2.txt') = 2 ] && diff '$TMP/s2s_1.txt' '$TMP/s2s_pp2.txt'"
check "plait seq2seq decodes a TP 2 x PP 2 checkpoint on 2 ranks (TP 2) as one process" \
    bash -c "timeout -k 5 60 mpirun.openmpi -n 2 '$PLAIT' seq2seq --load '$TMP/t_tp2_pp2' \
             --input '$TMP/src.txt' --max-new-tokens 6 > '$TMP/s2s_tp2_pp2.txt' &&
             diff '$TMP/s2s_1.txt' '$TMP/s2s_tp2_pp2.txt'"

# transformers' T5 layer, relative position bias tables: each stack's later stages hold tied
# copies of its table (the encoder's on 1, the decoder's on 3 at PP 4, split 2), drawn alike
# and their gradients summed over the stack's stages, so they stay equal to the originals
REL=(--normalization RMSNorm --disable-bias-linear --position-embedding-type relative
     --softmax-scale 1 --norm-epsilon 1e-6 --ffn-activation geglu
     --untie-embeddings-and-output-weights)
check "t5 relative: one process trains 10 iterations" run r_single 1 1 1 "${REL[@]}"
layout_checks "t5 relative" r_single r_pp2 "2 1 1 2" "${SPLIT[@]}" "${REL[@]}"
layout_checks "t5 relative" r_single r_pp4 "4 1 1 4" --pipeline-model-parallel-split-rank 2 \
    "${REL[@]}"
# At TP 2 the layer's 10 AdamW steps move one word-embedding element of one process's run by
# 1e-5 above the bound (pipelined or not: Adam's step on a row of tiny gradients amplifies
# the TP sums' order), so TP 2 x PP 4 is held to the unpipelined TP 2 run.
check "t5 relative: TP 2 with sp trains 10 iterations" run r_tp2 2 2 1 --sequence-parallel "${REL[@]}"
layout_checks "t5 relative (against TP 2)" r_tp2 r_tp2_pp4 "8 2 1 4" \
    --pipeline-model-parallel-split-rank 2 --sequence-parallel "${REL[@]}"
check "t5 relative pp 4: the tables' copies are on stages 1 and 3" $PY -c "
import json, sys
t = json.load(open('$TMP/r_tp2_pp4/iter_0000010/manifest.json'))['tensors']
st = {k: v['pipeline_stage'] for k, v in t.items() if 'relative' in k}
sys.exit(st != {'encoder_relative_pos_emb.relative_attention_bias.weight': 0,
                'encoder_relative_pos_emb.stage1.relative_attention_bias.weight': 1,
                'decoder_relative_pos_emb.relative_attention_bias.weight': 2,
                'decoder_relative_pos_emb.stage3.relative_attention_bias.weight': 3})"
check "t5 relative: a one-process checkpoint resumes at PP 4 (the copies filled from the tables)" \
    resume r_res_pp4 r_single 4 4 --pipeline-model-parallel-split-rank 2 "${REL[@]}"
ckpt_both r_res_pp4 r_single
check "t5 relative: ... its final parameters are one process's" ckpt_passed r_res_pp4 same
check "t5 relative: ... the copies equal their tables" ckpt_passed r_res_pp4 replicas
check "plait seq2seq decodes the TP 2 x PP 4 checkpoint on 2 ranks as the one-process one" \
    bash -c "'$PLAIT' seq2seq --load '$TMP/r_single' --input '$TMP/src.txt' --max-new-tokens 6 \
                 > '$TMP/r_s2s_1.txt' &&
             timeout -k 5 60 mpirun.openmpi -n 2 '$PLAIT' seq2seq --load '$TMP/r_tp2_pp4' \
                 --input '$TMP/src.txt' --max-new-tokens 6 > '$TMP/r_s2s_pp4.txt' &&
             [ \$(wc -l < '$TMP/r_s2s_1.txt') = 2 ] && diff '$TMP/r_s2s_1.txt' '$TMP/r_s2s_pp4.txt'"

# BART on MegaMolBART's objective (SMILES, each stage augmenting and masking the same
# samples alike: the encoder's stage the encoder input, the decoder's the decoder's): TP 2
# x PP 2. Molecules: the shipped set's canonical SMILES (RDKit), as bart_train.sh.
$PY - "$PLAIT_DATA/smiles" "$TMP/mols.csv" <<'PY'
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
        --data-path "$TMP/mols.csv" --split 90,10,0 --seq-length 64 --num-layers 2
        --hidden-size 32 --num-attention-heads 4 --micro-batch-size 2 --global-batch-size 8
        --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 2 --log-interval 1
        --eval-iters 2 --eval-interval 5 --seed 7 --train-iters 10)
check "MegaMolBART: one process trains 10 iterations" run m_single 1 1 1
layout_checks MegaMolBART m_single m_tp2_pp2 "4 2 1 2" "${SPLIT[@]}"

# Refusals, each naming the flags and what is expected.
T5=(--model t5 --data-path "$TMP/kjv_sent" --vocab-file "$PLAIT_DATA/bert/vocab.txt"
    --vocab-extra-ids 10 --num-layers 2 --hidden-size 8 --num-attention-heads 2 --seq-length 8
    --decoder-seq-length 8 --micro-batch-size 1 --global-batch-size 2 --train-iters 1 --lr 1e-3)
mpi2() { timeout -k 5 60 mpirun.openmpi -n 2 "$PLAIT" train "$@"; }
check_fails "t5 pipelined without a split is refused, naming Megatron's flags" \
    "needs --pipeline-model-parallel-split-rank S .*--encoder-pipeline-model-parallel-size" \
    mpi2 "${T5[@]}" --pipeline-model-parallel-size 2
check_fails "a split rank out of range is refused" "expected 1 <= S < P" \
    mpi2 "${T5[@]}" --pipeline-model-parallel-size 2 --pipeline-model-parallel-split-rank 2
check_fails "layers not dividing over their stages are refused" \
    "--decoder-num-layers 3 over 2 decoder stages .*each must divide evenly" \
    "$PLAIT" train "${T5[@]}" --decoder-num-layers 3 --pipeline-model-parallel-size 3 \
    --pipeline-model-parallel-split-rank 1
check_fails "both split flags together are refused" \
    "give --pipeline-model-parallel-split-rank or --encoder-pipeline-model-parallel-size, not both" \
    "$PLAIT" train "${T5[@]}" --pipeline-model-parallel-size 2 "${SPLIT[@]}" \
    --encoder-pipeline-model-parallel-size 1
check_fails "interleaving is refused by name" "model chunks .*are not supported" \
    timeout -k 5 60 mpirun.openmpi -n 2 "$PLAIT" train "${T5[@]}" --num-layers 4 \
    --decoder-num-layers 4 --pipeline-model-parallel-size 2 "${SPLIT[@]}" \
    --virtual-pipeline-model-parallel-size 2
check_fails "the split flag is refused for a decoder-only model" \
    "--pipeline-model-parallel-split-rank is for --model t5 or bart" \
    "$PLAIT" train --mock-data --vocab-size 100 --num-layers 2 --hidden-size 8 \
    --num-attention-heads 2 --seq-length 8 --micro-batch-size 1 --global-batch-size 1 \
    --train-iters 1 --lr 1e-3 "${SPLIT[@]}"
summary encdec_pp
