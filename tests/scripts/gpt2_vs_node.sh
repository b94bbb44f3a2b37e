#!/usr/bin/env bash
# GPT2BPETokenizer against the outside reference: gpt-3-encoder@1.1.4's own Encoder.js
# under node (tests/scripts/gpt2_reference.js). Each text is encoded as ONE string by
# both; the id sequences must be identical, and decoding plait's ids (in C, and with
# Encoder.js's decode) must give the file back byte for byte.
#   texts: data/kjv.txt (4.1 MB ASCII; 1,024,544 tokens per data-sources.md), and a
#   generated Unicode-heavy text (TestPlans samples, many scripts, emoji, marks, every
#   JavaScript white space, contractions, long runs that take the heap merge), and
#   random merge tables.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
BUILD_DIR=$ROOT/${PLAIT_TEST_BUILD:-build}
ENC=$BUILD_DIR/testtools/gpt2_encode
REF=$ROOT/tests/scripts/gpt2_reference.js
VOCAB=$PLAIT_DATA/gpt2/encoder.json
MERGES=$PLAIT_DATA/gpt2/vocab.bpe
KJV=$PLAIT_DATA/kjv.txt
export PLAIT_DATA

check node_is_available command -v node
check gpt2_encode_is_built test -x "$ENC"

# The reference's encode loop is Encoder.js's own with push() for concat() (the shipped
# one is quadratic); on prefixes both must agree.
check reference_loop_matches_shipped_encode_on_kjv node "$REF" selfcheck "$KJV" 60000

check kjv_node_encode node "$REF" encode "$KJV" "$TMP/kjv.node"
check kjv_plait_encode "$ENC" "$VOCAB" "$MERGES" "$KJV" "$TMP/kjv.ids" "$TMP/kjv.dec"
check kjv_ids_identical_to_node cmp "$TMP/kjv.node" "$TMP/kjv.ids"
check kjv_token_count_is_1024544 test "$(wc -l <"$TMP/kjv.ids")" -eq 1024544
check kjv_decode_reproduces_file cmp "$TMP/kjv.dec" "$KJV"
check kjv_node_decodes_plait_ids_to_file node "$REF" decode "$TMP/kjv.ids" "$KJV"

check unicode_text_generated node "$REF" unicode "$TMP/uni.txt"
check unicode_text_is_mostly_non_ascii \
    test "$(LC_ALL=C tr -d '\000-\177' <"$TMP/uni.txt" | wc -c)" -gt 100000
check reference_loop_matches_shipped_encode_on_unicode node "$REF" selfcheck "$TMP/uni.txt" 10000
check unicode_node_encode node "$REF" encode "$TMP/uni.txt" "$TMP/uni.node"
check unicode_plait_encode "$ENC" "$VOCAB" "$MERGES" "$TMP/uni.txt" "$TMP/uni.ids" "$TMP/uni.dec"
check unicode_ids_identical_to_node cmp "$TMP/uni.node" "$TMP/uni.ids"
check unicode_decode_reproduces_file cmp "$TMP/uni.dec" "$TMP/uni.txt"
check unicode_node_decodes_plait_ids_to_file node "$REF" decode "$TMP/uni.ids" "$TMP/uni.txt"

# Merge order on vocabularies no trainer would make: random merges over "abc" with
# shuffled ranks and repeated pairs, where bpe()'s "merge every occurrence of the best
# pair, then look again" differs from merging greedily one pair at a time.
for seed in 1 2 3 4 5 6; do
    d=$TMP/rand$seed
    node "$REF" randvocab "$d" $seed &&
        node "$REF" custom "$d" "$d/input.txt" "$d/node.ids" &&
        "$ENC" "$d/encoder.json" "$d/vocab.bpe" "$d/input.txt" "$d/plait.ids" 2>/dev/null
    check random_merges_seed${seed}_ids_identical_to_node cmp "$d/node.ids" "$d/plait.ids"
done

# Invalid UTF-8 is an error that gives the byte offset (bytes 0-5 are "hello ").
printf 'hello \xc0\x80 world' >"$TMP/bad.txt"
check_fails invalid_utf8_is_an_error_with_offset 'invalid UTF-8 at byte offset 6' \
    "$ENC" "$VOCAB" "$MERGES" "$TMP/bad.txt" "$TMP/bad.ids"

summary gpt2_vs_node
