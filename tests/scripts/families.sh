#!/usr/bin/env bash
# The model families on the shared blocks (src/nn/block.c, src/model/spec.c):
#  - KV-cached generation through pl_block_decode equals the training forward,
#    position by position, for GPT and Llama, also with
#    --apply-residual-connection-post-layernorm (tests/tools/generate_check.c);
#  - dropout is layout-independent: with Megatron's 0.1 dropouts, 1 process, DP 2,
#    DP 2 + ZeRO-2, 2 micro-batches, full and selective recompute give the same losses
#    (the masks are keyed by the global sample, not by the rank or micro-batch that
#    runs it) and dropout does change them;
#  - plait train --model llama on the King James Bible: trains, the loss falls, saves,
#    resumes bit for bit, generates from the checkpoint; a GPT run refuses the Llama
#    checkpoint naming the flag that differs.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
TOOLS=${PLAIT_TESTTOOLS:-$ROOT/build/testtools}
"$TOOLS/generate_check" | tee "$TMP/gen.out"
read -r p f < <(sed -nE 's/^generate_check: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$TMP/gen.out")
_pass=$((_pass + ${p:-0})); _fail=$((_fail + ${f:-1}))

kjv_dataset 1500 "$TMP/kjv"
DATA=(--data-path "$TMP/kjv_text_document" --split 98,2,0 "${GPT2[@]}" --seed 11)
SMALL=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32
       --global-batch-size 8 --train-iters 6 --lr 1e-3 --log-interval 1
       --eval-iters 0)

run() { # NAME LAUNCH... -- FLAGS...: metrics in $TMP/NAME.jsonl
    local name=$1; shift
    timeout -k 5 300 "$@" --metrics-file "$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1
}
world_is() { grep -q "world $2 = tp 1 x dp $2 x pp 1" "$TMP/$1.log"; }
# Losses equal within fp32 rounding of differently ordered gradient sums (train_dp.sh).
same_losses() { # A B N
    paste <(losses "$TMP/$1.jsonl") <(losses "$TMP/$2.jsonl") | awk -v n="$3" -v tol=2e-5 '
        { c++; d = $1 - $2; if (d < 0) d = -d; if (d > tol * $2) bad++ }
        END { exit !(c == n && !bad) }'
}
differ() { ! cmp -s <(losses "$TMP/$1.jsonl") <(losses "$TMP/$2.jsonl"); }
# The 2-rank runs are single-threaded (2 ranks of 2 OpenMP threads on 2 cores spin
# against each other; train_dp.sh); one process keeps the default threads.
MPI2=(env OMP_NUM_THREADS=1 mpirun.openmpi -n 2)

for fam in gpt llama; do
    G=(); [ "$fam" = llama ] && G=(--group-query-attention --num-query-groups 2)
    F=(--model "$fam" "${G[@]}" --hidden-dropout 0.1 --attention-dropout 0.1 "${SMALL[@]}" "${DATA[@]}")
    M=(--micro-batch-size 2)
    check "$fam dropout: one process trains" run ${fam}_d1 "$PLAIT" train "${F[@]}" "${M[@]}"
    check "$fam dropout: mpirun -n 2 runs" run ${fam}_d2 "${MPI2[@]}" "$PLAIT" train "${F[@]}" "${M[@]}"
    check "$fam dropout: mpirun -n 2 asserts world 2" world_is ${fam}_d2 2
    check "$fam dropout: DP 2 losses equal one process's" same_losses ${fam}_d1 ${fam}_d2 6
    check "$fam dropout: DP 2 + ZeRO-2 runs" run ${fam}_z2 "${MPI2[@]}" "$PLAIT" train "${F[@]}" "${M[@]}" --zero-stage 2
    check "$fam dropout: DP 2 + ZeRO-2 losses equal one process's" same_losses ${fam}_d1 ${fam}_z2 6
    check "$fam dropout: micro-batch 1 (8 micro-batches) runs" run ${fam}_mb "$PLAIT" train "${F[@]}" --micro-batch-size 1
    check "$fam dropout: micro-batch 1 gives micro-batch 2.s losses" same_losses ${fam}_d1 ${fam}_mb 6
    check "$fam dropout: full recompute runs" run ${fam}_full "$PLAIT" train "${F[@]}" "${M[@]}" \
        --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
    check "$fam dropout: full recompute redraws the same masks (same losses)" same_losses ${fam}_d1 ${fam}_full 6
    check "$fam dropout: selective recompute runs" run ${fam}_sel "$PLAIT" train "${F[@]}" "${M[@]}" --recompute-activations
    check "$fam dropout: selective recompute gives the same losses" same_losses ${fam}_d1 ${fam}_sel 6
    check "$fam without dropout runs" run ${fam}_d0 "$PLAIT" train --model "$fam" "${G[@]}" --hidden-dropout 0 \
        --attention-dropout 0 "${SMALL[@]}" "${M[@]}" "${DATA[@]}"
    check "$fam dropout changes the losses" differ ${fam}_d1 ${fam}_d0
done

# A small Llama on the KJV: RMSNorm, rope, SwiGLU, no biases, untied output layer.
LLAMA=(--model llama --group-query-attention --num-query-groups 2 --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64
       --micro-batch-size 4 --global-batch-size 8 --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine
       --lr-warmup-iters 5 --log-interval 10 --eval-iters 0 "${DATA[@]}")
check "llama: 60 iterations train and save" run llama_full "$PLAIT" train "${LLAMA[@]}" \
    --train-iters 60 --save "$TMP/llama_full"
check "llama: banner names the layer kinds" grep -q "layers: RMSNorm, SwiGLU, rope, no biases, untied output layer" "$TMP/llama_full.log"
loss_falls() { losses "$TMP/$1.jsonl" | awk 'NR == 1 { a = $1 } { b = $1 } END { exit !(b < a - 2) }'; }
check "llama: the loss falls by more than 2 nats" loss_falls llama_full
check "llama: 30 iterations, save" run llama_a "$PLAIT" train "${LLAMA[@]}" --train-iters 60 \
    --exit-interval 30 --save "$TMP/llama_half"
check "llama: resume to 60" run llama_b "$PLAIT" train "${LLAMA[@]}" --train-iters 60 \
    --load "$TMP/llama_half" --save "$TMP/llama_half"
check "llama: resumed run's checkpoint equals the uninterrupted one bit for bit" \
    cmp "$TMP/llama_full/iter_0000060/mp_rank_00/model_optim.safetensors" \
        "$TMP/llama_half/iter_0000060/mp_rank_00/model_optim.safetensors"
check "llama: generate from the checkpoint" "$PLAIT" generate --load "$TMP/llama_full" \
    --prompt "And God said" --max-new-tokens 8 --temperature 0
check_fails "a GPT run refuses the Llama checkpoint, naming the flag" "architecture differs.*--model" \
    "$PLAIT" train --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --ffn-hidden-size 128 \
    --micro-batch-size 4 --global-batch-size 8 --lr 3e-3 --train-iters 61 --eval-iters 0 \
    "${DATA[@]}" --load "$TMP/llama_full"
summary families
