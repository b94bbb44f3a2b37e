#!/usr/bin/env bash
# DeepSpeed ZeRO stage 1-3 optimizer shards read by plait ckpt import --format megatron
# (src/ckpt/megatron_zero.c, after DeepSpeed's zero_to_fp32.py). zero_import_write.py writes
# with python3-torch's torch.save a random GPT-2 as Megatron-DeepSpeed saves it under ZeRO 2
# at TP 2 x DP 2: bf16 copies in mp_rank_TT_model_states.pt, the fp32 weights flattened per
# param group, padded, split into DP partitions in zero_pp_rank_D_mp_rank_TT_optim_states.pt.
# Checked: the import's tensors, exported as Hugging Face, are the original fp32 ones bit for
# bit (also when saved by ZeRO 1, and by ZeRO 3 at TP 2 x DP 3 with placeholders in the model
# states and each parameter padded and split); with --no-zero-fp32 they are the bf16 copies (the original
# rounded to nearest even) and differ from the fp32 import; a missing shard, a shard beyond
# partition_count, a partition_count with too few shards, a TP rank without shards, ZeRO 3,
# a group one element short and one 2 x DP too long, stage 3 without fp32_flat_groups and
# --no-zero-fp32 under ZeRO 3 are refused naming the file.
source "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=1
HF=$ROOT/tests/scripts/hf_models.py

check "ZeRO 2 shards written (python3-torch)" \
    /usr/bin/python3 "$ROOT/tests/scripts/zero_import_write.py" "$TMP"
imp() { local from=$1; shift; "$PLAIT" ckpt import "$TMP/$from" --format megatron "$@"; }
check "gpt, ZeRO 2 at TP 2 x DP 2: imported, the log names the shards" bash -c "
    '$PLAIT' ckpt import '$TMP/zero_gpt' --format megatron --out '$TMP/zi' >'$TMP/zi.log' 2>&1 &&
    grep -q 'TP rank 1: fp32 weights from ZeRO stage 2 shards (2 DP partitions, 2 groups)' '$TMP/zi.log' &&
    '$PLAIT' ckpt export '$TMP/zi' --out '$TMP/zi_hf'"
check "gpt, --no-zero-fp32: imported from the model states' bf16 copies" bash -c "
    '$PLAIT' ckpt import '$TMP/zero_gpt' --format megatron --out '$TMP/nz' --no-zero-fp32 >'$TMP/nz.log' 2>&1 &&
    ! grep -q 'ZeRO' '$TMP/nz.log' &&
    '$PLAIT' ckpt export '$TMP/nz' --out '$TMP/nz_hf' && '$PLAIT' ckpt export '$TMP/nz' --out '$TMP/nz_hf16' --bf16"
check "... whose tensors differ from the ZeRO import's" /usr/bin/python3 -c "
import sys; sys.path.insert(0, '$ROOT/tests/scripts'); import hf_models
a, b = hf_models.read_dir('$TMP/zi_hf'), hf_models.read_dir('$TMP/nz_hf')
diff = [k for k in a if a[k][1].tobytes() != b[k][1].tobytes()]
sys.exit(0 if len(a) == len(b) and len(diff) == len(a) else 1)"

check "gpt, ZeRO 1 (zero_stage 1, the same layout): imported" bash -c "
    '$PLAIT' ckpt import '$TMP/zero_s1' --format megatron --out '$TMP/z1' >/dev/null 2>&1 &&
    '$PLAIT' ckpt export '$TMP/z1' --out '$TMP/z1_hf'"
check_fails "zero_stage 3 in stage 2's layout is refused by name" "no optimizer_state_dict.fp32_flat_groups list" \
    imp zero_s3 --out "$TMP/z3_out"
check "gpt, ZeRO 3 at TP 2 x DP 3 (placeholders in the model states, parameters padded): imported" bash -c "
    '$PLAIT' ckpt import '$TMP/zero3' --format megatron --out '$TMP/z3' >'$TMP/z3.log' 2>&1 &&
    grep -q 'TP rank 1: fp32 weights from ZeRO stage 3 shards (3 DP partitions' '$TMP/z3.log' &&
    '$PLAIT' ckpt export '$TMP/z3' --out '$TMP/z3_hf'"
check_fails "... with --no-zero-fp32 refused (its model states hold no weights)" \
    "ZeRO 3's model states hold no weights: --no-zero-fp32 cannot be followed" \
    imp zero3 --out "$TMP/z3n_out" --no-zero-fp32
check_fails "a group one element short is refused, naming the files and the sizes" \
    "zero_pp_rank_\\*_mp_rank_00_optim_states.pt: param_shapes\\[0\\] needs more than the [0-9]+ fp32 elements of group 0's 2 partitions" \
    imp zero_short --out "$TMP/zs_out"
check_fails "a group 2 x DP elements too long is refused (zero_to_fp32's alignment check)" \
    "group 0's 2 partitions hold [0-9]+ fp32 elements, param_shapes [0-9]+: expected them equal up to the alignment to 4" \
    imp zero_long --out "$TMP/zl_out"
cp -r "$TMP/zero_gpt" "$TMP/zero_missing" && rm "$TMP/zero_missing/global_step7/zero_pp_rank_1_mp_rank_01_optim_states.pt"
check_fails "a missing shard is refused, naming it" \
    "zero_pp_rank_1_mp_rank_01_optim_states.pt: missing: partition_count says 2 DP ranks" \
    imp zero_missing --out "$TMP/zm_out"
cp -r "$TMP/zero_gpt" "$TMP/zero_extra" && cp "$TMP/zero_extra/global_step7/zero_pp_rank_1_mp_rank_00_optim_states.pt" \
    "$TMP/zero_extra/global_step7/zero_pp_rank_2_mp_rank_00_optim_states.pt"
check_fails "a shard beyond partition_count is refused, naming it" \
    "zero_pp_rank_2_mp_rank_00_optim_states.pt: present, but partition_count says 2 DP ranks" \
    imp zero_extra --out "$TMP/ze_out"
check_fails "partition_count 3 beside 2 shards is refused, naming the missing one" \
    "zero_pp_rank_2_mp_rank_00_optim_states.pt: missing: partition_count says 3 DP ranks" \
    imp zero_pc3 --out "$TMP/zp_out"
cp -r "$TMP/zero_gpt" "$TMP/zero_tp1" && rm "$TMP/zero_tp1/global_step7/zero_pp_rank_"*"_mp_rank_01_optim_states.pt"
check_fails "TP rank 1 without shards beside TP rank 0's is refused" \
    "zero_pp_rank_0_mp_rank_01_optim_states.pt: missing, but TP rank 0's ZeRO shards are there" \
    imp zero_tp1 --out "$TMP/zt_out"

OMP_NUM_THREADS=2 /usr/bin/python3 "$HF" \
    same "$TMP/hf_gpt" "$TMP/zi_hf" :: same "$TMP/hf_gpt" "$TMP/z1_hf" :: same "$TMP/hf_gpt" "$TMP/z3_hf" :: bf16 "$TMP/hf_gpt" "$TMP/nz_hf16" | tee "$TMP/py.out"
read -r p f < <(sed -nE 's/^hf_models: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$TMP/py.out")
_pass=$((_pass + ${p:-0})); _fail=$((_fail + ${f:-1}))
summary zero_import
