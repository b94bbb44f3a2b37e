#!/usr/bin/env python3
"""Set-up of tests/scripts/zero_import.sh, in one start of python3-torch:

  zero_import_write.py TMP

TMP/hf_gpt     a random Hugging Face GPT-2 directory (hf_models.make_random)
TMP/zero_gpt   it as Megatron-DeepSpeed saves it with ZeRO stage 2 at TP 2 x DP 2
               (megatron_write.py's `zero`): bf16 copies in mp_rank_TT_model_states.pt, the fp32
               weights in global_step7/zero_pp_rank_D_mp_rank_TT_optim_states.pt
TMP/zero_pc3   the same with partition_count 3 recorded in the shards (two written)
TMP/zero_s1    the same saved by ZeRO stage 1 (zero_stage 1: the same layout)
TMP/zero_s3    zero_stage 3 recorded in stage 2's layout (refused: no fp32_flat_groups)
TMP/zero3      ZeRO stage 3 at TP 2 x DP 3: empty placeholders in
               zero_pp_rank_D_mp_rank_TT_model_states.pt, each parameter padded and split
TMP/zero_short, TMP/zero_long   group 0's last partition one element short, 2 x DP too long"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_models  # noqa: E402
import megatron_write  # noqa: E402

tmp = sys.argv[1]
hf_models.make_random("gpt2", f"{tmp}/hf_gpt", 1)
megatron_write.write(f"{tmp}/hf_gpt", f"{tmp}/zero_gpt", 2, 1, "zero", {})
megatron_write.write(f"{tmp}/hf_gpt", f"{tmp}/zero_pc3", 2, 1, "zero", {"partition_count": 3})
megatron_write.write(f"{tmp}/hf_gpt", f"{tmp}/zero_s1", 2, 1, "zero", {"stage": 1})
megatron_write.write(f"{tmp}/hf_gpt", f"{tmp}/zero_s3", 2, 1, "zero", {"stage": 3})
megatron_write.write(f"{tmp}/hf_gpt", f"{tmp}/zero3", 2, 1, "zero3", {})
megatron_write.write(f"{tmp}/hf_gpt", f"{tmp}/zero_short", 2, 1, "zero", {"trim": 1})
megatron_write.write(f"{tmp}/hf_gpt", f"{tmp}/zero_long", 2, 1, "zero", {"trim": -4})
