#!/usr/bin/python3
"""PyTorch parity: rebuild plait's GPT in PyTorch (Debian python3-torch) from the
weights and batches written by build/testtools/gpt_parity, in float64, and compare:
logits and loss (normwise relative error <= 1e-5), every parameter gradient (<= 1e-4),
and every parameter after 5 AdamW steps with warmup, cosine decay and clipping (<= 1e-4).

Tolerances: plait computes in fp32 (unit roundoff 6e-8); sums of ~C..N terms and a
softmax over 1024 logits stay well under 1e-5 relative for values; gradients pass
through more accumulations (up to N*C terms), hence 1e-4. Adam divides by sqrt(v),
which amplifies gradient differences where v is tiny, so parameters get 1e-4 too.

usage: torch_parity.py FILE.safetensors   (prints "torch_parity: N passed, N failed")
"""
import json
import math
import struct
import sys

import numpy as np
import torch

torch.set_grad_enabled(True)
DT = torch.float64


def read_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        dtype = {"F32": np.float32, "I32": np.int32}[t["dtype"]]
        out[name] = np.frombuffer(data[b:e], dtype=dtype).reshape(t["shape"])
    return out, meta


def megatron_lr(step_samples, max_lr, min_lr, warmup, decay):
    """OptimizerParamScheduler.get_lr with init_lr 0, cosine (megatron-facts 9.1)."""
    if warmup > 0 and step_samples <= warmup:
        return max_lr * step_samples / warmup
    if step_samples > decay:
        return min_lr
    ratio = (step_samples - warmup) / (decay - warmup)
    return min_lr + 0.5 * (math.cos(math.pi * ratio) + 1.0) * (max_lr - min_lr)


def forward(P, tokens, cfg):
    """Megatron GPT with learned positions, pre-LN, per-head interleaved QKV, tied head."""
    L, C, NH = cfg["layers"], cfg["hidden"], cfg["heads"]
    B, T = tokens.shape
    HS = C // NH
    x = P["embedding.word_embeddings.weight"][tokens] + P["embedding.position_embeddings.weight"][:T]
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    ln = torch.nn.functional.layer_norm
    for l in range(L):
        p = lambda s: P[f"decoder.layers.{l}.{s}"]
        h = ln(x, (C,), p("input_layernorm.weight"), p("input_layernorm.bias"), 1e-5)
        qkv = h @ p("self_attention.linear_qkv.weight").T + p("self_attention.linear_qkv.bias")
        qkv = qkv.view(B, T, NH, 3, HS)
        q, k, v = (qkv[:, :, :, i, :].transpose(1, 2) for i in range(3))
        s = (q @ k.transpose(-1, -2)) / math.sqrt(HS)
        a = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1) @ v
        a = a.transpose(1, 2).reshape(B, T, C)
        x = x + a @ p("self_attention.linear_proj.weight").T + p("self_attention.linear_proj.bias")
        h = ln(x, (C,), p("pre_mlp_layernorm.weight"), p("pre_mlp_layernorm.bias"), 1e-5)
        h = torch.nn.functional.gelu(h @ p("mlp.linear_fc1.weight").T + p("mlp.linear_fc1.bias"),
                                     approximate="tanh")
        x = x + h @ p("mlp.linear_fc2.weight").T + p("mlp.linear_fc2.bias")
    x = ln(x, (C,), P["decoder.final_layernorm.weight"], P["decoder.final_layernorm.bias"], 1e-5)
    return x @ P["embedding.word_embeddings.weight"].T


def rel(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def main():
    T_, meta = read_safetensors(sys.argv[1])
    cfg = json.loads(meta["config"])
    names = [k[len("init."):] for k in T_ if k.startswith("init.")]
    P = {n: torch.tensor(T_["init." + n], dtype=DT, requires_grad=True) for n in names}
    B, S, steps = cfg["batch"], cfg["seq"], cfg["steps"]
    batches = torch.tensor(T_["batches"].astype(np.int64))
    passed = failed = 0

    def check(what, err, tol):
        nonlocal passed, failed
        ok = err <= tol
        passed += ok
        failed += not ok
        print(f"{'ok' if ok else 'not ok'} {what}: relative error {err:.2e} (tolerance {tol:g})")

    decay = [n for n in names if P[n].dim() == 2]
    no_decay = [n for n in names if P[n].dim() == 1]
    opt = torch.optim.AdamW([{"params": [P[n] for n in decay], "weight_decay": cfg["weight_decay"]},
                             {"params": [P[n] for n in no_decay], "weight_decay": 0.0}],
                            lr=0.0, betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"])
    for s in range(steps):
        rows = batches[s * B:(s + 1) * B]
        tokens, targets = rows[:, :-1], rows[:, 1:]
        opt.zero_grad()
        logits = forward(P, tokens, cfg)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 targets.reshape(-1))
        loss.backward()
        if s == 0:
            check("logits", rel(T_["logits"], logits.detach().reshape(-1, logits.shape[-1])), 1e-5)
            check("loss", rel(T_["loss"], [loss.item()]), 1e-5)
            worst = max(names, key=lambda n: rel(T_["grad." + n], P[n].grad))
            for n in names:
                check(f"gradient {n}", rel(T_["grad." + n], P[n].grad), 1e-4)
            print(f"# worst gradient: {worst} {rel(T_['grad.' + worst], P[worst].grad):.2e}")
        norm = torch.nn.utils.clip_grad_norm_([P[n] for n in names], cfg["clip_grad"])
        check(f"grad norm step {s + 1}", rel(T_["grad_norm"][s], [norm.item()]), 1e-4)
        lr = megatron_lr(s * B, 1e-3, 1e-4, 2 * B, steps * B)
        check(f"lr step {s + 1}", rel(T_["lr"][s], [lr]), 1e-6)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
    for n in names:
        check(f"after {steps} steps {n}", rel(T_["final." + n], P[n].detach()), 1e-4)
    print(f"torch_parity: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
