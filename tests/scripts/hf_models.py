#!/usr/bin/env python3
"""Independent GPT-2 and Llama in PyTorch, written from Hugging Face transformers'
modeling definitions (models/gpt2/modeling_gpt2.py: GPT2LMHeadModel, Conv1D
y = x W + b with W (in, out), c_attn's output split [q | k | v], gelu_new;
models/llama/modeling_llama.py: LlamaForCausalLM, LlamaRMSNorm, rotate_half
RoPE with the llama3 frequency scaling, repeat_kv, SwiGLU MLP), reading a
Hugging Face directory by its tensor names and config.json only: nothing of
plait's layout is known here.

  hf_models.py logits HF_DIR PLAIT_LOGITS.safetensors
      the model's logits (float64) for plait's tokens equal plait's fp32 logits:
      normwise relative error <= 2e-6, fp32 rounding (u = 6e-8) of sums of C..F terms
      through L layers; measured 2e-7 to 9e-7, printed. A wrong layout gives errors of order
      1; leaving out Llama 3.1's rope scaling at 64 positions gives 4e-5.
  hf_models.py bf16 HF_FP32_DIR HF_BF16_DIR
      every BF16 tensor is the F32 tensor rounded to nearest even (torch's), bit for bit
  hf_models.py same HF_DIR_A HF_DIR_B
      the two directories hold the same tensors (names, shapes, dtypes, bytes),
      whether sharded with an index or not; shards respect the index
  hf_models.py plait_same ITER_DIR_A ITER_DIR_B
      two plait checkpoints of the same layout hold the same model tensors, bit for bit
  hf_models.py random gpt2|llama|llama_tied HF_DIR SEED
      writes a small Hugging Face directory with random weights (make_random)
  hf_models.py shards HF_DIR MAX_BYTES
      every shard is at most MAX_BYTES unless it holds a single tensor, the index's
      total_size is the sum of the tensors' bytes, every name maps to its file

Several commands in one start: CMD ARGS... :: CMD ARGS... Prints "ok ..." / "not ok ..."
lines and "hf_models: N passed, N failed"; exits non-zero on a failure."""
import json
import math
import os
import struct
import sys

import numpy as np
import torch

DT = {"F32": (np.float32, 4), "BF16": (np.uint16, 2), "I32": (np.int32, 4), "F16": (np.float16, 2)}


def read_safetensors(path):
    """{name: (dtype, numpy array)}: the public format, u64 header length, JSON, data."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        npt, _ = DT[t["dtype"]]
        b, e = t["data_offsets"]
        arr = np.frombuffer(data[b:e], dtype=npt).reshape(t["shape"])
        out[name] = (t["dtype"], arr)
    return out, header.get("__metadata__", {})


def read_dir(d):
    """The tensors of a Hugging Face directory: model.safetensors, or the index's shards."""
    index = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(index):
        files = sorted(set(json.load(open(index))["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    tensors = {}
    for f in files:
        t, meta = read_safetensors(os.path.join(d, f))
        assert meta.get("format") == "pt", f"{f}: metadata {meta}, transformers wants format pt"
        tensors.update(t)
    return tensors


def write_safetensors(path, tensors):
    """tensors {name: float32 numpy array} as a safetensors file with {"format": "pt"}."""
    header, off, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def make_random(arch, d, seed, layers=2):
    """A small Hugging Face directory with random weights: gpt2 (tied, 128 tokens) or llama
    (2 key/value groups of 4 heads, untied, 100 tokens, rope base 500000 with llama3 scaling);
    llama_tied: the same Llama with its output layer tied (as Llama 3.2 1B), no lm_head."""
    rng = np.random.default_rng(seed)
    r = lambda *shape: (rng.standard_normal(shape) * 0.1).astype(np.float32)
    ln = lambda n: (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)
    os.makedirs(d, exist_ok=True)
    C, H, L, T = 64, 4, layers, 64
    W = {}
    if arch == "gpt2":
        V, F = 128, 256
        cfg = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": V, "n_positions": T,
               "n_embd": C, "n_layer": L, "n_head": H, "n_inner": F, "activation_function": "gelu_new",
               "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True}
        W["transformer.wte.weight"], W["transformer.wpe.weight"] = r(V, C), r(T, C)
        for l in range(L):
            p = f"transformer.h.{l}."
            for n in ["ln_1", "ln_2"]:
                W[p + n + ".weight"], W[p + n + ".bias"] = ln(C), r(C)
            W[p + "attn.c_attn.weight"], W[p + "attn.c_attn.bias"] = r(C, 3 * C), r(3 * C)
            W[p + "attn.c_proj.weight"], W[p + "attn.c_proj.bias"] = r(C, C), r(C)
            W[p + "mlp.c_fc.weight"], W[p + "mlp.c_fc.bias"] = r(C, F), r(F)
            W[p + "mlp.c_proj.weight"], W[p + "mlp.c_proj.bias"] = r(F, C), r(C)
        W["transformer.ln_f.weight"], W["transformer.ln_f.bias"] = ln(C), r(C)
    else:
        V, F, G, D = 100, 128, 2, C // H
        cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": V, "hidden_size": C,
               "intermediate_size": F, "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": G,
               "max_position_embeddings": T, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
               "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
               "tie_word_embeddings": False, "hidden_act": "silu"}
        W["model.embed_tokens.weight"], W["lm_head.weight"] = r(V, C), r(V, C)
        for l in range(L):
            p = f"model.layers.{l}."
            W[p + "input_layernorm.weight"], W[p + "post_attention_layernorm.weight"] = ln(C), ln(C)
            W[p + "self_attn.q_proj.weight"], W[p + "self_attn.o_proj.weight"] = r(H * D, C), r(C, H * D)
            W[p + "self_attn.k_proj.weight"], W[p + "self_attn.v_proj.weight"] = r(G * D, C), r(G * D, C)
            W[p + "mlp.gate_proj.weight"], W[p + "mlp.up_proj.weight"] = r(F, C), r(F, C)
            W[p + "mlp.down_proj.weight"] = r(C, F)
        W["model.norm.weight"] = ln(C)
        if arch == "llama_tied":
            cfg["tie_word_embeddings"] = True
            del W["lm_head.weight"]
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    write_safetensors(os.path.join(d, "model.safetensors"), W)


def as_f64(dtype, arr):
    if dtype == "BF16":
        return torch.from_numpy((arr.astype(np.uint32) << 16).view(np.float32).copy()).double()
    return torch.from_numpy(arr.astype(np.float64))


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def gelu_new(x):  # transformers' NewGELUActivation
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def causal_attention(q, k, v):
    """q (H, T, D), k/v (H, T, D): softmax(q k^T / sqrt(D) + causal mask) v."""
    T, D = q.shape[1], q.shape[2]
    s = q @ k.transpose(-1, -2) / math.sqrt(D)
    s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    return torch.softmax(s, -1) @ v


def gpt2_logits(cfg, W, ids):
    C, H = cfg["n_embd"], cfg["n_head"]
    D, T, eps = C // H, len(ids), cfg["layer_norm_epsilon"]
    x = W["transformer.wte.weight"][ids] + W["transformer.wpe.weight"][torch.arange(T)]
    for l in range(cfg["n_layer"]):
        p = f"transformer.h.{l}."
        a = layer_norm(x, W[p + "ln_1.weight"], W[p + "ln_1.bias"], eps)
        qkv = a @ W[p + "attn.c_attn.weight"] + W[p + "attn.c_attn.bias"]  # Conv1D
        q, k, v = (t.view(T, H, D).transpose(0, 1) for t in qkv.split(C, dim=-1))
        o = causal_attention(q, k, v).transpose(0, 1).reshape(T, C)
        x = x + o @ W[p + "attn.c_proj.weight"] + W[p + "attn.c_proj.bias"]
        m = layer_norm(x, W[p + "ln_2.weight"], W[p + "ln_2.bias"], eps)
        m = gelu_new(m @ W[p + "mlp.c_fc.weight"] + W[p + "mlp.c_fc.bias"])
        x = x + m @ W[p + "mlp.c_proj.weight"] + W[p + "mlp.c_proj.bias"]
    x = layer_norm(x, W["transformer.ln_f.weight"], W["transformer.ln_f.bias"], eps)
    tied = cfg.get("tie_word_embeddings", True)
    return x @ (W["transformer.wte.weight"] if tied else W["lm_head.weight"]).T


def rms_norm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def llama_inv_freq(cfg, D):
    inv = 1.0 / (cfg.get("rope_theta", 10000.0) ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    rs = cfg.get("rope_scaling")
    if rs:  # transformers' _compute_llama3_parameters
        assert rs.get("rope_type", rs.get("type")) == "llama3", rs
        f, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        lo_wl, hi_wl = old / lo, old / hi
        wl = 2 * math.pi / inv
        scaled = torch.where(wl > lo_wl, inv / f, inv)
        smooth = (old / wl - lo) / (hi - lo)
        smoothed = (1 - smooth) * scaled / f + smooth * scaled
        medium = ~(wl < hi_wl) & ~(wl > lo_wl)
        inv = torch.where(medium, smoothed, scaled)
    return inv


def llama_logits(cfg, W, ids):
    C, H = cfg["hidden_size"], cfg["num_attention_heads"]
    G = cfg.get("num_key_value_heads", H)
    D = cfg.get("head_dim") or C // H
    T, eps = len(ids), cfg["rms_norm_eps"]
    freqs = torch.arange(T, dtype=torch.float64)[:, None] * llama_inv_freq(cfg, D)[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    x = W["model.embed_tokens.weight"][ids]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        a = rms_norm(x, W[p + "input_layernorm.weight"], eps)
        q = (a @ W[p + "self_attn.q_proj.weight"].T).view(T, H, D).transpose(0, 1)
        k = (a @ W[p + "self_attn.k_proj.weight"].T).view(T, G, D).transpose(0, 1)
        v = (a @ W[p + "self_attn.v_proj.weight"].T).view(T, G, D).transpose(0, 1)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = k.repeat_interleave(H // G, dim=0), v.repeat_interleave(H // G, dim=0)  # repeat_kv
        o = causal_attention(q, k, v).transpose(0, 1).reshape(T, H * D)
        x = x + o @ W[p + "self_attn.o_proj.weight"].T
        m = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
        g = torch.nn.functional.silu(m @ W[p + "mlp.gate_proj.weight"].T)
        x = x + (g * (m @ W[p + "mlp.up_proj.weight"].T)) @ W[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, W["model.norm.weight"], eps)
    tied = cfg.get("tie_word_embeddings", False)
    return x @ (W["model.embed_tokens.weight"] if tied else W["lm_head.weight"]).T


FAILS = PASSES = 0


def report(ok, msg):
    global FAILS, PASSES
    print(("ok " if ok else "not ok ") + msg)
    FAILS += not ok
    PASSES += bool(ok)


def cmd_logits(d, plait_file):
    cfg = json.load(open(os.path.join(d, "config.json")))
    W = {k: as_f64(dt, a) for k, (dt, a) in read_dir(d).items()}
    pl, _ = read_safetensors(plait_file)
    ids = torch.from_numpy(pl["tokens"][1].astype(np.int64))
    want = torch.from_numpy(pl["logits"][1].astype(np.float64))
    arch = cfg["architectures"][0]
    with torch.no_grad():
        got = {"GPT2LMHeadModel": gpt2_logits, "LlamaForCausalLM": llama_logits}[arch](cfg, W, ids)
    assert got.shape == want.shape, (got.shape, want.shape)
    err = ((got - want).abs().max() / want.abs().max()).item()
    report(err <= 2e-6, f"{arch} from {os.path.basename(d)}: logits = plait's, normwise "
           f"relative error {err:.2e} (<= 2e-6)")


def cmd_bf16(d32, d16):
    a, b = read_dir(d32), read_dir(d16)
    bad = [k for k in a if k not in b or b[k][0] != "BF16" or not np.array_equal(
        torch.from_numpy(a[k][1].copy()).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16),
        b[k][1])]
    report(not bad and set(a) == set(b),
           f"bf16: {len(b)} tensors are the fp32 export rounded to nearest even{' ' + str(bad[:3]) if bad else ''}")


def cmd_same(da, db):
    a, b = read_dir(da), read_dir(db)
    bad = [k for k in set(a) | set(b) if k not in a or k not in b or a[k][0] != b[k][0]
           or a[k][1].shape != b[k][1].shape or a[k][1].tobytes() != b[k][1].tobytes()]
    report(not bad, f"{os.path.basename(da)} and {os.path.basename(db)} hold the same {len(a)} "
           f"tensors{' but ' + str(sorted(bad)[:3]) if bad else ''}")


def plait_tensors(idir):
    """The model tensors of a plait iteration directory, by (rank directory, name)."""
    out = {}
    for sub in sorted(os.listdir(idir)):
        f = os.path.join(idir, sub, "model_optim.safetensors")
        if sub.startswith("mp_rank_") and os.path.exists(f):
            t, _ = read_safetensors(f)
            out.update({(sub, k): v for k, v in t.items() if not k.startswith("optimizer.")})
    return out


def cmd_plait_same(ia, ib):
    a, b = plait_tensors(ia), plait_tensors(ib)
    bad = [k for k in set(a) | set(b) if k not in a or k not in b or a[k][0] != b[k][0]
           or a[k][1].shape != b[k][1].shape or a[k][1].tobytes() != b[k][1].tobytes()]
    report(a and not bad, f"plait -> HF -> plait: the {len(a)} model tensors of "
           f"{os.path.basename(ia)} and {os.path.basename(ib)} are bit-identical"
           f"{' but ' + str(sorted(bad)[:3]) if bad else ''}")


def cmd_shards(d, max_bytes):
    index = json.load(open(os.path.join(d, "model.safetensors.index.json")))
    total, ok = 0, True
    for f in sorted(set(index["weight_map"].values())):
        t, _ = read_safetensors(os.path.join(d, f))
        nbytes = sum(a.nbytes for _, a in t.values())
        total += nbytes
        ok &= nbytes <= max_bytes or len(t) == 1
        ok &= all(index["weight_map"][k] == f for k in t)
    ok &= total == index["metadata"]["total_size"]
    ok &= len(index["weight_map"]) == len(read_dir(d))
    report(ok, f"shards of {os.path.basename(d)}: each <= {max_bytes} bytes or one tensor, "
           f"index total_size {index['metadata']['total_size']} = {total}, every name mapped")


if __name__ == "__main__":
    torch.set_num_threads(1)
    cmds = {"logits": cmd_logits, "bf16": cmd_bf16, "same": cmd_same, "plait_same": cmd_plait_same,
            "random": lambda arch, d, seed: make_random(arch, d, int(seed)),
            "shards": lambda d, m: cmd_shards(d, int(m))}
    # several commands in one start (torch's import is the slow part): CMD ARGS... :: CMD ARGS...
    argv, group = sys.argv[1:] + ["::"], []
    for a in argv:
        if a != "::":
            group.append(a)
            continue
        try:
            cmds[group[0]](*group[1:])
        except Exception as e:  # a missing file or tensor is a failure of that check
            report(False, f"{' '.join(group)}: {type(e).__name__}: {e}")
        group = []
    print(f"hf_models: {PASSES} passed, {FAILS} failed")
    sys.exit(1 if FAILS else 0)
