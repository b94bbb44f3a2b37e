#!/usr/bin/env bash
# plait preprocess / --merge / data inspect end to end.
#
# References are computed outside plait: megatron_reference.py (numpy, written
# from the documented format and Megatron's preprocess_data.py semantics; Python's
# json and csv modules read the inputs) and, for GPT-2, gpt-3-encoder under node.
# Until the real tokenizers are merged the pipeline runs with the byte-level test
# tokenizer through build/testtools/preprocess_bytes (same library code); the
# GPT2BPETokenizer case through $PLAIT skips only while that tokenizer says
# "not built yet".
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PY=/usr/bin/python3
REF="$ROOT/tests/scripts/megatron_reference.py"
PB="$(dirname "$PLAIT")/testtools/preprocess_bytes"
D="$TMP/pp"
rm -rf "$D"
mkdir -p "$D"
cd "$D" || exit 1

# check_exit NAME CODE PATTERN COMMAND...: the command exits with CODE and prints PATTERN.
check_exit() {
    local name=$1 code=$2 pat=$3; shift 3
    "$@" >"$TMP/check.out" 2>&1
    local rc=$?
    if [ "$rc" -eq "$code" ] && grep -qE -- "$pat" "$TMP/check.out"; then
        _pass=$((_pass + 1)); echo "ok $name"
    else
        _fail=$((_fail + 1)); echo "not ok $name (exit $rc, expected $code; pattern '$pat')"
        sed 's/^/    /' "$TMP/check.out" | tail -n 10
    fi
}
# same_files NAME A_PREFIX B_PREFIX: .bin and .idx byte-identical.
same_files() {
    check "$1" cmp "$2.idx" "$3.idx"
    check "$1 (.bin)" cmp "$2.bin" "$3.bin"
}
# no_files NAME GLOB: nothing matches (final names, temporaries).
no_files() {
    local name=$1; shift
    # shellcheck disable=SC2068
    if ls $@ >/dev/null 2>&1; then
        _fail=$((_fail + 1)); echo "not ok $name: $(ls $@ 2>/dev/null | tr '\n' ' ')"
    else
        _pass=$((_pass + 1)); echo "ok $name"
    fi
}
skip() { echo "skip $1: $2"; }

[ -x "$PB" ] || { echo "missing $PB (make all)"; echo "preprocess: 0 passed, 1 failed"; exit 1; }

# ---- corpora ------------------------------------------------------------------------
"$PY" - <<'EOF'
import json, random
r = random.Random(7)
alphabet = list("abcXYZ  .,'\"\\\n\t") + ["\u00e9", "\u20ac", "\U0001F600", "\u65e5", "\x01"]
def text():
    return "" if r.random() < 0.15 else "".join(r.choice(alphabet) for _ in range(r.randrange(60)))
with open("mixed.jsonl", "w", encoding="utf-8") as f:
    for i in range(3000):
        doc = {"id": i, "text": text(), "title": [text() for _ in range(r.randrange(4))]}
        if i % 7 == 0:
            doc["score"] = float("nan")       # json.dumps writes NaN; json.loads reads it
        f.write(json.dumps(doc, ensure_ascii=(i % 2 == 0)) + ("\r\n" if i % 5 == 0 else "\n"))
EOF
head -n 3000 "$PLAIT_DATA/kjv.txt" > kjv.txt
"$PY" -c '
import json, sys
with open("kjv.txt", encoding="utf-8") as f, open("kjv.jsonl", "w", encoding="utf-8") as o:
    for line in f:
        o.write(json.dumps({"text": line.rstrip("\n")}) + "\n")
'

# ---- flags ----------------------------------------------------------------------------
check_exit "missing --output-prefix is named" 2 "missing required flag --output-prefix" \
    "$PLAIT" preprocess --input kjv.jsonl
check_exit "--split-sentences without --punkt-params is refused by name" 2 \
    "--split-sentences needs --punkt-params FILE" \
    "$PLAIT" preprocess --input kjv.jsonl --output-prefix o --split-sentences
check_exit "--dataset-impl lazy is refused by name" 2 "--dataset-impl lazy" \
    "$PLAIT" preprocess --input kjv.jsonl --output-prefix o --dataset-impl lazy
check_exit "unknown --tokenizer-type is named" 2 "--tokenizer-type must be one of" \
    "$PLAIT" preprocess --input kjv.jsonl --output-prefix o --tokenizer-type Llama
check_exit "--workers 0 is named" 2 "--workers 0" \
    "$PLAIT" preprocess --input kjv.jsonl --output-prefix o --workers 0
check_exit "--partitions must divide --workers" 2 "--partitions 3" \
    "$PLAIT" preprocess --input kjv.jsonl --output-prefix o --workers 2 --partitions 3
check_exit "--on-error takes stop or skip" 2 "--on-error must be one of" \
    "$PLAIT" preprocess --input kjv.jsonl --output-prefix o --on-error maybe
check_exit "two inputs need --merge" 2 "--input: one file expected, 2 given" \
    "$PLAIT" preprocess --input a.jsonl b.jsonl --output-prefix o
check_exit "--tokenizer-model with a type that takes --vocab-file is refused by name" 2 \
    "--tokenizer-model is not used by --tokenizer-type GPT2BPETokenizer" \
    "$PLAIT" preprocess --input kjv.jsonl --output-prefix o --tokenizer-type GPT2BPETokenizer \
    --vocab-file v --merge-file m --tokenizer-model m.model
check_exit "--tokenizer-model is required for HuggingFaceTokenizer" 2 \
    "--tokenizer-model is required for --tokenizer-type HuggingFaceTokenizer" \
    "$PLAIT" preprocess --input kjv.jsonl --output-prefix o --tokenizer-type HuggingFaceTokenizer
check_exit "--vocab-file is required" 2 "--vocab-file is required" \
    "$PLAIT" preprocess --input kjv.jsonl --output-prefix o --tokenizer-type GPT2BPETokenizer
check_exit "--help lists the flags" 0 "--append-eod" "$PLAIT" preprocess --help
no_files "flag errors wrote nothing" "o_*"

# ---- byte tokenizer vs the numpy reference -------------------------------------------
check "mixed JSON (2 keys, lists, empty texts, NaN, CRLF, --append-eod, 3 workers)" \
    "$PB" --input mixed.jsonl --json-keys text title --append-eod --workers 3 --chunk-bytes 4096 \
    --output-prefix mixed
"$PY" "$REF" preprocess --input mixed.jsonl --format jsonl --keys text title --append-eod \
    --output-prefix ref_mixed
same_files "mixed text dataset equals Megatron's writer" mixed_text_document ref_mixed_text_document
same_files "mixed title dataset equals Megatron's writer" mixed_title_document ref_mixed_title_document

for w in 1 2 8; do
    check "KJV JSON with $w workers" "$PB" --input kjv.jsonl --workers $w --chunk-bytes 20000 \
        --append-eod --output-prefix kjv_w$w
done
"$PY" "$REF" preprocess --input kjv.jsonl --format jsonl --append-eod --output-prefix ref_kjv
same_files "KJV, 1 worker, equals the reference" kjv_w1_text_document ref_kjv_text_document
same_files "KJV, 2 workers, identical bytes" kjv_w2_text_document kjv_w1_text_document
same_files "KJV, 8 workers, identical bytes" kjv_w8_text_document kjv_w1_text_document

check "KJV from stdin" sh -c "cat kjv.jsonl | '$PB' --input - --append-eod --output-prefix kjv_stdin"
same_files "stdin equals the file run" kjv_stdin_text_document kjv_w1_text_document

check "int32 dtype with a vocabulary >= 65500" "$PB" --input kjv.jsonl --vocab-size 65500 \
    --output-prefix kjv32
"$PY" "$REF" preprocess --input kjv.jsonl --format jsonl --vocab-size 65500 --output-prefix ref_kjv32
same_files "int32 dataset equals the reference" kjv32_text_document ref_kjv32_text_document

check "text input (one document a line)" "$PB" --input kjv.txt --output-prefix txt --workers 2
"$PY" "$REF" preprocess --input kjv.txt --format text --output-prefix ref_txt
same_files "text dataset equals the reference" txt_text_document ref_txt_text_document

cp "$PLAIT_DATA/smiles/wehi_mols.csv" wehi.csv
for col in 0 1; do
    check "CSV column $col" "$PB" --input wehi.csv --csv-column $col --output-prefix csv$col --workers 2
    "$PY" "$REF" preprocess --input wehi.csv --format csv --column $col --output-prefix ref_csv$col
    same_files "CSV column $col equals Python's csv module" csv${col}_text_document ref_csv${col}_text_document
done
printf 'smiles,name\n' > header.csv && cat wehi.csv >> header.csv
check "CSV column by header name" "$PB" --input header.csv --csv-column smiles --output-prefix hdr
"$PY" "$REF" preprocess --input header.csv --format csv --column smiles --header --output-prefix ref_hdr
same_files "CSV header column equals the reference" hdr_text_document ref_hdr_text_document

check "CSV as one document (MegaMolBART layout)" "$PB" --input header.csv --csv-column smiles \
    --one-document --workers 2 --output-prefix onedoc
"$PY" "$REF" preprocess --input header.csv --format csv --column smiles --header --one-document \
    --output-prefix ref_onedoc
same_files "one-document dataset equals add_item + one end_document" onedoc_text_document \
    ref_onedoc_text_document

cp "$PLAIT_DATA/smiles/first_5K.smi" first.smi
cp "$PLAIT_DATA/smiles/CHEMBL2321810.smi" chembl.smi
check ".smi column 0" "$PB" --input first.smi --output-prefix smi --append-eod
"$PY" "$REF" preprocess --input first.smi --format smi --append-eod --output-prefix ref_smi
same_files ".smi equals whitespace-split reference" smi_text_document ref_smi_text_document
check ".smi column 1" "$PB" --input chembl.smi --csv-column 1 --output-prefix chembl
"$PY" "$REF" preprocess --input chembl.smi --format smi --column 1 --output-prefix ref_chembl
same_files ".smi column 1 equals the reference" chembl_text_document ref_chembl_text_document

# ---- malformed lines ------------------------------------------------------------------
{ head -n 10 kjv.jsonl; echo '{"text": "unterminated'; sed -n 11,20p kjv.jsonl;
  echo '{"txt": "x"}'; sed -n 21,30p kjv.jsonl; } > bad.jsonl
check_exit "a bad line stops the run with FILE:LINE" 1 "bad.jsonl:11: not valid JSON" \
    "$PB" --input bad.jsonl --output-prefix bad --workers 2
no_files "a failed run leaves no final or temporary files" "bad_text_document*"
check_exit "--on-error skip counts the bad lines" 0 "Skipped 2 malformed lines" \
    "$PB" --input bad.jsonl --output-prefix skipped --on-error skip --workers 2
cp "$TMP/check.out" skip.log
check "skip warnings name FILE:LINE" grep -q "bad.jsonl:22: missing key 'text' (skipped)" skip.log
"$PY" "$REF" preprocess --input bad.jsonl --format jsonl --skip-bad --output-prefix ref_skipped
same_files "skipping keeps exactly the good lines" skipped_text_document ref_skipped_text_document

# ---- merge ------------------------------------------------------------------------------
mkdir -p parts
sed -n 1,1000p kjv.jsonl > parts/b.jsonl
sed -n 1001,1500p kjv.jsonl > parts/a.jsonl
printf '{"text": ""}\n{"text": "last"}\n' > parts/c.jsonl
for p in a b c; do "$PB" --input parts/$p.jsonl --output-prefix parts/$p 2>/dev/null; done
check "merge a directory" "$PLAIT" preprocess --merge --input parts --output-prefix merged_dir
"$PY" "$REF" merge --output-prefix ref_merged parts/a_text_document parts/b_text_document \
    parts/c_text_document
same_files "directory merge equals add_index in sorted order" merged_dir ref_merged
check "merge listed prefixes" "$PLAIT" preprocess --merge --input parts/c_text_document.idx \
    parts/a_text_document --output-prefix merged_list
"$PY" "$REF" merge --output-prefix ref_merged_list parts/c_text_document parts/a_text_document
same_files "listed merge keeps the given order" merged_list ref_merged_list
check "int32 dataset for a mismatch" cp kjv32_text_document.idx parts/z_text_document.idx
cp kjv32_text_document.bin parts/z_text_document.bin
check_exit "merging different dtypes is an error naming the dataset" 2 "z_text_document: dtype int32" \
    "$PLAIT" preprocess --merge --input parts --output-prefix merged_bad
no_files "a failed merge leaves nothing" "merged_bad*"

# ---- inspect ----------------------------------------------------------------------------
for ds in mixed_text_document mixed_title_document merged_dir kjv32_text_document csv1_text_document; do
    "$PLAIT" data inspect "$ds" > inspect.out 2>&1
    check "inspect $ds agrees with numpy" sh -c "'$PY' '$REF' check-inspect $ds < inspect.out"
done
"$PLAIT" data inspect merged_dir --doc 1000 --max-tokens 0 > inspect.out
"$PY" "$REF" doc-ids merged_dir 1000 > want_ids.txt
check "inspect --doc shows the document's ids" sh -c \
    "grep '^  sequence' inspect.out | sed 's/^  sequence [0-9]* ([0-9]* tokens): //' | diff - want_ids.txt"
check_exit "inspect --doc out of range names --doc" 2 "--doc 5000: the dataset has 1502 documents" \
    "$PLAIT" data inspect merged_dir --doc 5000
check_exit "inspect without PREFIX" 2 "PREFIX expected" "$PLAIT" data inspect --doc 1
check_exit "inspect a missing dataset names the file" 1 "nothere.idx: cannot open" \
    "$PLAIT" data inspect nothere
cp merged_dir.idx corrupt.idx && cp merged_dir.bin corrupt.bin
printf 'X' | dd of=corrupt.idx bs=1 seek=0 conv=notrunc 2>/dev/null
# a file that is not what it claims exits 3, plait's code for bad input (docs/reliability.md)
check_exit "inspect a corrupt .idx names file and field" 3 "corrupt.idx: field magic" \
    "$PLAIT" data inspect corrupt
cp merged_dir.idx corrupt.idx && head -c 100 merged_dir.bin > corrupt.bin
check_exit "inspect a truncated .bin names the .bin" 3 "corrupt.bin: 100 bytes.*truncated" \
    "$PLAIT" data inspect corrupt

# ---- interrupted runs -------------------------------------------------------------------
mkfifo feed.jsonl
"$PB" --input feed.jsonl --output-prefix intr --workers 2 2>intr.err &
pid=$!
exec 3>feed.jsonl
head -n 500 kjv.jsonl >&3
sleep 0.5
kill -INT "$pid"
sleep 0.2
exec 3>&-
wait "$pid"
rc=$?
check "SIGINT stops the run with status 130" test "$rc" -eq 130
check "SIGINT is reported" grep -q "interrupted by signal 2" intr.err
no_files "SIGINT leaves no final or temporary files" "intr_text_document*"
rm -f feed.jsonl
mkfifo feed.jsonl
"$PB" --input feed.jsonl --output-prefix killed 2>/dev/null &
pid=$!
disown "$pid"
exec 3>feed.jsonl
head -n 500 kjv.jsonl >&3
sleep 0.5
kill -KILL "$pid"
exec 3>&-
while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
no_files "SIGKILL leaves nothing under the final names" killed_text_document.bin killed_text_document.idx
rm -f killed_text_document.*.tmp.* feed.jsonl

# ---- GPT-2 through the plait CLI, against gpt-3-encoder under node -----------------------
"$PY" - <<'EOF'
import json
rows = [{"text": "Hello world", "meta": 1},
        {"text": ["The quick brown fox jumps over the lazy dog.", "", " second  sentence\n"]},
        {"text": ""},
        {"text": "h\u00e9llo \U0001F917 \u65e5\u672c\u8a9e <|endoftext|>"},
        {"text": "CC(=O)Oc1ccccc1C(=O)O"}]
with open("gpt2.jsonl", "w", encoding="utf-8") as f:
    for r in rows:
        f.write(json.dumps(r, ensure_ascii=False) + "\n")
EOF
GPT2=(--tokenizer-type GPT2BPETokenizer --vocab-file "$PLAIT_DATA/gpt2/encoder.json"
      --merge-file "$PLAIT_DATA/gpt2/vocab.bpe")
"$PLAIT" preprocess --input gpt2.jsonl "${GPT2[@]}" --append-eod --workers 2 \
    --output-prefix gpt2 >gpt2.log 2>&1
rc=$?
if [ "$rc" -ne 0 ] && grep -q "GPT2BPETokenizer not built yet" gpt2.log; then
    skip "GPT-2 preprocess equals gpt-3-encoder + Megatron's writer" \
        "GPT2BPETokenizer not built yet on this branch"
else
    check "GPT-2 preprocess through plait" test "$rc" -eq 0
    node "$ROOT/tests/scripts/gpt2_node_ids.js" "$PLAIT_DATA/npm/gpt-3-encoder" gpt2.jsonl text \
        > gpt2_ids.jsonl
    "$PY" "$REF" preprocess --input gpt2.jsonl --format jsonl --append-eod --vocab-size 50257 \
        --eod 50256 --ids-file gpt2_ids.jsonl --output-prefix ref_gpt2
    same_files "GPT-2 dataset equals gpt-3-encoder ids + Megatron's writer" gpt2_text_document \
        ref_gpt2_text_document
    check_exit "inspect decodes with the tokenizer" 0 "text: Hello world<\|endoftext\|>" \
        "$PLAIT" data inspect gpt2_text_document "${GPT2[@]}"
    rm -f feed.jsonl && mkfifo feed.jsonl
    "$PLAIT" preprocess --input feed.jsonl "${GPT2[@]}" --output-prefix gintr 2>gintr.err &
    pid=$!
    exec 3>feed.jsonl
    head -n 200 kjv.jsonl >&3
    sleep 0.5
    kill -INT "$pid"
    sleep 0.2
    exec 3>&-
    wait "$pid"
    rc=$?
    check "plait preprocess: SIGINT exits 130" test "$rc" -eq 130
    no_files "plait preprocess: SIGINT leaves no files" "gintr_text_document*"
fi

summary preprocess
