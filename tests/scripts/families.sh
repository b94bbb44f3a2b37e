#!/usr/bin/env bash
# The model families on the shared blocks: KV-cached generation through
# pl_block_decode equals the training forward position by position
# (tests/tools/generate_check.c).
source "$(dirname "$0")/lib.sh"
TOOLS=${PLAIT_TESTTOOLS:-$ROOT/build/testtools}
"$TOOLS/generate_check" | tee "$TMP/gen.out"
read -r p f < <(sed -nE 's/^generate_check: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$TMP/gen.out")
_pass=$((_pass + ${p:-0})); _fail=$((_fail + ${f:-1}))
summary families
