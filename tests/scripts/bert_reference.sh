#!/usr/bin/env bash
# BERT WordPiece ids from plait against an outside implementation:
# Hugging Face tokenizers (Rust crate 0.22.x) through the prebuilt Node binding
# of npm @anush008/tokenizers-linux-x64-gnu@0.6.0, built from data/bert/vocab.txt
# (bert-base-uncased) with the standard BertNormalizer + BertPreTokenizer +
# WordPiece pipeline. Every id of every sentence must be equal, for the lower
# case and the cased variants. No cased vocabulary is reachable here, so the
# cased logic (no lower case, no accent stripping) runs on the uncased vocab.
# Test texts come from bert_reference/gen_sentences.py (its header lists the
# code points where HF knowingly differs from Megatron's Python tokenizer).
# The binding is fetched with `npm pack` into $PLAIT_REF_CACHE (default: a
# cache dir under this suite's temp dir) unless already there, pinned by sha256.
set -u
. "$(dirname "$0")/lib.sh"
HERE=$ROOT/tests/scripts/bert_reference
VOCAB=$PLAIT_DATA/bert/vocab.txt
ENCODE=${PLAIT_TESTTOOLS:-$ROOT/build/testtools}/bert_encode
PKG=@anush008/tokenizers-linux-x64-gnu@0.6.0
TGZ_SHA=f8db409cd5b52a2fac2fd963eacf5c33b3d5841c2520ca168c447b2f5cb4a281
NODE_SHA=c7f1e1604d60cb8e6f7309a777c3334ffbc7960a1e5b486a79fa693ec2c20b0c
CACHE=${PLAIT_REF_CACHE:-$TMP/ref-cache}
BINDING=$CACHE/anush008-tokenizers-linux-x64-gnu-0.6.0/tokenizers.linux-x64-gnu.node

sha() { sha256sum "$1" | cut -d' ' -f1; }

fetch_reference() {
    if [ -f "$BINDING" ] && [ "$(sha "$BINDING")" = "$NODE_SHA" ]; then return 0; fi
    command -v npm >/dev/null || { echo "cannot fetch $PKG: npm not found (apt-get install npm)"; return 1; }
    mkdir -p "$CACHE" || return 1
    local tgz=$CACHE/anush008-tokenizers-linux-x64-gnu-0.6.0.tgz
    if [ ! -f "$tgz" ]; then
        (cd "$CACHE" && npm pack --silent "$PKG" >/dev/null 2>"$CACHE/npm.err") || {
            echo "cannot fetch $PKG with npm pack:"; tail -n 5 "$CACHE/npm.err"; return 1; }
    fi
    [ "$(sha "$tgz")" = "$TGZ_SHA" ] || { echo "$tgz: sha256 $(sha "$tgz"), expected $TGZ_SHA"; return 1; }
    mkdir -p "$(dirname "$BINDING")" &&
        tar xzf "$tgz" -C "$(dirname "$BINDING")" --strip-components=1 package/tokenizers.linux-x64-gnu.node || return 1
    [ "$(sha "$BINDING")" = "$NODE_SHA" ] || { echo "$BINDING: sha256 mismatch"; return 1; }
}

# compare NAME REF OURS: every line equal; prints how many.
compare() {
    /usr/bin/python3 - "$@" <<'PY'
import sys
name, ref, ours = sys.argv[1:4]
a = open(ref).read().splitlines()
b = open(ours).read().splitlines()
same = sum(x == y for x, y in zip(a, b))
print(f"{name}: {same}/{len(a)} sentences identical (plait gave {len(b)} lines, "
      f"{sum(len(x.split()) for x in a)} reference ids)")
bad = [i for i, (x, y) in enumerate(zip(a, b)) if x != y][:5]
for i in bad:
    print(f"  line {i + 1}: reference [{a[i]}]\n          plait     [{b[i]}]")
sys.exit(0 if same == len(a) == len(b) and len(a) > 0 else 1)
PY
}

for f in "$VOCAB" "$PLAIT_DATA/kjv.txt"; do
    [ -f "$f" ] || { echo "missing $f (run scripts/setup.sh)"; exit 1; }
done
[ -x "$ENCODE" ] || { echo "missing $ENCODE (run make)"; exit 1; }
check fetch_reference_${PKG//[@\/.]/_} fetch_reference
check generate_test_sentences /usr/bin/python3 "$HERE/gen_sentences.py" "$PLAIT_DATA/kjv.txt" "$TMP"
cat "$TMP/check.out"
if [ -f "$BINDING" ] && [ -f "$TMP/main.hex" ]; then
    for run in main:lower main:cased sigma:lower; do
        set_=${run%:*} mode=${run#*:}
        node "$HERE/hf_encode.js" "$BINDING" "$VOCAB" "$mode" "$TMP/$set_.jsonl" >"$TMP/ref.$set_.$mode" &&
            "$ENCODE" "$VOCAB" "$mode" "$TMP/$set_.hex" >"$TMP/plait.$set_.$mode" &&
            compare "$set_/$mode" "$TMP/ref.$set_.$mode" "$TMP/plait.$set_.$mode" >"$TMP/cmp.out" 2>&1
        rc=$?
        cat "$TMP/cmp.out"
        check "ids_equal_reference_${set_}_$mode" test "$rc" -eq 0
    done
fi
# The README vector of bert-base-uncased (data-sources.md (b)).
printf '%s\n' "$(printf 'i like strawberries' | od -An -tx1 | tr -d ' \n')" >"$TMP/straw.hex"
check readme_vector_i_like_strawberries \
    test "$("$ENCODE" "$VOCAB" lower "$TMP/straw.hex")" = "1045 2066 13137 20968"
summary bert_reference
