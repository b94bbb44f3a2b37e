#!/usr/bin/env bash
# SMILES tokens from plait against Python's own re.findall, which MegaMolBART's
# tokenizer uses (smiles_reference/mmb_findall.py builds the same pattern):
# every SMILES of the three RDKit files in data/smiles and a set of adversarial
# strings (unknown and non-ASCII characters, %12, [nH+], unclosed [, lone
# backslashes, invalid UTF-8, newlines) must give identical tokens and ids,
# with the vocabulary plait builds and with one holding extra tokens. The
# vocabulary `plait data build-vocab` writes must be exactly the one the same
# rule gives over Python's tokens.
set -u
. "$(dirname "$0")/lib.sh"
REF=/usr/bin/python3
PY=$ROOT/tests/scripts/smiles_reference/mmb_findall.py
TOKS=${PLAIT_TESTTOOLS:-$ROOT/build/testtools}/smiles_tokens
D=$PLAIT_DATA/smiles
FILES=("$D/first_5K.smi" "$D/wehi_mols.csv" "$D/CHEMBL2321810.smi")
for f in "${FILES[@]}"; do [ -f "$f" ] || { echo "missing $f (run scripts/setup.sh)"; exit 1; }; done
for f in "$PLAIT" "$TOKS"; do [ -x "$f" ] || { echo "missing $f (run make)"; exit 1; }; done

# same_lines NAME REF OURS: all lines equal, with a count.
same_lines() {
    "$REF" - "$@" <<'PY'
import sys
name, ref, ours = sys.argv[1:4]
a = open(ref, encoding="utf-8").read().split("\n")[:-1]
b = open(ours, encoding="utf-8").read().split("\n")[:-1]
same = sum(x == y for x, y in zip(a, b))
print(f"{name}: {same}/{len(a)} strings with identical tokens and ids (plait: {len(b)} lines)")
for i in [i for i, (x, y) in enumerate(zip(a, b)) if x != y][:5]:
    print(f"  line {i + 1}: python [{a[i]}]\n          plait  [{b[i]}]")
sys.exit(0 if same == len(a) == len(b) and len(a) > 0 else 1)
PY
}

# compare_tokens NAME VOCAB CHEM_START STRINGS.hex
compare_tokens() {
    local name=$1 vocab=$2 start=$3 strings=$4
    "$REF" "$PY" tokens "$vocab" "$start" "$strings" >"$TMP/ref.$name" &&
        "$TOKS" "$vocab" "$start" "$strings" >"$TMP/plait.$name" &&
        same_lines "$name" "$TMP/ref.$name" "$TMP/plait.$name"
}

check corpus_extracted "$REF" "$PY" corpus "$D" "$TMP"
cat "$TMP/check.out"

# Vocabulary: default layout (chemical tokens from 272), and from 6 with --min-count 2.
check build_vocab_default "$PLAIT" data build-vocab --tokenizer-type SmilesTokenizer \
    --input "${FILES[@]}" --csv-column 1 --output "$TMP/plait272.vocab"
cat "$TMP/check.out"
check build_vocab_start6_min2 "$PLAIT" data build-vocab --tokenizer-type SmilesTokenizer \
    --input "${FILES[@]}" --csv-column 1 --output "$TMP/plait6.vocab" --chem-tokens-start 6 --min-count 2
check python_vocab_default "$REF" "$PY" vocab "$TMP/data.hex" 272 1 "$TMP/py272.vocab"
cat "$TMP/check.out"
check python_vocab_start6_min2 "$REF" "$PY" vocab "$TMP/data.hex" 6 2 "$TMP/py6.vocab"
check vocab_default_identical_to_python cmp "$TMP/py272.vocab" "$TMP/plait272.vocab"
check vocab_start6_min2_identical_to_python cmp "$TMP/py6.vocab" "$TMP/plait6.vocab"
check vocab_token_set_equal "$REF" -c '
import re, sys
R = r"""\[[^\]]+]|Br?|Cl?|N|O|S|P|F|I|b|c|n|o|s|p|\(|\)|\.|=|#|-|\+|\\\\|\/|:|~|@|\?|>|\*|\$|\%[0-9]{2}|[0-9]"""
prog = re.compile("(" + R + "|.)")
found = set()
for l in open("'"$TMP"'/data.hex"):
    found.update(prog.findall(bytes.fromhex(l.strip()).decode()))
vocab = open("'"$TMP"'/plait272.vocab", encoding="utf-8").read().split("\n")[:-1]
chem = set(vocab[272:])
print(len(found), "tokens found by Python,", len(chem), "chemical tokens in the vocabulary")
sys.exit(0 if chem == found - set(vocab[:272]) and len(vocab) == len(set(vocab)) else 1)'
cat "$TMP/check.out"

# Tokens and ids, every string.
for v in plait272:-1 plait6:6; do
    vocab=$TMP/${v%:*}.vocab start=${v#*:}
    for set_ in data adversarial; do
        compare_tokens "$set_-${v%:*}" "$vocab" "$start" "$TMP/$set_.hex" >"$TMP/cmp.out" 2>&1
        rc=$?
        cat "$TMP/cmp.out"
        check "tokens_equal_python_${set_}_${v%:*}" test "$rc" -eq 0
    done
done

# A vocabulary with MegaMolBART-style extra tokens (matched before the regex,
# in file order; "Cc" shadows "C" then "c").
{
    printf '%s\n' '<PAD>' '?' '^' '&' '<MASK>' '<SEP>' 'LogD_change_(-0.1, 0.1]' \
        'LogD_change_(-inf, -5.7]' 'Solubility_low->high' 'Clint_no_change' '<UNUSED_0>' \
        '<UNUSED_1>' '<UNUSED_10>' 'Cc' '[nH]' 'a|b' '' 'C' 'c' '(' ')' '1' '=' 'O' 'N' 'Cl'
} >"$TMP/extra.vocab"
for set_ in data adversarial; do
    compare_tokens "$set_-extra" "$TMP/extra.vocab" 16 "$TMP/$set_.hex" >"$TMP/cmp.out" 2>&1
    rc=$?
    cat "$TMP/cmp.out"
    check "tokens_equal_python_${set_}_extra_tokens" test "$rc" -eq 0
done

# Errors name the file and line.
printf 'CCO\nC\xffC\n' >"$TMP/bad_utf8.smi"
check_fails build_vocab_invalid_utf8_names_line 'bad_utf8.smi:2: invalid UTF-8' \
    "$PLAIT" data build-vocab --tokenizer-type SmilesTokenizer --input "$TMP/bad_utf8.smi" --output "$TMP/x.vocab"
printf 'CCO 1\nCC\n' >"$TMP/short.smi"
check_fails build_vocab_missing_column_names_line 'short.smi:2: --csv-column 2 asks for field 2' \
    "$PLAIT" data build-vocab --tokenizer-type SmilesTokenizer --input "$TMP/short.smi" --csv-column 2 --output "$TMP/x.vocab"
printf '"CCO,1\n' >"$TMP/quote.csv"
check_fails build_vocab_unterminated_quote_names_line 'quote.csv:1: unterminated quoted field' \
    "$PLAIT" data build-vocab --tokenizer-type SmilesTokenizer --input "$TMP/quote.csv" --csv-column 1 --output "$TMP/x.vocab"
check_fails build_vocab_missing_input_names_file 'nope.smi' \
    "$PLAIT" data build-vocab --tokenizer-type SmilesTokenizer --input "$TMP/nope.smi" --output "$TMP/x.vocab"
check_fails build_vocab_rejects_other_tokenizers 'tokenizer-type' \
    "$PLAIT" data build-vocab --tokenizer-type GPT2BPETokenizer --input "$TMP/short.smi" --output "$TMP/x.vocab"
check_fails build_vocab_rejects_small_chem_start 'chem-tokens-start' \
    "$PLAIT" data build-vocab --tokenizer-type SmilesTokenizer --input "$TMP/short.smi" --output "$TMP/x.vocab" --chem-tokens-start 5
check no_vocab_written_on_error test ! -e "$TMP/x.vocab"
check no_temporary_files_left sh -c "! ls '$TMP' | grep -q '\\.tmp\\.'"
summary smiles_reference
