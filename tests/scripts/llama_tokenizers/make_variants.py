#!/usr/bin/python3
"""Writes the derived tokenizer.json files the Llama tokenizer suite runs, each
compared between plait and Hugging Face tokenizers on the same file:

    make_variants.py DATA OUTDIR
      llama2/tokenizer.json         Meta's Llama 2 tokenizer.model as a tokenizer.json:
                                    vocab = the pieces, merges = every split of a
                                    piece into two pieces, pieces by score (highest
                                    first), splits of one piece by the ids of their
                                    halves; pipeline of DATA/mistral/tokenizer.json
      metaspace/tokenizer.json      the Mistral file in the older form: no normalizer,
                                    pre_tokenizer Metaspace(prepend_scheme first,
                                    split false), as Llama 2 files once had
      metaspace-split/tokenizer.json  Metaspace with the defaults (always, split) and
                                    a Metaspace decoder
      gpt2/tokenizer.json           GPT-2's encoder.json + vocab.bpe with ByteLevel
                                    (use_regex) pre-tokenizer, post-processor and
                                    decoder, and <|endoftext|> as a special token"""
import json
import os
import sys

import sentencepiece

data, out = sys.argv[1], sys.argv[2]


def save(name, obj):
    os.makedirs(f"{out}/{name}", exist_ok=True)
    with open(f"{out}/{name}/tokenizer.json", "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False)


base = json.load(open(f"{data}/mistral/tokenizer.json", encoding="utf-8"))

# Llama 2 from its tokenizer.model
sp = sentencepiece.SentencePieceProcessor(model_file=f"{data}/llama2/tokenizer.model")
pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
vocab = {p: i for i, p in enumerate(pieces)}
normal = [i for i in range(len(pieces)) if not (sp.is_control(i) or sp.is_unknown(i) or sp.is_byte(i))]
merges = []
for i in sorted(normal, key=lambda i: (-sp.get_score(i), i)):
    p = pieces[i]
    splits = [(p[:k], p[k:]) for k in range(1, len(p)) if p[:k] in vocab and p[k:] in vocab]
    merges += sorted(splits, key=lambda s: (vocab[s[0]], vocab[s[1]]))
llama2 = dict(base)
llama2["model"] = dict(base["model"], vocab=vocab, merges=[f"{a} {b}" for a, b in merges])
save("llama2", llama2)

meta = dict(base, normalizer=None,
            pre_tokenizer={"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                           "split": False})
save("metaspace", meta)
meta2 = dict(base, normalizer=None,
             pre_tokenizer={"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True},
             decoder={"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True})
save("metaspace-split", meta2)

enc = json.load(open(f"{data}/gpt2/encoder.json", encoding="utf-8"))
lines = open(f"{data}/gpt2/vocab.bpe", encoding="utf-8").read().split("\n")[1:-1]
bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
gpt2 = {"version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": 50256, "content": "<|endoftext|>", "single_word": False,
                          "lstrip": False, "rstrip": False, "normalized": True, "special": True}],
        "normalizer": None, "pre_tokenizer": bl, "post_processor": bl, "decoder": bl,
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                  "byte_fallback": False, "vocab": enc, "merges": [m for m in lines if m]}}
gpt2["model"]["continuing_subword_prefix"] = None
gpt2["model"]["end_of_word_suffix"] = None
save("gpt2", gpt2)
print("wrote llama2, metaspace, metaspace-split, gpt2")
