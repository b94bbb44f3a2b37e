#!/usr/bin/python3
"""Reference for plait's SentencePiece tokenizers: Debian's python3-sentencepiece
(SentencePiece 0.1.97) with Megatron's wrapper rules restated (plait's
sp_tokenizer.c header lists them with their sources).

    sp_encode.py MODEL WRAPPER lines|roundtrip|info TEXTS.jsonl
WRAPPER: default (megatron/core/tokenizers: EncodeAsIds), legacy-llama2 ([bos] +
EncodeAsIds), legacy-sp[:N] (the legacy SentencePieceTokenizer with N extra ids).
lines: ids of each text, space-separated; roundtrip: the decoded text of those ids
as a JSON string; info: vocab_size and eod."""
import json
import sys

import sentencepiece

model, wrapper, mode = sys.argv[1:4]
sp = sentencepiece.SentencePieceProcessor(model_file=model)
n = sp.get_piece_size()
vocab = {sp.id_to_piece(i): i for i in range(n)}
specials = {}  # text -> id, in insertion order
eod = sp.eos_id()
if wrapper.startswith("legacy-sp"):
    extra = int(wrapper.split(":")[1]) if ":" in wrapper else 0

    def piece_or(i, fallback):
        return sp.id_to_piece(i) if 0 <= i < n else fallback

    names = ["<CLS>", "<SEP>", "<EOD>", "<MASK>", piece_or(sp.pad_id(), "<PAD>"),
             piece_or(sp.bos_id(), "<BOS>"), piece_or(sp.eos_id(), "<EOS>")]
    names += [f"<extra_id_{i}>" for i in range(extra)]
    for t in names:
        if t not in vocab:
            vocab[t] = len(vocab)
        specials.setdefault(t, vocab[t])
    eod = specials["<EOD>"]


def tokenize(text):
    if wrapper == "legacy-llama2":
        return [sp.bos_id()] + sp.encode(text)
    if not specials:
        return sp.encode(text)
    ids, idx = [], 0
    while True:
        found = {t: text.find(t, idx) for t in specials if text.find(t, idx) >= 0}
        if not found:
            break
        tok = min(found, key=found.get)
        ids += sp.encode(text[idx:found[tok]]) + [specials[tok]]
        idx = found[tok] + len(tok)
    return ids + sp.encode(text[idx:])


def detokenize(ids):
    if not specials:
        return sp.decode(ids)
    inv = {v: k for k, v in specials.items()}
    text, last = "", 0
    for i, x in enumerate(ids):
        if x in inv:
            text += sp.decode(ids[last:i]) + " " + inv[x] + " "
            last = i + 1
    return text + sp.decode(ids[last:])


if mode == "info":
    print(f"vocab_size {len(vocab)}\neod {eod}")
    sys.exit(0)
out = []
for line in open(sys.argv[4], encoding="utf-8"):
    text = json.loads(line)
    ids = tokenize(text)
    out.append(json.dumps(detokenize(ids)) if mode == "roundtrip" else " ".join(map(str, ids)))
sys.stdout.write("\n".join(out) + "\n")
