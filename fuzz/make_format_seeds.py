#!/usr/bin/python3
"""Writes the seeds of the file-format fuzz targets into fuzz/seeds/<target>/:
fuzz_safetensors (safetensors files built here by the format's rules), fuzz_npy
(numpy.save output, one selector byte in front: dtype index | 4 for 2-D with 2 columns),
fuzz_ds_config (DeepSpeed configs like the test suites'), fuzz_train_args (command
lines, one argument a line) and fuzz_manifest (manifests of checkpoints that plait
writes: GPT, a LLaMA-style model, ZeRO-3 over 2 ranks). Usage:
  fuzz/make_format_seeds.py [PLAIT]     (PLAIT: build/plait, for the manifests)"""
import io
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEEDS = os.path.join(ROOT, "fuzz", "seeds")


def put(target, name, data):
    d = os.path.join(SEEDS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def safetensors(tensors, meta=None):
    header, blobs, off = {}, [], 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if meta:
        header["__metadata__"] = meta
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


put("fuzz_safetensors", "two_f32", safetensors({
    "a.weight": ("F32", [2, 3], np.arange(6, dtype="<f4").tobytes()),
    "a.bias": ("F32", [3], np.ones(3, dtype="<f4").tobytes())}, {"format": "pt"}))
put("fuzz_safetensors", "bf16_i64", safetensors({
    "x": ("BF16", [4], bytes(8)), "step": ("I64", [], struct.pack("<q", 7))}))
put("fuzz_safetensors", "empty", safetensors({}))

for i, dt in enumerate(["<i2", "<i4", "<u4", "<i8"]):
    for sel, arr in ((i, np.arange(5, dtype=dt)), (i | 4, np.arange(6, dtype=dt).reshape(3, 2))):
        b = io.BytesIO()
        np.save(b, arr)
        put("fuzz_npy", f"sel{sel}", bytes([sel]) + b.getvalue())

put("fuzz_ds_config", "zero2", json.dumps({
    "train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, "gradient_clipping": 1.0,
    "zero_optimization": {"stage": 2, "reduce_bucket_size": 5e8},
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8,
                                              "weight_decay": 0.01}},
    "bf16": {"enabled": False}}))
put("fuzz_ds_config", "onecycle", json.dumps({
    "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
    "scheduler": {"type": "OneCycle", "params": {"cycle_first_step_size": 2,
                  "cycle_min_lr": 1e-4, "cycle_max_lr": 1e-3, "decay_lr_rate": 0.1,
                  "cycle_min_mom": 0.85, "cycle_max_mom": 0.99}},
    "fp16": {"enabled": "true", "loss_scale": 0, "initial_scale_power": 8}}))
put("fuzz_ds_config", "warmup_decay",
    '{"train_micro_batch_size_per_gpu": "1", "steps_per_print": 1, "zero_optimization": '
    '{"stage": 1}, "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": 0, '
    '"warmup_max_lr": 0.001, "warmup_num_steps": 2, "total_num_steps": 10}}, '
    '"optimizer": {"type": "Adam", "params": {"lr": "0.001"}}, "lr": 1, "lr": 2}')

TINY = ["--mock-data", "--vocab-size", "100", "--num-layers", "2", "--hidden-size", "16",
        "--num-attention-heads", "2", "--seq-length", "16", "--micro-batch-size", "1",
        "--lr", "1e-3", "--train-iters", "4"]
for name, extra in (("tiny", []),
                    ("llama", ["--swiglu", "--normalization", "RMSNorm", "--ffn-hidden-size",
                               "32", "--position-embedding-type", "rope",
                               "--group-query-attention", "--num-query-groups", "1",
                               "--lr-warmup-iters", "1", "--lr-decay-style", "cosine"]),
                    ("legacy", ["--checkpoint-activations", "--warmup", "0.1",
                                "--zero-stage", "3", "--tensor-model-parallel-size", "1"]),
                    ("samples", ["--train-samples", "64", "--lr-decay-samples", "32",
                                 "--global-batch-size", "4", "--rampup-batch-size", "2", "2",
                                 "32"])):
    put("fuzz_train_args", name, "\n".join(TINY + extra))

plait = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "plait")
env = dict(os.environ, OMP_NUM_THREADS="1")
with tempfile.TemporaryDirectory() as tmp:
    runs = (("gpt", [], 1), ("llama", ["--swiglu", "--normalization", "RMSNorm",
            "--ffn-hidden-size", "32", "--position-embedding-type", "rope",
            "--untie-embeddings-and-output-weights", "--disable-bias-linear",
            "--num-attention-heads", "4", "--group-query-attention", "--num-query-groups", "2"], 1),
            ("zero3", ["--zero-stage", "3"], 2))
    for name, extra, n in runs:
        save = os.path.join(tmp, name)
        cmd = [plait, "train"] + TINY[:-2] + ["--train-iters", "2", "--lr-decay-iters", "8",
                                              "--save", save] + extra
        if n > 1:
            cmd = ["mpirun.openmpi", "--oversubscribe", "-n", str(n)] + cmd
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(save, "iter_0000002", "manifest.json"), "rb") as f:
            put("fuzz_manifest", name, f.read())
