#!/usr/bin/env python3
"""Seeds of fuzz/fuzz_torch_file.c, written by python3-torch: small torch.save files in
the shapes Megatron saves (a Namespace, nested dicts, tensors of several dtypes, a view,
numpy's RNG state), the bare pickle of one and a .nemo-like tar holding one. usage: make_pt_seeds.py OUT_DIR"""
import argparse
import collections
import io
import os
import sys
import zipfile

import numpy as np
import torch

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
obj = {"args": argparse.Namespace(num_layers=2, hidden_size=8, swiglu=False, lr=1e-3, tokenizer_type="GPT2BPETokenizer"),
       "checkpoint_version": 3.0, "iteration": 7,
       "model": {"language_model": {"embedding": {"word_embeddings": collections.OrderedDict(weight=torch.randn(4, 2))},
                                    "encoder": collections.OrderedDict([("layers.0.input_layernorm.weight", torch.ones(2)),
                                                                        ("layers.0.mlp.dense_h_to_4h.bias", torch.randn(3).to(torch.bfloat16))])}},
       "optimizer": {"state": {0: {"exp_avg": torch.zeros(2)}}, "view": torch.arange(6.0)[1:5:2]},
       "rng_state": [{"np_rng_state": np.random.RandomState(1).get_state(), "torch_rng_state": torch.get_rng_state()[:8].clone()}]}
torch.save(obj, os.path.join(out, "megatron_like.pt"))
torch.save({"w": torch.randn(2, 3).half(), "l": [1, -1, 2 ** 40, 1.5, "s", None, True]}, os.path.join(out, "small.pt"))
import tarfile
with tarfile.open(os.path.join(out, "small.nemo"), "w") as tar:  # a .nemo: config and weights
    for name, data in [("model_config.yaml", b"num_layers: 2\nhidden_size: 8\n"),
                       ("model_weights.ckpt", open(os.path.join(out, "small.pt"), "rb").read())]:
        info = tarfile.TarInfo("./" + name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
with zipfile.ZipFile(os.path.join(out, "small.pt")) as z:
    name = [n for n in z.namelist() if n.endswith("data.pkl")][0]
    open(os.path.join(out, "small.pkl"), "wb").write(z.read(name))
