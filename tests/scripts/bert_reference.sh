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
# The binding is fetched by hf_binding_lib.sh (npm pack, pinned by sha256).
set -u
. "$(dirname "$0")/lib.sh"
HERE=$ROOT/tests/scripts/bert_reference
VOCAB=$PLAIT_DATA/bert/vocab.txt
ENCODE=${PLAIT_TESTTOOLS:-$ROOT/build/testtools}/bert_encode
. "$(dirname "$0")/hf_binding_lib.sh"
BINDING=$HF_BINDING

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
check fetch_reference_${HF_PKG//[@\/.]/_} fetch_hf_binding
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
