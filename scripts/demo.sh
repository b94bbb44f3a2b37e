#!/usr/bin/env bash
# The demo: tokenize the King James Bible with GPT-2's tokenizer into Megatron's
# .bin/.idx format, train a small GPT on it for a few minutes (progress line,
# validation, checkpoints), then generate text from the checkpoint.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${PLAIT_DATA:-$PWD/data}
OUT=${DEMO_OUT:-$PWD/build/demo}
GPT2=(--tokenizer-type GPT2BPETokenizer --vocab-file "$DATA/gpt2/encoder.json"
      --merge-file "$DATA/gpt2/vocab.bpe")
mkdir -p "$OUT"
echo "== 1. preprocess: one JSON document per verse -> $OUT/kjv_text_document.{bin,idx}"
python3 -c '
import json, sys
with open(sys.argv[1], encoding="utf-8") as f, open(sys.argv[2], "w", encoding="utf-8") as o:
    for line in f:
        o.write(json.dumps({"text": line.rstrip("\n")}) + "\n")
' "$DATA/kjv.txt" "$OUT/kjv.jsonl"
build/plait preprocess --input "$OUT/kjv.jsonl" --json-keys text "${GPT2[@]}" --append-eod \
    --workers 2 --output-prefix "$OUT/kjv"
build/plait data inspect "$OUT/kjv_text_document" "${GPT2[@]}"
echo "== 2. train a small GPT (examples/gpt_kjv_small.json)"
rm -rf "$OUT/ckpt" "$OUT/metrics.jsonl"
build/plait train --config examples/gpt_kjv_small.json "${GPT2[@]}" \
    --data-path "$OUT/kjv_text_document" --save "$OUT/ckpt" --data-cache-path "$OUT/cache" \
    --metrics-file "$OUT/metrics.jsonl"
/usr/bin/python3 scripts/plot.py loss "$OUT/metrics.jsonl" -o "$OUT/loss.png"
echo "== 3. generate from the checkpoint"
build/plait generate --load "$OUT/ckpt" --prompt "And God said," --max-new-tokens 60 \
    --temperature 0.8 --top-k 40 --seed 1
