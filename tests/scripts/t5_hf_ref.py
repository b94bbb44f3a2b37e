#!/usr/bin/python3
"""An independent float64 PyTorch T5ForConditionalGeneration, written against transformers'
module structure and weight names (modeling_t5.py; no transformers import):
shared.weight; encoder.block.N.layer.0.{layer_norm, SelfAttention.{q,k,v,o}} with the
relative_attention_bias table in block 0 of each stack (shared by the stack's layers);
encoder.block.N.layer.1.{layer_norm, DenseReluDense.{wi | wi_0, wi_1, wo}};
decoder.block.N.layer.1.EncDecAttention (no position bias), layer.2 the MLP;
{encoder, decoder}.final_layer_norm; lm_head.weight, or with tied embeddings the
decoder output scaled by d_model^-0.5 before shared.weight. T5LayerNorm is RMS without
mean or bias; attention scores are not scaled; nothing has a bias.

Also plait_to_hf: the HF tensors as differentiable views of plait's (Megatron core)
parameters, so gradients of an HF-structured forward land on plait's names."""
import math

import torch


def bucket(rel_pos, bidirectional, num_buckets, max_distance):
    """transformers' T5Attention._relative_position_bucket."""
    buckets = 0
    if bidirectional:
        num_buckets //= 2
        buckets += (rel_pos > 0).to(torch.long) * num_buckets
        rel_pos = torch.abs(rel_pos)
    else:
        rel_pos = -torch.min(rel_pos, torch.zeros_like(rel_pos))
    max_exact = num_buckets // 2
    is_small = rel_pos < max_exact
    large = max_exact + (torch.log(rel_pos.float() / max_exact)
                         / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return buckets + torch.where(is_small, rel_pos, large)


def compute_bias(table, q_len, k_len, bidirectional, cfg):
    ctx = torch.arange(q_len, dtype=torch.long)[:, None]
    mem = torch.arange(k_len, dtype=torch.long)[None, :]
    b = bucket(mem - ctx, bidirectional, cfg["buckets"], cfg["max_distance"])
    return table[b].permute(2, 0, 1).unsqueeze(0)  # (1, NH, q, k)


def rms(x, w, eps):
    var = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(var + eps))


def forward(W, src, src_len, dec, cfg):
    """logits (B, Td, V) of an HF-named state dict W (float64 tensors)."""
    C, NH = cfg["hidden"], cfg["heads"]
    HS = cfg.get("d_kv") or cfg.get("kv_channels") or C // NH
    eps = cfg.get("norm_eps", 1e-6)  # transformers: layer_norm_epsilon
    B, Te = src.shape
    Td = dec.shape[1]
    shared = W["shared.weight"]

    def attention(pre, x, kv, bias, allowed):
        Tq, Tk = x.shape[1], kv.shape[1]
        q = (x @ W[pre + "q.weight"].T).view(B, Tq, NH, HS).transpose(1, 2)
        k = (kv @ W[pre + "k.weight"].T).view(B, Tk, NH, HS).transpose(1, 2)
        v = (kv @ W[pre + "v.weight"].T).view(B, Tk, NH, HS).transpose(1, 2)
        s = (q @ k.transpose(-1, -2)) * cfg.get("score_scale", 1.0)  # T5: no 1/sqrt(d_kv)
        if bias is not None:
            s = s + bias
        p = torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1)
        o = (p @ v).transpose(1, 2).reshape(B, Tq, NH * HS)
        return o @ W[pre + "o.weight"].T

    def ff(pre, h):
        if cfg["act"] == "geglu":
            g = torch.nn.functional.gelu(h @ W[pre + "wi_0.weight"].T, approximate="tanh")
            a = g * (h @ W[pre + "wi_1.weight"].T)
        else:
            a = torch.relu(h @ W[pre + "wi.weight"].T)
        return a @ W[pre + "wo.weight"].T

    keys_ok = torch.arange(Te).view(1, 1, 1, Te) < src_len.view(B, 1, 1, 1)
    h = shared[src]
    ebias = compute_bias(W["encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"],
                         Te, Te, True, cfg)
    for i in range(cfg["enc_layers"]):
        pre = f"encoder.block.{i}.layer."
        n = rms(h, W[pre + "0.layer_norm.weight"], eps)
        h = h + attention(pre + "0.SelfAttention.", n, n, ebias, keys_ok.expand(B, 1, Te, Te))
        h = h + ff(pre + "1.DenseReluDense.", rms(h, W[pre + "1.layer_norm.weight"], eps))
    enc = rms(h, W["encoder.final_layer_norm.weight"], eps)
    causal = torch.ones(Td, Td, dtype=torch.bool).tril().view(1, 1, Td, Td).expand(B, 1, Td, Td)
    dbias = compute_bias(W["decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"],
                         Td, Td, False, cfg)
    y = shared[dec]
    for i in range(cfg["dec_layers"]):
        pre = f"decoder.block.{i}.layer."
        n = rms(y, W[pre + "0.layer_norm.weight"], eps)
        y = y + attention(pre + "0.SelfAttention.", n, n, dbias, causal)
        n = rms(y, W[pre + "1.layer_norm.weight"], eps)
        y = y + attention(pre + "1.EncDecAttention.", n, enc, None, keys_ok.expand(B, 1, Td, Te))
        y = y + ff(pre + "2.DenseReluDense.", rms(y, W[pre + "2.layer_norm.weight"], eps))
    y = rms(y, W["decoder.final_layer_norm.weight"], eps)
    if "lm_head.weight" in W:
        return y @ W["lm_head.weight"].T
    return (y * C ** -0.5) @ shared.T


def plait_to_hf(P, cfg):
    """HF-named views of plait's parameters (Megatron core names): qkv rows per head
    [q; k; v], linear_kv per head [k; v], fc1 of GEGLU [wi_0; wi_1]."""
    C, NH = cfg["hidden"], cfg["heads"]
    HS = cfg.get("kv_channels") or C // NH
    W = {"shared.weight": P["embedding.word_embeddings.weight"]}
    if "output_layer.weight" in P:
        W["lm_head.weight"] = P["output_layer.weight"]
    for stack, n_layers in (("encoder", cfg["enc_layers"]), ("decoder", cfg["dec_layers"])):
        W[f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"] = \
            P[f"{stack}_relative_pos_emb.relative_attention_bias.weight"]
        W[f"{stack}.final_layer_norm.weight"] = P[f"{stack}.final_layernorm.weight"]
        for i in range(n_layers):
            src, dst = f"{stack}.layers.{i}.", f"{stack}.block.{i}.layer."
            qkv = P[src + "self_attention.linear_qkv.weight"].view(NH, 3, HS, C)
            for j, x in enumerate("qkv"):
                W[dst + f"0.SelfAttention.{x}.weight"] = qkv[:, j].reshape(NH * HS, C)
            W[dst + "0.SelfAttention.o.weight"] = P[src + "self_attention.linear_proj.weight"]
            W[dst + "0.layer_norm.weight"] = P[src + "input_layernorm.weight"]
            mlp = "1"
            if stack == "decoder":
                mlp = "2"
                W[dst + "1.layer_norm.weight"] = P[src + "pre_cross_attn_layernorm.weight"]
                W[dst + "1.EncDecAttention.q.weight"] = P[src + "cross_attention.linear_q.weight"]
                kv = P[src + "cross_attention.linear_kv.weight"].view(NH, 2, HS, C)
                W[dst + "1.EncDecAttention.k.weight"] = kv[:, 0].reshape(NH * HS, C)
                W[dst + "1.EncDecAttention.v.weight"] = kv[:, 1].reshape(NH * HS, C)
                W[dst + "1.EncDecAttention.o.weight"] = P[src + "cross_attention.linear_proj.weight"]
            W[dst + mlp + ".layer_norm.weight"] = P[src + "pre_mlp_layernorm.weight"]
            fc1 = P[src + "mlp.linear_fc1.weight"]
            if cfg["act"] == "geglu":
                F = fc1.shape[0] // 2
                W[dst + mlp + ".DenseReluDense.wi_0.weight"] = fc1[:F]
                W[dst + mlp + ".DenseReluDense.wi_1.weight"] = fc1[F:]
            else:
                W[dst + mlp + ".DenseReluDense.wi.weight"] = fc1
            W[dst + mlp + ".DenseReluDense.wo.weight"] = P[src + "mlp.linear_fc2.weight"]
    return W
