#!/usr/bin/env bash
# T5's sentinels and padding rows across plait ckpt import / export --format hf
# (src/ckpt/hf_t5.c, model/hf_t5_names.c). plait's legacy SentencePieceTokenizer (Megatron's)
# numbers <extra_id_0> first after its pieces and added tokens, transformers' T5Tokenizer last
# after the pieces; config.json's vocab_size counts Megatron's padding rows (t5-small: 32128
# for 32100 tokens). A T5 directory written by Python alone (t5_hf_make.py: Llama 2's
# SentencePiece model, 100 sentinels, 32128 rows) imports at TP 2 with the sentinel rows
# renumbered and the rows past the tokenizer kept as padding; the independent PyTorch T5 on the
# Hugging Face ids of tokens from the vocabulary's end (pieces, added tokens, sentinels) gives
# plait's logits on plait's ids, permuted (t5_hf_sentinels.py, with a control); export writes
# the directory's tensors back exactly with a T5Tokenizer's tokenizer_config.json and
# special_tokens_map.json; import at TP 1 -> export is byte-identical; plait seq2seq reads text
# with sentinels; a vocab_size that cannot hold the tokenizer imports without sentinels.
source "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=1
PY=/usr/bin/python3
LOGITS=$ROOT/build/testtools/encdec_logits
MAKE=$ROOT/tests/scripts/t5_hf_make.py
SPM=$PLAIT_DATA/llama2/tokenizer.model

check "t5 vocab: a third-party T5 with 100 sentinels and 32128 rows imports at TP 2" bash -c "
    $PY '$MAKE' '$TMP/x' '$SPM' gated - 32128 100 > /dev/null &&
    '$PLAIT' ckpt import '$TMP/x' --format hf --out '$TMP/x_imp2' \
        --tensor-model-parallel-size 2 > '$TMP/imp2.log' 2>&1 &&
    grep -q '100 sentinels <extra_id_N> renumbered' '$TMP/imp2.log'"
check "t5 vocab: the manifest: the legacy tokenizer with 100 sentinels, 32105 tokens in 32128 rows" \
    $PY -c "
import json, sys
m = json.load(open('$TMP/x_imp2/release/manifest.json'))
t, c = m['tokenizer'], m['model']
sys.exit(not (t['legacy'] and t['vocab_extra_ids'] == 100 and c['vocab_size'] == 32105 and
              c['padded_vocab_size'] == 32128))"
check "t5 vocab: plait's logits on tokens from the vocabulary's end" \
    "$LOGITS" "$TMP/x_imp2" "$TMP/x_logits.safetensors" 24 12 31990
check "t5 vocab: exported back" bash -c "'$PLAIT' ckpt export '$TMP/x_imp2' --format hf \
    --out '$TMP/x_hf2' > '$TMP/exp.log' 2>&1 && grep -q '\"vocab_size\":.32128' '$TMP/x_hf2/config.json'"
OMP_NUM_THREADS=2 $PY "$ROOT/tests/scripts/t5_hf_sentinels.py" "$TMP/x" "$TMP/x_hf2" \
    "$TMP/x_logits.safetensors" | tee "$TMP/py.out" | grep -v '^ok'
read -r p f < <(sed -nE 's/^t5_hf_sentinels: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$TMP/py.out")
_pass=$((_pass + ${p:-0})); _fail=$((_fail + ${f:-1}))

check "t5 vocab: the export imported at TP 1 exports the same bytes, tokenizer files included" \
    bash -c "'$PLAIT' ckpt import '$TMP/x_hf2' --format hf --out '$TMP/x_imp1' > '$TMP/imp1.log' 2>&1 &&
    '$PLAIT' ckpt export '$TMP/x_imp1' --format hf --out '$TMP/x_hf3' > /dev/null 2>&1 &&
    for f in config.json model.safetensors generation_config.json spiece.model \
             tokenizer_config.json special_tokens_map.json; do
        cmp '$TMP/x_hf2/'\$f '$TMP/x_hf3/'\$f || exit 1
    done"
printf 'in the beginning <extra_id_0> created <extra_id_1> earth\n' >"$TMP/src.txt"
check "t5 vocab: plait seq2seq generates from text with sentinels" bash -c "
    '$PLAIT' seq2seq --load '$TMP/x_imp1' --input '$TMP/src.txt' --max-new-tokens 4 \
        --output '$TMP/gen.txt' > '$TMP/gen.log' 2>&1 && [ \$(wc -l < '$TMP/gen.txt') = 1 ]"
check "t5 vocab: a vocab_size that cannot hold the sentinels imports without them, warning" bash -c "
    $PY '$MAKE' '$TMP/y' '$SPM' relu - 32064 100 > /dev/null &&
    '$PLAIT' ckpt import '$TMP/y' --format hf --out '$TMP/y_imp' > '$TMP/y.log' 2>&1 &&
    grep -q 'imported without sentinels' '$TMP/y.log' &&
    $PY -c \"
import json, sys
m = json.load(open('$TMP/y_imp/release/manifest.json'))
sys.exit(not (m['model']['vocab_size'] == 32064 and 'vocab_extra_ids' not in m['tokenizer']))\""
summary t5_hf_vocab
