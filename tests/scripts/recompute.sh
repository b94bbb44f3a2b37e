#!/usr/bin/env bash
# Activation recomputation (--recompute-activations, --recompute-granularity,
# --recompute-method, --recompute-num-layers): every mode trains to the same
# losses and the same final checkpoint, bit for bit, as keeping every activation
# (one process; and ZeRO-3 at DP 2, where the recomputed forward needs each
# layer gathered again through the fetch hook); the model's forward and backward
# agree bit for bit under tensor parallelism 2 (gpt_recompute: plait train does
# not take --tensor-model-parallel-size > 1 yet); peak memory falls by what the
# plan says; Megatron's flag checks are errors naming the flag and value. Every
# MPI run asserts its world size from the program's own banner.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
PY=/usr/bin/python3
# 4 layers, so that uniform groups of 1 and 2 and a block of 2 differ. Synthetic tokens
# over 4100 words: recomputation's bit-exactness depends neither on the text nor on the
# vocabulary's size, and GPT-2's 50257 words were most of each launch's work.
MODEL=(--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 32
       --micro-batch-size 2 --global-batch-size 8 --train-iters 6 --lr 1e-3 --min-lr 1e-4
       --lr-decay-style cosine --lr-warmup-iters 2 --log-interval 1 --eval-iters 0
       --mock-data --vocab-size 4100 --seed 7)
declare -A MODE=([none]=""
                 [selective]="--recompute-activations"
                 [uniform1]="--recompute-granularity full --recompute-method uniform --recompute-num-layers 1"
                 [uniform2]="--recompute-granularity full --recompute-method uniform --recompute-num-layers 2"
                 [block2]="--recompute-granularity full --recompute-method block --recompute-num-layers 2")
ORDER=(none selective uniform1 uniform2 block2)

run() { # NAME NP MODE [FLAGS...]: trains, checkpoint in $TMP/NAME, metrics in $TMP/NAME.jsonl
    local name=$1 np=$2 mode=$3; shift 3
    local launch=("$PLAIT")
    [ "$np" -gt 0 ] && launch=(env OMP_NUM_THREADS=1 mpirun.openmpi -n "$np" "$PLAIT")
    rm -rf "${TMP:?}/$name" "$TMP/$name.jsonl"
    # shellcheck disable=SC2086
    timeout -k 5 300 "${launch[@]}" train "${MODEL[@]}" ${MODE[$mode]} "$@" --save "$TMP/$name" \
        --metrics-file "$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1
}
world_is() { grep -q "world $2 = tp 1 x dp $2 x pp 1" "$TMP/$1.log"; }
# Bit for bit: the losses as printed with 17 digits, and the checkpoint's tensors
# file (parameters and Adam state) byte for byte.
same_bits() {
    diff <(losses "$TMP/$1.jsonl") <(losses "$TMP/$2.jsonl") >/dev/null &&
        [ "$(losses "$TMP/$1.jsonl" | wc -l)" -eq 6 ] &&
        cmp -s "$TMP/$1/iter_0000006/mp_rank_00/model_optim.safetensors" \
            "$TMP/$2/iter_0000006/mp_rank_00/model_optim.safetensors"
}
plan_says() { grep -q "recompute $2): " "$TMP/$1.log"; }

# ---- one process --------------------------------------------------------------
for mode in "${ORDER[@]}"; do
    check "one process, recompute $mode: trains 6 iterations, world 1" \
        eval "run p_$mode 0 $mode && world_is p_$mode 1"
done
check "the memory plan names the mode (selective)" plan_says p_selective selective
check "the memory plan names the mode (full, uniform, 2 layers)" \
    plan_says p_uniform2 "full, uniform, 2 layers"
for mode in "${ORDER[@]:1}"; do
    check "one process: $mode gives the losses and final checkpoint of none, bit for bit" \
        same_bits p_none p_$mode
done

# With bf16 GEMMs (activations saved in bf16, forward's fp32 outputs in the
# backward scratch) and with the LM head's logits kept (whose memory the layer
# backward scratch shares), and with Megatron's --apply-residual-connection-post-layernorm
# (each residual its norm's output, rebuilt in the rerun), the rerun forward must still
# reproduce every value.
for extra in "--bf16" "--lm-head-logits keep" "--bf16 --lm-head-logits keep" \
    "--apply-residual-connection-post-layernorm"; do
    tag=${extra//[^a-z0-9]/}
    # shellcheck disable=SC2086
    check "one process $extra: none and full uniform 1 run" \
        eval "run x_${tag}_none 0 none $extra && run x_${tag}_uniform1 0 uniform1 $extra"
    check "one process $extra: full uniform 1 gives the losses and checkpoint of none, bit for bit" \
        same_bits x_${tag}_none x_${tag}_uniform1
    # shellcheck disable=SC2086
    check "one process $extra: selective runs" run x_${tag}_selective 0 selective $extra
    check "one process $extra: selective gives the losses and checkpoint of none, bit for bit" \
        same_bits x_${tag}_none x_${tag}_selective
done

# ---- ZeRO-3, DP 2 ------------------------------------------------------------------
for mode in none selective uniform1 block2; do
    check "ZeRO-3 dp 2, recompute $mode: runs, world 2" \
        eval "run z3_$mode 2 $mode --zero-stage 3 && world_is z3_$mode 2"
done
for mode in selective uniform1 block2; do
    check "ZeRO-3 dp 2: $mode gives the losses and final checkpoint of none, bit for bit" \
        same_bits z3_none z3_$mode
done
check "DP 2 (stage 0, bucketed all-reduce during backward), full uniform 1: runs, world 2" \
    eval "run d2_uniform1 2 uniform1 && world_is d2_uniform1 2"
check "DP 2 (stage 0) without recompute: runs, world 2" \
    eval "run d2_none 2 none && world_is d2_none 2"
check "DP 2 (stage 0): full uniform 1 gives the losses and checkpoint of none, bit for bit" \
    same_bits d2_none d2_uniform1

# ---- tensor parallelism 2 (the model directly) ------------------------------------
tp_run() { # NP
    local launch=("$ROOT/build/testtools/gpt_recompute")
    [ "$1" -gt 1 ] && launch=(env OMP_NUM_THREADS=1 mpirun.openmpi -n "$1" "${launch[@]}")
    timeout -k 5 300 "${launch[@]}" >"$TMP/tp$1.log" 2>&1
}
check "gpt_recompute, TP 1: every mode's losses and gradients bit-identical" tp_run 1
check "gpt_recompute under mpirun -n 2: every mode bit-identical at TP 2" tp_run 2
check "gpt_recompute under mpirun -n 2 asserts world 2 = tp 2" grep -q "^world 2 = tp 2$" "$TMP/tp2.log"
check "gpt_recompute TP 2 checked all 7 modes" grep -q "gpt_recompute: 7 passed, 0 failed" "$TMP/tp2.log"

# ---- memory --------------------------------------------------------------------------
# A model whose activations dominate: 8 layers of hidden 256, 1,024 tokens per
# micro-batch, vocabulary 128; ~100 MiB of model state, ~90 MiB of activations.
MEM=(--num-layers 8 --hidden-size 256 --num-attention-heads 4 --seq-length 256 --mock-data
     --vocab-size 128 --micro-batch-size 4 --train-iters 2 --lr 1e-3 --log-interval 1
     --eval-iters 0)
mem_run() { # MODE
    rm -f "$TMP/mem_$1.jsonl"
    # shellcheck disable=SC2086
    timeout -k 5 300 "$PLAIT" train "${MEM[@]}" ${MODE[$1]} --metrics-file "$TMP/mem_$1.jsonl" \
        >"$TMP/mem_$1.log" 2>&1 && world_is "mem_$1" 1
}
for mode in none selective uniform1 block2; do
    check "memory run, recompute $mode" mem_run $mode
done
# Peak RSS (VmHWM) without recompute minus with it equals the planned difference in
# activation bytes within 3 MiB + 5% of it: the runs share the code, model state and
# start-up, so only planned buffers differ; the slack covers allocator rounding.
# A mode that saved nothing would fail: every planned saving here is >= 4 MiB, more
# than the slack (selective saves 7 x 1 MiB of attention output, full uniform 1 ~63 MiB).
memory_falls() {
    $PY - "$TMP" <<'PYEOF'
import json, sys
tmp, MiB = sys.argv[1], 1 << 20
def peak(mode):
    r = [json.loads(l) for l in open(f'{tmp}/mem_{mode}.jsonl') if 'vmhwm_kib_max' in l][-1]
    return r['vmhwm_kib_max'] * 1024, r['act_bytes'], r['act_bytes_kept']
p0, a0, k0 = peak('none')
ok = a0 == k0
for mode in ('selective', 'uniform1', 'block2'):
    p, a, k = peak(mode)
    want, got = a0 - a, p0 - p
    good = k == k0 and want >= 4 * MiB and abs(got - want) <= 3 * MiB + 0.05 * want
    print(f'{mode}: peak {p/MiB:.1f} MiB vs {p0/MiB:.1f} MiB without recompute; fell '
          f'{got/MiB:.1f} MiB, plan says {want/MiB:.1f} MiB', 'ok' if good else 'BAD')
    ok &= good
sys.exit(0 if ok else 1)
PYEOF
}
check "peak memory falls by what the activation plan says" memory_falls
memory_falls | sed 's/^/    /'

# ---- flag checks ------------------------------------------------------------------------
bad() { timeout 60 "$PLAIT" train "${MODEL[@]}" "$@"; }
check_fails "full without a method is refused (Megatron's message)" \
    '--recompute-granularity full needs --recompute-method: using recompute_granularity: full so recompute_method must be "block" or "uniform"' \
    bad --recompute-granularity full --recompute-num-layers 1
check_fails "full without --recompute-num-layers is refused" \
    "--recompute-num-layers \(not given\): .*must be between 1 and num_layers_per_pipeline_rank: 4" \
    bad --recompute-granularity full --recompute-method uniform
check_fails "--recompute-num-layers 5 of 4 layers is refused, naming the value" \
    "--recompute-num-layers \(got 5\): .*must be between 1 and num_layers_per_pipeline_rank: 4" \
    bad --recompute-granularity full --recompute-method block --recompute-num-layers 5
check_fails "--recompute-num-layers 0 is refused" "--recompute-num-layers \(got 0\)" \
    bad --recompute-granularity full --recompute-method uniform --recompute-num-layers 0
check_fails "selective with a method is refused (Megatron's message)" \
    "--recompute-method uniform: recompute method is not yet supported for selective recomputing granularity" \
    bad --recompute-granularity selective --recompute-method uniform
check_fails "selective with --recompute-num-layers is refused" \
    "--recompute-num-layers 2: when using recompute_granularity: selective recompute_num_layers must be None" \
    bad --recompute-activations --recompute-num-layers 2
check_fails "--recompute-activations with --recompute-granularity full is refused, naming both" \
    "--recompute-activations means --recompute-granularity selective, which conflicts with --recompute-granularity full" \
    bad --recompute-activations --recompute-granularity full --recompute-method uniform \
    --recompute-num-layers 1
check_fails "a method without a granularity is refused rather than ignored" \
    "--recompute-method block needs --recompute-granularity full" bad --recompute-method block
check_fails "an unknown granularity is refused with the choices" \
    "--recompute-granularity must be one of \{full\|selective\}, got 'partial'" \
    bad --recompute-granularity partial
summary recompute
