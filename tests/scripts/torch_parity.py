#!/usr/bin/python3
"""PyTorch parity: rebuild plait's GPT or Llama in PyTorch (Debian python3-torch) from the
weights and batches written by build/testtools/model_parity, in float64, and compare:
logits and loss (normwise relative error <= 1e-5), every parameter gradient (<= 1e-4),
and every parameter after 5 AdamW steps with warmup, cosine decay and clipping (<= 1e-4).

Tolerances: plait computes in fp32 (unit roundoff 6e-8); sums of ~C..N terms and a
softmax over 1024 logits stay well under 1e-5 relative for values; gradients pass
through more accumulations (up to N*C terms), hence 1e-4. Adam divides by sqrt(v),
which amplifies gradient differences where v is tiny, so parameters get 1e-4 too.

bf16 (a file written by `model_parity FILE --bf16`, plait's GEMMs in bf16 as with --bf16):
the reference rounds the inputs of the same matrix products to bf16 (linear layers
forward, dx and dW; the LM head's logits, dx and dW; attention's products stay
unrounded, as in plait) and multiplies in float64, so it is plait's arithmetic up to
fp32 accumulation. Tolerances then come from rounding flips: plait's fp32 activations
differ from the float64 ones by ~1e-6 relative, so a fraction ~1e-6 / 2^-8 ~ 3e-4 of the
values rounded to bf16 land on the other neighbour, each off by one bf16 ulp (2^-8 =
3.9e-3); over a product of K such terms this gives ~sqrt(3e-4) * 2^-8 ~ 7e-5 relative,
so logits and loss get 5e-4 (measured 1.4e-4). Gradients pass through several rounded
products, each with its own flips, and small reductions (LayerNorm gains, biases: sums
over rows that cancel) amplify them relative to their size: 5e-3 per tensor (measured
worst 6.8e-4); Adam rescales per element, so parameters after 5 steps get 5e-3 per
tensor too (measured 2.2e-3). Taken together as one vector, all gradients must agree to
1e-3 (measured 1.1e-4) and all parameter updates to 3e-3 (measured 2.7e-3; 2.2e-3
without the key rows below).
The same plait values compared with the unrounded float64 model must differ by MORE
than these tolerances (logits 3.3e-3 > 5e-4, all gradients 3.4e-3 > 1e-3, all updates
7.3e-3 > 3e-3), so the test fails if bf16 was not applied.

Saved activations under bf16: plait keeps qkv, the attention output and fc1 in bf16
and goes on with the rounded values, so the reference rounds the same three (the
gradient passes through the rounding unchanged) and its attention backward takes
D = rowsum(dO * O) from the rounded O, as plait's does. One quantity is then noise by
construction: the key rows of the QKV bias. Softmax ignores a shift shared by a
query's scores, so their gradient sum_t q_t sum_s dS_ts is exactly 0 with D =
rowsum(P * dP); with D from the rounded O it is q-weighted sums of O's rounding
residuals (measured 7e-7 against 5e-2 for the value rows). Rounding flips (above)
make ~2-5% of that residual differ between plait and the reference, and Adam, whose
eps (1e-8) is below these gradients, turns them into full-size steps whose signs
follow the noise: after 5 steps the key rows differ by 20-50%. So under bf16 the QKV
bias is checked on its q and v rows at the per-tensor tolerance, and its key rows'
gradient must be noise-sized (under 1e-4 of the tensor's gradient) in both plait and
the reference; the key rows stay in the all-gradients and all-updates checks.

fp16 (`model_parity FILE --fp16`: plait's GEMMs in fp16 mode, static loss scale 1024, taken
off the gradients before clipping and Adam, as `plait train --fp16 --loss-scale 1024`):
the reference rounds the same products' inputs to fp16 (denormals below 2^-14 included),
scales the loss by the same 1024 and divides the gradients by it; activations stay
unrounded on both sides (plait keeps fp32 activations under --fp16). fp16's grid is 8x
finer than bf16's (u = 2^-11 = 4.9e-4), so a small fp32-vs-float64 difference flips more
roundings, and each flip moves a whole row of the next product by ~u / sqrt(K), enough to
flip further roundings downstream: measured, 12.5% of the final LayerNorm's outputs
round differently and the forward states differ by 5.8e-5 (bf16: 0.2% and 2.5e-5). The
agreement therefore saturates near u / 4 rather than improving with the finer grid:
logits and loss and all gradients together get u / 2 = 2.5e-4 (measured 1.4e-4 and
1.4e-4), all updates u = 5e-4 (measured 3.3e-4); per tensor 2e-3 (4u; measured worst
gradient 3.0e-4, parameter 4.0e-4). The same plait values differ from the unrounded model
by more (logits 3.9e-4, gradients 4.1e-4, updates 7.2e-4), so the test fails if fp16 was
not applied.

Llama (`model_parity FILE --model llama [--groups G] [--rope-scaling]`): an independent
PyTorch Llama (forward_llama: RMSNorm, rotate-half RoPE on (B, heads, T, HS), SwiGLU by
chunk, K/V shared by repeat_interleave, untied head) with the same tolerances in each
precision; reduced precision rounds what plait rounds (the GEMM inputs; q, k after RoPE,
v, the attention output and fc1 under bf16).
Dropout (`--dropout P`, fp32): plait's masks, computed by the tool from the documented
formulas, are applied by the reference at the same places (embeddings, attention
probabilities, each branch's output before the residual add), so it checks that plait
drops exactly those elements with exactly that scale; the tolerances are fp32's.

usage: torch_parity.py FILE.safetensors...
       (prints "torch_parity: N passed, N failed" once for all files)
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


def bf16(x):
    """x rounded to bf16 (round to nearest even), back in float64."""
    return x.to(torch.bfloat16).to(DT)


def fp16(x):
    """x rounded to fp16 (round to nearest even, denormals below 2^-14), in float64."""
    return x.to(torch.float16).to(DT)


def rounded_matmul(rnd):
    """y = x . w^T with both inputs rounded by rnd; backward rounds the inputs of
    dx = dy . w and dw = dy^T . x the same way (plait's GEMMs in bf16 or fp16 mode)."""

    class RoundedMatMul(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return rnd(x) @ rnd(w).T

        @staticmethod
        def backward(ctx, dy):
            x, w = ctx.saved_tensors
            x2, dy2 = x.reshape(-1, x.shape[-1]), dy.reshape(-1, dy.shape[-1])
            dx = (rnd(dy2) @ rnd(w)).reshape(x.shape)
            dw = rnd(dy2).T @ rnd(x2)
            return dx, dw

    return RoundedMatMul.apply


class RoundBF16(torch.autograd.Function):
    """A saved activation under --bf16 (qkv, fc1): forward goes on with x rounded to
    bf16; the gradient passes through unchanged (plait's backward gets dqkv, dfc1
    in fp32 and feeds them to the GEMMs)."""

    @staticmethod
    def forward(ctx, x):
        return bf16(x)

    @staticmethod
    def backward(ctx, dy):
        return dy


class BF16Attention(torch.autograd.Function):
    """Causal attention of bf16-rounded q, k, v whose output is saved in bf16
    (plait's attn under --bf16). Backward is plait's (and FlashAttention's): with P
    recomputed from q, k and D = rowsum(dO * O) taken from the saved, rounded O,
    dS = P (dP - D); so D is not exactly rowsum(P * dP) as autograd would have it."""

    @staticmethod
    def forward(ctx, q, k, v, mask):
        p = torch.softmax(((q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1]))
                          .masked_fill(mask, float("-inf")), dim=-1)
        o = bf16(p @ v)
        ctx.save_for_backward(q, k, v, o, p)
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, p = ctx.saved_tensors
        scale = 1.0 / math.sqrt(q.shape[-1])
        dv = p.transpose(-1, -2) @ do
        dp = do @ v.transpose(-1, -2)
        ds = p * (dp - (do * o).sum(-1, keepdim=True)) * scale
        return ds @ k, ds.transpose(-1, -2) @ q, dv, None


def mm_exact(x, w):
    return x @ w.T


def attention_exact(q, k, v, mask):
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    return torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1) @ v


EXACT = (mm_exact, lambda x: x, attention_exact)
OPS = {"fp32": EXACT,
       "bf16": (rounded_matmul(bf16), RoundBF16.apply, BF16Attention.apply),
       "fp16": (rounded_matmul(fp16), lambda x: x, attention_exact)}


def forward(P, tokens, cfg, ops=EXACT):
    """Megatron GPT with learned positions, pre-LN, per-head interleaved QKV, tied head.
    ops: the matrix product, the rounding of saved activations, the attention core."""
    mm, keep, attention = ops
    L, C, NH = cfg["layers"], cfg["hidden"], cfg["heads"]
    B, T = tokens.shape
    HS = C // NH
    x = P["embedding.word_embeddings.weight"][tokens] + P["embedding.position_embeddings.weight"][:T]
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    ln = torch.nn.functional.layer_norm
    for l in range(L):
        p = lambda s: P[f"decoder.layers.{l}.{s}"]
        h = ln(x, (C,), p("input_layernorm.weight"), p("input_layernorm.bias"), 1e-5)
        qkv = keep(mm(h, p("self_attention.linear_qkv.weight")) + p("self_attention.linear_qkv.bias"))
        qkv = qkv.view(B, T, NH, 3, HS)
        q, k, v = (qkv[:, :, :, i, :].transpose(1, 2) for i in range(3))
        a = attention(q, k, v, mask)
        a = a.transpose(1, 2).reshape(B, T, C)
        x = x + mm(a, p("self_attention.linear_proj.weight")) + p("self_attention.linear_proj.bias")
        h = ln(x, (C,), p("pre_mlp_layernorm.weight"), p("pre_mlp_layernorm.bias"), 1e-5)
        h = torch.nn.functional.gelu(keep(mm(h, p("mlp.linear_fc1.weight")) + p("mlp.linear_fc1.bias")),
                                     approximate="tanh")
        x = x + mm(h, p("mlp.linear_fc2.weight")) + p("mlp.linear_fc2.bias")
    x = ln(x, (C,), P["decoder.final_layernorm.weight"], P["decoder.final_layernorm.bias"], 1e-5)
    return mm(x, P["embedding.word_embeddings.weight"])


def rope_tables(T, rot, cfg):
    """cos, sin (T, rot/2) in float64: inv_freq[i] = base^(-2i/rot) (Megatron's
    RotaryEmbedding), rescaled by Llama 3.1's rule (Megatron's _apply_scaling, HF's
    _compute_llama3_parameters: low 1, high 4, factor 8) when the file says so."""
    inv = cfg["rotary_base"] ** (-np.arange(0, rot, 2, dtype=np.float64) / rot)
    if cfg.get("rope_scaling"):
        factor, low, high, orig = 8.0, 1.0, 4.0, cfg["rope_original"]
        wavelen = 2 * math.pi / inv
        smooth = (orig / wavelen - low) / (high - low)
        inv = np.where(wavelen < orig / high, inv,
                       np.where(wavelen > orig / low, inv / factor,
                                (1 - smooth) * inv / factor + smooth * inv))
    ang = np.outer(np.arange(T, dtype=np.float64), inv)
    return torch.tensor(np.cos(ang)), torch.tensor(np.sin(ang))


def rope(x, cos, sin):
    """Rotate-half RoPE of x (..., T, HS) on its first 2 * cos.shape[1] dims."""
    half = cos.shape[1]
    x1, x2, rest = x[..., :half], x[..., half:2 * half], x[..., 2 * half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)


def rmsnorm(x, w, eps=1e-5):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def attention_dropout_exact(q, k, v, mask, drop):
    """Causal attention whose probabilities are multiplied by plait's dropout mask
    (0 or 1 / (1 - p)) before the values."""
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    return (torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1) * drop) @ v


def forward_llama(P, tokens, cfg, ops=EXACT, drops=None):
    """Megatron's Llama (GPTModel with RMSNorm, rope, SwiGLU, grouped-query attention,
    no biases, untied output layer). QKV rows per KV group: its query heads, k, v; fc1
    rows [gate; up]. Written independently of plait: heads by reshapes, K/V shared by
    repeat_interleave, RoPE by rotate_half on (B, heads, T, HS)."""
    mm, keep, attention = ops
    L, C, NH, G = cfg["layers"], cfg["hidden"], cfg["heads"], cfg["groups"]
    B, T = tokens.shape
    HS, QG = C // NH, NH // G
    cos, sin = rope_tables(T, HS, cfg)
    x = P["embedding.word_embeddings.weight"][tokens]
    if drops:
        x = x * drops["embedding"].view(B, T, C)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    for l in range(L):
        p = lambda s: P[f"decoder.layers.{l}.{s}"]
        h = rmsnorm(x, p("input_layernorm.weight"))
        qkv = mm(h, p("self_attention.linear_qkv.weight")).view(B, T, G, QG + 2, HS)
        q = qkv[:, :, :, :QG, :].reshape(B, T, NH, HS).transpose(1, 2)
        k = qkv[:, :, :, QG, :].transpose(1, 2)
        v = qkv[:, :, :, QG + 1, :].transpose(1, 2)
        q, k, v = keep(rope(q, cos, sin)), keep(rope(k, cos, sin)), keep(v)
        k, v = k.repeat_interleave(QG, dim=1), v.repeat_interleave(QG, dim=1)
        if drops:
            a = attention_dropout_exact(q, k, v, mask, drops[l]["attention_probs"])
        else:
            a = attention(q, k, v, mask)
        a = mm(a.transpose(1, 2).reshape(B, T, NH * HS), p("self_attention.linear_proj.weight"))
        x = x + (a * drops[l]["attention_output"].view(B, T, C) if drops else a)
        h = keep(mm(rmsnorm(x, p("pre_mlp_layernorm.weight")), p("mlp.linear_fc1.weight")))
        gate, up = h.chunk(2, dim=-1)
        m = mm(torch.nn.functional.silu(gate) * up, p("mlp.linear_fc2.weight"))
        x = x + (m * drops[l]["mlp_output"].view(B, T, C) if drops else m)
    x = rmsnorm(x, P["decoder.final_layernorm.weight"])
    return mm(x, P["output_layer.weight"])


def forward_gpt_dropout(P, tokens, cfg, drops):
    """forward() with plait's dropout masks (fp32 only): on the embeddings, the
    attention probabilities, and each branch's output (bias included) before the
    residual addition, as Megatron's bias_dropout_add."""
    L, C, NH = cfg["layers"], cfg["hidden"], cfg["heads"]
    B, T = tokens.shape
    HS = C // NH
    x = P["embedding.word_embeddings.weight"][tokens] + P["embedding.position_embeddings.weight"][:T]
    x = x * drops["embedding"].view(B, T, C)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    ln = torch.nn.functional.layer_norm
    for l in range(L):
        p = lambda s: P[f"decoder.layers.{l}.{s}"]
        h = ln(x, (C,), p("input_layernorm.weight"), p("input_layernorm.bias"), 1e-5)
        qkv = (h @ p("self_attention.linear_qkv.weight").T + p("self_attention.linear_qkv.bias"))
        qkv = qkv.view(B, T, NH, 3, HS)
        q, k, v = (qkv[:, :, :, i, :].transpose(1, 2) for i in range(3))
        a = attention_dropout_exact(q, k, v, mask, drops[l]["attention_probs"])
        a = a.transpose(1, 2).reshape(B, T, C)
        a = a @ p("self_attention.linear_proj.weight").T + p("self_attention.linear_proj.bias")
        x = x + a * drops[l]["attention_output"].view(B, T, C)
        h = ln(x, (C,), p("pre_mlp_layernorm.weight"), p("pre_mlp_layernorm.bias"), 1e-5)
        h = torch.nn.functional.gelu(h @ p("mlp.linear_fc1.weight").T + p("mlp.linear_fc1.bias"),
                                     approximate="tanh")
        h = h @ p("mlp.linear_fc2.weight").T + p("mlp.linear_fc2.bias")
        x = x + h * drops[l]["mlp_output"].view(B, T, C)
    x = ln(x, (C,), P["decoder.final_layernorm.weight"], P["decoder.final_layernorm.bias"], 1e-5)
    return x @ P["embedding.word_embeddings.weight"].T


def bert_encoder(P, tokens, types, lengths, cfg, ops=EXACT):
    """Megatron core's BertModel's encoder (pretrain_bert.py, local layer spec), written
    from its source: word + position + token-type embeddings; pre-LN layers as GPT's, but
    every position attends to every key of its sample inside the sample's length (keys in
    the padding masked); encoder.final_layernorm. Returns its output (B, T, C).
    cfg res_post_norm (Megatron's --apply-residual-connection-post-layernorm, as
    ParallelTransformerLayer: residual = layernorm_output): each residual addition adds
    the norm's output instead of the layer's (or the attention's) sum."""
    mm, keep, attention = ops
    L, C, NH = cfg["layers"], cfg["hidden"], cfg["heads"]
    B, T = tokens.shape
    HS = C // NH
    x = (P["embedding.word_embeddings.weight"][tokens] + P["embedding.position_embeddings.weight"][:T]
         + P["embedding.tokentype_embeddings.weight"][types])
    keys = torch.arange(T).view(1, 1, 1, T)
    mask = keys >= lengths.view(B, 1, 1, 1)  # (B, 1, T, T) broadcast over heads and queries
    mask = mask.expand(B, 1, T, T)
    ln = torch.nn.functional.layer_norm
    after = cfg.get("res_post_norm", 0)
    for l in range(L):
        p = lambda s: P[f"encoder.layers.{l}.{s}"]
        h = ln(x, (C,), p("input_layernorm.weight"), p("input_layernorm.bias"), 1e-5)
        x = h if after else x
        qkv = keep(mm(h, p("self_attention.linear_qkv.weight")) + p("self_attention.linear_qkv.bias"))
        qkv = qkv.view(B, T, NH, 3, HS)
        q, k, v = (qkv[:, :, :, i, :].transpose(1, 2) for i in range(3))
        a = attention(q, k, v, mask).transpose(1, 2).reshape(B, T, C)
        x = x + mm(a, p("self_attention.linear_proj.weight")) + p("self_attention.linear_proj.bias")
        h = ln(x, (C,), p("pre_mlp_layernorm.weight"), p("pre_mlp_layernorm.bias"), 1e-5)
        x = h if after else x
        h = torch.nn.functional.gelu(keep(mm(h, p("mlp.linear_fc1.weight")) + p("mlp.linear_fc1.bias")),
                                     approximate="tanh")
        x = x + mm(h, p("mlp.linear_fc2.weight")) + p("mlp.linear_fc2.bias")
    return ln(x, (C,), P["encoder.final_layernorm.weight"], P["encoder.final_layernorm.bias"], 1e-5)


def forward_bert(P, tokens, types, lengths, cfg, ops=EXACT):
    """BertModel's heads on bert_encoder: lm_head = LayerNorm(gelu(dense(x))) with the
    exact (erf) GELU of torch.nn.functional.gelu; logits = lm_head(x) . wte^T +
    output_layer.bias; pooler = tanh(dense(x[:, 0])); binary_head = linear(pooler).
    Returns the MLM logits (B, T, V) and the binary logits (B, 2)."""
    mm, C = ops[0], cfg["hidden"]
    ln = torch.nn.functional.layer_norm
    x = bert_encoder(P, tokens, types, lengths, cfg, ops)
    h = torch.nn.functional.gelu(mm(x, P["lm_head.dense.weight"]) + P["lm_head.dense.bias"])
    h = ln(h, (C,), P["lm_head.layer_norm.weight"], P["lm_head.layer_norm.bias"], 1e-5)
    logits = mm(h, P["embedding.word_embeddings.weight"]) + P["output_layer.bias"]
    pooled = torch.tanh(mm(x[:, 0], P["pooler.dense.weight"]) + P["pooler.dense.bias"])
    return logits, mm(pooled, P["binary_head.weight"]) + P["binary_head.bias"]


def bert_task_loss(P, tokens, types, lengths, labels, cls, cfg, ops=EXACT, hdrop=None):
    """A fine-tuning BERT: bert_encoder, then the task's head and loss, as the sources
    define them. sequence (Megatron's legacy Classification): logits =
    classification_head(tanh(pooler.dense(x[:, 0]))), cross-entropy with the sample's
    class. token (NeMo's TokenClassifier, one layer): logits = classifier.mlp.layer0(x)
    per position, cross-entropy over the labelled positions (label -1 ignored). span
    (NeMo's QA head, Hugging Face's BertForQuestionAnswering): start and end logits =
    classifier.mlp.layer0(x) split in two, each a softmax over the sample's T positions,
    loss = (CE(start) + CE(end)) / 2. regression (Megatron's Classification with
    num_classes 1, NeMo's STS-B loss): y = classification_head(tanh(pooler.dense(x[:, 0])))
    (one value), torch.nn.functional.mse_loss (the mean over samples) with the sample's
    float target (its bits carried in the int32 label row). hdrop: the head's dropout mask
    (0 or 1/(1-p)), multiplied into the pooled output before classification_head (Megatron's
    classification_dropout) or into the hidden states before classifier.mlp.layer0 (NeMo's
    TokenClassifier dropout). Returns the logits and the loss."""
    mm = ops[0]
    x = bert_encoder(P, tokens, types, lengths, cfg, ops)
    CE = torch.nn.functional.cross_entropy
    task = cfg["family"].split("-")[1]
    if task == "sequence":
        pooled = torch.tanh(mm(x[:, 0], P["pooler.dense.weight"]) + P["pooler.dense.bias"])
        if hdrop is not None:
            pooled = pooled * hdrop
        logits = mm(pooled, P["classification_head.weight"]) + P["classification_head.bias"]
        return logits, CE(logits, cls)
    if task == "regression":
        pooled = torch.tanh(mm(x[:, 0], P["pooler.dense.weight"]) + P["pooler.dense.bias"])
        if hdrop is not None:
            pooled = pooled * hdrop
        y = mm(pooled, P["classification_head.weight"]) + P["classification_head.bias"]
        target = torch.tensor(cls.numpy().astype(np.int32).view(np.float32).astype(np.float64),
                              dtype=y.dtype)
        return y, torch.nn.functional.mse_loss(y[:, 0], target)
    if hdrop is not None:
        x = x * hdrop.reshape(x.shape)
    logits = mm(x, P["classifier.mlp.layer0.weight"]) + P["classifier.mlp.layer0.bias"]
    if task == "token":
        return logits.reshape(-1, logits.shape[-1]), CE(logits.reshape(-1, logits.shape[-1]),
                                                        labels.reshape(-1), ignore_index=-1)
    start, end = logits[..., 0], logits[..., 1]
    loss = (CE(start, labels[:, 0]) + CE(end, labels[:, 1])) / 2
    return logits.reshape(-1, 2), loss


def rel(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def run(path, check):
    """Replays plait's 5 steps in float64 (with bf16-rounded products if the file
    says so) and checks every recorded value. Returns the reference's values."""
    T_, meta = read_safetensors(path)
    cfg = json.loads(meta["config"])
    prec = cfg.get("precision", "fp32")
    rounded = prec != "fp32"
    scale = cfg.get("loss_scale", 1.0)
    tol = {"fp32": {"logits": 1e-5, "grad": 1e-4, "param": 1e-4},
           "bf16": {"logits": 5e-4, "grad": 5e-3, "param": 5e-3, "grads": 1e-3, "updates": 3e-3},
           "fp16": {"logits": 2.5e-4, "grad": 2e-3, "param": 2e-3, "grads": 2.5e-4,
                    "updates": 5e-4}}[prec]
    names = [k[len("init."):] for k in T_ if k.startswith("init.")]
    B, S, steps = cfg["batch"], cfg["seq"], cfg["steps"]
    batches = torch.tensor(T_["batches"].astype(np.int64))
    bert = cfg.get("family", "").startswith("bert")
    task = "-" in cfg.get("family", "")
    if bert:
        ttl = torch.tensor(T_["bert.tokens_types_labels"].astype(np.int64))
        lir = torch.tensor(T_["bert.lengths_is_random"].astype(np.int64))

    def replay(ops):
        P = {n: torch.tensor(T_["init." + n], dtype=DT, requires_grad=True) for n in names}
        decay = [n for n in names if P[n].dim() == 2]
        no_decay = [n for n in names if P[n].dim() == 1]
        opt = torch.optim.AdamW([{"params": [P[n] for n in decay], "weight_decay": cfg["weight_decay"]},
                                 {"params": [P[n] for n in no_decay], "weight_decay": 0.0}],
                                lr=0.0, betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"])
        out = {"norms": [], "lrs": []}
        for s in range(steps):
            rows = batches[s * B:(s + 1) * B]
            tokens, targets = rows[:, :-1], rows[:, 1:]
            opt.zero_grad()
            drops = None
            if cfg.get("dropout", 0) > 0:
                t = lambda k: torch.tensor(T_[f"dropout.{s}.{k}"], dtype=DT)
                drops = {l: {k: t(f"{l}.{k}") for k in
                             ("attention_output", "mlp_output", "attention_probs")}
                         for l in range(cfg["layers"])}
                drops["embedding"] = t("embedding")
            if task:
                tokens, types, labels = (ttl[s * B:(s + 1) * B, i] for i in range(3))
                hdrop = (torch.tensor(T_[f"head_dropout.{s}"], dtype=DT)
                         if cfg.get("head_dropout", 0) > 0 else None)
                logits, loss = bert_task_loss(P, tokens, types, lir[0, s * B:(s + 1) * B], labels,
                                              lir[1, s * B:(s + 1) * B], cfg, ops, hdrop)
                targets = None
            elif bert:
                tokens, types, labels = (ttl[s * B:(s + 1) * B, i] for i in range(3))
                logits, blog = forward_bert(P, tokens, types, lir[0, s * B:(s + 1) * B], cfg, ops)
                lm = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                       labels.reshape(-1), ignore_index=-1)
                sop = torch.nn.functional.cross_entropy(blog, lir[1, s * B:(s + 1) * B])
                targets = None
            elif cfg.get("family", "gpt") == "llama":
                logits = forward_llama(P, tokens, cfg, ops, drops)
            elif drops:
                logits = forward_gpt_dropout(P, tokens, cfg, drops)
            else:
                logits = forward(P, tokens, cfg, ops)
            if task:
                pass
            elif bert:  # pretrain_bert.py's loss_func: lm loss + sop loss
                loss = lm + sop
            else:
                loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                         targets.reshape(-1))
            (loss * scale).backward()  # fp16: the static loss scale, taken off below
            for n in names:
                P[n].grad /= scale
            if s == 0:
                out["logits"] = logits.detach().reshape(-1, logits.shape[-1])
                out["loss"] = loss.item()
                if bert and not task:
                    out["lm_loss"], out["sop_loss"] = lm.item(), sop.item()
                    out["binary_logits"] = blog.detach()
                out["grads"] = {n: P[n].grad.clone() for n in names}
            norm = torch.nn.utils.clip_grad_norm_([P[n] for n in names], cfg["clip_grad"])
            out["norms"].append(norm.item())
            lr = megatron_lr(s * B, 1e-3, 1e-4, 2 * B, steps * B)
            out["lrs"].append(lr)
            for g in opt.param_groups:
                g["lr"] = lr
            opt.step()
        out["params"] = {n: P[n].detach() for n in names}
        return out

    ref = replay(OPS[prec])
    tag = f"[{cfg.get('family', 'gpt')}, {prec}" + (
        f", {cfg['groups']} query groups" if cfg.get("family") == "llama" else "") + (
        ", Llama 3.1 rope scaling" if cfg.get("rope_scaling") else "") + (
        f", dropout {cfg['dropout']:g}" if cfg.get("dropout", 0) > 0 else "") + (
        ", residual after the norm" if cfg.get("res_post_norm") else "") + (
        f", head dropout {cfg['head_dropout']:g}" if cfg.get("head_dropout", 0) > 0 else "") + "] "
    check(tag + "logits", rel(T_["logits"], ref["logits"]), tol["logits"])
    check(tag + "loss", rel(T_["loss"], [ref["loss"]]), tol["logits"])
    if cfg.get("res_post_norm"):  # the control: the ordinary pre-norm computes something else
        with torch.no_grad():
            P0 = {n: torch.tensor(T_["init." + n], dtype=DT) for n in names}
            tt = ttl[:B]
            lg, _ = forward_bert(P0, tt[:, 0], tt[:, 1], lir[0, :B], dict(cfg, res_post_norm=0))
        e = rel(T_["logits"], lg.reshape(-1, lg.shape[-1]))
        check(f"{tag}the reference with the residual before the norm differs ({e:.2e})",
              -e, -100 * tol["logits"])
    if cfg.get("head_dropout", 0) > 0:  # the control: the head without the mask differs
        with torch.no_grad():
            P0 = {n: torch.tensor(T_["init." + n], dtype=DT) for n in names}
            tt = ttl[:B]
            lg, _ = bert_task_loss(P0, tt[:, 0], tt[:, 1], lir[0, :B], tt[:, 2], lir[1, :B], cfg)
        e = rel(T_["logits"], lg.reshape(-1, lg.shape[-1]))
        check(f"{tag}the reference without the head's mask differs ({e:.2e})",
              -e, -100 * tol["logits"])
        keep = np.mean([np.mean(T_[f"head_dropout.{s}"] > 0) for s in range(steps)])
        check(f"{tag}the masks keep {keep:.3f} of the elements (1 - p = "
              f"{1 - cfg['head_dropout']:g}, within 0.05)", abs(keep - (1 - cfg["head_dropout"])), 0.05)
    if bert and not task:
        check(tag + "MLM loss", rel(T_["lm_loss"], [ref["lm_loss"]]), tol["logits"])
        check(tag + "binary (SOP) loss", rel(T_["sop_loss"], [ref["sop_loss"]]), tol["logits"])
        check(tag + "binary logits", rel(T_["binary_logits"], ref["binary_logits"]), tol["logits"])
    # The span head's softmaxes run over a sample's positions, so adding one number to
    # all of a sample's start (or end) logits changes nothing: the head's bias and the
    # final LayerNorm's bias (which shifts every position's logits by the same W beta)
    # have a gradient of exactly 0. Each side holds its rounding noise there (plait's
    # fp32 ~4e-8, the reference's float64 ~1e-17), which Adam (eps 1e-8) turns into
    # steps of either sign; they move nothing else (the shift cancels in the softmax).
    # So those two are checked to be noise-sized in both, not compared. With the head's
    # dropout the final LayerNorm's bias reaches each position through its own mask, so
    # the shift is no longer uniform: it has a true gradient and is compared as usual.
    span_zero = {"classifier.mlp.layer0.bias"}
    if not cfg.get("head_dropout", 0) > 0:
        span_zero.add("encoder.final_layernorm.bias")

    def structural_zero(n):
        return cfg.get("family") == "bert-span" and n in span_zero

    gnorm = max(np.linalg.norm(np.concatenate([np.asarray(ref["grads"][n]).ravel() for n in names])),
                1e-30)
    for n in names:
        if structural_zero(n):
            for who, g in (("plait", T_["grad." + n]), ("reference", ref["grads"][n])):
                check(f"{tag}{n}: its gradient is rounding noise ({who}, relative to all "
                      f"gradients)", np.linalg.norm(np.asarray(g)) / gnorm, 1e-6)
            continue
        check(f"{tag}gradient {n}", rel(T_["grad." + n], ref["grads"][n]), tol["grad"])
    worst = max((n for n in names if not structural_zero(n)),
                key=lambda n: rel(T_["grad." + n], ref["grads"][n]))
    print(f"# {tag}worst gradient: {worst} {rel(T_['grad.' + worst], ref['grads'][worst]):.2e}")
    for s in range(steps):
        check(f"{tag}grad norm step {s + 1}", rel(T_["grad_norm"][s], [ref["norms"][s]]), tol["grad"])
        check(f"{tag}lr step {s + 1}", rel(T_["lr"][s], [ref["lrs"][s]]), 1e-6)
    NH, HS = cfg["heads"], cfg["hidden"] // cfg["heads"]
    if "linear_qkv.bias" not in " ".join(names):
        NH = 0  # no QKV bias (Llama): nothing below looks at its rows

    def rows(n, a, which):
        """The q, k, v rows ("qv" or "k") of a QKV bias (per-head interleaved)."""
        a = np.asarray(a).reshape(NH, 3, HS)
        return (a[:, [0, 2], :] if which == "qv" else a[:, 1, :]).ravel()

    def key_bias_noise(n):
        return prec == "bf16" and n.endswith("self_attention.linear_qkv.bias")

    for n in names:
        if structural_zero(n):
            continue
        if not key_bias_noise(n):
            check(f"{tag}after {steps} steps {n}", rel(T_["final." + n], ref["params"][n]), tol["param"])
            continue
        # See the docstring: the key rows of the QKV bias are Adam-amplified
        # rounding noise under bf16; the q and v rows are held to the tolerance, the
        # key rows' gradient must be noise-sized, in plait and in the reference.
        check(f"{tag}after {steps} steps {n}, q and v rows",
              rel(rows(n, T_["final." + n], "qv"), rows(n, ref["params"][n], "qv")), tol["param"])
        for who, g in (("plait", T_["grad." + n]), ("reference", ref["grads"][n])):
            check(f"{tag}{n} key rows' gradient is rounding noise ({who}, relative to the "
                  f"tensor's)", np.linalg.norm(rows(n, g, "k")) / np.linalg.norm(g), 1e-4)
    worst = max((n for n in names if not key_bias_noise(n) and not structural_zero(n)),
                key=lambda n: rel(T_["final." + n], ref["params"][n]))
    print(f"# {tag}worst parameter after {steps} steps: {worst} "
          f"{rel(T_['final.' + worst], ref['params'][worst]):.2e}")
    if rounded:
        # The reduced precision must show. Per tensor, small reductions (LayerNorm gains,
        # biases) cancel and amplify the rounding flips, hence the per-tensor tolerances
        # above; taken together (all gradients as one vector, all parameter updates as
        # one), plait matches the rounded reference within tol["grads"] and
        # tol["updates"] and differs from the unrounded model by more than that.
        exact = replay(EXACT)
        e = rel(T_["logits"], exact["logits"])
        check(f"{tag}logits differ from the unrounded model by more than {tol['logits']:g} ({e:.2e})",
              -e, -tol["logits"])
        # Untied word embeddings (Llama) get only their lookup gradient, so a row's
        # history is the few steps its token occurred in; with Adam (eps far below the
        # gradients) a row seen once moves by ~lr * sign(g) per element, and the
        # elements whose gradient is near 0 take the sign of the rounding noise, as the
        # GPT's key bias rows above. Measured: 2 rows seen once (in step 3) carry 99.99%
        # of the tensor's 1.6e-2 update difference. So the updates taken together leave
        # that tensor out, it keeps its per-tensor and gradient checks, and the
        # explanation itself is checked: the difference sits in rows seen in <= 2 steps.
        sparse = "embedding.word_embeddings.weight"
        update_names = [n for n in names if not (n == sparse and "output_layer.weight" in names)]
        if len(update_names) < len(names):
            u = (T_["final." + sparse] - T_["init." + sparse]) - (
                np.asarray(ref["params"][sparse]) - T_["init." + sparse])
            seen = np.zeros(u.shape[0], dtype=np.int64)
            for s in range(steps):
                seen[np.unique(np.asarray(batches[s * B:(s + 1) * B, :-1]))] += 1
            d = np.linalg.norm(u, axis=1)
            share = np.linalg.norm(d[seen <= 2]) / max(np.linalg.norm(d), 1e-30)
            check(f"{tag}untied word embeddings: the update difference is in rows seen in "
                  f"<= 2 of {steps} steps ({share:.4f} of it)", 1 - share, 0.01)
        flat = lambda d, ns=names: np.concatenate([np.asarray(d[n]).ravel() for n in ns])
        init = flat({n: T_["init." + n] for n in names})
        init_u = flat({n: T_["init." + n] for n in update_names}, update_names)
        g_plait = flat({n: T_["grad." + n] for n in names})
        u_plait = flat({n: T_["final." + n] for n in update_names}, update_names) - init_u
        # Adam's m / sqrt(v) passes gradient differences on to the updates at similar
        # or larger relative size (where v is small), and 5 steps add up.
        for what, mine, r, x, t in (
                ("all gradients", g_plait, flat(ref["grads"]), flat(exact["grads"]), tol["grads"]),
                ("all parameter updates", u_plait, flat(ref["params"], update_names) - init_u,
                 flat(exact["params"], update_names) - init_u, tol["updates"])):
            check(f"{tag}{what} together vs the {prec}-rounded reference", rel(mine, r), t)
            e = rel(mine, x)
            check(f"{tag}{what} differ from the unrounded model by more than {t:g} ({e:.2e})",
                  -e, -t)


def run_files(run_one, name):
    """Runs run_one(path, check) on every file named on the command line and prints
    "NAME: N passed, N failed"; returns the exit code."""
    passed = failed = 0

    def check(what, err, tol):
        nonlocal passed, failed
        ok = err <= tol
        passed += ok
        failed += not ok
        print(f"{'ok' if ok else 'not ok'} {what}: relative error {err:.2e} (tolerance {tol:g})")

    for path in sys.argv[1:]:
        run_one(path, check)
    print(f"{name}: {passed} passed, {failed} failed")
    return 1 if failed else 0


def main():
    return run_files(run, "torch_parity")


if __name__ == "__main__":
    sys.exit(main())
