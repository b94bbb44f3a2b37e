#!/usr/bin/env bash
# The demo: preprocess the King James Bible with the GPT-2 tokenizer and print
# the dataset summary (the trainer comes in a later issue).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${PLAIT_DATA:-$PWD/data}
OUT=${DEMO_OUT:-$PWD/build/demo}
mkdir -p "$OUT"
# One JSON object per verse, as Megatron's preprocess_data.py takes it.
python3 -c '
import json, sys
with open(sys.argv[1], encoding="utf-8") as f, open(sys.argv[2], "w", encoding="utf-8") as o:
    for line in f:
        o.write(json.dumps({"text": line.rstrip("\n")}) + "\n")
' "$DATA/kjv.txt" "$OUT/kjv.jsonl"
build/plait preprocess --input "$OUT/kjv.jsonl" --json-keys text \
    --tokenizer-type GPT2BPETokenizer --vocab-file "$DATA/gpt2/encoder.json" \
    --merge-file "$DATA/gpt2/vocab.bpe" --append-eod --workers 2 \
    --output-prefix "$OUT/kjv"
build/plait data inspect "$OUT/kjv_text_document" --tokenizer-type GPT2BPETokenizer \
    --vocab-file "$DATA/gpt2/encoder.json" --merge-file "$DATA/gpt2/vocab.bpe"
