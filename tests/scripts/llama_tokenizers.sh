#!/usr/bin/env bash
# Llama-family tokenizers from plait against outside implementations, every id equal:
#   HuggingFaceTokenizer   Hugging Face tokenizers 0.22.2 (Node binding, hf_binding_lib.sh) on
#                          the same tokenizer.json: Meta's Llama 3 (data/llama3), Mistral 7B
#                          (data/mistral), and files derived by llama_tokenizers/
#                          make_variants.py (Meta's Llama 2 model as tokenizer.json, the
#                          older Metaspace forms, GPT-2's files as a tokenizer.json)
#   SentencePiece types    Debian's python3-sentencepiece 0.1.97 on Meta's Llama 2
#                          tokenizer.model (BPE) and ALBERT's 30k-clean.model (unigram,
#                          nmt_nfkc), with Megatron's wrapper rules restated in
#                          llama_tokenizers/sp_encode.py (default and --legacy-tokenizer)
# on every verse of the King James Bible and on llama_tokenizers/gen_texts.py's stress
# texts; decode against the references' decode; vocab_size and eod; refusals; then
# plait preprocess with the Llama 3 tokenizer (int32 .bin, read
# back with numpy, ids equal to Hugging Face's), and plait train / generate opening it.
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/hf_binding_lib.sh"
HERE=$ROOT/tests/scripts/llama_tokenizers
ENC=${PLAIT_TESTTOOLS:-$ROOT/build/testtools}/tok_encode
D=$PLAIT_DATA
for f in "$D/kjv.txt" "$D/llama3/tokenizer.json" "$D/mistral/tokenizer.json" \
         "$D/llama2/tokenizer.model" "$D/sentencepiece/30k-clean.model" "$D/gpt2/encoder.json"; do
    [ -f "$f" ] || { echo "missing $f (run scripts/setup.sh)"; exit 1; }
done
[ -x "$ENC" ] || { echo "missing $ENC (run make)"; exit 1; }

# compare NAME REF OURS: every line equal; prints how many lines and ids.
compare() {
    /usr/bin/python3 - "$@" <<'PY'
import sys
name, ref, ours = sys.argv[1:4]
a = open(ref, encoding="utf-8").read().splitlines()
b = open(ours, encoding="utf-8").read().splitlines()
same = sum(x == y for x, y in zip(a, b))
print(f"{name}: {same}/{len(a)} texts identical, {sum(len(x.split()) for x in a)} reference ids")
for i in [i for i, (x, y) in enumerate(zip(a, b)) if x != y][:5]:
    print(f"  line {i + 1}: reference [{a[i][:200]}]\n          plait     [{b[i][:200]}]")
sys.exit(0 if same == len(a) == len(b) and len(a) > 0 else 1)
PY
}

# decoded NAME REF(JSON strings) OURS(hex) TEXTS(jsonl) [identity]: plait's decode equals
# the reference's on every text; with "identity", also decode(encode(x)) == x.
decoded() {
    /usr/bin/python3 - "$@" <<'PY'
import json, sys
name, ref, ours, texts = sys.argv[1:5]
a = [json.loads(l) for l in open(ref, encoding="utf-8")]
b = [bytes.fromhex(l.strip()).decode("utf-8") for l in open(ours)]
t = [json.loads(l) for l in open(texts, encoding="utf-8")]
same, ident = sum(x == y for x, y in zip(a, b)), sum(x == y for x, y in zip(b, t))
print(f"{name}: decode equal on {same}/{len(a)} texts; decode(encode(x)) == x on {ident}")
ok = same == len(a) == len(b) > 0 and (len(sys.argv) < 6 or ident == len(t))
sys.exit(0 if ok else 1)
PY
}

check fetch_reference_${HF_PKG//[@\/.]/_} fetch_hf_binding
check generate_test_texts /usr/bin/python3 "$HERE/gen_texts.py" "$D/kjv.txt" "$TMP"
cat "$TMP/check.out"
check derive_tokenizer_json_variants /usr/bin/python3 "$HERE/make_variants.py" "$D" "$TMP/var"

# --- HuggingFaceTokenizer against Hugging Face tokenizers ----------------------------------
hf_ids() { # NAME DIR SET
    node "$HERE/hf_encode.js" "$HF_BINDING" "$2/tokenizer.json" lines "$TMP/$3.jsonl" >"$TMP/ref.$1.$3" &&
        "$ENC" --model "$2" HuggingFaceTokenizer lines "$TMP/$3.hex" "$TMP/plait.$1.$3" 2>/dev/null &&
        compare "$1/$3" "$TMP/ref.$1.$3" "$TMP/plait.$1.$3"
}
if [ -f "$HF_BINDING" ]; then
    for run in llama3:$D/llama3:kjv llama3:$D/llama3:stress mistral:$D/mistral:kjv \
               mistral:$D/mistral:stress llama2:$TMP/var/llama2:kjv llama2:$TMP/var/llama2:stress \
               metaspace:$TMP/var/metaspace:stress metaspace-split:$TMP/var/metaspace-split:stress \
               gpt2:$TMP/var/gpt2:stress; do
        IFS=: read -r name dir set_ <<<"$run"
        hf_ids "$name" "$dir" "$set_" >"$TMP/cmp.out" 2>&1
        rc=$?
        cat "$TMP/cmp.out"
        check "hf_ids_equal_${name}_$set_" test "$rc" -eq 0
    done
    for run in llama3:$D/llama3:identity mistral:$D/mistral: metaspace-split:$TMP/var/metaspace-split:; do
        IFS=: read -r name dir ident <<<"$run"
        node "$HERE/hf_encode.js" "$HF_BINDING" "$dir/tokenizer.json" roundtrip "$TMP/stress.jsonl" \
            >"$TMP/rref.$name" &&
            "$ENC" --model "$dir" HuggingFaceTokenizer roundtrip "$TMP/stress.hex" "$TMP/rplait.$name" 2>/dev/null &&
            decoded "$name" "$TMP/rref.$name" "$TMP/rplait.$name" "$TMP/stress.jsonl" $ident >"$TMP/cmp.out" 2>&1
        rc=$?
        cat "$TMP/cmp.out"
        check "hf_decode_equal_$name" test "$rc" -eq 0
    done
    for name in llama3 mistral; do
        check "hf_vocab_size_is_len_tokenizer_$name" test \
            "$(node "$HERE/hf_encode.js" "$HF_BINDING" "$D/$name/tokenizer.json" info -)" = \
            "$("$ENC" --model "$D/$name" HuggingFaceTokenizer info - - | head -n 1)"
    done
fi
check "llama3: vocab_size 128256, eod <|end_of_text|> 128001 (tokenizer_config.json)" test \
    "$("$ENC" --model "$D/llama3" HuggingFaceTokenizer info - - | tr '\n' ' ')" = "vocab_size 128256 eod 128001 "
check "mistral: vocab_size 32000, eod </s> 2" test \
    "$("$ENC" --model "$D/mistral" HuggingFaceTokenizer info - - | tr '\n' ' ')" = "vocab_size 32000 eod 2 "
check "llama3: 'Hello world' is Meta's [9906, 1917], no BOS (the post-processor is ByteLevel)" test \
    "$(printf 'Hello world' | od -An -tx1 | tr -d ' \n' > "$TMP/hw.hex"; "$ENC" --model "$D/llama3" HuggingFaceTokenizer lines "$TMP/hw.hex" -)" = "9906 1917"
check "mistral: 'Hello world' is [1, 22557, 1526], <s> first (TemplateProcessing)" test \
    "$("$ENC" --model "$D/mistral" HuggingFaceTokenizer lines "$TMP/hw.hex" -)" = "1 22557 1526"
printf '{"model": {"type": "Unigram", "vocab": []}}' >"$TMP/unigram.json"
check_fails "an unsupported tokenizer.json component is an error naming it" \
    "unigram.json: model of type 'Unigram' is not supported" \
    "$ENC" --model "$TMP/unigram.json" HuggingFaceTokenizer info - -

# --- SentencePiece types against python3-sentencepiece ---------------------------------------
M=$D/llama2/tokenizer.model
sp_ids() { # NAME REFWRAPPER SET plait-args...
    local name=$1 wrap=$2 set_=$3
    shift 3
    /usr/bin/python3 "$HERE/sp_encode.py" "$M" "$wrap" lines "$TMP/$set_.jsonl" >"$TMP/ref.$name.$set_" &&
        "$ENC" --model "$M" "$@" lines "$TMP/$set_.hex" "$TMP/plait.$name.$set_" &&
        compare "$name/$set_" "$TMP/ref.$name.$set_" "$TMP/plait.$name.$set_"
}
sp_runs=("Llama2Tokenizer:default:kjv:Llama2Tokenizer"
         "Llama2Tokenizer:default:stress:Llama2Tokenizer"
         "SentencePieceTokenizer:default:stress:SentencePieceTokenizer"
         "legacy-Llama2Tokenizer:legacy-llama2:kjv:--legacy Llama2Tokenizer"
         "legacy-Llama2Tokenizer:legacy-llama2:stress:--legacy Llama2Tokenizer"
         "legacy-SentencePieceTokenizer:legacy-sp#3:stress:--legacy --extra-ids 3 SentencePieceTokenizer")
for run in "${sp_runs[@]}"; do
    IFS=: read -r name wrap set_ args <<<"$run"
    wrap=${wrap/\#/:}
    # shellcheck disable=SC2086
    sp_ids "$name" "$wrap" "$set_" $args >"$TMP/cmp.out" 2>&1
    rc=$?
    cat "$TMP/cmp.out"
    check "sp_ids_equal_${name}_$set_" test "$rc" -eq 0
    if [ "$set_" = stress ]; then
        # shellcheck disable=SC2086
        /usr/bin/python3 "$HERE/sp_encode.py" "$M" "$wrap" roundtrip "$TMP/stress.jsonl" >"$TMP/rref.$name" &&
            "$ENC" --model "$M" $args roundtrip "$TMP/stress.hex" "$TMP/rplait.$name" &&
            decoded "$name" "$TMP/rref.$name" "$TMP/rplait.$name" "$TMP/stress.jsonl" >"$TMP/cmp.out" 2>&1
        rc=$?
        cat "$TMP/cmp.out"
        check "sp_decode_equal_$name" test "$rc" -eq 0
        # shellcheck disable=SC2086
        check "sp_vocab_size_and_eod_$name" test \
            "$(/usr/bin/python3 "$HERE/sp_encode.py" "$M" "$wrap" info)" = "$("$ENC" --model "$M" $args info - -)"
    fi
done
# ALBERT's unigram model with the nmt_nfkc charsmap
M=$D/sentencepiece/30k-clean.model
uni_runs=("unigram-SentencePieceTokenizer:default:kjv:SentencePieceTokenizer"
          "unigram-SentencePieceTokenizer:default:stress:SentencePieceTokenizer"
          "unigram-legacy-SentencePieceTokenizer:legacy-sp#2:stress:--legacy --extra-ids 2 SentencePieceTokenizer")
for run in "${uni_runs[@]}"; do
    IFS=: read -r name wrap set_ args <<<"$run"
    wrap=${wrap/\#/:}
    # shellcheck disable=SC2086
    sp_ids "$name" "$wrap" "$set_" $args >"$TMP/cmp.out" 2>&1
    rc=$?
    cat "$TMP/cmp.out"
    check "sp_ids_equal_${name}_$set_" test "$rc" -eq 0
done
# shellcheck disable=SC2086
/usr/bin/python3 "$HERE/sp_encode.py" "$M" default roundtrip "$TMP/stress.jsonl" >"$TMP/rref.uni" &&
    "$ENC" --model "$M" SentencePieceTokenizer roundtrip "$TMP/stress.hex" "$TMP/rplait.uni" &&
    decoded unigram "$TMP/rref.uni" "$TMP/rplait.uni" "$TMP/stress.jsonl" >"$TMP/cmp.out" 2>&1
rc=$?
cat "$TMP/cmp.out"
check "sp_decode_equal_unigram" test "$rc" -eq 0
M=$D/llama2/tokenizer.model
head -c 1000 "$M" >"$TMP/truncated.model"
check_fails "a truncated tokenizer.model is an error naming the byte offset" \
    "truncated.model: .*byte offset [0-9]+" \
    "$ENC" --model "$TMP/truncated.model" Llama2Tokenizer info - -

# --- preprocess (int32 for a 128k vocabulary) and training ------------------------------------
LL3=(--tokenizer-type HuggingFaceTokenizer --tokenizer-model "$D/llama3")
check "preprocess KJV with the Llama 3 tokenizer" "$PLAIT" preprocess --input "$D/kjv.txt" \
    --output-prefix "$TMP/ll3" "${LL3[@]}" --workers 2
check "preprocess KJV with Llama2Tokenizer" "$PLAIT" preprocess --input "$D/kjv.txt" \
    --output-prefix "$TMP/ll2" --tokenizer-type Llama2Tokenizer --tokenizer-model "$M" --append-eod
readback() { # PREFIX DTYPE_CODE REF_IDS [EOD]: every document's ids equal REF's line
    /usr/bin/python3 - "$@" <<'PY'
import sys
import numpy as np
prefix, code, ref = sys.argv[1], int(sys.argv[2]), sys.argv[3]
eod = int(sys.argv[4]) if len(sys.argv) > 4 else None
idx = open(prefix + ".idx", "rb").read()
assert idx[:9] == b"MMIDIDX\x00\x00", "magic"
dt = {4: np.int32, 8: np.uint16}[idx[17]]
assert idx[17] == code, f"dtype code {idx[17]}, expected {code}"
s, d = np.frombuffer(idx, np.uint64, 2, 18)
sizes = np.frombuffer(idx, np.int32, int(s), 34)
ptrs = np.frombuffer(idx, np.int64, int(s), 34 + 4 * int(s))
tokens = np.fromfile(prefix + ".bin", dtype=dt)
want = [list(map(int, l.split())) for l in open(ref)]
got = [tokens[p // tokens.itemsize:p // tokens.itemsize + n].tolist() for p, n in zip(ptrs, sizes)]
if eod is not None:
    want = [w + [eod] for w in want]
same = sum(a == b for a, b in zip(got, want))
print(f"{prefix}: dtype {np.dtype(dt).name} (code {code}), {len(got)} documents, "
      f"{same}/{len(want)} equal to the reference, {sum(map(len, want))} ids")
sys.exit(0 if same == len(want) == len(got) else 1)
PY
}
if [ -f "$TMP/ref.llama3.kjv" ]; then
    check "llama3 dataset: int32 (code 4), every document equal to Hugging Face's ids" \
        readback "$TMP/ll3_text_document" 4 "$TMP/ref.llama3.kjv"
    cat "$TMP/check.out"
fi
check "Llama2Tokenizer dataset: uint16 (code 8), ids of python3-sentencepiece plus eod" \
    readback "$TMP/ll2_text_document" 8 "$TMP/ref.Llama2Tokenizer.kjv" 2
cat "$TMP/check.out"
check "plait train opens the HuggingFaceTokenizer and trains on the int32 dataset" timeout 600 \
    "$PLAIT" train --num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 32 \
    --micro-batch-size 2 --global-batch-size 2 --train-iters 2 --lr 1e-3 --log-interval 1 \
    --eval-interval 2 --eval-iters 1 --split 98,2,0 --data-path "$TMP/ll3_text_document" "${LL3[@]}" \
    --save "$TMP/ckpt"
check "the checkpoint manifest records tokenizer_model" grep -rq '"tokenizer_model"' "$TMP/ckpt"
check "plait generate reopens the tokenizer from the checkpoint" \
    "$PLAIT" generate --load "$TMP/ckpt" --prompt "In the beginning" --max-new-tokens 4 --temperature 0
summary llama_tokenizers
