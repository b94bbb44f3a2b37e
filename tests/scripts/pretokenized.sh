#!/usr/bin/env bash
# Seed 003's pre-tokenized corpus: whitespace-separated tokens with a vocabulary
# JSON. plait preprocess --tokenizer-type PretokenizedTokenizer writes exactly the
# ids Python's [vocab.get(t, unk) for t in text.split()] + [eod] gives
# (tests/scripts/pretokenized.py, every str.isspace() character in the corpus);
# the dataset trains, and the checkpoint generates text made of vocabulary tokens.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1
PY=/usr/bin/python3
REF="$ROOT/tests/scripts/pretokenized.py"
TOK=(--tokenizer-type PretokenizedTokenizer --vocab-file "$TMP/vocab.json")
check "corpus and vocabulary written" $PY "$REF" corpus "$PLAIT_DATA/kjv.txt" 1200 "$TMP"
cat "$TMP/check.out"
check "preprocess with --append-eod" "$PLAIT" preprocess --input "$TMP/corpus.jsonl" \
    --output-prefix "$TMP/pt" "${TOK[@]}" --append-eod --workers 2
check "ids equal Python's vocab.get(t, unk) over text.split(), eod appended" \
    $PY "$REF" check "$TMP" "$TMP/pt_text_document"
cat "$TMP/check.out"
zstd -q -c "$TMP/corpus.jsonl" > "$TMP/corpus.jsonl.zst"
check "the same corpus compressed gives the same dataset" sh -c "'$PLAIT' preprocess --input '$TMP/corpus.jsonl.zst' --output-prefix '$TMP/ptz' ${TOK[*]} --append-eod && cmp '$TMP/pt_text_document.bin' '$TMP/ptz_text_document.bin'"
check "data inspect decodes the first document" sh -c "'$PLAIT' data inspect '$TMP/pt_text_document' ${TOK[*]} | grep -q 'In the beginning God created'"

MODEL=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32
       --micro-batch-size 2 --global-batch-size 4 --train-iters 20 --lr 3e-3 --min-lr 3e-4
       --lr-decay-style cosine --lr-warmup-iters 2 --log-interval 5 --eval-iters 0
       --data-path "$TMP/pt_text_document" --split 98,2,0 "${TOK[@]}" --seed 7)
check "train 20 iterations and save" \
    timeout -k 5 120 "$PLAIT" train "${MODEL[@]}" --save "$TMP/ckpt" --metrics-file "$TMP/m.jsonl"
check "  the loss falls" sh -c "grep '\"lm_loss\"' '$TMP/m.jsonl' | sed -E 's/.*\"lm_loss\": ([^,]*),.*/\1/' | awk 'NR == 1 { a = \$1 } { b = \$1 } END { exit !(b < a) }'"
check "generate from the checkpoint (tokenizer from its metadata)" sh -c \
    "timeout 60 '$PLAIT' generate --load '$TMP/ckpt' --prompt 'And God said' --max-new-tokens 8 --temperature 0 > '$TMP/gen.txt'"
check "  the text is the prompt and vocabulary tokens" $PY -c '
import json, sys
vocab = json.load(open(sys.argv[1], encoding="utf-8"))
text = open(sys.argv[2], encoding="utf-8").read()
assert "And God said" in text, text
words = text[text.index("And God said"):].split()
assert len(words) >= 3 + 1, words
assert all(w in vocab for w in words), [w for w in words if w not in vocab]' "$TMP/vocab.json" "$TMP/gen.txt"
summary pretokenized
