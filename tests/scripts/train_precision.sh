#!/usr/bin/env bash
# Mixed precision in the trainer (docs/precision.md): --fp16 with Megatron's
# dynamic loss scaler (an initial 2^32 overflows, iterations are skipped on
# every rank while the scale halves, then training proceeds and the loss
# falls), a static --loss-scale, the scaler's state in checkpoints (resume is
# bit-exact), --bf16 training, and the flag and DeepSpeed-config checks.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
kjv_dataset 2000 "$TMP/kjv"
MODEL=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64
       --micro-batch-size 2 --global-batch-size 4 --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine
       --lr-warmup-iters 2 --log-interval 1 --eval-iters 0 --split 98,2,0
       --data-path "$TMP/kjv_text_document" "${GPT2[@]}")

col() { grep '"lm_loss"' "$1" | sed -E "s/.*\"$2\": ([^,}]*).*/\1/"; }

# 1. Dynamic scaling from 2^32 (Megatron's default): the first overflow spends the
#    hysteresis (2), every later one halves the scale, until the scaled gradients
#    fit in fp16; skipped iterations move neither the optimizer nor the schedule.
check "fp16 with the dynamic scaler trains 40 iterations" "$PLAIT" train "${MODEL[@]}" --fp16 \
    --train-iters 40 --metrics-file "$TMP/fp16.jsonl"
check "iteration 1 overflows at 2^32" test "$(field "$TMP/fp16.jsonl" 1 skipped)/$(field "$TMP/fp16.jsonl" 1 loss_scale)" = "true/4294967296"
check "iteration 2 still runs at 2^32 (hysteresis 2), iteration 3 at 2^31" \
    test "$(field "$TMP/fp16.jsonl" 2 loss_scale)/$(field "$TMP/fp16.jsonl" 3 loss_scale)" = "4294967296/2147483648"
scales_ok() { # skipped iterations halve the scale (after the first two); clean ones keep it
    paste <(col "$TMP/fp16.jsonl" skipped) <(col "$TMP/fp16.jsonl" loss_scale) | awk '
        NR == 1 { prev_skip = $1; prev = $2; first_clean = 0; next }
        { if (prev_skip == "true" && NR > 2 && $2 != prev / 2) bad++
          if (prev_skip == "false" && $2 != prev) bad++
          if ($1 == "false" && !first_clean) first_clean = NR
          if ($1 == "true" && first_clean) bad++      # no overflow once it fits (window 1000)
          prev_skip = $1; prev = $2 }
        END { print "first clean iteration " first_clean ", scale then " prev; exit !(first_clean > 3 && !bad) }'
}
check "scale halves on each overflow until it fits, then stays (window 1000)" scales_ok
nskip=$(col "$TMP/fp16.jsonl" skipped | grep -c true)
check "skipped iterations are counted ($nskip)" test "$(field "$TMP/fp16.jsonl" 40 skipped_total)" = "$nskip"
check "the schedule did not move during the skipped iterations" \
    test "$(field "$TMP/fp16.jsonl" $((nskip + 1)) lr)" = "$(field "$TMP/fp16.jsonl" 1 lr)"
loss_falls() { # mean of the last 5 losses below the first clean iteration's by 0.5 nats
    local first; first=$(field "$TMP/fp16.jsonl" $((nskip + 1)) lm_loss)
    col "$TMP/fp16.jsonl" lm_loss | tail -n 5 | awk -v f="$first" '{ s += $1 } END {
        print "first " f ", last five " s / NR; exit !(s / NR < f - 0.5) }'
}
check "after the overflows the loss falls" loss_falls
# Megatron's line: after iteration 1's overflow the scale is the halved one (Megatron
# prints the optimizer's scale after the step), no grad norm, one skipped iteration, no
# nan iteration (the loss was finite), and no advanced iteration to average a loss over.
check "the progress line shows the loss scale and the skipped count as Megatron's" \
    grep -qE "lm loss: 0.000000E\+00 \| loss scale: 2147483648.0 \| number of skipped iterations:   1 \| number of nan iterations:   0 \|" \
    <("$PLAIT" train "${MODEL[@]}" --fp16 --train-iters 3 2>&1)

check "routine overflows do not count toward --max-skipped-steps" "$PLAIT" train "${MODEL[@]}" --fp16 \
    --train-iters 14 --max-skipped-steps 2
check_fails "overflows at --min-loss-scale do count, and stop the run naming the flag" \
    "consecutive iterations had a non-finite loss or gradient \(--max-skipped-steps 2\)" \
    "$PLAIT" train "${MODEL[@]}" --fp16 --initial-loss-scale 4294967296 --min-loss-scale 4294967296 \
    --train-iters 14 --max-skipped-steps 2

# 2. A static --loss-scale never changes and, small enough, never overflows.
check "fp16 with --loss-scale 1024 trains" "$PLAIT" train "${MODEL[@]}" --fp16 --loss-scale 1024 \
    --train-iters 10 --metrics-file "$TMP/static.jsonl"
check "static scale: constant, no skipped iteration" \
    test "$(col "$TMP/static.jsonl" loss_scale | sort -u)/$(col "$TMP/static.jsonl" skipped | sort -u)" = "1024/false"
check "fp32 reference run" "$PLAIT" train "${MODEL[@]}" --train-iters 10 --metrics-file "$TMP/fp32.jsonl"
# fp16 rounds GEMM inputs to 11 significant bits (u = 2^-11 ~ 5e-4): losses stay
# within 1e-2 relative of fp32 over 10 iterations, yet differ (fp16 is applied).
within() { # A B TOL [differ]: every loss of A within TOL (relative) of B's [and not all equal]
    paste <(col "$1" lm_loss) <(col "$2" lm_loss) | awk -v tol="$3" -v differ="${4:-0}" '
        { d = $1 - $2; if (d < 0) d = -d; if (d > tol * $2) bad++; if (d > m) m = d; c++ }
        END { print c " losses, max difference " m; exit !(c > 0 && !bad && (m > 0 || !differ)) }'
}
close_not_equal() { within "$1" "$2" "$3" differ; }
check "fp16 (static scale) losses close to fp32 but not equal" close_not_equal "$TMP/static.jsonl" "$TMP/fp32.jsonl" 1e-2

# 3. bf16 trains, differs from fp32 by bf16's rounding only.
check "bf16 trains 10 iterations" "$PLAIT" train "${MODEL[@]}" --bf16 --train-iters 10 \
    --metrics-file "$TMP/bf16.jsonl"
# bf16 keeps 8 significant bits (u = 2^-8 ~ 4e-3) on GEMM inputs, fp32 elsewhere;
# loss ~ 10 nats after 10 steps moves by well under 2%.
check "bf16 losses close to fp32 but not equal" close_not_equal "$TMP/bf16.jsonl" "$TMP/fp32.jsonl" 2e-2
# plait bench counts the operand elements its GEMMs converted to bf16 per step: both
# operands of every product. 2 layers of 256 rows x 64 (qkv, attention projection, fc1,
# fc2: forward, dx and dW) and the fused LM head over 512 words (logits, dx, dW).
conv=$("$PLAIT" bench --vocab-size 512 --num-layers 2 --hidden-size 64 --num-attention-heads 4 \
    --seq-length 64 --micro-batch-size 4 --train-iters 3 --bf16 2>&1 | tail -n 1 |
    /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["gemm_operands_converted_per_step"])')
want=$(/usr/bin/python3 -c '
N, C, V, L = 256, 64, 512, 2
per = sum(N * i + o * i + N * o + o * i + N * o + N * i for i, o in [(C, 3 * C), (C, C), (C, 4 * C), (4 * C, C)])
print(L * per + (N * C + V * C) + (N * V + V * C) + (N * V + N * C))')
check "bench --bf16 converts both operands of every product once: $conv elements a step (want $want)" \
    test "${conv:-x}" = "$want"
check "the memory plan counts the bf16 GEMM operand buffers" \
    grep -qE "bf16 GEMM operands [0-9.]+ MiB" <("$PLAIT" train "${MODEL[@]}" --bf16 --train-iters 3 2>&1)
# bf16 saves qkv (3C), the attention output (C) and fc1 (F = 4C) in bf16: the plan
# shrinks by L x N x 8C x 2 bytes (2 x 4096 x 512 x 2 = 8 MiB here), nothing else moves.
acts_mib() { # FLAGS...: the planned activation MiB of a short synthetic run
    "$PLAIT" bench --vocab-size 512 --num-layers 2 --hidden-size 64 --num-attention-heads 4 \
        --seq-length 256 --micro-batch-size 16 --train-iters 1 "$@" 2>&1 |
        sed -nE 's/^activations \(micro-batch 16, recompute none\): ([0-9.]+) MiB planned.*/\1/p'
}
a32=$(acts_mib); a16=$(acts_mib --bf16)
check "bf16 plans qkv, attention output and fc1 in bf16: 8 MiB less ($a32 -> $a16 MiB)" \
    awk -v a="$a32" -v b="$a16" 'BEGIN { d = a - b - 8; exit !(a != "" && b != "" && d < 0.1 && d > -0.1) }'

# 4. The scaler's state is checkpointed: with a window of 3 the scale grows and
#    shrinks; resuming at iteration 12 reproduces iterations 13..24 bit for bit.
SC=(--fp16 --initial-loss-scale 1048576 --loss-scale-window 3 --hysteresis 2 --train-iters 24)
check "fp16 run with checkpoints every 12 iterations" "$PLAIT" train "${MODEL[@]}" "${SC[@]}" \
    --save "$TMP/ck" --save-interval 12 --metrics-file "$TMP/ck.jsonl"
check "the manifest holds the scaler state" grep -q '"grad_scaler"' "$TMP/ck/iter_0000012/manifest.json"
mkdir -p "$TMP/rs" && cp -r "$TMP/ck/iter_0000012" "$TMP/rs/" && echo 12 > "$TMP/rs/latest_checkpointed_iteration.txt"
check "resume from iteration 12" "$PLAIT" train "${MODEL[@]}" "${SC[@]}" --load "$TMP/rs" \
    --save "$TMP/rs" --metrics-file "$TMP/rs.jsonl"
same_tail() { diff <(col "$TMP/ck.jsonl" "$1" | tail -n 12) <(col "$TMP/rs.jsonl" "$1"); }
check "resumed losses equal the uninterrupted run's, bit for bit" same_tail lm_loss
check "resumed loss scales equal the uninterrupted run's" same_tail loss_scale
check "the scale changed during the run (the test exercises the state)" \
    test "$(col "$TMP/ck.jsonl" loss_scale | sort -u | wc -l)" -gt 2

# 5. Under ZeRO (stage 2: gradients reduce-scattered into shards, unscaled there)
#    and data parallelism, fp16 with a static scale and bf16 give one process's
#    losses within 5e-5 (the fp32 sums' order differs; see train_dp.sh for bf16).
Z=(--train-iters 10)
for p in "--fp16 --loss-scale 4096" "--bf16"; do
    tag=${p%% *}; tag=${tag#--}
    check "$tag: one process" "$PLAIT" train "${MODEL[@]}" "${Z[@]}" $p --metrics-file "$TMP/z1_$tag.jsonl"
    check "$tag: 2 ranks, ZeRO stage 2" timeout 120 env OMP_NUM_THREADS=1 mpirun.openmpi -n 2 "$PLAIT" train "${MODEL[@]}" "${Z[@]}" \
        $p --zero-stage 2 --metrics-file "$TMP/z2_$tag.jsonl"
    check "$tag: ZeRO-2 on 2 ranks gives one process's losses" within "$TMP/z2_$tag.jsonl" "$TMP/z1_$tag.jsonl" 5e-5
done

# 6. Flags.
check_fails "--bf16 with --fp16 is an error naming both" "--bf16 and --fp16 exclude each other" \
    "$PLAIT" train "${MODEL[@]}" --train-iters 1 --bf16 --fp16
check_fails "--loss-scale without --fp16 is an error" "--loss-scale applies only with --fp16" \
    "$PLAIT" train "${MODEL[@]}" --train-iters 1 --loss-scale 128
check_fails "--hysteresis with --bf16 is an error" "--hysteresis applies only with --fp16" \
    "$PLAIT" train "${MODEL[@]}" --train-iters 1 --bf16 --hysteresis 3
check_fails "--min-loss-scale above --initial-loss-scale is an error" \
    "need 0 < --min-loss-scale \(1e\+06\) <= --initial-loss-scale \(1024\)" \
    "$PLAIT" train "${MODEL[@]}" --train-iters 1 --fp16 --initial-loss-scale 1024 --min-loss-scale 1e6
echo '{"bf16": {"enabled": true}}' > "$TMP/ds_bf16.json"
echo '{"fp16": {"enabled": true, "loss_scale": 0, "loss_scale_window": 500, "hysteresis": 3}}' > "$TMP/ds_fp16.json"
echo '{"fp16": {"enabled": true, "loss_scale": 0, "initial_scale_power": 20}}' > "$TMP/ds_fp16p.json"
echo '{"fp16": {"enabled": true}, "bf16": {"enabled": true}}' > "$TMP/ds_both.json"
check "DeepSpeed bf16 block selects bf16" grep -q "precision: bf16 GEMMs" \
    <("$PLAIT" train "${MODEL[@]}" --train-iters 3 --deepspeed_config "$TMP/ds_bf16.json" 2>&1)
check "DeepSpeed fp16 block: dynamic from DeepSpeed's default 2^16" grep -q "loss scale dynamic from 65536" \
    <("$PLAIT" train "${MODEL[@]}" --train-iters 3 --deepspeed_config "$TMP/ds_fp16.json" 2>&1)
check "DeepSpeed fp16 initial_scale_power 20" grep -q "loss scale dynamic from 1048576" \
    <("$PLAIT" train "${MODEL[@]}" --train-iters 3 --deepspeed_config "$TMP/ds_fp16p.json" 2>&1)
check_fails "DeepSpeed bf16 with --fp16 on the command line names both" \
    "--fp16 \(command line or --config\) conflicts with bf16.enabled in --deepspeed_config" \
    "$PLAIT" train "${MODEL[@]}" --train-iters 1 --fp16 --deepspeed_config "$TMP/ds_bf16.json"
check_fails "DeepSpeed dynamic fp16 with --loss-scale names both" \
    "--loss-scale 128 \(command line or --config\) conflicts with fp16.loss_scale 0 \(dynamic\)" \
    "$PLAIT" train "${MODEL[@]}" --train-iters 1 --loss-scale 128 --deepspeed_config "$TMP/ds_fp16.json"
check_fails "DeepSpeed hysteresis conflicting with --hysteresis names both" \
    "--hysteresis 2 \(command line or --config\) conflicts with fp16.hysteresis 3" \
    "$PLAIT" train "${MODEL[@]}" --train-iters 1 --hysteresis 2 --deepspeed_config "$TMP/ds_fp16.json"
check_fails "DeepSpeed bf16 and fp16 both enabled is an error" "bf16.enabled and fp16.enabled are both true" \
    "$PLAIT" train "${MODEL[@]}" --train-iters 1 --deepspeed_config "$TMP/ds_both.json"
summary train_precision
