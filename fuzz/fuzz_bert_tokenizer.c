/* libFuzzer target: BERT WordPiece encode and decode on arbitrary bytes.
 * Loads $PLAIT_DATA/bert/vocab.txt (default data/) once, lower case and cased.
 * Invariants: encode succeeds, every id is in [0, vocab_size), and decoding
 * those ids succeeds. */
#include "base/vec.h"
#include "data/tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static pl_tokenizer *open_one(const char *type)
{
    const char *dir = getenv("PLAIT_DATA");
    char path[4096];
    snprintf(path, sizeof path, "%s/bert/vocab.txt", dir && *dir ? dir : "data");
    pl_tokenizer *t = NULL;
    if (pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = type, .vocab_file = path}) != PL_OK) {
        fprintf(stderr, "fuzz_bert_tokenizer: %s\n", pl_error_msg());
        abort();
    }
    return t;
}

static void check(pl_tokenizer *t, const uint8_t *data, size_t size)
{
    pl_ids ids = {0};
    pl_bytes s = {0};
    if (pl_tokenizer_encode(t, (const char *)data, size, &ids) != PL_OK) {
        fprintf(stderr, "encode failed: %s\n", pl_error_msg());
        abort();
    }
    for (int64_t i = 0; i < ids.n; i++)
        if (ids.data[i] < 0 || ids.data[i] >= t->vocab_size) {
            fprintf(stderr, "%s: id %d out of range\n", t->type, ids.data[i]);
            abort();
        }
    if (pl_tokenizer_decode(t, ids.data, ids.n, &s) != PL_OK) {
        fprintf(stderr, "decode failed: %s\n", pl_error_msg());
        abort();
    }
    pl_ids_free(&ids);
    pl_bytes_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static pl_tokenizer *lower, *cased;
    if (!lower) {
        lower = open_one("BertWordPieceLowerCase");
        cased = open_one("BertWordPieceCase");
    }
    check(lower, data, size);
    check(cased, data, size);
    return 0;
}
