#!/usr/bin/env bash
# Pipeline parallelism in `plait train`: P = 2, 4 and 8 stages under the 1F1B, GPipe,
# ZB-H1 (zero-bubble: split backwards, bit for bit 1F1B's) and interleaved (v = 2 and 4
# model chunks per rank) schedules, combined with TP 2 (and sequence
# parallelism), DP 2 and ZeRO 0-1 (stages 2-3: pp_zero.sh), 8 ranks in 3D, with dropout
# on, for GPT (tied embeddings: the last stage's copy summed over the embedding group)
# and Llama (untied), on the King James Bible (the 4-layer GPT runs on synthetic tokens):
# the same losses over 10 iterations and validation as one process, the same final parameters (assembled
# from the mp_rank_XX_YYY shards by tests/scripts/ckpt_tensors.py, which also checks the
# tied copy equals the embeddings bit for bit); the bytes each step sends between stages
# equal the theory; resume is bit-exact; what this version does not run is refused by
# name. Every run asserts its layout from plait's banner and runs under a timeout.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1 # up to 8 ranks share 2 cores
kjv_dataset 2000 "$TMP/kjv"
# 4 layers (8 for P = 8), micro-batch 2 x 32 rows, 4 micro-batches per step and DP rank
# at DP 1 (2 at DP 2), validation every 5 iterations.
# Data: the 8-layer GPT runs train on the King James Bible (GPT-2's tokenizer), since
# their checkpoints also generate text, and so do the Llama runs: untied input embeddings
# see only the batch's tokens, and uniform synthetic tokens give thousands of rows a
# gradient of a few occurrences, which left less of the parameter bound's margin (tp.sh's
# tp 2 x dp 2 exceeded it). The 4-layer GPT runs train on synthetic tokens over 4100 words. The layouts' equality does not depend on the text or the
# vocabulary's size: the stages send N/tp x C activations whatever it is, and 4100 words
# pad to 4608 rows as GPT-2's 50257 pad to 50688 (the padding inside the last TP shard).
# GPT-2's 50257 words were most of each launch (the embeddings initialized, touched and
# checkpointed on every stage: 157 MB of checkpoints a pp 2 run).
MODEL_BASE=(--hidden-size 64 --num-attention-heads 8 --seq-length 32 --micro-batch-size 2
      --global-batch-size 8 --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 2
      --log-interval 1 --eval-iters 2 --eval-interval 5 --seed 7 --hidden-dropout 0.1
      --attention-dropout 0.1)
use_data() { # syn | kjv: BASE and COMMON train on synthetic tokens or on the KJV
    if [ "$1" = kjv ]; then
        BASE=("${MODEL_BASE[@]}" --data-path "$TMP/kjv_text_document" --split 90,10,0 "${GPT2[@]}")
    else
        BASE=("${MODEL_BASE[@]}" --mock-data --vocab-size 4100)
    fi
    COMMON=("${BASE[@]}" --train-iters 10)
}
use_data syn
LLAMA=(--model llama --group-query-attention --num-query-groups 4)

check "gpt: one process trains 10 iterations (4 layers)" run g_single 1 1 1 --num-layers 4
layout_checks gpt g_single g_pp2 "2 1 1 2" --num-layers 4
layout_checks gpt g_single g_pp4 "4 1 1 4" --num-layers 4
layout_checks gpt g_single g_pp2_gpipe "2 1 1 2" --num-layers 4 --pipeline-schedule gpipe
layout_checks gpt g_single g_pp4_gpipe "4 1 1 4" --num-layers 4 --pipeline-schedule gpipe
layout_checks gpt g_single g_pp2_tp2_sp "4 2 1 2" --num-layers 4 --sequence-parallel
layout_checks gpt g_single g_pp2_dp2 "4 1 2 2" --num-layers 4
layout_checks gpt g_single g_3d "8 2 2 2" --num-layers 4 --recompute-activations
layout_checks gpt g_single g_3d_z1 "8 2 2 2" --num-layers 4 --use-distributed-optimizer \
    --sequence-parallel
layout_checks gpt g_single g_pp4_z1 "8 1 2 4" --num-layers 4 --zero-stage 1
layout_checks gpt g_single g_pp2_full "2 1 1 2" --num-layers 4 --recompute-granularity full \
    --recompute-method uniform --recompute-num-layers 1
# Uneven stages (Megatron's --decoder-first/last-pipeline-num-layers): 3 + 1 layers, and
# 1 + 2 + 1 over three stages.
layout_checks gpt g_single g_pp2_uneven "2 1 1 2" --num-layers 4 \
    --decoder-first-pipeline-num-layers 3
layout_checks gpt g_single g_pp3_uneven "3 1 1 3" --num-layers 4 \
    --decoder-first-pipeline-num-layers 1 --decoder-last-pipeline-num-layers 1
check "uneven stages: layer 3 of 4 lives on the last of three stages" $PY -c "
import json, sys
m = json.load(open('$TMP/g_pp3_uneven/iter_0000010/manifest.json'))['tensors']
stage = [m[f'decoder.layers.{l}.self_attention.linear_qkv.weight']['pipeline_stage'] for l in range(4)]
print(stage); sys.exit(stage != [0, 1, 1, 2])"
if [ -x "$ROOT/build-mpich/plait" ]; then
    check "gpt: MPICH pp 2 x tp 2 runs" bash -c "timeout -k 5 300 mpirun.mpich -n 4 \
        '$ROOT/build-mpich/plait' train $(printf '%q ' "${COMMON[@]}") --num-layers 4 \
        --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
        --make-vocab-size-divisible-by 256 --metrics-file '$TMP/g_mpich.jsonl' > '$TMP/g_mpich.log' 2>&1"
    check "gpt: MPICH pp 2 x tp 2 asserts its layout" layout_is g_mpich 4 2 1 2
    check "gpt: MPICH pp 2 x tp 2: losses and validation equal one process's" \
        same_losses g_single g_mpich
fi
# ZB-H1: every backward in its input and weight halves, the weight halves filling the
# cooldown; the gradients are summed in the same order as 1F1B's, so the same bytes.
layout_checks gpt g_single g_pp4_zb "4 1 1 4" --num-layers 4 --pipeline-schedule zb-h1
layout_checks gpt g_single g_3d_zb "8 2 2 2" --num-layers 4 --pipeline-schedule zb-h1 \
    --use-distributed-optimizer --sequence-parallel
same_ckpt_bytes() { # A B: every rank's files of iteration 10 byte for byte
    local f n=0
    for f in "$TMP/$1"/iter_0000010/*/*.safetensors; do
        cmp -s "$f" "$TMP/$2/${f#"$TMP/$1/"}" || return 1
        n=$((n + 1))
    done
    [ "$n" -gt 0 ] && diff <(losses "$TMP/$1.jsonl") <(losses "$TMP/$2.jsonl") >/dev/null
}
check "zb-h1 at pp 4 gives 1f1b's losses and checkpoint bit for bit" same_ckpt_bytes g_pp4 g_pp4_zb
check "zb-h1 in 3D with ZeRO 1 gives 1f1b's bit for bit" same_ckpt_bytes g_3d_z1 g_3d_zb
check_fails "zb-h1 with activation recomputation is refused, saying why" \
    "zero-bubble schedule .* with activation recomputation" \
    timeout -k 5 60 mpirun.openmpi -n 2 "$PLAIT" train "${COMMON[@]}" --num-layers 4 \
    --pipeline-model-parallel-size 2 --pipeline-schedule zb-h1 --recompute-activations
# ZeRO 2-3: the input half readies no gradient slot, the weight half reduce-scatters each
# layer after every micro-batch as the whole backward does: 1F1B's bytes again.
for z in 2 3; do
    check "pp 2 x dp 2, ZeRO $z, 1f1b runs" run g_pp2_dp2_z$z 4 1 2 --num-layers 4 --zero-stage $z
    check "pp 2 x dp 2, ZeRO $z, zb-h1 runs" run g_pp2_dp2_z${z}_zb 4 1 2 --num-layers 4 \
        --zero-stage $z --pipeline-schedule zb-h1
    check "pp 2 x dp 2, ZeRO $z, zb-h1 asserts its layout" layout_is g_pp2_dp2_z${z}_zb 4 1 2 2
    check "zb-h1 with ZeRO $z gives 1f1b's losses and checkpoint bit for bit" \
        same_ckpt_bytes g_pp2_dp2_z$z g_pp2_dp2_z${z}_zb
done
check "pp 2 x dp 2, ZeRO 3, zb-h1: final parameters equal one process's" \
    same_params g_pp2_dp2_z3_zb g_single

use_data kjv
check "gpt: one process trains 10 iterations (8 layers)" run g8_single 1 1 1 --num-layers 8
layout_checks gpt g8_single g8_pp8 "8 1 1 8" --num-layers 8
# Interleaved 1F1B (Megatron's virtual pipeline): chunk k of rank r holds virtual stage
# k P + r; activations go round the ranks v times.
layout_checks gpt g8_single g8_pp2_v2 "2 1 1 2" --num-layers 8 \
    --num-layers-per-virtual-pipeline-stage 2
layout_checks gpt g8_single g8_pp2_v4 "2 1 1 2" --num-layers 8 \
    --num-virtual-stages-per-pipeline-rank 4 --recompute-granularity full \
    --recompute-method uniform --recompute-num-layers 1
layout_checks gpt g8_single g8_pp4_v2 "4 1 1 4" --num-layers 8 \
    --virtual-pipeline-model-parallel-size 2
layout_checks gpt g8_single g8_3d_v2 "8 2 2 2" --num-layers 8 \
    --num-layers-per-virtual-pipeline-stage 2 --sequence-parallel --use-distributed-optimizer
check "interleaved: layer 5 of 8 lives on rank 0 (virtual stage 2 of 4)" $PY -c "
import json, sys
m = json.load(open('$TMP/g8_pp2_v2/iter_0000010/manifest.json'))['tensors']
stage = [m[f'decoder.layers.{l}.self_attention.linear_qkv.weight']['pipeline_stage'] for l in range(8)]
print(stage); sys.exit(stage != [0, 0, 1, 1, 0, 0, 1, 1])"

check "llama: one process trains 10 iterations" run l_single 1 1 1 --num-layers 4 "${LLAMA[@]}"
layout_checks llama l_single l_pp2 "2 1 1 2" --num-layers 4 "${LLAMA[@]}"
layout_checks llama l_single l_pp2_tp2 "4 2 1 2" --num-layers 4 "${LLAMA[@]}" --sequence-parallel
layout_checks llama l_single l_pp2_zb "2 1 1 2" --num-layers 4 "${LLAMA[@]}" \
    --pipeline-schedule zb-h1
layout_checks llama l_single l_pp2_v2 "2 1 1 2" --num-layers 4 "${LLAMA[@]}" \
    --num-virtual-stages-per-pipeline-rank 2

# Bytes between stages per step, from rank 0 (the first stage): m micro-batches, each
# sending its activation (N/tp x C floats, here 64 x 64) and receiving its gradient:
# 2m calls, wire m * 4 N C bytes; the loss and skip flag summed over the stages once (16
# bytes, 2 (P-1)/P of it on the wire).
# Interleaved (v chunks): rank 0 sends v activations and v - 1 gradients per micro-batch
# and receives v - 1 activations (from the last rank) and v gradients: (4v - 2) m calls,
# (2v - 1) m sends of N/tp x C floats on the wire.
pp_bytes_match() { # NAME P MICRO_BATCHES ROWS [V]
    $PY - "$TMP/$1.jsonl" "$2" "$3" "$4" "${5:-1}" <<'PYEOF'
import json, sys
path, P, m, rows, v = sys.argv[1], *map(int, sys.argv[2:])
last = [json.loads(l) for l in open(path) if '"iteration": 10,' in l and 'pp_calls' in l][-1]
C = 64
want = {'send/recv': ((4 * v - 2) * m, (2 * v - 1) * m * 4 * rows * C),
        'all-reduce': (1, 16 * 2 * (P - 1) / P)}
ok = True
for k, (calls, wire) in want.items():
    got_c, got_b = last['pp_calls'][k], last['pp_wire_bytes'][k]
    print(f'{k}: calls {got_c} (theory {calls}), wire bytes {got_b} (theory {wire:.0f})')
    ok &= got_c == calls and abs(got_b - wire) < 0.5
sys.exit(0 if ok else 1)
PYEOF
}
check "pp 2: bytes between stages per step equal the theory" pp_bytes_match g_pp2 2 4 64
check "pp 4: bytes between stages per step equal the theory" pp_bytes_match g_pp4 4 4 64
check "pp 2 x tp 2, sp: N/tp rows cross the stages" pp_bytes_match g_pp2_tp2_sp 2 4 32
check "pp 2 x dp 2: bytes between stages per step equal the theory" pp_bytes_match g_pp2_dp2 2 2 64
check "pp 2, 2 chunks per rank: bytes between stages per step equal the theory" \
    pp_bytes_match g8_pp2_v2 2 4 64 2
check "pp 4, 2 chunks per rank: bytes between stages per step equal the theory" \
    pp_bytes_match g8_pp4_v2 4 4 64 2
pp_bytes_match g_pp2 2 4 64 | sed 's/^/    /'
check "a pp 2 x tp 2 checkpoint has Megatron's mp_rank_XX_YYY directories" test -f \
    "$TMP/g_pp2_tp2_sp/iter_0000010/mp_rank_01_001/model_optim.safetensors"

# ---- resume and refusals ------------------------------------------------------------
# 3D with ZeRO-1: every (tp, pp, dp) rank resumes its own optimizer shard (stages pad
# their flat buffers to different lengths; the manifest lists each).
resume_checks() { # WHAT RUN LAYERS FLAGS...: resume RUN's iteration 5 with its flags
    local what=$1 from=$2 layers=$3; shift 3
    local dir="$TMP/resume_$from"
    rm -rf "$dir"; mkdir -p "$dir"
    cp -r "$TMP/$from/iter_0000005" "$dir/"
    echo 5 > "$dir/latest_checkpointed_iteration.txt"
    check "$what: resumed from iteration 5" \
        timeout -k 5 300 mpirun.openmpi -n 8 "$PLAIT" train "${COMMON[@]}" --num-layers "$layers" \
        --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --sequence-parallel \
        --use-distributed-optimizer --make-vocab-size-divisible-by 256 "$@" --load "$dir" \
        --save "$dir" --metrics-file "$dir.jsonl"
    check "$what: losses after resuming equal the uninterrupted run's, bit for bit" \
        diff <(losses "$TMP/$from.jsonl" | tail -n 5) <(losses "$dir.jsonl")
    check "$what: final parameters after resuming equal, bit for bit" \
        $PY "$CK" same "$dir/iter_0000010" "$TMP/$from/iter_0000010" 0 0
}
use_data syn
resume_checks "pp 2 x tp 2 x dp 2, ZeRO 1, sp" g_3d_z1 4
use_data kjv
resume_checks "interleaved 3D, ZeRO 1" g8_3d_v2 8 --num-layers-per-virtual-pipeline-stage 2
use_data syn
check_fails "layers not divisible by the stages are refused, naming both flags" \
    "--num-layers 4 is not divisible by --pipeline-model-parallel-size 3" \
    timeout -k 5 60 mpirun.openmpi -n 3 "$PLAIT" train "${COMMON[@]}" --num-layers 4 \
    --pipeline-model-parallel-size 3
check_fails "an impossible uneven split is refused, naming the flags" \
    "--num-layers 4 cannot be split over 3 pipeline stages with --decoder-first-pipeline-num-layers 3" \
    timeout -k 5 60 mpirun.openmpi -n 3 "$PLAIT" train "${COMMON[@]}" --num-layers 4 \
    --pipeline-model-parallel-size 3 --decoder-first-pipeline-num-layers 3 \
    --decoder-last-pipeline-num-layers 2
check_fails "the interleaved schedule without model chunks is refused, naming the flags" \
    "interleaved needs model chunks: --num-layers-per-virtual-pipeline-stage" \
    timeout -k 5 60 mpirun.openmpi -n 2 "$PLAIT" train "${COMMON[@]}" --num-layers 4 \
    --pipeline-model-parallel-size 2 --pipeline-schedule interleaved
check_fails "model chunks under 1f1b are refused" "1f1b with 2 model chunks per rank" \
    timeout -k 5 60 mpirun.openmpi -n 2 "$PLAIT" train "${COMMON[@]}" --num-layers 4 \
    --pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 \
    --pipeline-schedule 1f1b
check_fails "layers per chunk that do not divide a stage's are refused" \
    "the 4 layers of a pipeline stage are not divisible by --num-layers-per-virtual-pipeline-stage 3" \
    timeout -k 5 60 "$PLAIT" train "${COMMON[@]}" --num-layers 8 \
    --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 3
check_fails "two interleaving flags at once are refused" "cannot be set together" \
    timeout -k 5 60 "$PLAIT" train "${COMMON[@]}" --num-layers 8 --pipeline-model-parallel-size 2 \
    --num-layers-per-virtual-pipeline-stage 2 --virtual-pipeline-model-parallel-size 2
check_fails "--pipeline_model_parallel_size (A4SFramework) conflicting with the Megatron flag is refused" \
    "--pipeline-model-parallel-size 2 conflicts with --pipeline_model_parallel_size 4" \
    timeout -k 5 60 "$PLAIT" train "${COMMON[@]}" --num-layers 4 --pipeline-model-parallel-size 2 \
    --pipeline_model_parallel_size 4
# Weights move between pipeline layouts (the manifest names each tensor's stage); the
# optimizer state does not, and says so.
gen_text() { # CKPT OUT: greedy text, one process
    timeout -k 5 60 "$PLAIT" generate --load "$TMP/$1" --prompt "In the" --max-new-tokens 12 \
        --temperature 0 >"$TMP/$2.txt" 2>"$TMP/$2.err"
}
check "generate reads an interleaved pp 2 checkpoint (2 chunks) as one model" \
    gen_text g8_pp2_v2 gen_v2
check "generate reads the one-process checkpoint" gen_text g8_single gen_single
check "their greedy texts are the same" cmp "$TMP/gen_single.txt" "$TMP/gen_v2.txt"
sed 's/^/    /' "$TMP/gen_v2.txt"
finetune() { # NAME NP PP: 3 iterations from g_pp2's weights
    timeout -k 5 120 mpirun.openmpi -n "$2" "$PLAIT" train "${BASE[@]}" --num-layers 4 \
        --train-iters 3 --pipeline-model-parallel-size "$3" --make-vocab-size-divisible-by 512 \
        --load "$TMP/g_pp2" --finetune --metrics-file "$TMP/$1.jsonl" >"$TMP/$1.log" 2>&1
}
check "--finetune from a pp 2 checkpoint into one process runs (weights only)" finetune ft1 1 1
check "--finetune from a pp 2 checkpoint into pp 4 runs" finetune ft4 4 4
check "--finetune into pp 4: the losses of one process's fine-tuning from the same weights" \
    bash -c "paste <(grep '\"lm_loss\"' '$TMP/ft1.jsonl' | sed -E 's/.*\"lm_loss\": ([^,]*),.*/\1/') \
                   <(grep '\"lm_loss\"' '$TMP/ft4.jsonl' | sed -E 's/.*\"lm_loss\": ([^,]*),.*/\1/') |
             awk '{ c++; d = \$1 - \$2; if (d < 0) d = -d; if (d > 2e-5 * \$2) bad++ }
                  END { exit !(c == 3 && !bad) }'"
check "the optimizer state loads in another pipeline layout, pp 2 -> 4 (reshard.sh checks losses)" \
    timeout -k 5 120 mpirun.openmpi -n 4 "$PLAIT" train "${COMMON[@]}" --num-layers 4 \
    --pipeline-model-parallel-size 4 --make-vocab-size-divisible-by 512 --load "$TMP/g_pp2"
summary pp
