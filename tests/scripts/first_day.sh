#!/usr/bin/env bash
# A Megatron or DeepSpeed user's first day (issue 16): the seeds' own launch lines,
# scaled down to a tiny model with their flags unchanged, run under mpirun and mean
# what Megatron means. DeepSpeedExamples' Megatron-LM-v1.1.5-3D_parallelism
# examples/ds_pretrain_gpt2.sh (with its ds_zero_stage_2_config.json, batch sizes
# scaled) and examples/pretrain_gpt2_distributed.sh, A4SFramework's
# `--strategy ThreeD`, and a preprocess line with argparse's `--vocab` abbreviation.
# Budget: under 60 s on 2 cores (every rank runs one thread).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1
V="$PLAIT_DATA/gpt2/encoder.json"
M="$PLAIT_DATA/gpt2/vocab.bpe"

# 1. Preprocess as seed 002 types it: `--vocab` is argparse's unique prefix of --vocab-file.
head -n 2000 "$PLAIT_DATA/kjv.txt" | /usr/bin/python3 -c '
import json, sys
for line in sys.stdin:
    print(json.dumps({"text": line.rstrip("\n")}))' > "$TMP/kjv.jsonl"
check "preprocess takes --vocab for --vocab-file (argparse's abbreviation)" \
    timeout 60 "$PLAIT" preprocess --input "$TMP/kjv.jsonl" --output-prefix "$TMP/kjv" \
    --tokenizer-type GPT2BPETokenizer --vocab "$V" --merge-file "$M" --append-eod --workers 2
check_fails "preprocess: an ambiguous prefix lists the candidates" \
    "ambiguous option: --vo could match --vocab-file, --vocab, --vocab-extra-ids" \
    timeout 10 "$PLAIT" preprocess --input "$TMP/kjv.jsonl" --output-prefix "$TMP/x" \
    --tokenizer-type GPT2BPETokenizer --vo "$V" --merge-file "$M" --workers 1
check_fails "train takes no abbreviations (allow_abbrev=False) and suggests the flag" \
    "unknown flag '--num-layer' \(did you mean --num-layers\?\)" \
    timeout 10 "$PLAIT" train --num-layer 2

# 2. ds_pretrain_gpt2.sh: gpt_options + deepspeed_options + chkp_opt, as the script
# assembles them (--checkpoint-activations twice), mp_size 1 on 2 ranks.
cat > "$TMP/ds_zero_stage_2_config.json" <<'JSON'
{
  "train_batch_size": 8,
  "gradient_accumulation_steps": 1,
  "steps_per_print": 1,
  "zero_optimization": {
    "stage": 2,
    "allgather_partitions": true,
    "reduce_scatter": true,
    "allgather_bucket_size": 50000000,
    "reduce_bucket_size": 50000000,
    "overlap_comm": true
  },
  "optimizer": {
    "type": "Adam",
    "params": {
      "lr": 0.00015,
      "max_grad_norm": 1.0,
      "betas": [0.9, 0.95]
    }
  },
  "gradient_clipping": 1.0,
  "fp16": {
    "enabled": true,

    "loss_scale": 0,
    "loss_scale_window": 1000,
    "hysteresis": 2,
    "min_loss_scale": 1
  },
  "wall_clock_breakdown": true,
  "zero_allow_untested_optimizer": false
}
JSON
gpt_options=(--model-parallel-size 1 --num-layers 2 --hidden-size 64 --num-attention-heads 4
    --seq-length 32 --max-position-embeddings 32 --batch-size 4 --train-iters 10
    --lr-decay-iters 10 --save "$TMP/ck_ds" --load "$TMP/ck_ds" --data-path "$TMP/kjv_text_document"
    --vocab-file "$V" --merge-file "$M" --data-impl mmap --split 949,50,1
    --distributed-backend nccl --lr 1.5e-4 --lr-decay-style cosine --min-lr 1.0e-5
    --weight-decay 1e-2 --clip-grad 1.0 --warmup 0.2 --checkpoint-activations --log-interval 1
    --save-interval 10 --eval-interval 5 --eval-iters 1 --fp16 --tensorboard-dir "$TMP/tb")
deepspeed_options=(--deepspeed --deepspeed_config "$TMP/ds_zero_stage_2_config.json"
    --zero-stage 0 --zero-reduce-bucket-size 50000000 --zero-allgather-bucket-size 5000000000
    --zero-contigious-gradients --zero-reduce-scatter)
chkp_opt=(--checkpoint-activations --checkpoint-num-layers 1 --partition-activations
    --synchronize-each-layer --contigious-checkpointing)
check "ds_pretrain_gpt2.sh's flags run (mpirun -n 2)" timeout -k 5 40 mpirun.openmpi -n 2 \
    -x OMP_NUM_THREADS "$PLAIT" train "${gpt_options[@]}" "${deepspeed_options[@]}" \
    "${chkp_opt[@]}" --metrics-file "$TMP/ds.jsonl"
cp "$TMP/check.out" "$TMP/ds.log"
has() { grep -qE -- "$1" "$TMP/ds.log"; }
count() { grep -cE -- "$1" "$TMP/ds.log"; }
check "world 2 = tp 1 x dp 2 (--model-parallel-size 1)" has "world 2 = tp 1 x dp 2 x pp 1"
check "--batch-size 4 is the micro-batch; the JSON's train_batch_size 8 = 4 x 1 x dp 2" \
    has "batch: micro 4 x 1 micro-batches x dp 2 = global 8; 10 iterations"
check "--checkpoint-activations --checkpoint-num-layers 1 = full uniform recompute of 1 layer" \
    has "activations \(micro-batch 4, recompute full, uniform, 1 layer\)"
check "--deepspeed: the JSON's zero_optimization.stage 2 wins over --zero-stage 0, said once" \
    test "$(count "note: zero_optimization.stage 2 overrides --zero-stage 0")" = 1
check "ZeRO stage 2 runs over dp 2" has "memory plan \(per rank, ZeRO stage 2, dp 2\)"
check "--fp16 with the JSON's dynamic scaler (DeepSpeed's 2^16 start)" \
    has "precision: fp16 .* loss scale dynamic from 65536"
for flag in "--distributed-backend nccl" "--partition-activations" \
            "--contigious-checkpointing" "--synchronize-each-layer" "--zero-reduce-scatter" \
            "--zero-contigious-gradients" "--zero-reduce-bucket-size 50000000" \
            "--zero-allgather-bucket-size 5000000000" "zero_optimization.overlap_comm" \
            "wall_clock_breakdown" "optimizer.params.max_grad_norm"; do
    check "$flag: exactly one line (rank 0 only) saying what plait does" \
        test "$(count "^note: $flag")" = 1
done
check "--tensorboard-dir: one event file, by the last rank, and no note" \
    test "$(ls "$TMP/tb" | grep -c '^events\.out\.tfevents\.')" = 1 -a "$(count "^note: --tensorboard-dir")" = 0 \
    -a "$(count "tensorboard: rank 1 of 2 writes")" = 1
# Megatron v1: warmup_iter = warmup x lr-decay-iters = 0.2 x 10 = 2 iterations; plait counts
# Megatron's way in samples, so iteration 1 runs at 0, 2 at half, 3 at the peak 1.5e-4.
lr_is() { /usr/bin/python3 -c 'import sys; sys.exit(abs(float(sys.argv[1]) - float(sys.argv[2])) > 1e-12)' \
    "$(field "$TMP/ds.jsonl" "$1" lr)" "$2"; }
check "--warmup 0.2: iteration 1 at lr 0" lr_is 1 0
check "--warmup 0.2: iteration 2 at half the peak" lr_is 2 7.5e-05
check "--warmup 0.2: iteration 3 at the peak 1.5e-4 (2 warmup iterations)" lr_is 3 1.5e-04
check "the loss is finite and falls over 10 iterations" /usr/bin/python3 -c '
import json, math, sys
l = [json.loads(x)["lm_loss"] for x in open(sys.argv[1]) if "\"lm_loss\"" in x]
sys.exit(not (len(l) == 10 and all(math.isfinite(v) for v in l) and l[-1] < l[0]))' "$TMP/ds.jsonl"
check "the checkpoint is written at --save-interval" \
    test "$(cat "$TMP/ck_ds/latest_checkpointed_iteration.txt" 2>/dev/null)" = 10

# 3. pretrain_gpt2_distributed.sh (torch.distributed.launch -> mpirun), no DeepSpeed.
check "pretrain_gpt2_distributed.sh's flags run (mpirun -n 2)" timeout -k 5 40 mpirun.openmpi \
    -n 2 -x OMP_NUM_THREADS "$PLAIT" train --model-parallel-size 1 --num-layers 2 \
    --hidden-size 64 --num-attention-heads 4 --batch-size 2 --seq-length 32 \
    --max-position-embeddings 32 --train-iters 4 --lr-decay-iters 4 \
    --data-path "$TMP/kjv_text_document" --vocab-file "$V" --merge-file "$M" --data-impl mmap \
    --split 949,50,1 --distributed-backend nccl --lr 0.00015 --lr-decay-style cosine \
    --min-lr 1.0e-5 --weight-decay 1e-2 --clip-grad 1.0 --warmup .01 --checkpoint-activations \
    --log-interval 1 --eval-interval 1000 --eval-iters 0 --fp16 --metrics-file "$TMP/dist.jsonl"
cp "$TMP/check.out" "$TMP/dist.log"
check "... --batch-size 2 x dp 2 = global 4 (Megatron v1: the local batch)" \
    grep -q "batch: micro 2 x 1 micro-batches x dp 2 = global 4" "$TMP/dist.log"
check "... recompute full, uniform, 1 layer" \
    grep -q "recompute full, uniform, 1 layer" "$TMP/dist.log"
check "... no --tokenizer-type: GPT2BPETokenizer as pretrain_gpt.py's args_defaults; 4 iterations" \
    test "$(grep -c '"lm_loss"' "$TMP/dist.jsonl")" = 4
check "... --distributed-backend nccl: one line from 2 ranks" \
    test "$(grep -c "^note: --distributed-backend nccl" "$TMP/dist.log")" = 1

# 4. A4SFramework: --strategy ThreeD --pipeline_model_parallel_size 2 --tensor_model_parallel_size 2
check "A4S --strategy ThreeD with its TP and PP flags runs (mpirun -n 4)" timeout -k 5 40 \
    mpirun.openmpi -n 4 -x OMP_NUM_THREADS "$PLAIT" train --strategy ThreeD \
    --pipeline_model_parallel_size 2 --tensor_model_parallel_size 2 --num-layers 2 \
    --hidden-size 64 --num-attention-heads 4 --seq-length 32 --micro-batch-size 2 \
    --global-batch-size 4 --train-iters 2 --lr 1e-3 --mock-data --vocab-size 512 \
    --log-interval 1 --eval-iters 0 --metrics-file "$TMP/a4s.jsonl"
cp "$TMP/check.out" "$TMP/a4s.log"
check "... world 4 = tp 2 x dp 1 x pp 2 under ZeRO stage 1 (A4S runs ThreeD on ZeRO-1)" \
    grep -qE "world 4 = tp 2 x dp 1 x pp 2" "$TMP/a4s.log"
check "... ZeRO stage 1" grep -qE "ZeRO stage 1" "$TMP/a4s.log"

# 5. A DeepSpeed scheduler as DeepSpeed runs it: WarmupLR with its default log warmup,
# counted in optimizer steps, the first step at warmup_min_lr (lr_schedules.py).
cat > "$TMP/ds_warmup.json" <<'JSON'
{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
 "optimizer": {"type": "AdamW", "params": {"lr": 0.5, "weight_decay": 0.01}},
 "scheduler": {"type": "WarmupLR",
               "params": {"warmup_min_lr": 1e-4, "warmup_max_lr": 1e-3, "warmup_num_steps": 4}}}
JSON
check "a DeepSpeed WarmupLR config runs (mpirun -n 2)" timeout -k 5 40 mpirun.openmpi -n 2 \
    -x OMP_NUM_THREADS "$PLAIT" train --num-layers 2 --hidden-size 64 --num-attention-heads 4 \
    --seq-length 32 --train-iters 6 --mock-data --vocab-size 512 --log-interval 1 \
    --eval-iters 0 --deepspeed --deepspeed_config "$TMP/ds_warmup.json" \
    --metrics-file "$TMP/warmup.jsonl"
cp "$TMP/check.out" "$TMP/warmup.log"
check "... optimizer.params.lr 0.5 gives way to warmup_max_lr, said once" \
    test "$(grep -c "^note: optimizer.params.lr 0.5: the scheduler's warmup_max_lr" "$TMP/warmup.log")" = 1
check "... lr of iterations 1-6 = warmup_min_lr + delta log(k+1)/log(W), k = iteration - 2" \
    /usr/bin/python3 -c '
import json, math, sys
lrs = [json.loads(x)["lr"] for x in open(sys.argv[1]) if "\"lr\"" in x]
lo, hi, W = 1e-4, 1e-3, 4
want = [lo if k < 0 else lo + (hi - lo) * (math.log(k + 1) / math.log(W) if k < W else 1.0)
        for k in range(-1, 5)]
print(lrs, want)
sys.exit(not (len(lrs) == 6 and all(abs(a - b) <= 1e-12 for a, b in zip(lrs, want))))' \
    "$TMP/warmup.jsonl"

WARM=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 --train-iters 6
      --mock-data --vocab-size 512 --log-interval 1 --eval-iters 0 --deepspeed
      --deepspeed_config "$TMP/ds_warmup.json" --save "$TMP/ck_warm")
check "... stopped at iteration 3 and resumed" sh -c '"$@" --exit-interval 3 >/dev/null 2>&1 &&
    "$@" --load "$0" --metrics-file "$0.resumed.jsonl"' "$TMP/ck_warm" timeout -k 5 40 "$PLAIT" \
    train "${WARM[@]}"
check "... the resumed iterations 4-6 run at the uninterrupted run's learning rates" \
    test "$(grep -o '"lr": [^,]*' "$TMP/ck_warm.resumed.jsonl" | tr '\n' ' ')" = \
    "$(grep -o '"lr": [^,]*' "$TMP/warmup.jsonl" | tail -n 3 | tr '\n' ' ')"

# OneCycle: the lr along DeepSpeed's cycle, and Adam's beta1 cycled with it. Adam's first
# step does not depend on the betas (bias correction makes it g / |g|), so the second loss
# agrees to fp32 rounding (1e-6) and the later ones differ by far more (1e-5).
onecycle() { # NAME CYCLE_MOMENTUM
    cat > "$TMP/$1.json" <<JSON
{"train_micro_batch_size_per_gpu": 2,
 "scheduler": {"type": "OneCycle", "params": {"cycle_min_lr": 1e-4, "cycle_max_lr": 1e-3,
  "cycle_first_step_size": 2, "cycle_second_step_size": 3, "decay_step_size": 1,
  "decay_lr_rate": 0.5, "cycle_momentum": $2}}}
JSON
    timeout -k 5 40 "$PLAIT" train --num-layers 2 --hidden-size 64 --num-attention-heads 4 \
        --seq-length 32 --train-iters 7 --mock-data --vocab-size 512 --log-interval 1 \
        --eval-iters 0 --deepspeed_config "$TMP/$1.json" --metrics-file "$TMP/$1.jsonl"
}
check "a DeepSpeed OneCycle config runs (cycle_momentum true)" onecycle oc true
check "... and with cycle_momentum false" onecycle ocf false
check "... lr of iterations 1-7 = OneCycle's cycle, then min / (1 + 0.5 d)" /usr/bin/python3 -c '
import json, math, sys
lrs = [json.loads(x)["lr"] for x in open(sys.argv[1]) if "\"lr\"" in x]
lo, hi, first, total = 1e-4, 1e-3, 2, 5
def lr(k):
    if k < 0: return lo
    if k < total:
        bi = k + 1; cycle = math.floor(1 + bi / total); x = 1 + bi / total - cycle; r = first / total
        return lo + (hi - lo) * (x / r if x <= r else (x - 1) / (r - 1))
    return lo / (1 + 0.5 * (k - total + 1))
want = [lr(k) for k in range(-1, 6)]
print(lrs, want)
sys.exit(not (len(lrs) == 7 and all(abs(a - b) <= 1e-12 for a, b in zip(lrs, want))))' "$TMP/oc.jsonl"
check "... cycle_momentum changes Adam's betas: same first two losses, then different ones" \
    /usr/bin/python3 -c '
import json, sys
a, b = ([json.loads(x)["lm_loss"] for x in open(f) if "\"lm_loss\"" in x] for f in sys.argv[1:])
print(a, b)
sys.exit(not (a[0] == b[0] and abs(a[1] - b[1]) <= 1e-6 and
              max(abs(x - y) for x, y in zip(a[2:], b[2:])) > 1e-5))' "$TMP/oc.jsonl" "$TMP/ocf.jsonl"

# LRRangeTest: the lr of each iteration is DeepSpeed's min_lr (1 + step_rate interval),
# interval = (last_batch_iteration + 1) / step_size, floored with the staircase.
range_test() { # NAME STAIRCASE
    cat > "$TMP/$1.json" <<JSON
{"train_micro_batch_size_per_gpu": 2,
 "scheduler": {"type": "LRRangeTest", "params": {"lr_range_test_min_lr": 1e-4,
  "lr_range_test_step_size": 2, "lr_range_test_step_rate": 0.5, "lr_range_test_staircase": $2}}}
JSON
    timeout -k 5 40 "$PLAIT" train --num-layers 2 --hidden-size 64 --num-attention-heads 4 \
        --seq-length 32 --train-iters 5 --mock-data --vocab-size 512 --log-interval 1 \
        --eval-iters 0 --deepspeed_config "$TMP/$1.json" --metrics-file "$TMP/$1.jsonl"
}
check "a DeepSpeed LRRangeTest config runs (continuous)" range_test rt false
check "... and as a staircase" range_test rts true
check "... lr of iterations 1-5 = LRRangeTest's formula, k = iteration - 2" /usr/bin/python3 -c '
import json, math, sys
def lrs(f): return [json.loads(x)["lr"] for x in open(f) if "\"lr\"" in x]
def want(stair):
    out = []
    for k in range(-1, 4):
        interval = float(k + 1) / 2
        out.append(1e-4 * (1 + 0.5 * (math.floor(interval) if stair else interval)))
    return out
a, b = lrs(sys.argv[1]), lrs(sys.argv[2])
print(a, want(False), b, want(True))
same = lambda x, y: len(x) == 5 and all(abs(p - q) <= 1e-12 for p, q in zip(x, y))  # printed to 15 digits
sys.exit(not (same(a, want(False)) and same(b, want(True))))' "$TMP/rt.jsonl" "$TMP/rts.jsonl"

# 6. Refusals that name the flag.
check_fails "--data-impl lazy is refused by name" "--data-impl lazy: plait reads only the mmap format" \
    timeout 10 "$PLAIT" train "${gpt_options[@]}" --data-impl lazy
# found by fuzz_ds_config: a list where DeepSpeed wants an object crashed the reader
printf '%s' '{"train_batch_size": 4, "optimizer": {"type": "AdamW", "params": [0.9, 0.999]}}' \
    >"$TMP/ds_params_list.json"
check_fails "a DeepSpeed block that is not an object is refused naming it" \
    "optimizer.params must be a JSON object" \
    timeout 10 "$PLAIT" train "${gpt_options[@]}" --deepspeed_config "$TMP/ds_params_list.json"
summary first_day
