#!/usr/bin/env python3
"""An independent BART in PyTorch with Hugging Face transformers' module structure and
tensor names (models/bart/modeling_bart.py, BartForConditionalGeneration), float64, for
plait's `--model bart --transformer-block-type post_ln`:

  embeddings   x = layernorm_embedding(embed_tokens(ids) * embed_scale + embed_positions(
               position + 2)), per stack (BartLearnedPositionalEmbedding: a table of
               max_position_embeddings + 2 rows, offset 2; embed_scale sqrt(d_model) with
               scale_embedding, else 1, BartConfig's default)
  encoder      per layer: x = self_attn_layer_norm(x + out_proj(attn(q_proj x, k_proj x,
               v_proj x))) with the source's padding keys masked; x = final_layer_norm(x +
               fc2(gelu(fc1(x)))) (activation_function "gelu", exact); no final norm
  decoder      the same with causal self-attention, then encoder_attn (queries from x, keys
               and values from the encoder output, its padding masked) and
               encoder_attn_layer_norm between the two
  head         lm_head (tied to model.shared) + final_logits_bias

Parity with the files build/testtools/encdec_parity --post-ln writes (plait's initial
parameters, batches, first-step logits, loss and gradients): plait's parameters become
transformers' tensors in plait_to_hf, the one place that knows Megatron core's names and
layouts (self-attention QKV rows per head [q; k; v], cross-attention linear_kv per head
[k; v]; the decoder's positions decoder_embedding.position_embeddings, rows 2.. of its
embed_positions).
Checks: logits and loss (normwise relative 1e-5), every gradient (1e-4): t5_parity.py's
tolerances (fp32 against float64 at these sizes); a pre-LN reading of the same weights is
far from plait's logits.

  hf_bart.py parity FILE.safetensors...
      the parity above
  hf_bart.py logits HF_DIR PLAIT_LOGITS.safetensors
      an exported directory, read by transformers' names and config.json only, gives
      plait's decoder logits (build/testtools/ckpt_logits) for the same source and decoder
      tokens within 2e-6 (normwise relative: fp32 rounding through both stacks)
  hf_bart.py same HF_DIR_A HF_DIR_B [NAME...]
      the same tensors, bit for bit (but the NAMEs)
  hf_bart.py positions HF_DIR_A HF_DIR_B
      B's embed_positions rows 2.. are A's, its rows 0 and 1 zero
  hf_bart.py random HF_DIR SEED [scale_embedding]
      writes a small BartForConditionalGeneration directory with random weights

Several commands in one start: CMD ARGS... :: CMD ARGS... (prints "hf_bart.py: N passed,
N failed")"""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_bert import check, read_safetensors, rel  # noqa: E402
import hf_bert  # noqa: E402

DT = torch.float64


def bart_forward(W, cfg, src, src_len, dec, post_ln=True):
    """BartForConditionalGeneration's logits (B, Td, V) for decoder_input_ids dec."""
    C, NH, eps = cfg["d_model"], cfg["encoder_attention_heads"], 1e-5
    HS = C // NH
    B, Te = src.shape
    Td = dec.shape[1]
    ln = lambda x, p: torch.nn.functional.layer_norm(x, (C,), W[p + ".weight"], W[p + ".bias"], eps)
    lin = lambda x, p: x @ W[p + ".weight"].T + W[p + ".bias"]
    heads = lambda x: x.view(x.shape[0], -1, NH, HS).transpose(1, 2)

    def attention(p, x, kv, allowed):
        q = heads(lin(x, p + ".q_proj")) * HS ** -0.5
        k, v = heads(lin(kv, p + ".k_proj")), heads(lin(kv, p + ".v_proj"))
        s = (q @ k.transpose(-1, -2)).masked_fill(~allowed, torch.finfo(DT).min)
        ctx = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(x.shape[0], -1, C)
        return lin(ctx, p + ".out_proj")

    def block(x, p, sublayers):
        for name, f in sublayers:  # post-LN: norm(x + f(x)); pre-LN control: x + f(norm(x))
            x = ln(x + f(x), p + name) if post_ln else x + f(ln(x, p + name))
        return x

    scale = C ** 0.5 if cfg.get("scale_embedding") else 1.0

    def embed(stack, ids):
        T = ids.shape[1]
        x = W["model.shared.weight"][ids] * scale + W[f"model.{stack}.embed_positions.weight"][2:2 + T]
        return ln(x, f"model.{stack}.layernorm_embedding") if post_ln else x

    mlp = lambda p: lambda h: lin(torch.nn.functional.gelu(lin(h, p + "fc1")), p + "fc2")
    src_keys = (torch.arange(Te).view(1, 1, 1, Te) < src_len.view(B, 1, 1, 1))
    x = embed("encoder", src)
    for l in range(cfg["encoder_layers"]):
        p = f"model.encoder.layers.{l}."
        x = block(x, p, [("self_attn_layer_norm", lambda h: attention(p + "self_attn", h, h, src_keys)),
                         ("final_layer_norm", mlp(p))])
    enc = x
    causal = torch.tril(torch.ones(Td, Td, dtype=torch.bool)).view(1, 1, Td, Td)
    y = embed("decoder", dec)
    for l in range(cfg["decoder_layers"]):
        p = f"model.decoder.layers.{l}."
        y = block(y, p, [("self_attn_layer_norm", lambda h: attention(p + "self_attn", h, h, causal)),
                         ("encoder_attn_layer_norm",
                          lambda h: attention(p + "encoder_attn", h, enc, src_keys)),
                         ("final_layer_norm", mlp(p))])
    return y @ W["model.shared.weight"].T + W["final_logits_bias"][0]


def plait_to_hf(P, cfg):
    C, NH = cfg["d_model"], cfg["encoder_attention_heads"]
    HS = C // NH
    off2 = lambda pos: torch.cat([torch.zeros(2, C, dtype=DT), pos])  # BART's offset of 2
    W = {"model.shared.weight": P["embedding.word_embeddings.weight"],
         "model.encoder.embed_positions.weight": off2(P["embedding.position_embeddings.weight"]),
         "model.decoder.embed_positions.weight":
             off2(P["decoder_embedding.position_embeddings.weight"]),
         "final_logits_bias": P["lm_head.output_layer.bias"].view(1, -1)}
    for stack in ("encoder", "decoder"):
        for s in ("weight", "bias"):
            W[f"model.{stack}.layernorm_embedding.{s}"] = P[f"{stack}.initial_layernorm.{s}"]
        for l in range(cfg[f"{stack}_layers"]):
            p, h = f"{stack}.layers.{l}.", f"model.{stack}.layers.{l}."
            for s in ("weight", "bias"):
                qkv = P[p + f"self_attention.linear_qkv.{s}"]
                qkv = qkv.view(NH, 3, HS, C) if s == "weight" else qkv.view(NH, 3, HS)
                for i, n in enumerate(("q_proj", "k_proj", "v_proj")):
                    W[h + f"self_attn.{n}.{s}"] = qkv[:, i].reshape(C, C) if s == "weight" \
                        else qkv[:, i].reshape(C)
                pairs = [("self_attention.linear_proj", "self_attn.out_proj"),
                         ("post_self_attn_layernorm", "self_attn_layer_norm"),
                         ("mlp.linear_fc1", "fc1"), ("mlp.linear_fc2", "fc2"),
                         ("post_mlp_layernorm", "final_layer_norm")]
                if stack == "decoder":
                    kv = P[p + f"cross_attention.linear_kv.{s}"]
                    kv = kv.view(NH, 2, HS, C) if s == "weight" else kv.view(NH, 2, HS)
                    for i, n in enumerate(("k_proj", "v_proj")):
                        W[h + f"encoder_attn.{n}.{s}"] = kv[:, i].reshape(C, C) if s == "weight" \
                            else kv[:, i].reshape(C)
                    pairs += [("cross_attention.linear_q", "encoder_attn.q_proj"),
                              ("cross_attention.linear_proj", "encoder_attn.out_proj"),
                              ("post_cross_attn_layernorm", "encoder_attn_layer_norm")]
                for src_, dst in pairs:
                    W[h + dst + "." + s] = P[p + src_ + "." + s]
    return W


def parity(path):
    F, meta = read_safetensors(path)
    c = json.loads(meta["config"])
    assert c.get("post_ln") == 1, f"{path}: not an encdec_parity --post-ln file"
    cfg = {"d_model": c["hidden"], "encoder_attention_heads": c["heads"],
           "encoder_layers": c["enc_layers"], "decoder_layers": c["dec_layers"],
           "scale_embedding": c.get("scale_embedding", 0)}
    B, Te, Td = c["batch"], c["enc_seq"], c["dec_seq"]
    row = torch.tensor(F["batch"].astype(np.int64))[0]
    src = row[:B * Te].view(B, Te)
    dec = row[B * Te:B * Te + B * Td].view(B, Td)
    tgt = row[B * Te + B * Td:B * Te + 2 * B * Td].view(B, Td)
    src_len = row[B * Te + 2 * B * Td:]
    P = {k[5:]: torch.tensor(v.astype(np.float64), requires_grad=True)
         for k, v in F.items() if k.startswith("init.")}
    tag = f"{os.path.basename(path)} BartForConditionalGeneration" + \
        (" (scale_embedding)" if cfg["scale_embedding"] else "") + ": "
    with torch.no_grad():
        other = bart_forward(plait_to_hf(P, cfg), cfg, src, src_len, dec, post_ln=False)
    e = rel(F["logits"], other.reshape(-1, other.shape[-1]).numpy())
    check(tag + "a pre-LN reading of the weights is far from plait's logits", e > 1e-2, f"({e:.3g})")
    logits = bart_forward(plait_to_hf(P, cfg), cfg, src, src_len, dec)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1),
                                             ignore_index=-1)
    e = rel(F["logits"], logits.detach().reshape(-1, logits.shape[-1]).numpy())
    check(tag + "logits", e <= 1e-5, f"(rel err {e:.3g})")
    e = rel(F["loss"], [loss.item()])
    check(tag + "loss", e <= 1e-5, f"(rel err {e:.3g})")
    loss.backward()
    worst, name = 0.0, ""
    for k, t in P.items():
        e = rel(F["grad." + k], t.grad.numpy())
        if e > worst:
            worst, name = e, k
    check(tag + f"every gradient ({len(P)} tensors)", worst <= 1e-4, f"(worst {worst:.3g}: {name})")


def config_of(d):
    c = json.load(open(os.path.join(d, "config.json")))
    return c, {"d_model": c["d_model"], "encoder_attention_heads": c["encoder_attention_heads"],
               "encoder_layers": c["encoder_layers"], "decoder_layers": c["decoder_layers"],
               "scale_embedding": c.get("scale_embedding", False)}


def logits(d, plait_file):
    """The directory, read by transformers' names and config.json only, gives plait's
    decoder logits (ckpt_logits) for the same source and decoder tokens."""
    c, cfg = config_of(d)
    W = hf_bert.read_dir(d)
    W.setdefault("lm_head.weight", W["model.shared.weight"])
    F, _ = read_safetensors(plait_file)
    src = torch.from_numpy(F["src_tokens"].astype(np.int64)).view(1, -1)
    dec = torch.from_numpy(F["tokens"].astype(np.int64)).view(1, -1)
    tag = f"{os.path.basename(d)} BartForConditionalGeneration: "
    check(tag + "model_type bart, gelu, tied, BART's positions offset by 2",
          c["model_type"] == "bart" and c["activation_function"] == "gelu" and
          c.get("tie_word_embeddings", True) and
          W["model.encoder.embed_positions.weight"].shape[0] == c["max_position_embeddings"] + 2)
    out = bart_forward(W, cfg, src, torch.tensor([src.shape[1]]), dec)
    e = rel(F["logits"], out.reshape(F["logits"].shape).numpy())
    check(tag + "logits equal plait's", e <= 2e-6, f"(rel err {e:.3g})")


def make_random(d, seed, scale_embedding=False):
    """A small BartForConditionalGeneration directory with random weights (2 + 2 layers,
    d_model 64, 4 heads, ffn 128, 40 positions, 120 tokens; the positions' two offset rows
    random too, as a trained model's are), config.json as transformers writes it."""
    rng = np.random.default_rng(seed)
    r = lambda *shape: (rng.standard_normal(shape) * 0.1).astype(np.float32)
    ln = lambda n: (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)
    os.makedirs(d, exist_ok=True)
    V, C, NH, F, T, L = 120, 64, 4, 128, 40, 2
    cfg = {"activation_dropout": 0.0, "activation_function": "gelu",
           "architectures": ["BartForConditionalGeneration"], "attention_dropout": 0.0,
           "bos_token_id": 0, "d_model": C, "decoder_attention_heads": NH, "decoder_ffn_dim": F,
           "decoder_layerdrop": 0.0, "decoder_layers": L, "decoder_start_token_id": 2,
           "dropout": 0.1, "encoder_attention_heads": NH, "encoder_ffn_dim": F,
           "encoder_layerdrop": 0.0, "encoder_layers": L, "eos_token_id": 2,
           "forced_eos_token_id": 2, "init_std": 0.02, "is_encoder_decoder": True,
           "max_position_embeddings": T, "model_type": "bart", "num_hidden_layers": L,
           "pad_token_id": 1, "scale_embedding": scale_embedding, "torch_dtype": "float32",
           "use_cache": True, "vocab_size": V}
    W = {"model.shared.weight": r(V, C), "final_logits_bias": r(1, V)}
    for stack in ("encoder", "decoder"):
        W[f"model.{stack}.embed_positions.weight"] = r(T + 2, C)
        W[f"model.{stack}.layernorm_embedding.weight"] = ln(C)
        W[f"model.{stack}.layernorm_embedding.bias"] = r(C)
        for l in range(L):
            p = f"model.{stack}.layers.{l}."
            attns = ["self_attn"] + (["encoder_attn"] if stack == "decoder" else [])
            for a in attns:
                for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
                    W[p + f"{a}.{n}.weight"], W[p + f"{a}.{n}.bias"] = r(C, C), r(C)
                W[p + f"{a}_layer_norm.weight"], W[p + f"{a}_layer_norm.bias"] = ln(C), r(C)
            W[p + "fc1.weight"], W[p + "fc1.bias"] = r(F, C), r(F)
            W[p + "fc2.weight"], W[p + "fc2.bias"] = r(C, F), r(C)
            W[p + "final_layer_norm.weight"], W[p + "final_layer_norm.bias"] = ln(C), r(C)
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=2)
    hf_bert.write_safetensors(os.path.join(d, "model.safetensors"), W)
    print(f"wrote {d}: BartForConditionalGeneration, {len(W)} tensors")


def main(argv):
    torch.set_grad_enabled(True)
    cmds, cur = [], []
    for a in argv:
        if a == "::":
            cmds.append(cur)
            cur = []
        else:
            cur.append(a)
    cmds.append(cur)
    for c in cmds:
        if c[0] == "parity":
            for f in c[1:]:
                parity(f)
        elif c[0] == "logits":
            logits(c[1], c[2])
        elif c[0] == "same":
            hf_bert.same(*c[1:])
        elif c[0] == "positions":
            A, B = hf_bert.read_dir(c[1]), hf_bert.read_dir(c[2])
            for stack in ("encoder", "decoder"):
                n = f"model.{stack}.embed_positions.weight"
                check(f"{os.path.basename(c[2])}: {n}: rows 2.. are {os.path.basename(c[1])}'s, "
                      "rows 0-1 (never read) zero",
                      torch.equal(A[n][2:], B[n][2:]) and not B[n][:2].any())
        elif c[0] == "random":
            make_random(c[1], int(c[2]), len(c) > 3 and c[3] == "scale_embedding")
            return 0
        else:
            raise SystemExit(f"hf_bart.py: unknown command {c[0]}")
    print(f"hf_bart.py: {hf_bert._pass} passed, {hf_bert._fail} failed")
    return 1 if hf_bert._fail else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
