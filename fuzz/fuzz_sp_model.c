/* libFuzzer target: the tokenizer.model protobuf reader on arbitrary bytes.
 *
 * Each input is parsed as a SentencePiece ModelProto. A refusal must be a format or
 * unsupported-model error with a message; a model that loads must encode and decode a
 * fixed text (with a space, a digit run, CJK and an emoji) without failing. Seeds:
 * fuzz/seeds/fuzz_sp_model/, small BPE and unigram models written by
 * fuzz/make_sp_seeds.py. Any other outcome aborts. */
#include "base/status.h"
#include "data/tokenizer/sp_internal.h"
#include "data/tokenizer/tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pl_sp_model *m = NULL;
    pl_status st = pl_sp_model_parse(&m, data, size, "fuzz.model");
    if (st != PL_OK) {
        if ((st != PL_ERR_FORMAT && st != PL_ERR_UNSUPPORTED && st != PL_ERR_NOMEM) || !*pl_error_msg()) {
            fprintf(stderr, "fuzz_sp_model: unexpected status %d: %s\n", (int)st, pl_error_msg());
            abort();
        }
        return 0;
    }
    pl_sp_model_release(m);
    /* through the public constructor: write the model to a file */
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_sp_model.%d", (int)getpid());
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(data, 1, size, fp) != size || fclose(fp) != 0)
        abort();
    pl_tokenizer *t = NULL;
    if (pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "SentencePieceTokenizer", .tokenizer_model = path}) !=
        PL_OK) {
        fprintf(stderr, "fuzz_sp_model: parsed but not opened: %s\n", pl_error_msg());
        abort();
    }
    static const char text[] = "Hello  world 12345 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\xA4\x97 <s>";
    pl_ids ids = {0};
    pl_bytes back = {0};
    if (pl_tokenizer_encode(t, text, sizeof text - 1, &ids) != PL_OK ||
        pl_tokenizer_decode(t, ids.data, ids.n, &back) != PL_OK) {
        fprintf(stderr, "fuzz_sp_model: %s\n", pl_error_msg());
        abort();
    }
    pl_ids_free(&ids);
    pl_bytes_free(&back);
    pl_tokenizer_free(t);
    remove(path);
    return 0;
}
