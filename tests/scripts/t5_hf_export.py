#!/usr/bin/python3
"""A plait T5 exported as transformers' T5ForConditionalGeneration, read by Hugging Face
names and config.json alone into the independent float64 T5 of t5_hf_ref.py, gives the
logits plait computes for the same checkpoint (build/testtools/encdec_logits), within
fp32 rounding (1e-5, t5_parity.py's bound for logits). A control: the same reference with
the MLP's two input projections exchanged (gated-gelu), or a tied model's lm_head without
the d_model^-0.5 scale, must differ by more than 1e-3.

usage: t5_hf_export.py HF_DIR LOGITS.safetensors [HF_DIR LOGITS.safetensors ...]
(prints "t5_hf_export: N passed, N failed")"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import t5_hf_ref  # noqa: E402
from torch_parity import read_safetensors, rel  # noqa: E402


def config_of(d):
    j = json.load(open(os.path.join(d, "config.json")))
    assert j["architectures"] == ["T5ForConditionalGeneration"] and j["model_type"] == "t5"
    return {"hidden": j["d_model"], "heads": j["num_heads"], "d_kv": j["d_kv"],
            "enc_layers": j["num_layers"], "dec_layers": j["num_decoder_layers"],
            "buckets": j["relative_attention_num_buckets"],
            "max_distance": j["relative_attention_max_distance"],
            "act": {"relu": "relu", "gated-gelu": "geglu"}[j["feed_forward_proj"]],
            "norm_eps": j["layer_norm_epsilon"], "tied": j.get("tie_word_embeddings", True)}  # T5Config default


def main():
    passed = failed = 0
    args = sys.argv[1:]
    for d, lp in zip(args[0::2], args[1::2]):
        cfg = config_of(d)
        T, _ = read_safetensors(os.path.join(d, "model.safetensors"))
        W = {k: torch.tensor(v, dtype=torch.float64) for k, v in T.items()
             if not (cfg["tied"] and k == "lm_head.weight")}
        L, _ = read_safetensors(lp)
        src = torch.tensor(L["src"].astype("int64")).view(1, -1)
        dec = torch.tensor(L["dec"].astype("int64")).view(1, -1)
        src_len = torch.tensor(L["src_len"].astype("int64"))
        with torch.no_grad():
            logits = t5_hf_ref.forward(W, src, src_len, dec, cfg)[0]
            X = dict(W)
            for a in [k for k in W if "wi_0" in k]:
                b = a.replace("wi_0", "wi_1")
                X[a], X[b] = W[b], W[a]
            if cfg["tied"] and cfg["act"] != "geglu":
                X["lm_head.weight"] = W["shared.weight"]  # unscaled
            other = t5_hf_ref.forward(X, src, src_len, dec, cfg)[0]
        name = os.path.basename(d)
        for what, e, ok in (("logits equal plait's", rel(L["logits"], logits), None),
                            ("the control (exchanged tensors) differs", rel(L["logits"], other),
                             1e-3)):
            good = e > ok if ok else e <= 1e-5
            print("%s %s: %s (relative error %.2e)" % ("ok" if good else "not ok", name, what, e))
            passed, failed = passed + good, failed + (not good)
    print("t5_hf_export: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
