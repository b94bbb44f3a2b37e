#!/usr/bin/python3
"""Writes a small random T5ForConditionalGeneration directory as transformers'
save_pretrained lays it out, independently of plait: config.json with T5Config's keys
(t5-small's style: no tie_word_embeddings key, so tied; relu), model.safetensors under
Hugging Face's names including the encoder.embed_tokens / decoder.embed_tokens copies of
shared.weight that older checkpoints hold, and a SentencePiece model as spiece.model.
Weights are drawn wide enough (std 0.12, bias tables 1.0) for the logits to be far from
uniform, so that a wrong layout shows.

With VOCAB and EXTRA_IDS: vocab_size VOCAB (t5-small's style: 32128 rows for its 32100
tokens) and a tokenizer_config.json declaring EXTRA_IDS sentinels <extra_id_N>.

usage: t5_hf_make.py OUT_DIR SPIECE_MODEL [relu|gated [D_KV [VOCAB EXTRA_IDS]]]
(D_KV: default d_model / heads)"""
import json
import os
import shutil
import struct
import sys

import numpy as np


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for k, v in tensors.items():
        b = np.ascontiguousarray(v, dtype=np.float32).tobytes()
        header[k] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    out, spm = sys.argv[1], sys.argv[2]
    gated = len(sys.argv) > 3 and sys.argv[3] == "gated"
    d, H, F, Le, Ld, V, nb = 64, 4, 96, 2, 2, 32000, 32
    dkv = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[4] != "-" else d // H
    V = int(sys.argv[5]) if len(sys.argv) > 6 else V
    inner = H * dkv
    rng = np.random.default_rng(5)
    w = lambda *s: rng.normal(0, 0.12, s)  # noqa: E731
    T = {"shared.weight": w(V, d)}
    T["encoder.embed_tokens.weight"] = T["shared.weight"]
    T["decoder.embed_tokens.weight"] = T["shared.weight"]
    for stack, L in (("encoder", Le), ("decoder", Ld)):
        T[f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"] = \
            rng.normal(0, 1.0, (nb, H))
        T[f"{stack}.final_layer_norm.weight"] = 1 + 0.1 * rng.normal(size=d)
        for i in range(L):
            p = f"{stack}.block.{i}.layer."
            atts = ["0.SelfAttention"] + (["1.EncDecAttention"] if stack == "decoder" else [])
            for a in atts:
                for x in "qkv":
                    T[f"{p}{a}.{x}.weight"] = w(inner, d)
                T[f"{p}{a}.o.weight"] = w(d, inner)
                T[f"{p}{a[0]}.layer_norm.weight"] = 1 + 0.1 * rng.normal(size=d)
            m = "2" if stack == "decoder" else "1"
            T[f"{p}{m}.layer_norm.weight"] = 1 + 0.1 * rng.normal(size=d)
            for x in (["wi_0", "wi_1"] if gated else ["wi"]):
                T[f"{p}{m}.DenseReluDense.{x}.weight"] = w(F, d)
            T[f"{p}{m}.DenseReluDense.wo.weight"] = w(d, F)
    os.makedirs(out, exist_ok=True)
    write_safetensors(os.path.join(out, "model.safetensors"), T)
    cfg = {"architectures": ["T5ForConditionalGeneration"], "model_type": "t5",
           "d_model": d, "d_kv": dkv, "d_ff": F, "num_layers": Le, "num_decoder_layers": Ld,
           "num_heads": H, "relative_attention_num_buckets": nb,
           "relative_attention_max_distance": 128, "dropout_rate": 0.1,
           "layer_norm_epsilon": 1e-6, "initializer_factor": 1.0,
           "feed_forward_proj": "gated-gelu" if gated else "relu", "is_encoder_decoder": True,
           "n_positions": 64, "pad_token_id": 0, "eos_token_id": 2, "decoder_start_token_id": 0,
           "vocab_size": V, "use_cache": True}
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)
    shutil.copy(spm, os.path.join(out, "spiece.model"))
    if len(sys.argv) > 6:
        n = int(sys.argv[6])
        tok = {"tokenizer_class": "T5Tokenizer", "extra_ids": n, "model_max_length": 512,
               "additional_special_tokens": ["<extra_id_%d>" % i for i in range(n)],
               "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}
        json.dump(tok, open(os.path.join(out, "tokenizer_config.json"), "w"), indent=2)


if __name__ == "__main__":
    main()
