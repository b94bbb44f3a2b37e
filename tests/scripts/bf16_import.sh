#!/usr/bin/env bash
# DeepSpeed's BF16_Optimizer shards (global_stepN/bf16_zero_pp_rank_D_mp_rank_TT_optim_states.pt,
# what Megatron-DeepSpeed writes with bf16 and ZeRO 0 or 1) read by plait ckpt import --format
# megatron (src/ckpt/megatron_bf16.c, after deepspeed/runtime/bf16_optimizer.py's state_dict).
# bf16_import_write.py writes with python3-torch a random GPT-2 at TP 2 x DP 3: bf16 copies in
# mp_rank_TT_model_states.pt, the fp32 master weights per param group flattened, padded to
# 2 x DP, split into DP partitions (the padding in the last), with group_paddings and each
# rank's param_slice_mappings; and Megatron-DeepSpeed's GPTModelPipe through DeepSpeed's pipeline
# engine (bf16 layer files, TP 2, args PP 2) with BF16_Optimizer's shards per stage
# (bf16_zero_pp_rank_D_mp_rank_{p x TP + t}, PipelineModule's parameter names, the tied
# embedding on both stages). Checked: the imports (ZeRO 0: param_shapes None; ZeRO 1; the pipe),
# exported as Hugging Face, hold the original fp32 tensors bit for bit, and the log names the
# shards; ZeRO 2 shards under DeepSpeed's bf16 name (bf16_zero_pp_rank_*) are read as ZeRO's;
# --no-zero-fp32 gives the bf16 copies (pipe: with a warning); a stage's missing shards, a fragment that does not continue its piece, a padding
# that does not add up, a missing shard and one beyond partition_count are refused naming the file.
source "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=1
HF=$ROOT/tests/scripts/hf_models.py

check "BF16_Optimizer shards written (python3-torch)" \
    /usr/bin/python3 "$ROOT/tests/scripts/bf16_import_write.py" "$TMP"
imp() { local from=$1; shift; "$PLAIT" ckpt import "$TMP/$from" --format megatron "$@"; }
check "gpt, BF16_Optimizer (ZeRO 0) at TP 2 x DP 3: imported, the log names the shards" bash -c "
    '$PLAIT' ckpt import '$TMP/bf16_gpt' --format megatron --out '$TMP/bi' >'$TMP/bi.log' 2>&1 &&
    grep -q 'TP rank 1: fp32 weights from BF16_Optimizer.s shards (3 DP partitions, 2 groups)' '$TMP/bi.log' &&
    '$PLAIT' ckpt export '$TMP/bi' --out '$TMP/bi_hf'"
check "gpt, BF16_Optimizer under ZeRO 1 (param_shapes in the model states): imported" bash -c "
    '$PLAIT' ckpt import '$TMP/bf16_zero1' --format megatron --out '$TMP/b1' >/dev/null 2>&1 &&
    '$PLAIT' ckpt export '$TMP/b1' --out '$TMP/b1_hf'"
check "gpt, ZeRO 2 shards named bf16_zero_pp_rank_* (DeepSpeed's name under bf16): read as ZeRO's" bash -c "
    '$PLAIT' ckpt import '$TMP/bf16_z2' --format megatron --out '$TMP/b2' >'$TMP/b2.log' 2>&1 &&
    grep -q 'fp32 weights from ZeRO stage 2 shards' '$TMP/b2.log' &&
    '$PLAIT' ckpt export '$TMP/b2' --out '$TMP/b2_hf'"
check "gpt, --no-zero-fp32: the model states' bf16 copies" bash -c "
    '$PLAIT' ckpt import '$TMP/bf16_gpt' --format megatron --out '$TMP/bn' --no-zero-fp32 >'$TMP/bn.log' 2>&1 &&
    ! grep -q 'BF16_Optimizer' '$TMP/bn.log' && '$PLAIT' ckpt export '$TMP/bn' --out '$TMP/bn_hf16' --bf16"
check "gpt, DeepSpeed's pipeline engine (layer files in bf16, TP 2, args PP 2) with BF16_Optimizer's shards per stage: imported" bash -c "
    '$PLAIT' ckpt import '$TMP/bf16_pipe' --format megatron --out '$TMP/pi' >'$TMP/pi.log' 2>&1 &&
    grep -q 'TP rank 1: fp32 weights from BF16_Optimizer.s shards of 2 stages (2 DP partitions)' '$TMP/pi.log' &&
    '$PLAIT' ckpt export '$TMP/pi' --out '$TMP/pi_hf'"
check "... with --no-zero-fp32: the layer files' bf16 weights, with a warning naming the shards" bash -c "
    '$PLAIT' ckpt import '$TMP/bf16_pipe' --format megatron --out '$TMP/pn' --no-zero-fp32 >'$TMP/pn.log' 2>&1 &&
    grep -q 'bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt: optimizer shards (--no-zero-fp32) beside' '$TMP/pn.log' &&
    '$PLAIT' ckpt export '$TMP/pn' --out '$TMP/pn_hf16' --bf16"
cp -r "$TMP/bf16_pipe" "$TMP/bf16_pipe_missing" && rm "$TMP/bf16_pipe_missing/global_step7/bf16_zero_pp_rank_0_mp_rank_03_optim_states.pt"
check_fails "... a stage's missing shards are refused, naming the file" \
    "bf16_zero_pp_rank_0_mp_rank_03_optim_states.pt: missing beside DP rank 0's shards" \
    imp bf16_pipe_missing --out "$TMP/bpm"
check_fails "a fragment that does not continue its piece on the previous rank is refused" \
    "bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt: language_model.encoder.layers.1.self_attention.query_key_value.weight's piece at 1 does not continue" \
    imp bf16_gap --out "$TMP/bg"
check_fails "a group_paddings that does not add up is refused" \
    "group 0's 3 partitions of [0-9]+ elements hold parameters of [0-9]+ and a padding of [0-9]+: expected them to add up" \
    imp bf16_pad --out "$TMP/bp"
cp -r "$TMP/bf16_gpt" "$TMP/bf16_missing" && rm "$TMP/bf16_missing/global_step7/bf16_zero_pp_rank_2_mp_rank_01_optim_states.pt"
check_fails "a missing shard is refused, naming it" \
    "bf16_zero_pp_rank_2_mp_rank_01_optim_states.pt: missing: partition_count says 3 DP ranks" \
    imp bf16_missing --out "$TMP/bm"
cp -r "$TMP/bf16_gpt" "$TMP/bf16_extra" && cp "$TMP/bf16_extra/global_step7/bf16_zero_pp_rank_2_mp_rank_00_optim_states.pt" \
    "$TMP/bf16_extra/global_step7/bf16_zero_pp_rank_3_mp_rank_00_optim_states.pt"
check_fails "a shard beyond partition_count is refused, naming it" \
    "bf16_zero_pp_rank_3_mp_rank_00_optim_states.pt: present, but partition_count says 3 DP ranks" \
    imp bf16_extra --out "$TMP/be"

OMP_NUM_THREADS=2 /usr/bin/python3 "$HF" \
    same "$TMP/hf_gpt" "$TMP/bi_hf" :: same "$TMP/hf_gpt" "$TMP/b1_hf" :: same "$TMP/hf_gpt" "$TMP/b2_hf" :: \
    bf16 "$TMP/hf_gpt" "$TMP/bn_hf16" :: same "$TMP/hf_gpt" "$TMP/pi_hf" :: bf16 "$TMP/hf_gpt" "$TMP/pn_hf16" | tee "$TMP/py.out"
read -r p f < <(sed -nE 's/^hf_models: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$TMP/py.out")
_pass=$((_pass + ${p:-0})); _fail=$((_fail + ${f:-1}))
summary bf16_import
