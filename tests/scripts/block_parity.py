#!/usr/bin/python3
"""One transformer layer against PyTorch, and layouts against each other.

  block_parity.py torch FILE...   rebuild the layer each FILE describes (written by
                                  build/testtools/block_parity) in PyTorch, float64, from
                                  its parameters and inputs, and compare the output, the
                                  input's gradient, the encoder output's gradient and
                                  every parameter's gradient.
  block_parity.py same A B        two runs of one layer (e.g. one process and tensor
                                  parallelism 2 with sequence parallelism) give the same
                                  tensors within fp32 rounding.

The reference is written from the definitions, not from plait's code: pre-norm
(x + f(norm(x))), pre-norm with the residual taken after the norm (norm(x) + f(norm(x)):
Megatron's --apply-residual-connection-post-layernorm, ParallelTransformerLayer's
`residual = layernorm_output`, for the cross-attention residual too) or post-norm
(norm(x + f(x))) residual branches; LayerNorm with the
biased variance or RMSNorm (x / sqrt(mean(x^2) + eps), times the gain, plus the bias);
self-attention from Megatron's QKV rows (per key/value group its query heads, then k, then
v; per head [q, k, v] for multi-head), causal, padded (keys at or past
a sample's length masked) or unmasked; cross-attention with queries from the layer
and per-head [k, v] rows from the encoder output (Megatron core's linear_q and
linear_kv), the encoder's padding masking its keys; GELU (tanh form) MLP; dropout as
plait's exported masks (0 or 1/(1-p)) multiplied in at the attention probabilities
and the three branch outputs. Autograd gives the gradients for the upstream
gradient dy the file carries.

Tolerances: plait computes in fp32 (u = 6e-8) with sums of at most a few hundred
terms; normwise relative error 1e-5 for the output and every gradient, as
torch_parity.py's forward (gradients of this one layer pass through fewer
accumulations than a whole model's, so the same bound holds). Layouts (same):
tensor parallelism reorders sums, so 2e-6 normwise (a few ulp), and the encoder
output's gradient, summed over ranks, the same.
"""
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_parity import read_safetensors as read_raw  # noqa: E402

DT = torch.float64
TOL = 1e-5
TOL_SAME = 2e-6


def read_safetensors(path):
    """The file's tensors, and its config (the metadata's JSON)."""
    tensors, meta = read_raw(path)
    return tensors, json.loads(meta["config"])


def rel(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    d = np.linalg.norm(b)
    return float(np.linalg.norm(a - b) / (d if d > 0 else 1.0))


passed = failed = 0


def check(ok, what):
    global passed, failed
    print(("ok " if ok else "not ok ") + what)
    if ok:
        passed += 1
    else:
        failed += 1


def norm(x, w, b, kind, eps):
    if kind == "rmsnorm":
        y = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w
    else:
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        y = (x - mu) / torch.sqrt(var + eps) * w
    return y + b if b is not None else y


def attend(q, k, v, allowed, drop):
    """q (B,NH,T,HS), k, v (B,NH,S,HS), allowed (B,1,T,S) bool, drop (B,NH,T,S) or None."""
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    p = torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1)
    if drop is not None:
        p = p * drop
    return p @ v


def layer(t, cfg, P, placement=None, masks=True, enc_len=True, res_post=None):
    """The layer's output for the file's inputs; P: parameter tensors by name suffix.
    The negative controls: placement (0 pre-norm, 1 post-norm) other than the file's,
    the residual before the norm instead of after it (res_post), without the dropout
    masks, without the encoder's padding."""
    B = t["pad_len"].shape[0]
    N, C = t["x"].shape
    T = N // B
    NH = cfg["heads"]
    HS = C // NH
    kind, eps, named_post = cfg["norm"], cfg["eps"], cfg["post_norm"]
    post = named_post if placement is None else placement
    after = cfg.get("res_post_norm", 0) if res_post is None else res_post
    drop = {k[5:]: torch.tensor(v, dtype=DT) for k, v in t.items()
            if k.startswith("mask.") and masks}
    names = {1: ("input_layernorm", "post_self_attn_layernorm"),
             2: ("pre_cross_attn_layernorm", "post_cross_attn_layernorm"),
             3: ("pre_mlp_layernorm", "post_mlp_layernorm")}

    def nrm(h, site):
        n = names[site][1 if named_post else 0]
        return norm(h, P[n + ".weight"], P.get(n + ".bias"), kind, eps)

    def branch(h, site, f, out_mask):
        hn = h if post else nrm(h, site)
        y = f(hn)
        if out_mask in drop:
            y = y * drop[out_mask]
        return nrm(h + y, site) if post else (hn if after else h) + y

    pad = torch.tensor(t["pad_len"].astype(np.int64))
    qpos = torch.arange(T).view(1, 1, T, 1)
    kpos = torch.arange(T).view(1, 1, 1, T)
    if cfg["mask"] == "causal":
        allowed = (kpos <= qpos).expand(B, 1, T, T)
    elif cfg["mask"] == "padding":
        allowed = (kpos < pad.view(B, 1, 1, 1)).expand(B, 1, T, T)
    else:
        allowed = torch.ones(B, 1, T, T, dtype=torch.bool)

    def self_attn(h):
        qkv = h @ P["self_attention.linear_qkv.weight"].T + P["self_attention.linear_qkv.bias"]
        G = cfg.get("groups", NH)
        QG = NH // G
        qkv = qkv.view(B, T, G, QG + 2, HS)  # per group: its QG query heads, k, v
        q = qkv[:, :, :, :QG].reshape(B, T, NH, HS).transpose(1, 2)
        k = qkv[:, :, :, QG].repeat_interleave(QG, dim=2).transpose(1, 2)
        v = qkv[:, :, :, QG + 1].repeat_interleave(QG, dim=2).transpose(1, 2)
        o = attend(q, k, v, allowed, drop.get("attention_probs"))
        o = o.permute(0, 2, 1, 3).reshape(N, C)
        return o @ P["self_attention.linear_proj.weight"].T + P["self_attention.linear_proj.bias"]

    def cross_attn(h):
        enc = P["__enc"]
        S = enc.shape[0] // B
        q = (h @ P["cross_attention.linear_q.weight"].T + P["cross_attention.linear_q.bias"])
        q = q.view(B, T, NH, HS).transpose(1, 2)
        kv = enc @ P["cross_attention.linear_kv.weight"].T + P["cross_attention.linear_kv.bias"]
        kv = kv.view(B, S, NH, 2, HS).permute(3, 0, 2, 1, 4)  # per head [k, v]
        if "enc_len" in t and enc_len:
            el = torch.tensor(t["enc_len"].astype(np.int64))
            ok = (torch.arange(S).view(1, 1, 1, S) < el.view(B, 1, 1, 1)).expand(B, 1, T, S)
        else:
            ok = torch.ones(B, 1, T, S, dtype=torch.bool)
        o = attend(q, kv[0], kv[1], ok, drop.get("cross_probs"))
        o = o.transpose(1, 2).reshape(N, C)
        return o @ P["cross_attention.linear_proj.weight"].T + P["cross_attention.linear_proj.bias"]

    def mlp(h):
        a = torch.nn.functional.gelu(h @ P["mlp.linear_fc1.weight"].T + P["mlp.linear_fc1.bias"],
                                     approximate="tanh")
        return a @ P["mlp.linear_fc2.weight"].T + P["mlp.linear_fc2.bias"]

    h = branch(P["__x"], 1, self_attn, "attention_output")
    if cfg["cross"]:
        h = branch(h, 2, cross_attn, "cross_output")
    return branch(h, 3, mlp, "mlp_output")


def torch_case(path):
    t, cfg = read_safetensors(path)
    P = {k[6:]: torch.tensor(v, dtype=DT, requires_grad=True)
         for k, v in t.items() if k.startswith("param.")}
    P["__x"] = torch.tensor(t["x"], dtype=DT, requires_grad=True)
    if cfg["cross"]:
        P["__enc"] = torch.tensor(t["enc"], dtype=DT, requires_grad=True)
    y = layer(t, cfg, P)
    y.backward(torch.tensor(t["dy"], dtype=DT))
    label = "%s (%s, %s mask%s%s%s)" % (
        path.split("/")[-1], "post-norm" if cfg["post_norm"]
        else "pre-norm, residual after the norm" if cfg.get("res_post_norm") else "pre-norm",
        cfg["mask"],
        ", cross-attention to %d positions" % cfg["cross"] if cfg["cross"] else "",
        ", " + cfg["norm"], ", dropout %g" % cfg["dropout"] if cfg["dropout"] else "")
    e = rel(t["y"], y.detach().numpy())
    check(e < TOL, "%s: output within %g of PyTorch (%.2e)" % (label, TOL, e))
    e = rel(t["dx"], P["__x"].grad.numpy())
    check(e < TOL, "%s: input gradient (%.2e)" % (label, e))
    if cfg["cross"]:
        e = rel(t["denc"], P["__enc"].grad.numpy())
        check(e < TOL, "%s: encoder output gradient (%.2e)" % (label, e))
    worst, which = 0.0, ""
    for k, v in P.items():
        if k.startswith("__"):
            continue
        e = rel(t["grad." + k], v.grad.numpy())
        if e > worst:
            worst, which = e, k
    n = sum(1 for k in P if not k.startswith("__"))
    check(worst < TOL, "%s: all %d parameter gradients (worst %.2e, %s)" % (label, n, worst, which))
    # the checks can fail: the other norm placement, the layer without its dropout masks
    # or without the encoder's padding, computes something else
    controls = [("the other norm placement", cfg, dict(placement=1 - cfg["post_norm"]))]
    if cfg.get("res_post_norm"):
        controls.append(("the residual before the norm (ordinary pre-norm)", cfg,
                         dict(res_post=0)))
    if cfg["dropout"]:
        controls.append(("no dropout masks", cfg, dict(masks=False)))
    if "enc_len" in t:
        controls.append(("no encoder padding", cfg, dict(enc_len=False)))
    if cfg["mask"] == "padding":
        controls.append(("no padding mask", dict(cfg, mask="none"), {}))
    for what, c2, kw in controls:
        with torch.no_grad():
            e = rel(t["y"], layer(t, c2, P, **kw).numpy())
        check(e > 100 * TOL, "%s: the reference with %s differs (%.2e)" % (label, what, e))


def same(a, b):
    ta, ca = read_safetensors(a)
    tb, cb = read_safetensors(b)
    label = "%s vs %s" % (a.split("/")[-1], b.split("/")[-1])
    check(sorted(ta) == sorted(tb), "%s: the same tensors" % label)
    worst, which = 0.0, ""
    for k in ta:
        if k in tb and ta[k].dtype == np.float32:
            e = rel(ta[k], tb[k])
            if e > worst:
                worst, which = e, k
        elif k in tb:
            check(np.array_equal(ta[k], tb[k]), "%s: %s equal" % (label, k))
    check(worst < TOL_SAME, "%s (tp %d%s vs tp %d%s): every tensor within %g (worst %.2e, %s)" % (
        label, ca["tp"], " sp" if ca["sp"] else "", cb["tp"], " sp" if cb["sp"] else "",
        TOL_SAME, worst, which))


if __name__ == "__main__":
    torch.set_num_threads(1)
    if len(sys.argv) >= 3 and sys.argv[1] == "torch":
        for f in sys.argv[2:]:
            torch_case(f)
    elif len(sys.argv) == 4 and sys.argv[1] == "same":
        same(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
    print("block_parity: %d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)
