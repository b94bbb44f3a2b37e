#!/usr/bin/env bash
# Checkpoints into any layout (src/ckpt/source.h): a run saved at one TP x PP x DP x ZeRO
# layout resumes at another and continues as the uninterrupted run would: the 5 losses
# after resuming equal one process's within 2e-5 relative, and the final parameters within
# ckpt_tensors.py's bound (train_lib.sh's argument: only the order of the TP/DP reductions
# changes); in the same layout the resume is bit-exact. GPT (TP 2 x DP 2 ZeRO-1 -> TP 1 x
# PP 2 x DP 2 ZeRO-3, TP 4, one process; TP 2 x PP 2 x DP 2 ZeRO-1 -> TP 1 x PP 4 x DP 2
# ZeRO-3), Llama with 2 key/value groups over TP 4 (shared
# k/v) -> TP 1 x DP 2 ZeRO-2, BERT TP 2 x PP 2 -> DP 2 ZeRO-1. Another vocabulary padding:
# rows zero-filled or dropped, checked bit for bit by reshard_check.py. Megatron's loading
# flags: --ckpt-step, --load DIR/iter_N, --finetune, --no-load-optim and the scheduler's
# --override-opt_param-scheduler / --use-checkpoint-opt_param-scheduler.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
RC="$ROOT/tests/scripts/reshard_check.py"
export OMP_NUM_THREADS=1 # up to 8 ranks share 2 cores

# --lr-decay-iters fixes the schedule, so a run cut short at 5 is the first half of 10.
GPT=(--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 32
     --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 --lr 1e-3
     --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 2 --lr-decay-iters 10
     --log-interval 1 --mock-data --vocab-size 100)
LLAMA=(--model llama --group-query-attention --num-query-groups 2 "${GPT[@]}")
BERT=(--model bert --mock-data --vocab-size 1000 --num-layers 4 --hidden-size 64
      --num-attention-heads 8 --seq-length 32 --micro-batch-size 2 --global-batch-size 8
      --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 2 --lr-decay-iters 10
      --log-interval 1 --seed 7)

# go NAME NP TP PP ZERO DIVISIBLE FLAGS...: trains into $TMP/NAME (metrics NAME.jsonl)
go() {
    local name=$1 np=$2 tp=$3 pp=$4 z=$5 div=$6; shift 6
    timeout -k 5 120 mpirun.openmpi -n "$np" "$PLAIT" train "$@" --tensor-model-parallel-size "$tp" \
        --pipeline-model-parallel-size "$pp" --zero-stage "$z" --make-vocab-size-divisible-by "$div" \
        --save "$TMP/$name" --save-interval 5 --metrics-file "$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1 &&
        layout_is "$name" "$np" "$tp" $((np / (tp * pp))) "$pp"
}
# from SRC NAME: NAME's directory holds SRC's iteration 5 only
from() {
    rm -rf "$TMP/$2" && mkdir -p "$TMP/$2" && cp -r "$TMP/$1/iter_0000005" "$TMP/$2/" &&
        echo 5 >"$TMP/$2/latest_checkpointed_iteration.txt"
}
# resumed REF NAME: NAME's 5 losses equal REF's last 5 within 2e-5 relative, and its
# iteration-10 parameters REF's within ckpt_tensors.py's 1e-5 + 1e-4 |p|
resumed() {
    paste <(losses "$TMP/$1.jsonl" | tail -n 5) <(losses "$TMP/$2.jsonl") | awk '
        { c++; d = $1 - $2; if (d < 0) d = -d; if (d > 2e-5 * $2) bad++ }
        END { exit !(c == 5 && !bad) }' && same_params "$1" "$2"
}
# resume FAMILY REF SRC NAME NP TP PP ZERO DIV FLAGS...
resume() {
    local fam=$1 ref=$2 src=$3 name=$4 np=$5 tp=$6 pp=$7 z=$8 div=$9; shift 9
    from "$src" "$name"
    check "$fam: $src resumed as TP $tp x PP $pp x DP $((np / (tp * pp))) ZeRO $z" \
        go "$name" "$np" "$tp" "$pp" "$z" "$div" "$@" --load "$TMP/$name" --train-iters 10
    check "$fam: ... the log names both layouts" grep -q "into TP $tp x PP $pp" "$TMP/$name.log"
    check "$fam: ... losses 6-10 and final parameters equal one process's" resumed "$ref" "$name"
}

# ---- GPT
check "gpt: one process, 10 iterations" go g_ref 1 1 1 0 128 "${GPT[@]}" --train-iters 10
check "gpt: TP 2 x DP 2 ZeRO-1, 10 iterations (saved at 5)" go g_src 4 2 1 1 64 "${GPT[@]}" --train-iters 10
resume gpt g_ref g_src g_pp2z3 4 1 2 3 128 "${GPT[@]}"
resume gpt g_ref g_src g_tp4 4 4 1 0 32 "${GPT[@]}"
resume gpt g_ref g_src g_one 1 1 1 0 128 "${GPT[@]}"
# the issue's proof: 3D (TP 2 x PP 2 x DP 2 ZeRO-1, 8 ranks) resumed as TP 1 x PP 4 x DP 2 ZeRO-3
check "gpt: TP 2 x PP 2 x DP 2 ZeRO-1, 5 iterations" \
    go g_3d 8 2 2 1 64 "${GPT[@]}" --micro-batch-size 1 --train-iters 10 --exit-interval 5
resume gpt g_ref g_3d g_pp4z3 8 1 4 3 128 "${GPT[@]}" --micro-batch-size 1
from g_src g_same
check "gpt: resumed in the saving layout" go g_same 4 2 1 1 64 "${GPT[@]}" --load "$TMP/g_same" --train-iters 10
bit_exact() { diff <(losses "$TMP/g_src.jsonl" | tail -n 5) <(losses "$TMP/g_same.jsonl") &&
    for f in mp_rank_00/model_optim.safetensors mp_rank_01/optim_dp_001.safetensors; do
        cmp "$TMP/g_src/iter_0000010/$f" "$TMP/g_same/iter_0000010/$f" || return 1; done; }
check "gpt: ... bit-exact: the same losses and the same files as the uninterrupted run" bit_exact

# ---- the vocabulary's padding: 100 tokens padded to 128 (saved) and 256 (TP 4 x 64)
from g_src g_pad
check "gpt: loaded into a padding of 256 rows, saved untrained" \
    go g_pad 4 4 1 0 64 "${GPT[@]}" --load "$TMP/g_pad" --train-iters 5
check "gpt: ... a warning names both paddings and the zero-fill" \
    grep -q "padded to 128 rows, this run's to 256 .* zero-filled" "$TMP/g_pad.log"
check "gpt: ... shared rows bit-identical, the new rows zero (weights and moments)" \
    $PY "$RC" padded "$TMP/g_src/iter_0000005" "$TMP/g_pad/iter_0000005"
from g_pad g_unpad
check "gpt: and back into 128 rows (the extra rows dropped)" \
    go g_unpad 1 1 1 0 128 "${GPT[@]}" --load "$TMP/g_unpad" --train-iters 5
check "gpt: ... a warning says the rows are dropped" grep -q "dropped" "$TMP/g_unpad.log"
check "gpt: ... parameters bit-identical to the original checkpoint's" \
    $PY "$CK" same "$TMP/g_src/iter_0000005" "$TMP/g_unpad/iter_0000005" 0 0
check "gpt: ... Adam moments bit-identical through both paddings" \
    $PY "$RC" moments "$TMP/g_pad/iter_0000005" "$TMP/g_unpad/iter_0000005"

# ---- Llama: grouped-query attention with 2 groups over TP 4 (each k/v shared by 2 ranks)
check "llama: one process, 10 iterations" go l_ref 1 1 1 0 128 "${LLAMA[@]}" --train-iters 10
check "llama: TP 4 (groups < TP), 5 iterations" go l_src 4 4 1 0 32 "${LLAMA[@]}" --train-iters 10 --exit-interval 5
resume llama l_ref l_src l_dp2z2 2 1 1 2 128 "${LLAMA[@]}"

# ---- BERT
check "bert: one process, 10 iterations" go b_ref 1 1 1 0 128 "${BERT[@]}" --train-iters 10
check "bert: TP 2 x PP 2, 5 iterations" go b_src 4 2 2 0 64 "${BERT[@]}" --train-iters 10 --exit-interval 5
resume bert b_ref b_src b_dp2z1 2 1 1 1 128 "${BERT[@]}"

# ---- Megatron's loading flags
ONE=(--tensor-model-parallel-size 1 --make-vocab-size-divisible-by 128)
# one NAME FLAGS...: one process, metrics in $TMP/NAME.jsonl, output in $TMP/NAME.log
one() { local n=$1; shift; timeout -k 5 120 "$PLAIT" train "$@" --metrics-file "$TMP/$n.jsonl" >"$TMP/$n.log" 2>&1; }
# bitwise A B: runs A and B logged the same 5 losses, bit for bit
bitwise() { local a b; a=$(losses "$TMP/$1.jsonl"); b=$(losses "$TMP/$2.jsonl")
    test "$(printf '%s\n' "$a" | wc -l)" = 5 -a "$a" = "$b"; }
check "--ckpt-step 5 loads iteration 5 of a directory whose latest is 10" \
    one step5 "${GPT[@]}" "${ONE[@]}" --load "$TMP/g_src" --ckpt-step 5 --train-iters 10
step5_same() { paste <(losses "$TMP/g_ref.jsonl" | tail -n 5) <(losses "$TMP/step5.jsonl") | awk '
    { c++; d = $1 - $2; if (d < 0) d = -d; if (d > 2e-5 * $2) bad++ } END { exit !(c == 5 && !bad) }'; }
check "--ckpt-step 5: losses 6-10 equal the uninterrupted run's" step5_same
check "--load DIR/iter_0000005 loads that iteration" \
    one iterdir "${GPT[@]}" "${ONE[@]}" --load "$TMP/g_src/iter_0000005/" --train-iters 10
check "... the same losses as --ckpt-step 5" bitwise step5 iterdir
check_fails "--ckpt-step and an iter_ directory that disagree are refused" \
    "names iteration 5 but --ckpt-step is 10" \
    timeout -k 5 120 "$PLAIT" train "${GPT[@]}" "${ONE[@]}" --load "$TMP/g_src/iter_0000005" --ckpt-step 10 --train-iters 10
LONGER=("${GPT[@]}" "${ONE[@]}" --load "$TMP/g_one" --lr-decay-iters 20 --train-iters 12)
check_fails "a longer schedule is refused naming the field and both flags" \
    "the decay length .* is 160 in this run and 80 in the checkpoint.*--override-opt_param-scheduler" \
    timeout -k 5 120 "$PLAIT" train "${LONGER[@]}"
check "--override-opt_param-scheduler: this run's longer schedule" \
    one over "${LONGER[@]}" --override-opt_param-scheduler
check "... a log line says what changed and what the schedule does next" grep -qE \
    "LR schedule: the decay length .* 80 -> 160 \(--override-opt_param-scheduler.*from sample 80: lr .* decaying \(cosine\) to --min-lr 0.0001 at sample 160 \(iteration 20\)" \
    "$TMP/over.log"
# Megatron's cosine at sample 80 of warmup 16, decay 160: min + (max - min) (1 + cos(pi r)) / 2
cosine_lr() { $PY -c "import math, sys; r = (80 - 16) / (160 - 16)
want = 1e-4 + 9e-4 * (1 + math.cos(math.pi * r)) / 2; sys.exit(abs(float(sys.argv[1]) - want) > 1e-9 * want)" \
    "$(field "$TMP/over.jsonl" 11 lr)"; }
check "... iteration 11's lr is Megatron's cosine on the new decay length" cosine_lr
check "--use-checkpoint-opt_param-scheduler: the checkpoint's schedule" \
    one keep "${LONGER[@]}" --use-checkpoint-opt_param-scheduler
check "... the log line says the decay ended at sample 80" \
    grep -qE "160 -> 80 \(--use-checkpoint-opt_param-scheduler.*the decay ended at sample 80" "$TMP/keep.log"
check "... iteration 11 runs at --min-lr" test "$(field "$TMP/keep.jsonl" 11 lr)" = 0.0001
check_fails "both scheduler flags are refused" "are both set" \
    timeout -k 5 120 "$PLAIT" train "${LONGER[@]}" --use-checkpoint-opt_param-scheduler --override-opt_param-scheduler
check "--override-lr-scheduler (Megatron's older name) is the same flag" \
    one over2 "${LONGER[@]}" --override-lr-scheduler
check "... the same lr" test -n "$(field "$TMP/over.jsonl" 11 lr)" -a \
    "$(field "$TMP/over.jsonl" 11 lr)" = "$(field "$TMP/over2.jsonl" 11 lr)"
check "--finetune: weights of iteration 5 (TP 2 x DP 2 ZeRO-1), from iteration 0" \
    one ft "${GPT[@]}" "${ONE[@]}" --load "$TMP/g_src" --ckpt-step 5 --finetune \
    --train-iters 10
check "... 10 iterations from iteration 1, the schedule from its start (lr 0 in warmup)" \
    test "$(losses "$TMP/ft.jsonl" | wc -l)" = 10 -a "$(field "$TMP/ft.jsonl" 1 lr)" = 0
check "... the log says so" grep -q -- "--finetune: weights of iteration 5 loaded; starting at iteration 0" "$TMP/ft.log"
check "--no-load-optim: iteration and samples kept" \
    one nlo "${GPT[@]}" "${ONE[@]}" --load "$TMP/g_src" --ckpt-step 5 --no-load-optim \
    --train-iters 10
check "... iterations 6-10 at samples 48.., the scheduler restarted (lr 0: warmup)" \
    test "$(losses "$TMP/nlo.jsonl" | wc -l)" = 5 -a "$(field "$TMP/nlo.jsonl" 6 consumed_samples)" = 48 \
    -a "$(field "$TMP/nlo.jsonl" 6 lr)" = 0
check "--no-load-rng: accepted; plait's draws follow --seed and the position, so the same run" \
    one nlr "${GPT[@]}" "${ONE[@]}" --load "$TMP/g_src" --ckpt-step 5 --no-load-rng \
    --train-iters 10
check "... bit-identical losses to --ckpt-step 5 alone" bitwise step5 nlr
check_fails "a checkpoint of another family is refused naming the field" \
    "architecture differs from this run's in --model" \
    timeout -k 5 120 "$PLAIT" train "${LLAMA[@]}" "${ONE[@]}" --ffn-hidden-size 256 --load "$TMP/g_src" --train-iters 10

# ---- plait ckpt: inspect, reshard (offline), convert
check "ckpt inspect --json describes the TP 2 x DP 2 ZeRO-1 checkpoint" \
    timeout -k 5 120 bash -c "'$PLAIT' ckpt inspect '$TMP/g_src/iter_0000005' --json > '$TMP/inspect.json'"
check "... layout, tensors and every file's size agree with the directory" \
    $PY "$RC" inspect "$TMP/inspect.json" "$TMP/g_src/iter_0000005"
check "ckpt inspect (text) names the layout and verifies every checksum" \
    timeout -k 5 120 bash -c "'$PLAIT' ckpt inspect '$TMP/g_src' --ckpt-step 5 | grep -q 'layout: TP 2 x PP 1 x DP 2, ZeRO stage 1' &&
             '$PLAIT' ckpt inspect '$TMP/g_src' --ckpt-step 5 | grep -q 'every checksum verified'"
cp -r "$TMP/g_src/iter_0000005" "$TMP/bad_iter" && mkdir -p "$TMP/bad" && mv "$TMP/bad_iter" "$TMP/bad/iter_0000005"
printf 'x' >> "$TMP/bad/iter_0000005/mp_rank_01/optim_dp_001.safetensors"
check_fails "ckpt inspect finds a corrupted shard" "optim_dp_001.safetensors: xxh64 .*corrupt file" \
    timeout -k 5 60 "$PLAIT" ckpt inspect "$TMP/bad/iter_0000005"
rm -rf "$TMP/rs"
check "ckpt reshard: TP 2 x DP 2 ZeRO-1 -> TP 1 x PP 2, offline (no MPI)" \
    timeout -k 5 60 "$PLAIT" ckpt reshard "$TMP/g_src" --ckpt-step 5 --out "$TMP/rs" --tensor-model-parallel-size 1 \
    --pipeline-model-parallel-size 2
check "... published as a save: iter_0000005, latest 5, TP 1 x PP 2 stage-0 files" \
    test "$(cat "$TMP/rs/latest_checkpointed_iteration.txt")" = 5 -a \
    -f "$TMP/rs/iter_0000005/mp_rank_00_001/model_optim.safetensors"
check "... its parameters are the original's, bit for bit" \
    $PY "$CK" same "$TMP/g_src/iter_0000005" "$TMP/rs/iter_0000005" 0 0
check "gpt: the offline reshard resumed at TP 1 x PP 2" \
    go rs 2 1 2 0 128 "${GPT[@]}" --load "$TMP/rs" --train-iters 10
check "... losses 6-10 and final parameters equal one process's" resumed g_ref rs
check_fails "ckpt reshard to an impossible TP size names the flag" "not divisible by --tensor-model-parallel-size 3" \
    timeout -k 5 60 "$PLAIT" ckpt reshard "$TMP/g_src" --out "$TMP/rs3" --tensor-model-parallel-size 3
check "ckpt convert --weights-only --bf16: Megatron's release directory" \
    timeout -k 5 60 "$PLAIT" ckpt convert "$TMP/g_src/iter_0000005" --out "$TMP/rel" --weights-only --bf16
check "... release/ and \"release\" in the latest file" \
    test "$(cat "$TMP/rel/latest_checkpointed_iteration.txt")" = release -a -d "$TMP/rel/release"
check "... each weight is the original rounded to bf16 (nearest even)" \
    $PY "$RC" bf16 "$TMP/g_src/iter_0000005" "$TMP/rel/release"
check "ckpt convert --fp32: the weights bit for bit" \
    timeout -k 5 120 bash -c "'$PLAIT' ckpt convert '$TMP/g_src/iter_0000005' --out '$TMP/rel32' --weights-only --fp32 >/dev/null &&
             $PY '$CK' same '$TMP/g_src/iter_0000005' '$TMP/rel32/release' 0 0"
check_fails "ckpt convert without --weights-only says why" "add --weights-only" \
    timeout -k 5 60 "$PLAIT" ckpt convert "$TMP/g_src" --out "$TMP/rel2"
check "plait train loads the bf16 release as --finetune does (iteration 0)" \
    one rel "${GPT[@]}" "${ONE[@]}" --load "$TMP/rel" --train-iters 2
check "... from iteration 1, and says so" \
    bash -c "grep -q 'weights-only release checkpoint, starting at iteration 0' '$TMP/rel.log' &&
             test \"\$(grep -c '\"lm_loss\"' '$TMP/rel.jsonl')\" = 2"
check_fails "a weights-only checkpoint without --no-load-optim names the missing state" \
    "no optimizer state .* loads with --no-load-optim or --finetune" \
    timeout -k 5 120 bash -c "'$PLAIT' ckpt reshard '$TMP/g_src' --ckpt-step 5 --out '$TMP/wo' --tensor-model-parallel-size 2 --weights-only >/dev/null &&
             '$PLAIT' train $(printf '%q ' "${GPT[@]}" "${ONE[@]}") --load '$TMP/wo' --train-iters 10"
summary reshard
