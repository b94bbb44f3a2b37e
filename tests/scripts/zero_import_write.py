#!/usr/bin/env python3
"""Set-up of tests/scripts/zero_import.sh, in one start of python3-torch:

  zero_import_write.py TMP

TMP/hf_gpt     a random Hugging Face GPT-2 directory (hf_models.make_random)
TMP/zero_gpt   it as Megatron-DeepSpeed saves it with ZeRO stage 2 at TP 2 x DP 2
               (megatron_write.py's `zero`): bf16 copies in mp_rank_TT_model_states.pt, the fp32
               weights in global_step7/zero_pp_rank_D_mp_rank_TT_optim_states.pt
TMP/zero_pc3   the same with partition_count 3 recorded in the shards (two written)"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_models  # noqa: E402
import megatron_write  # noqa: E402

tmp = sys.argv[1]
hf_models.make_random("gpt2", f"{tmp}/hf_gpt", 1)
megatron_write.write(f"{tmp}/hf_gpt", f"{tmp}/zero_gpt", 2, 1, "zero", {})
megatron_write.write(f"{tmp}/hf_gpt", f"{tmp}/zero_pc3", 2, 1, "zero", {"zero_partition_count": 3})
