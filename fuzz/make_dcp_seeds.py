#!/usr/bin/env python3
"""Seeds of fuzz/fuzz_dcp_metadata.c: the .metadata files of the torch_dist checkpoints
tests/scripts/torch_dist_write.py writes (GPT at TP 2 x PP 2, the Llama with non-homogeneous
layers). usage: make_dcp_seeds.py OUT_DIR"""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "scripts"))
import hf_models  # noqa: E402
import torch_dist_write  # noqa: E402

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
with tempfile.TemporaryDirectory() as tmp:
    hf_models.make_random("gpt2", f"{tmp}/hf_gpt", 1)
    hf_models.make_random("llama", f"{tmp}/hf_llama", 2)
    torch_dist_write.write(f"{tmp}/hf_gpt", f"{tmp}/gpt", 2, 2)
    torch_dist_write.write(f"{tmp}/hf_llama", f"{tmp}/llama", 2, 1, te=False, homogeneous=False)
    for name in ["gpt", "llama"]:
        shutil.copy(f"{tmp}/{name}/iter_0000007/.metadata", os.path.join(out, f"{name}.metadata"))
