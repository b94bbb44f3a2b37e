#!/usr/bin/env bash
# Compressed corpora read directly: JSON lines and plain text compressed with
# the real gzip, xz and zstd command-line tools (and Python's gzip/lzma modules
# for multi-member and concatenated files) preprocess to .bin/.idx files
# byte-identical to the uncompressed input's; so do the same bytes piped on
# stdin and a SMILES vocabulary built from a .smi.gz. A truncated or corrupt
# file is an error naming the file (exit 3) that leaves no outputs behind.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
head -n 1500 "$PLAIT_DATA/kjv.txt" > "$TMP/kjv.txt"
/usr/bin/python3 -c '
import json, sys
for line in open(sys.argv[1]):
    print(json.dumps({"text": line.rstrip("\n")}))' "$TMP/kjv.txt" > "$TMP/kjv.jsonl"
pre() { # INPUT PREFIX [flags]: preprocess with GPT-2 BPE
    local in=$1 out=$2; shift 2
    "$PLAIT" preprocess --input "$in" --output-prefix "$out" "${GPT2[@]}" --append-eod --workers 2 "$@"
}
same_dataset() { # A B: the text_document .bin and .idx are identical
    cmp "$TMP/$1_text_document.bin" "$TMP/$2_text_document.bin" &&
    cmp "$TMP/$1_text_document.idx" "$TMP/$2_text_document.idx"
}
check "plain JSON lines preprocess" pre "$TMP/kjv.jsonl" "$TMP/plain"
check "  to a non-empty dataset (1500 documents)" sh -c "[ \$('$PLAIT' data inspect '$TMP/plain_text_document' 2>&1 | grep -c '^documents: 1500$') = 1 ]"
gzip -c "$TMP/kjv.jsonl" > "$TMP/kjv.jsonl.gz"
xz -c "$TMP/kjv.jsonl" > "$TMP/kjv.jsonl.xz"
zstd -q -c "$TMP/kjv.jsonl" > "$TMP/kjv.jsonl.zst"
for z in gz xz zst; do
    check ".jsonl.$z preprocesses" pre "$TMP/kjv.jsonl.$z" "$TMP/c_$z"
    check "  .bin/.idx byte-identical to the plain input's" same_dataset plain "c_$z"
done
# several gzip members (as `cat a.gz b.gz`), two concatenated xz streams (Python's modules)
/usr/bin/python3 -c '
import gzip, lzma, sys
data = open(sys.argv[1], "rb").read()
cut = data.index(b"\n", len(data) // 3) + 1
open(sys.argv[2], "wb").write(gzip.compress(data[:cut]) + gzip.compress(data[cut:]))
open(sys.argv[3], "wb").write(lzma.compress(data[:cut]) + lzma.compress(data[cut:]))' \
    "$TMP/kjv.jsonl" "$TMP/multi.jsonl.gz" "$TMP/multi.jsonl.xz"
check "two gzip members preprocess as one file" pre "$TMP/multi.jsonl.gz" "$TMP/m_gz"
check "  byte-identical" same_dataset plain m_gz
check "two xz streams preprocess as one file" pre "$TMP/multi.jsonl.xz" "$TMP/m_xz"
check "  byte-identical" same_dataset plain m_xz
check "zstd piped on stdin (--input -) preprocesses" \
    sh -c "zstd -q -c '$TMP/kjv.jsonl' | '$PLAIT' preprocess --input - --output-prefix '$TMP/stdin' --tokenizer-type GPT2BPETokenizer --vocab-file '$PLAIT_DATA/gpt2/encoder.json' --merge-file '$PLAIT_DATA/gpt2/vocab.bpe' --append-eod"
check "  byte-identical" same_dataset plain stdin
# plain text: the format comes from the name under the compression suffix
check "plain .txt preprocesses" pre "$TMP/kjv.txt" "$TMP/tplain"
xz -c "$TMP/kjv.txt" > "$TMP/kjv.txt.xz"
check ".txt.xz preprocesses as text" pre "$TMP/kjv.txt.xz" "$TMP/txz"
check "  byte-identical to the .txt's" same_dataset tplain txz

# bad input
head -c 20000 "$TMP/kjv.jsonl.gz" > "$TMP/cut.jsonl.gz"
check_fails "truncated .gz: error naming the file" "cut.jsonl.gz: truncated gzip data" \
    pre "$TMP/cut.jsonl.gz" "$TMP/cut"
check "  exit code 3 (bad input)" sh -c "'$PLAIT' preprocess --input '$TMP/cut.jsonl.gz' --output-prefix '$TMP/cut' ${GPT2[*]} >/dev/null 2>&1; [ \$? = 3 ]"
check "  no outputs left behind" sh -c "! ls '$TMP'/cut_* 2>/dev/null | grep -q ."
cp "$TMP/kjv.jsonl.zst" "$TMP/bad.jsonl.zst"
printf 'XXXXXXXX' | dd of="$TMP/bad.jsonl.zst" bs=1 seek=3000 conv=notrunc 2>/dev/null
check_fails "corrupt .zst: error naming the file" "bad.jsonl.zst: corrupt zstd data" \
    pre "$TMP/bad.jsonl.zst" "$TMP/bad"
head -c 30000 "$TMP/kjv.jsonl.xz" > "$TMP/cut.jsonl.xz"
check_fails "truncated .xz: error naming the file" "cut.jsonl.xz: truncated xz data" \
    pre "$TMP/cut.jsonl.xz" "$TMP/cutxz"
cp "$TMP/kjv.jsonl" "$TMP/lies.jsonl.gz"
check_fails "a .gz that is not gzip" "lies.jsonl.gz: named .gz but not gzip data" \
    pre "$TMP/lies.jsonl.gz" "$TMP/lies"
bzip2 -c "$TMP/kjv.jsonl" > "$TMP/kjv.jsonl.bz2" 2>/dev/null || printf 'BZh' > "$TMP/kjv.jsonl.bz2"
check_fails ".bz2 is refused, saying which formats are read" "bz2 input is not read directly \(.gz, .xz and .zst are\)" \
    pre "$TMP/kjv.jsonl.bz2" "$TMP/bz"

# a SMILES vocabulary from a compressed corpus equals the one from the plain file
SMI="$PLAIT_DATA/smiles/first_5K.smi"
gzip -c "$SMI" > "$TMP/first_5K.smi.gz"
vocab() { "$PLAIT" data build-vocab --tokenizer-type SmilesTokenizer --input "$1" --output "$2"; }
check "build-vocab from the plain .smi" vocab "$SMI" "$TMP/plain.vocab"
check "build-vocab from .smi.gz" vocab "$TMP/first_5K.smi.gz" "$TMP/gz.vocab"
check "  the same vocabulary" cmp "$TMP/plain.vocab" "$TMP/gz.vocab"
summary compressed
