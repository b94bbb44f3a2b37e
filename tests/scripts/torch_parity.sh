#!/usr/bin/env bash
# plait's GPT against the same model in PyTorch (float64): logits, loss,
# gradients, and parameters after 5 AdamW steps. See torch_parity.py.
source "$(dirname "$0")/lib.sh"
"$ROOT/build/testtools/gpt_parity" "$TMP/parity.safetensors" || { echo "parity: 0 passed, 1 failed"; exit 1; }
OMP_NUM_THREADS=2 /usr/bin/python3 "$ROOT/tests/scripts/torch_parity.py" "$TMP/parity.safetensors"
