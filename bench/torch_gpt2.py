#!/usr/bin/python3
"""The same GPT-2 as plait's (pre-LN, learned positions, tied head, GELU tanh,
AdamW) in PyTorch, trained on random tokens; prints one JSON line with
tokens_per_sec, step_ms and peak_rss_bytes.

usage: torch_gpt2.py --layers L --hidden C --heads NH --vocab V --seq T --batch B
                     [--steps N] [--warmup W] [--threads K] [--bf16] [--recompute]

--recompute: each block under torch.utils.checkpoint (its activations recomputed in
backward), PyTorch's counterpart of plait's --recompute-granularity full.
"""
import argparse
import json
import math
import resource
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.NH = NH
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc1, self.fc2 = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, T, self.NH, 3, C // self.NH).unbind(3)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
        att = torch.softmax((q @ k.transpose(-1, -2)) / math.sqrt(C // self.NH)
                            + torch.zeros(T, T).masked_fill(mask, float("-inf")), -1) @ v
        x = x + self.proj(att.transpose(1, 2).reshape(B, T, C))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, C, NH, V, T, recompute=False):
        super().__init__()
        self.recompute = recompute
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.lnf = nn.LayerNorm(C)
        # plait's (and Megatron's) initialisation: N(0, 0.02), output projections
        # 0.02 / sqrt(2 L), zero biases. PyTorch's defaults (N(0, 1) embeddings
        # tied to the head) give logits so large that softmax underflows into
        # denormals, which run ~20x slower on x86 and would distort the timing.
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() == 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith(("proj.weight", "fc2.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = torch.utils.checkpoint.checkpoint(b, x) if self.recompute else b(x)
        logits = self.lnf(x) @ self.wte.weight.T
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def main():
    p = argparse.ArgumentParser()
    for a, d in [("layers", 12), ("hidden", 768), ("heads", 12), ("vocab", 50257), ("seq", 256),
                 ("batch", 4), ("steps", 10), ("warmup", 2), ("threads", 2)]:
        p.add_argument("--" + a, type=int, default=d)
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--recompute", action="store_true")
    a = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(a.threads)
    model = GPT(a.layers, a.hidden, a.heads, a.vocab, a.seq, a.recompute)
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
                      "loss": loss.item()}))


if __name__ == "__main__":
    main()
