#!/usr/bin/python3
"""The sentinels <extra_id_N> of a T5 across plait ckpt import / export --format hf.

Megatron's legacy _SentencePieceTokenizer (megatron/training/tokenizer/tokenizer.py, which
plait's legacy SentencePieceTokenizer follows) gives the pieces their SentencePiece ids, then
appends <CLS> <SEP> <EOD> <MASK>, the pad / bos / eos pieces (<PAD> <BOS> <EOS> when the
model has none), each unless it is a piece, then <extra_id_0> .. <extra_id_{N-1}>.
transformers' T5Tokenizer (tokenization_t5.py, the T5Converter) has the pieces, then the
sentinels in reverse: <extra_id_i> = pieces + N - 1 - i; other tokens come from
tokenizer_config.json's added_tokens_decoder. Both rules are rebuilt here from the
SentencePiece model (the sentencepiece module) and the exported tokenizer_config.json.

Checked: the independent PyTorch T5 of t5_hf_ref.py, on the Hugging Face directory HF_DIR
and the Hugging Face ids of the tokens plait's logits were computed on (encdec_logits with
tokens from the vocabulary's end: pieces, added tokens and sentinels), gives plait's logits
with its columns permuted alike, within fp32 rounding (1e-5); the same on plait's ids
unpermuted differs (> 1e-3); the directory plait exported (HF_DIR2) holds HF_DIR's tensors
exactly and its tokenizer files declare T5Tokenizer's numbering.

usage: t5_hf_sentinels.py HF_DIR HF_DIR2 LOGITS.safetensors
(prints "t5_hf_sentinels: N passed, N failed")"""
import json
import os
import sys

import numpy as np
import sentencepiece
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import t5_hf_ref  # noqa: E402
from t5_hf_export import config_of  # noqa: E402
from torch_parity import read_safetensors, rel  # noqa: E402


def megatron_legacy_tokens(sp, n):
    """plait's (Megatron's legacy) id -> token, past the pieces."""
    pieces = {sp.id_to_piece(i) for i in range(sp.get_piece_size())}
    out = []

    def add(t):
        if t not in pieces and t not in out:
            out.append(t)
    for t in ("<CLS>", "<SEP>", "<EOD>", "<MASK>"):
        add(t)
    for pid, name in ((sp.pad_id(), "<PAD>"), (sp.bos_id(), "<BOS>"), (sp.eos_id(), "<EOS>")):
        add(sp.id_to_piece(pid) if pid >= 0 else name)
    return out + ["<extra_id_%d>" % i for i in range(n)]


def main():
    hf, hf2, lp = sys.argv[1:4]
    passed = failed = 0

    def check(what, ok, detail=""):
        nonlocal passed, failed
        print("%s %s%s" % ("ok" if ok else "not ok", what, detail))
        passed, failed = passed + bool(ok), failed + (not ok)

    sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(hf2, "spiece.model"))
    P = sp.get_piece_size()
    tc = json.load(open(os.path.join(hf2, "tokenizer_config.json")))
    N = tc["extra_ids"]
    added = {v["content"]: int(k) for k, v in tc["added_tokens_decoder"].items()}
    extra = megatron_legacy_tokens(sp, N)

    def hf_id(tok):
        if tok.startswith("<extra_id_"):
            return P + N - 1 - int(tok[10:-1])  # T5Tokenizer
        return added[tok]
    perm = np.arange(P + len(extra))
    perm[P:] = [hf_id(t) for t in extra]
    check("tokenizer_config.json: T5Tokenizer, extra_ids %d, the sentinels listed in order" % N,
          tc["tokenizer_class"] == "T5Tokenizer" and
          tc["additional_special_tokens"] == ["<extra_id_%d>" % i for i in range(N)] and
          all(added["<extra_id_%d>" % i] == P + N - 1 - i for i in range(N)))
    check("special_tokens_map.json lists the sentinels", json.load(
        open(os.path.join(hf2, "special_tokens_map.json")))["additional_special_tokens"] ==
        tc["additional_special_tokens"])
    check("the Hugging Face ids are a permutation of plait's",
          sorted(perm.tolist()) == list(range(len(perm))))

    A, _ = read_safetensors(os.path.join(hf, "model.safetensors"))
    B, _ = read_safetensors(os.path.join(hf2, "model.safetensors"))
    check("the exported tensors are the imported directory's, exactly",
          all(k in A and np.array_equal(A[k], B[k]) for k in B) and
          all(k in B for k in A if "embed_tokens" not in k))

    cfg = config_of(hf)
    W = {k: torch.tensor(v, dtype=torch.float64) for k, v in A.items()
         if not (cfg["tied"] and k == "lm_head.weight")}
    L, _ = read_safetensors(lp)
    src, dec = L["src"].astype("int64"), L["dec"].astype("int64")
    n_len = int(L["src_len"][0])
    sentinels = sum(int(t) >= P + len(extra) - N for t in list(src[:n_len]) + list(dec))
    specials = sum(P <= int(t) < P + len(extra) - N for t in list(src[:n_len]) + list(dec))
    check("the text has sentinels (%d) and added tokens (%d)" % (sentinels, specials),
          sentinels > 0 and specials > 0)
    to_hf = lambda ids: torch.tensor(perm[ids]).view(1, -1)  # noqa: E731
    src_len = torch.tensor([n_len])
    with torch.no_grad():
        logits = t5_hf_ref.forward(W, to_hf(src), src_len, to_hf(dec), cfg)[0].numpy()
        plain = t5_hf_ref.forward(W, torch.tensor(src).view(1, -1), src_len,
                                  torch.tensor(dec).view(1, -1), cfg)[0].numpy()
    e = rel(L["logits"], logits[:, perm])
    check("the PyTorch T5 on the Hugging Face ids gives plait's logits, permuted",
          e <= 1e-5, " (relative error %.2e)" % e)
    e = rel(L["logits"], plain[:, perm])
    check("the control (plait's ids unpermuted) differs", e > 1e-3, " (relative error %.2e)" % e)
    print("t5_hf_sentinels: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
