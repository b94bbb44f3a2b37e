#!/usr/bin/python3
"""PyTorch parity of plait's transformers-style T5 (--position-embedding-type relative,
RMSNorm, no biases, --softmax-scale 1, --ffn-activation relu|geglu, tied with the output
layer's input scaled by hidden^-0.5 or untied): the independent HF-structured T5 of
t5_hf_ref.py on views of the weights build/testtools/encdec_parity --hf-t5 wrote, and
compared: logits and loss (1e-5), every gradient (1e-4), the parameters after 5 AdamW
steps with warmup, cosine decay and clipping (1e-4): t5_parity.py's tolerances and
reasons. A control: the same reference with Megatron's 1/sqrt(d) scaling must differ.

usage: t5_hf_parity.py FILE.safetensors...  (prints "t5_hf_parity: N passed, N failed")
"""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from t5_hf_ref import forward, plait_to_hf  # noqa: E402
from torch_parity import megatron_lr, read_safetensors, rel, run_files  # noqa: E402

DT = torch.float64


def run(path, check):
    T_, meta = read_safetensors(path)
    cfg = json.loads(meta["config"])
    names = [k[len("init."):] for k in T_ if k.startswith("init.")]
    B, Te, Td, steps = cfg["batch"], cfg["enc_seq"], cfg["dec_seq"], cfg["steps"]
    batch = torch.tensor(T_["batch"].astype(np.int64))
    P = {n: torch.tensor(T_["init." + n], dtype=DT, requires_grad=True) for n in names}
    decay = [n for n in names if P[n].dim() == 2]
    no_decay = [n for n in names if P[n].dim() == 1]
    opt = torch.optim.AdamW([{"params": [P[n] for n in decay], "weight_decay": cfg["weight_decay"]},
                             {"params": [P[n] for n in no_decay], "weight_decay": 0.0}],
                            lr=0.0, betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"])
    tag = "[hf t5 %s, %s, buckets %d/%d%s] " % (
        cfg["act"], "tied" if cfg["tied"] else "untied", cfg["buckets"], cfg["max_distance"],
        ", heads of %d" % cfg["kv_channels"] if cfg.get("kv_channels") else "")
    for s in range(steps):
        row = batch[s]
        src = row[:B * Te].view(B, Te)
        dec = row[B * Te:B * Te + B * Td].view(B, Td)
        tgt = row[B * Te + B * Td:B * Te + 2 * B * Td].view(B, Td)
        src_len = row[B * Te + 2 * B * Td:]
        opt.zero_grad()
        logits = forward(plait_to_hf(P, cfg), src, src_len, dec, cfg)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 tgt.reshape(-1), ignore_index=-1)
        loss.backward()
        if s == 0:  # control: Megatron's 1/sqrt(d) scores differ
            with torch.no_grad():
                other = forward(plait_to_hf(P, cfg), src, src_len, dec,
                                dict(cfg, score_scale=(cfg.get("kv_channels") or
                                                       cfg["hidden"] // cfg["heads"]) ** -0.5))
            e = rel(T_["logits"], other.reshape(-1, other.shape[-1]))
            check(f"{tag}the reference with 1/sqrt(d) scores differs ({e:.2e})", -e, -1e-3)
            check(tag + "logits", rel(T_["logits"], logits.detach().reshape(-1, logits.shape[-1])),
                  1e-5)
            check(tag + "loss", rel(T_["loss"], [loss.item()]), 1e-5)
            for n in names:
                check(f"{tag}gradient {n}", rel(T_["grad." + n], P[n].grad), 1e-4)
        norm = torch.nn.utils.clip_grad_norm_([P[n] for n in names], cfg["clip_grad"])
        check(f"{tag}grad norm step {s + 1}", rel(T_["grad_norm"][s], [norm.item()]), 1e-4)
        lr = megatron_lr(s * B, 1e-3, 1e-4, 2 * B, steps * B)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
    for n in names:
        check(f"{tag}after {steps} steps {n}", rel(T_["final." + n], P[n].detach()), 1e-4)


def main():
    return run_files(run, "t5_hf_parity")


if __name__ == "__main__":
    sys.exit(main())
