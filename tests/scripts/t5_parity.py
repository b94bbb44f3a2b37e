#!/usr/bin/python3
"""PyTorch parity of plait's T5 (model/encdec.h): an independent float64 T5 written from
Megatron core's T5Model (local spec) - shared word and learned position embeddings; an
encoder of pre-LN layers attending both ways within each source's length;
encoder.final_layernorm; a decoder of pre-LN layers: causal self-attention, then
cross-attention (queries from pre_cross_attn_layernorm's output by linear_q, per head
[k; v] from the encoder output by linear_kv, keys beyond the source length masked,
linear_proj), then the MLP (tanh GELU, Megatron's fused bias-GELU);
decoder.final_layernorm; logits = . word_embeddings^T + lm_head.output_layer.bias - built
from the weights and batches build/testtools/encdec_parity wrote, and compared: logits and
loss (1e-5), every gradient (1e-4), the parameters after 5 AdamW steps with warmup,
cosine decay and clipping (1e-4); torch_parity.py's tolerances and arguments.

usage: t5_parity.py FILE.safetensors...  (prints "t5_parity: N passed, N failed")
"""
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_parity import megatron_lr, read_safetensors, rel, run_files  # noqa: E402

DT = torch.float64


def attend(q, k, v, allowed):
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    return torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1) @ v


def forward(P, src, src_len, dec, cfg):
    C, NH = cfg["hidden"], cfg["heads"]
    HS = C // NH
    B, Te = src.shape
    Td = dec.shape[1]
    ln = torch.nn.functional.layer_norm
    wte, wpe = P["embedding.word_embeddings.weight"], P["embedding.position_embeddings.weight"]

    def lin(x, name):
        return x @ P[name + ".weight"].T + P[name + ".bias"]

    def norm(x, name):
        return ln(x, (C,), P[name + ".weight"], P[name + ".bias"], 1e-5)

    # Megatron's --apply-residual-connection-post-layernorm (ParallelTransformerLayer,
    # default_decoder_cross_attention): each residual is the branch's norm output
    after = cfg.get("res_post_norm", 0)

    def branch(x, name, f):
        h = norm(x, name)
        return (h if after else x) + f(h)

    def heads(x, T):
        return x.view(B, T, NH, HS).transpose(1, 2)

    def self_attn(h, pre, T, allowed):
        qkv = lin(h, pre + "self_attention.linear_qkv").view(B, T, NH, 3, HS)
        q, k, v = (qkv[:, :, :, i].transpose(1, 2) for i in range(3))
        o = attend(q, k, v, allowed).transpose(1, 2).reshape(B, T, C)
        return lin(o, pre + "self_attention.linear_proj")

    def mlp(h, pre):
        a = torch.nn.functional.gelu(lin(h, pre + "mlp.linear_fc1"), approximate="tanh")
        return lin(a, pre + "mlp.linear_fc2")

    keys_ok = (torch.arange(Te).view(1, 1, 1, Te) < src_len.view(B, 1, 1, 1))
    x = wte[src] + wpe[:Te]
    for l in range(cfg["enc_layers"]):
        pre = f"encoder.layers.{l}."
        x = branch(x, pre + "input_layernorm",
                   lambda h: self_attn(h, pre, Te, keys_ok.expand(B, 1, Te, Te)))
        x = branch(x, pre + "pre_mlp_layernorm", lambda h: mlp(h, pre))
    enc = norm(x, "encoder.final_layernorm")
    causal = torch.ones(Td, Td, dtype=torch.bool).tril().view(1, 1, Td, Td).expand(B, 1, Td, Td)
    y = wte[dec] + wpe[:Td]
    for l in range(cfg["dec_layers"]):
        pre = f"decoder.layers.{l}."
        y = branch(y, pre + "input_layernorm", lambda h: self_attn(h, pre, Td, causal))

        def cross(h):
            q = heads(lin(h, pre + "cross_attention.linear_q"), Td)
            kv = lin(enc, pre + "cross_attention.linear_kv").view(B, Te, NH, 2, HS)
            k, v = kv[:, :, :, 0].transpose(1, 2), kv[:, :, :, 1].transpose(1, 2)
            o = attend(q, k, v, keys_ok.expand(B, 1, Td, Te)).transpose(1, 2).reshape(B, Td, C)
            return lin(o, pre + "cross_attention.linear_proj")
        y = branch(y, pre + "pre_cross_attn_layernorm", cross)
        y = branch(y, pre + "pre_mlp_layernorm", lambda h: mlp(h, pre))
    y = norm(y, "decoder.final_layernorm")
    return y @ wte.T + P["lm_head.output_layer.bias"]


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
    tag = "[t5, fp32%s] " % (", residual after the norm" if cfg.get("res_post_norm") else "")
    for s in range(steps):
        row = batch[s]
        src = row[:B * Te].view(B, Te)
        dec = row[B * Te:B * Te + B * Td].view(B, Td)
        tgt = row[B * Te + B * Td:B * Te + 2 * B * Td].view(B, Td)
        src_len = row[B * Te + 2 * B * Td:]
        opt.zero_grad()
        logits = forward(P, src, src_len, dec, cfg)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 tgt.reshape(-1), ignore_index=-1)
        loss.backward()
        if s == 0 and cfg.get("res_post_norm"):  # control: the ordinary pre-norm differs
            with torch.no_grad():
                other = forward(P, src, src_len, dec, dict(cfg, res_post_norm=0))
            e = rel(T_["logits"], other.reshape(-1, other.shape[-1]))
            check(f"{tag}the reference with the residual before the norm differs ({e:.2e})",
                  -e, -1e-3)
        if s == 0:
            check(tag + "logits", rel(T_["logits"], logits.detach().reshape(-1, logits.shape[-1])),
                  1e-5)
            check(tag + "loss", rel(T_["loss"], [loss.item()]), 1e-5)
            for n in names:
                check(f"{tag}gradient {n}", rel(T_["grad." + n], P[n].grad), 1e-4)
        norm = torch.nn.utils.clip_grad_norm_([P[n] for n in names], cfg["clip_grad"])
        check(f"{tag}grad norm step {s + 1}", rel(T_["grad_norm"][s], [norm.item()]), 1e-4)
        lr = megatron_lr(s * B, 1e-3, 1e-4, 2 * B, steps * B)
        check(f"{tag}lr step {s + 1}", rel(T_["lr"][s], [lr]), 1e-6)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
    for n in names:
        check(f"{tag}after {steps} steps {n}", rel(T_["final." + n], P[n].detach()), 1e-4)


def main():
    return run_files(run, "t5_parity")


if __name__ == "__main__":
    sys.exit(main())
