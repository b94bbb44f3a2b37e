#!/usr/bin/python3
"""The same Llama as plait's `--model llama` (RMSNorm, rotary embeddings rotating
whole heads by rotate_half, SwiGLU MLP with fc1 = [gate; up], grouped-query
attention, no biases, untied output layer, no dropout, AdamW) in PyTorch, trained
on random tokens; prints one JSON line with tokens_per_sec, step_ms and
peak_rss_bytes, as bench/torch_gpt2.py does.

usage: torch_llama.py --layers L --hidden C --heads NH --kv-heads G --ffn F --vocab V
                      --seq T --batch B [--steps N] [--warmup W] [--threads K] [--bf16]
                      [--rotary-base R] [--eps E] [--glibc-malloc-defaults]

Written to be as fast as this PyTorch (Debian's 1.13, no fused attention, no
torch.compile, no nn.RMSNorm) is here, so that the comparison does not flatter
plait. Choices measured on this machine (2 threads, fp32 and bf16 autocast,
forward + backward of one layer's attention at B 2, T 512, 12 heads of 64):
- Attention is baddbmm (scores = mask + scale * q k^T in one call, the additive
  causal mask built once) + softmax + bmm: 2-4x faster than torch_gpt2.py's
  separate matmul, scale and mask add, and faster than 1.13's
  F._scaled_dot_product_attention (a composite of the same math ops, no fused
  kernel on CPU).
- Grouped-query attention without copying K and V: the QG = NH / G query heads
  of a group attend to its one K, V as one (QG T) x T product per group (the
  mask repeated QG times), instead of repeat_interleave'ing K and V to NH heads;
  equal to the repeat_interleave form to 1e-16 in float64, forward and backward.
- glibc malloc keeps what it frees (no mmap'd chunks, no trimming), set in-process
  with mallopt as plait does for itself (src/parallel/dist.c): PyTorch allocates
  its activations and optimizer temporaries afresh every step, and with glibc's
  defaults each large one is a new mapping whose pages fault in on first touch
  (~10 us per 4 KiB page on this VM). AdamW's step over the 134M parameters of
  the 12 x 768 Llama fell from a median 3.7-6.6 s to 2.4 s (load ~5).
  --glibc-malloc-defaults measures without it. (PyTorch's own CPU tuning guide
  suggests jemalloc or tcmalloc for the same reason; neither is installed here.)
  AdamW's foreach=True was no faster and took 0.6 GiB more.
The QKV rows are Megatron's (per group: its QG query heads, then k, then v), so
the weights are laid out as plait's and Megatron's; fc1's rows are [gate; up].
"""
import argparse
import ctypes
import json
import math
import resource
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * w (torch 1.13 has no nn.RMSNorm)."""

    def __init__(self, C, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(C))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Block(nn.Module):
    def __init__(self, C, NH, G, FF, eps):
        super().__init__()
        self.NH, self.G, self.HS = NH, G, C // NH
        self.input_layernorm, self.pre_mlp_layernorm = RMSNorm(C, eps), RMSNorm(C, eps)
        self.linear_qkv = nn.Linear(C, (NH + 2 * G) * self.HS, bias=False)
        self.linear_proj = nn.Linear(NH * self.HS, C, bias=False)
        self.linear_fc1 = nn.Linear(C, 2 * FF, bias=False)
        self.linear_fc2 = nn.Linear(FF, C, bias=False)

    def forward(self, x, cos, sin, mask):
        B, T, C = x.shape
        NH, G, HS = self.NH, self.G, self.HS
        QG = NH // G
        qkv = self.linear_qkv(self.input_layernorm(x)).view(B, T, G, QG + 2, HS)
        # split, not slicing: its backward is one cat, where each slice's backward
        # would fill a zero tensor the size of qkv.
        q, k, v = qkv.split((QG, 1, 1), dim=3)
        q = q.reshape(B, T, NH, HS).transpose(1, 2)                   # (B, NH, T, HS)
        k, v = k.squeeze(3).transpose(1, 2), v.squeeze(3).transpose(1, 2)  # (B, G, T, HS)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        # Heads are group-major (head h uses group h // QG), so (B, NH, T, HS) is
        # (B, G, QG T, HS): each group's queries against its own K and V.
        s = torch.baddbmm(mask, q.reshape(B * G, QG * T, HS),
                          k.reshape(B * G, T, HS).transpose(1, 2), alpha=1.0 / math.sqrt(HS))
        a = torch.bmm(torch.softmax(s, dim=-1), v.reshape(B * G, T, HS))
        x = x + self.linear_proj(a.view(B, NH, T, HS).transpose(1, 2).reshape(B, T, NH * HS))
        gate, up = self.linear_fc1(self.pre_mlp_layernorm(x)).chunk(2, dim=-1)
        return x + self.linear_fc2(F.silu(gate) * up)


class Llama(nn.Module):
    def __init__(self, L, C, NH, G, FF, V, T, base, eps):
        super().__init__()
        assert C % NH == 0 and NH % G == 0 and (C // NH) % 2 == 0
        self.word_embeddings = nn.Embedding(V, C)
        self.layers = nn.ModuleList(Block(C, NH, G, FF, eps) for _ in range(L))
        self.final_layernorm = RMSNorm(C, eps)
        self.output_layer = nn.Linear(C, V, bias=False)
        HS, QG = C // NH, NH // G
        # Megatron's RotaryEmbedding: inv_freq[i] = base^(-2i/HS), angles duplicated
        # over both halves for rotate_half.
        inv = base ** (-torch.arange(0, HS, 2, dtype=torch.float64) / HS)
        ang = torch.outer(torch.arange(T, dtype=torch.float64), inv).repeat(1, 2)
        self.register_buffer("cos", ang.cos().float(), persistent=False)
        self.register_buffer("sin", ang.sin().float(), persistent=False)
        causal = torch.zeros(T, T).masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1),
                                               float("-inf"))
        self.register_buffer("mask", causal.repeat(QG, 1), persistent=False)  # (QG T, T)
        # plait's (and Megatron's) initialisation: N(0, 0.02), output projections
        # (linear_proj, linear_fc2) 0.02 / sqrt(2 L), norm weights 1. PyTorch's
        # defaults (N(0, 1) embeddings) give logits so large that softmax
        # underflows into denormals, which run ~20x slower on x86 and would distort
        # the timing.
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith(("linear_proj.weight", "linear_fc2.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets):
        x = self.word_embeddings(idx)
        T = idx.shape[1]
        cos, sin = self.cos[:T], self.sin[:T]
        for b in self.layers:
            x = b(x, cos, sin, self.mask)
        logits = self.output_layer(self.final_layernorm(x))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def keep_freed_memory():
    """glibc: no mmap'd chunks, never trim the heap (M_MMAP_MAX 0, M_TRIM_THRESHOLD max)."""
    libc = ctypes.CDLL("libc.so.6")
    libc.mallopt(-4, 0)
    libc.mallopt(-1, 2**31 - 1)


def main():
    p = argparse.ArgumentParser()
    for a, d in [("layers", 12), ("hidden", 768), ("heads", 12), ("kv-heads", 4), ("ffn", 2048),
                 ("vocab", 32000), ("seq", 512), ("batch", 2), ("steps", 10), ("warmup", 2),
                 ("threads", 2)]:
        p.add_argument("--" + a, type=int, default=d)
    p.add_argument("--rotary-base", type=float, default=10000.0)
    p.add_argument("--eps", type=float, default=1e-5)
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--glibc-malloc-defaults", action="store_true")
    a = p.parse_args()
    if not a.glibc_malloc_defaults:
        keep_freed_memory()
    torch.manual_seed(0)
    torch.set_num_threads(a.threads)
    model = Llama(a.layers, a.hidden, a.heads, a.kv_heads, a.ffn, a.vocab, a.seq, a.rotary_base, a.eps)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    times = []
    for step in range(a.warmup + a.steps):
        idx = torch.randint(0, a.vocab, (a.batch, a.seq + 1))
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            loss = model(idx[:, :-1], idx[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
    step_s = sorted(times)[len(times) // 2]
    print(json.dumps({"impl": "pytorch", "torch": torch.__version__, "tokens_per_sec":
                      a.batch * a.seq / step_s, "step_ms": 1e3 * step_s, "peak_rss_bytes":
                      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "parameters": sum(p.numel() for p in model.parameters()),
                      "malloc": "glibc defaults" if a.glibc_malloc_defaults else "keep freed",
                      "loss": loss.item()}))


if __name__ == "__main__":
    main()
