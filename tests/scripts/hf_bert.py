#!/usr/bin/env python3
"""An independent BERT in PyTorch with Hugging Face transformers' module structure and
tensor names (models/bert/modeling_bert.py), for plait's post-LN BERT
(--transformer-block-type post_ln) and its Hugging Face export and import.

The model, float64, as transformers builds it:
  BertEmbeddings   x = LayerNorm(word[ids] + position[0..T) + token_type[types]), eps
                   layer_norm_eps (dropout: off, evaluation)
  BertLayer        attention.self.{query,key,value} (per head HS columns of C), scores /
                   sqrt(HS) + (1 - mask) * finfo.min over the keys past the sample's length,
                   softmax; x = attention.output.LayerNorm(x + attention.output.dense(ctx));
                   x = output.LayerNorm(x + output.dense(act(intermediate.dense(x)))),
                   act = ACT2FN[hidden_act] ("gelu": exact erf)
  BertPooler       tanh(dense(x[:, 0]))
  heads            BertForPreTraining: cls.predictions (transform.dense, act,
                   transform.LayerNorm, decoder tied to the word embeddings, bias
                   cls.predictions.bias), cls.seq_relationship on the pooler;
                   BertForMaskedLM: cls.predictions, no pooler;
                   BertForSequenceClassification: classifier on the pooler (num_labels 1:
                   regression, MSE); BertForTokenClassification: classifier on every
                   position, no pooler; BertForQuestionAnswering: qa_outputs (2) on every
                   position, split into start and end logits, no pooler.
Nothing of plait's layout is used by the model; plait_to_hf below is the one place that
knows Megatron core's names and layouts (QKV rows per head [q; k; v]), written from
Megatron's documented layout, for the parity check of plait's own gradients.

  hf_bert.py parity FILE.safetensors...
      files written by model_parity --model bert --post-ln [--task T]: the model built
      from the file's initial parameters (its vocabulary the padded one, as plait's
      softmax runs over it) gives plait's logits and loss (MLM + NSP, or the task's) to
      1e-5 and every gradient to 1e-4 (normwise relative; the fp32 rounding of torch_parity.py's
      BERT cases, the same model sizes), and a pre-LN reading of the same weights does not.
  hf_bert.py logits HF_DIR PLAIT_LOGITS.safetensors
      the exported directory, read by transformers' names and config.json only, gives
      plait's logits (ckpt_logits: the MLM logits, or the task's; the binary logits) for
      the same tokens within 2e-6 (normwise relative: fp32 rounding through L layers).
  hf_bert.py bf16_loss FP32_FILE BF16_FILE
      model_parity --post-ln's loss with --bf16 is within 1e-3 of fp32's (bf16's 8-bit
      mantissa on the GEMMs' inputs: ~4e-3 per product, averaging out over the sums;
      measured 4e-6) and not equal to it
  hf_bert.py same HF_DIR_A HF_DIR_B [NAME...]
      the two directories hold the same tensors, bit for bit (but the NAMEs)
  hf_bert.py zeros HF_DIR NAME
      the tensor NAME is there and all zeros
  hf_bert.py logits_in HF_DIR PLAIT_LOGITS.safetensors
      the same for a directory plait imported (the logits only)
  hf_bert.py random ARCH HF_DIR SEED [VOCAB.txt]
      writes a small Hugging Face BERT directory with random weights (ARCH:
      BertForPreTraining, BertForMaskedLM, BertForSequenceClassification,
      BertForTokenClassification, BertForQuestionAnswering), config.json as
      transformers writes it, and vocab.txt (given, or 120 made-up tokens).

Several commands in one start: CMD ARGS... :: CMD ARGS... Prints "ok ..." / "not ok ..."
lines and "hf_bert.py: N passed, N failed"; exits non-zero on a failure."""
import json
import os
import struct
import sys

import numpy as np
import torch

DT = torch.float64
NP = {"F32": np.float32, "I32": np.int32, "BF16": np.uint16}
_pass, _fail = 0, 0


def check(name, ok, detail=""):
    global _pass, _fail
    if ok:
        _pass += 1
        print(f"ok {name} {detail}")
    else:
        _fail += 1
        print(f"not ok {name} {detail}")


def read_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        a = np.frombuffer(data[b:e], dtype=NP[t["dtype"]]).reshape(t["shape"])
        if t["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32).reshape(t["shape"])
        out[name] = a
    return out, meta


def write_safetensors(path, tensors):
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


def gelu(x, act):
    if act == "gelu":
        return torch.nn.functional.gelu(x)
    if act in ("gelu_new", "gelu_pytorch_tanh"):
        return torch.nn.functional.gelu(x, approximate="tanh")
    raise ValueError(f"hidden_act {act}")


def bert_forward(W, cfg, arch, ids, types, lengths, post_ln=True):
    """transformers' Bert*: returns (main logits, second logits or None).
    W: {transformers name: float64 tensor}; post_ln False reads the same weights as a
    pre-LN model (the negative control of the parity check)."""
    C, NH = cfg["hidden_size"], cfg["num_attention_heads"]
    HS, eps, act = C // NH, cfg["layer_norm_eps"], cfg["hidden_act"]
    B, T = ids.shape
    ln = lambda x, p: torch.nn.functional.layer_norm(x, (C,), W[p + ".weight"], W[p + ".bias"], eps)
    lin = lambda x, p: x @ W[p + ".weight"].T + W[p + ".bias"]
    e = "bert.embeddings."
    x = W[e + "word_embeddings.weight"][ids] + W[e + "position_embeddings.weight"][:T] + \
        W[e + "token_type_embeddings.weight"][types]
    x = ln(x, e + "LayerNorm") if post_ln else x
    keys = torch.arange(T).view(1, 1, 1, T)
    ext = (keys >= lengths.view(B, 1, 1, 1)).to(DT) * torch.finfo(DT).min
    for l in range(cfg["num_hidden_layers"]):
        p = f"bert.encoder.layer.{l}."
        h = x if post_ln else ln(x, p + "attention.output.LayerNorm")
        q, k, v = (lin(h, p + "attention.self." + n).view(B, T, NH, HS).transpose(1, 2)
                   for n in ("query", "key", "value"))
        s = q @ k.transpose(-1, -2) / HS ** 0.5 + ext
        ctx = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, T, C)
        a = lin(ctx, p + "attention.output.dense")
        x = ln(x + a, p + "attention.output.LayerNorm") if post_ln else x + a
        h = x if post_ln else ln(x, p + "output.LayerNorm")
        m = lin(gelu(lin(h, p + "intermediate.dense"), act), p + "output.dense")
        x = ln(x + m, p + "output.LayerNorm") if post_ln else x + m
    pooled = lambda: torch.tanh(lin(x[:, 0], "bert.pooler.dense"))
    if arch in ("BertForPreTraining", "BertForMaskedLM"):
        h = ln(gelu(lin(x, "cls.predictions.transform.dense"), act), "cls.predictions.transform.LayerNorm")
        logits = h @ W[e + "word_embeddings.weight"].T + W["cls.predictions.bias"]
        nsp = lin(pooled(), "cls.seq_relationship") if arch == "BertForPreTraining" else None
        return logits, nsp
    if arch == "BertForSequenceClassification":
        return lin(pooled(), "classifier"), None
    if arch == "BertForTokenClassification":
        return lin(x, "classifier"), None
    return lin(x, "qa_outputs"), None  # BertForQuestionAnswering: [..., 0] start, [..., 1] end


# ---- plait's names (the parity check only)

def plait_to_hf(P, cfg, arch):
    """{transformers name: tensor} made differentiably from plait's tensors P (Megatron
    core's names: encoder.layers.N..., QKV rows per head [q; k; v], HS each)."""
    C, NH = cfg["hidden_size"], cfg["num_attention_heads"]
    HS = C // NH
    W = {"bert.embeddings.word_embeddings.weight": P["embedding.word_embeddings.weight"],
         "bert.embeddings.position_embeddings.weight": P["embedding.position_embeddings.weight"],
         "bert.embeddings.LayerNorm.weight": P["encoder.initial_layernorm.weight"],
         "bert.embeddings.LayerNorm.bias": P["encoder.initial_layernorm.bias"]}
    W["bert.embeddings.token_type_embeddings.weight"] = P.get(
        "embedding.tokentype_embeddings.weight", torch.zeros(2, C, dtype=DT))
    for l in range(cfg["num_hidden_layers"]):
        p, h = f"encoder.layers.{l}.", f"bert.encoder.layer.{l}."
        qkv_w = P[p + "self_attention.linear_qkv.weight"].view(NH, 3, HS, C)
        qkv_b = P[p + "self_attention.linear_qkv.bias"].view(NH, 3, HS)
        for i, n in enumerate(("query", "key", "value")):
            W[h + f"attention.self.{n}.weight"] = qkv_w[:, i].reshape(C, C)
            W[h + f"attention.self.{n}.bias"] = qkv_b[:, i].reshape(C)
        for src, dst in (("self_attention.linear_proj", "attention.output.dense"),
                         ("post_self_attn_layernorm", "attention.output.LayerNorm"),
                         ("mlp.linear_fc1", "intermediate.dense"), ("mlp.linear_fc2", "output.dense"),
                         ("post_mlp_layernorm", "output.LayerNorm")):
            for s in ("weight", "bias"):
                W[h + dst + "." + s] = P[p + src + "." + s]
    pairs = {"BertForPreTraining": [("lm_head.dense", "cls.predictions.transform.dense"),
                                    ("lm_head.layer_norm", "cls.predictions.transform.LayerNorm"),
                                    ("pooler.dense", "bert.pooler.dense"),
                                    ("binary_head", "cls.seq_relationship")],
             "BertForSequenceClassification": [("pooler.dense", "bert.pooler.dense"),
                                               ("classification_head", "classifier")],
             "BertForTokenClassification": [("classifier.mlp.layer0", "classifier")],
             "BertForQuestionAnswering": [("classifier.mlp.layer0", "qa_outputs")]}[arch]
    for src, dst in pairs:
        for s in ("weight", "bias"):
            W[dst + "." + s] = P[src + "." + s]
    if arch == "BertForPreTraining":
        W["cls.predictions.bias"] = P["output_layer.bias"]
    return W


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def parity(path):
    F, meta = read_safetensors(path)
    c = json.loads(meta["config"])
    assert c["post_ln"] == 1, f"{path}: not a --post-ln file"
    task = c["family"].split("-")[1] if "-" in c["family"] else None
    arch = {None: "BertForPreTraining", "sequence": "BertForSequenceClassification",
            "token": "BertForTokenClassification", "span": "BertForQuestionAnswering"}[task]
    cfg = {"hidden_size": c["hidden"], "num_attention_heads": c["heads"], "num_hidden_layers": c["layers"],
           "layer_norm_eps": 1e-5, "hidden_act": "gelu"}
    B, T, V = c["batch"], c["seq"], c["padded_vocab"]
    P = {k[5:]: torch.tensor(v.astype(np.float64), requires_grad=True)
         for k, v in F.items() if k.startswith("init.")}
    ttl = torch.from_numpy(F["bert.tokens_types_labels"].astype(np.int64))[:B]
    lr = torch.from_numpy(F["bert.lengths_is_random"].astype(np.int64))[:, :B]
    ids, types, labels, lengths, second = ttl[:, 0], ttl[:, 1], ttl[:, 2], lr[0], lr[1]
    CE = torch.nn.functional.cross_entropy
    tag = f"{os.path.basename(path)} {arch}: "
    for post in (True, False):
        W = plait_to_hf(P, cfg, arch)
        logits, nsp = bert_forward(W, cfg, arch, ids, types, lengths, post_ln=post)
        if arch == "BertForPreTraining":
            mlm = CE(logits.reshape(-1, V), labels.reshape(-1), ignore_index=-1)
            loss = mlm + CE(nsp, second)
            flat = logits.reshape(-1, V)
        elif arch == "BertForSequenceClassification":
            loss, flat = CE(logits, second), logits
        elif arch == "BertForTokenClassification":
            flat = logits.reshape(-1, logits.shape[-1])
            loss = CE(flat, labels.reshape(-1), ignore_index=-1)
        else:
            loss = (CE(logits[..., 0], labels[:, 0]) + CE(logits[..., 1], labels[:, 1])) / 2
            flat = logits.reshape(-1, 2)
        e_logits = rel(F["logits"], flat.detach().numpy())
        if not post:  # the same weights as a pre-LN model: far from plait's
            check(tag + "a pre-LN reading of the weights is far from plait's logits", e_logits > 1e-2,
                  f"(rel err {e_logits:.3g})")
            break
        check(tag + "logits", e_logits <= 1e-5, f"(rel err {e_logits:.3g})")
        e = rel(F["loss"], [loss.item()])
        check(tag + ("MLM + NSP loss" if nsp is not None else "loss"), e <= 1e-5, f"(rel err {e:.3g})")
        if nsp is not None:
            e = rel(F["binary_logits"], nsp.detach().numpy())
            check(tag + "NSP (binary) logits", e <= 1e-5, f"(rel err {e:.3g})")
        loss.backward()
        worst, name_w, allg, allr, zero = 0.0, "", [], [], []
        total = np.sqrt(sum(float((t.grad.numpy() ** 2).sum()) for t in P.values()))
        for k, t in P.items():
            g, r = F["grad." + k].astype(np.float64), t.grad.numpy()
            allg.append(g.ravel()), allr.append(r.ravel())
            if np.linalg.norm(r) <= 1e-9 * total:
                # zero in exact arithmetic (the span head's softmax over positions takes
                # away any per-column shift, so the last norm's bias has none): plait's
                # must be rounding noise, under 1e-6 of the whole gradient
                zero.append((k, np.linalg.norm(g) / total))
            elif rel(g, r) > worst:
                worst, name_w = rel(g, r), k
        check(tag + f"every gradient ({len(P) - len(zero)} tensors)", worst <= 1e-4,
              f"(worst {worst:.3g}: {name_w})")
        for k, e in zero:
            check(tag + f"gradient {k}, zero in exact arithmetic, is noise", e <= 1e-6, f"({e:.3g})")
        e = rel(np.concatenate(allg), np.concatenate(allr))
        check(tag + "all gradients as one vector", e <= 1e-5, f"(rel err {e:.3g})")


def read_dir(d):
    index = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) \
        else ["model.safetensors"]
    W = {}
    for f in files:
        t, meta = read_safetensors(os.path.join(d, f))
        assert meta.get("format") == "pt", f"{f}: metadata {meta}"
        W.update({k: torch.from_numpy(v.astype(np.float64)) for k, v in t.items()})
    return W


def logits(d, plait_file, export=True):
    cfg = json.load(open(os.path.join(d, "config.json")))
    arch = cfg["architectures"][0]
    W = read_dir(d)
    W = {(k[:-5] + "weight" if k.endswith("LayerNorm.gamma") else  # transformers' _fix_key
          k[:-4] + "bias" if k.endswith("LayerNorm.beta") else k): v for k, v in W.items()}
    F, _ = read_safetensors(plait_file)
    ids = torch.from_numpy(F["tokens"].astype(np.int64)).view(1, -1)
    T = ids.shape[1]
    tag = f"{os.path.basename(d)} {arch}: "
    if export:  # what transformers' save_pretrained writes
        check(tag + "model_type bert, post-LN's LayerNorm epsilon and hidden_act gelu",
              cfg["model_type"] == "bert" and cfg["hidden_act"] == "gelu" and "layer_norm_eps" in cfg)
        expect_pooler = arch in ("BertForPreTraining", "BertForSequenceClassification")
        check(tag + "a pooler exactly when the class has one",
              ("bert.pooler.dense.weight" in W) == expect_pooler)
        check(tag + "no tied decoder tensor (transformers' tied weights are not saved)",
              "cls.predictions.decoder.weight" not in W)
    main, second = bert_forward(W, cfg, arch, ids, torch.zeros_like(ids), torch.tensor([T]))
    e = rel(F["logits"], main.reshape(F["logits"].shape).numpy())
    check(tag + "logits equal plait's", e <= 2e-6, f"(rel err {e:.3g})")
    if second is not None:
        e = rel(F["binary_logits"], second.reshape(-1).numpy())
        check(tag + "NSP logits equal plait's", e <= 2e-6, f"(rel err {e:.3g})")


def same(a, b, *skip):
    """Two directories hold the same tensors (names, shapes, values bit for bit), but
    for the names in skip."""
    A, B = (read_dir(d) for d in (a, b))
    for n in skip:
        A.pop(n, None), B.pop(n, None)
    bad = sorted(set(A) ^ set(B)) or [k for k in A if A[k].shape != B[k].shape or
                                       not torch.equal(A[k], B[k])]
    check(f"{os.path.basename(b)} holds {os.path.basename(a)}'s {len(A)} tensors, bit for bit",
          not bad, f"(differ: {bad[:3]})" if bad else "")


def zeros(d, name):
    W = read_dir(d)
    check(f"{os.path.basename(d)}: {name} is zero", name in W and not W[name].any())


def make_random(arch, d, seed, vocab=None):
    arch, legacy = arch.split(":")[0], arch.endswith(":legacy")
    rng = np.random.default_rng(seed)
    r = lambda *shape: (rng.standard_normal(shape) * 0.1).astype(np.float32)
    ln = lambda n: (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)
    os.makedirs(d, exist_ok=True)
    if vocab:
        words = open(vocab, encoding="utf-8").read().splitlines()
    else:
        words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(115)]
    with open(os.path.join(d, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("".join(w + "\n" for w in words))
    V, C, NH, L, F, T = len(words), 64, 4, 2, 256, 64
    K = {"BertForSequenceClassification": 3, "BertForTokenClassification": 5,
         "BertForQuestionAnswering": 2}.get(arch, 0)
    cfg = {"architectures": [arch], "model_type": "bert", "attention_probs_dropout_prob": 0.1,
           "classifier_dropout": None, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
           "hidden_size": C, "initializer_range": 0.02, "intermediate_size": F, "layer_norm_eps": 1e-12,
           "max_position_embeddings": T, "num_attention_heads": NH, "num_hidden_layers": L,
           "pad_token_id": 0, "position_embedding_type": "absolute", "torch_dtype": "float32",
           "type_vocab_size": 2, "use_cache": True, "vocab_size": V}
    if arch in ("BertForSequenceClassification", "BertForTokenClassification"):
        cfg["id2label"] = {str(i): f"LABEL_{i}" for i in range(K)}
        cfg["label2id"] = {f"LABEL_{i}": i for i in range(K)}
    e = "bert.embeddings."
    W = {e + "word_embeddings.weight": r(V, C), e + "position_embeddings.weight": r(T, C),
         e + "token_type_embeddings.weight": r(2, C), e + "LayerNorm.weight": ln(C), e + "LayerNorm.bias": r(C)}
    for l in range(L):
        p = f"bert.encoder.layer.{l}."
        for n in ("query", "key", "value"):
            W[p + f"attention.self.{n}.weight"], W[p + f"attention.self.{n}.bias"] = r(C, C), r(C)
        W[p + "attention.output.dense.weight"], W[p + "attention.output.dense.bias"] = r(C, C), r(C)
        W[p + "attention.output.LayerNorm.weight"], W[p + "attention.output.LayerNorm.bias"] = ln(C), r(C)
        W[p + "intermediate.dense.weight"], W[p + "intermediate.dense.bias"] = r(F, C), r(F)
        W[p + "output.dense.weight"], W[p + "output.dense.bias"] = r(C, F), r(C)
        W[p + "output.LayerNorm.weight"], W[p + "output.LayerNorm.bias"] = ln(C), r(C)
    if arch in ("BertForPreTraining", "BertForSequenceClassification"):
        W["bert.pooler.dense.weight"], W["bert.pooler.dense.bias"] = r(C, C), r(C)
    if arch in ("BertForPreTraining", "BertForMaskedLM"):
        W["cls.predictions.transform.dense.weight"], W["cls.predictions.transform.dense.bias"] = r(C, C), r(C)
        W["cls.predictions.transform.LayerNorm.weight"] = ln(C)
        W["cls.predictions.transform.LayerNorm.bias"] = r(C)
        W["cls.predictions.bias"] = r(V)
    if arch == "BertForPreTraining":
        W["cls.seq_relationship.weight"], W["cls.seq_relationship.bias"] = r(2, C), r(2)
    if arch in ("BertForSequenceClassification", "BertForTokenClassification"):
        W["classifier.weight"], W["classifier.bias"] = r(K, C), r(K)
    if arch == "BertForQuestionAnswering":
        W["qa_outputs.weight"], W["qa_outputs.bias"] = r(2, C), r(2)
    if legacy:  # older BERT checkpoints (bert-base-uncased's): BertForPreTraining's heads in a
        # BertForMaskedLM's files, and the LayerNorms' gamma / beta names
        W["bert.pooler.dense.weight"], W["bert.pooler.dense.bias"] = r(C, C), r(C)
        W["cls.seq_relationship.weight"], W["cls.seq_relationship.bias"] = r(2, C), r(2)
        W = {(k[:-6] + "gamma" if k.endswith("LayerNorm.weight") else
              k[:-4] + "beta" if k.endswith("LayerNorm.bias") else k): v for k, v in W.items()}
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=2)
    json.dump({"tokenizer_class": "BertTokenizer", "do_lower_case": True, "model_max_length": T},
              open(os.path.join(d, "tokenizer_config.json"), "w"))
    write_safetensors(os.path.join(d, "model.safetensors"), W)
    print(f"wrote {d}: {arch}, {len(W)} tensors")


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
        elif c[0] in ("logits", "logits_in"):
            logits(c[1], c[2], export=c[0] == "logits")
        elif c[0] == "bf16_loss":  # FP32_FILE BF16_FILE: the bf16 run's loss, near, not equal
            a, b = (read_safetensors(f)[0]["loss"][0] for f in c[1:3])
            e = abs(float(a) - float(b)) / abs(float(a))
            check("post-LN BERT with --bf16 GEMMs (the exact GELU's bf16 kernels): loss within "
                  "1e-3 of fp32's, and not fp32's", 0 < e <= 1e-3, f"(rel diff {e:.3g})")
        elif c[0] == "same":
            same(*c[1:])
        elif c[0] == "zeros":
            zeros(c[1], c[2])
        elif c[0] == "random":
            make_random(c[1], c[2], int(c[3]), c[4] if len(c) > 4 else None)
        else:
            raise SystemExit(f"hf_bert.py: unknown command {c[0]}")
    if _pass or _fail:
        print(f"hf_bert.py: {_pass} passed, {_fail} failed")
    return 1 if _fail else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
