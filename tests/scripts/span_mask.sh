#!/usr/bin/env bash
# MegaMolBART's span masking (src/data/span_mask.h) against MolBART's
# MolEncTokenizer._mask_span (tests/scripts/span_mask/molbart_mask.py):
# the same loop on plait's draws gives the same output, token for token, over
# 20,000 sequences of 1-60 tokens (zero-length spans included); and MolBART's
# code with its own RNGs (random.choices, torch.poisson) gives the same
# statistics, at MegaMolBART's settings (0.1, lambda 3) and at lambda 1.5;
# a wrong lambda is caught.
set -u
. "$(dirname "$0")/lib.sh"
REF=/usr/bin/python3
PY=$ROOT/tests/scripts/span_mask/molbart_mask.py
TOOL=${PLAIT_TESTTOOLS:-$ROOT/build/testtools}/span_mask
[ -x "$TOOL" ] || { echo "missing $TOOL (run make)"; exit 1; }
"$REF" -c 'import torch' 2>/dev/null || { echo "missing python3-torch (scripts/setup.sh)"; exit 1; }

for cfg in "0.1 3" "0.3 3" "0.1 1.5"; do
    set -- $cfg
    name=p$1_l$2
    check "plait_masks_$name" sh -c "'$TOOL' 10000 60 $1 $2 2026 >'$TMP/$name.tsv'"
    check "molbart_loop_same_output_$name" "$REF" "$PY" replay "$TMP/$name.tsv"
    cat "$TMP/check.out"
done
# MolBART's own RNGs (each run imports torch: MegaMolBART's setting and a shorter lambda).
for name in p0.1_l3 p0.1_l1.5; do
    p=${name#p}; p=${p%_l*}; l=${name#*_l}
    check "molbart_rng_same_statistics_$name" "$REF" "$PY" stats "$TMP/$name.tsv" "$p" "$l" 2026
    cat "$TMP/check.out"
done
check_fails statistics_catch_a_wrong_lambda 'standard errors' "$REF" "$PY" stats "$TMP/p0.1_l3.tsv" 0.1 2.5 2026
cat "$TMP/check.out"
summary span_mask
