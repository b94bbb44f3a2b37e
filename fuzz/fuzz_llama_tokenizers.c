/* libFuzzer target: the Llama-family tokenizers on arbitrary text.
 *
 * Loads data/llama3 and data/mistral (HuggingFaceTokenizer) and data/llama2/
 * tokenizer.model (Llama2Tokenizer) once ($PLAIT_DATA overrides data/; run from the
 * repository root). For each input:
 *   valid UTF-8:  every tokenizer encodes it; encoding again (warm word cache) and on a
 *                 fresh fork (cold cache) gives the same ids; decode succeeds; for Llama 3
 *                 (ByteLevel) decode(encode(x)) == x;
 *   invalid:      the HuggingFaceTokenizer refuses it with PL_ERR_FORMAT and leaves the
 *                 output as it was (SentencePiece, like the library, reads bad bytes as
 *                 U+FFFD and must not fail).
 * Any mismatch aborts. */
#include "base/utf8.h"
#include "data/tokenizer/tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static pl_tokenizer *toks[3];
static const char *names[3] = {"llama3", "mistral", "llama2"};

static void die(const char *name, const char *what)
{
    fprintf(stderr, "fuzz_llama_tokenizers: %s: %s (%s)\n", name, what, pl_error_msg());
    abort();
}

static void load(void)
{
    const char *dir = getenv("PLAIT_DATA");
    char path[4096];
    if (!dir || !*dir)
        dir = "data";
    for (int k = 0; k < 3; k++) {
        pl_tokenizer_spec s = {.type = k < 2 ? "HuggingFaceTokenizer" : "Llama2Tokenizer"};
        snprintf(path, sizeof path, k < 2 ? "%s/%s" : "%s/%s/tokenizer.model", dir, names[k]);
        s.tokenizer_model = path;
        if (pl_tokenizer_open(&toks[k], &s) != PL_OK)
            die(names[k], "cannot load (run scripts/setup.sh)");
    }
}

static int same_ids(const pl_ids *a, const pl_ids *b)
{
    return a->n == b->n && (a->n == 0 || memcmp(a->data, b->data, (size_t)a->n * sizeof *a->data) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!toks[0])
        load();
    const char *text = (const char *)data;
    int valid = pl_utf8_valid(text, size);
    for (int k = 0; k < 3; k++) {
        pl_ids ids = {0}, again = {0}, cold = {0};
        pl_bytes back = {0};
        pl_tokenizer *f = NULL;
        pl_status st = pl_tokenizer_encode(toks[k], text, size, &ids);
        if (!valid && k < 2) {
            if (st != PL_ERR_FORMAT || ids.n != 0)
                die(names[k], "invalid UTF-8 not refused cleanly");
            pl_ids_free(&ids);
            continue;
        }
        if (st != PL_OK)
            die(names[k], "encode failed");
        if (pl_tokenizer_encode(toks[k], text, size, &again) != PL_OK || !same_ids(&ids, &again))
            die(names[k], "a second encode differs");
        if (pl_tokenizer_fork(toks[k], &f) != PL_OK || pl_tokenizer_encode(f, text, size, &cold) != PL_OK ||
            !same_ids(&ids, &cold))
            die(names[k], "a fork's encode differs");
        if (pl_tokenizer_decode(toks[k], ids.data, ids.n, &back) != PL_OK)
            die(names[k], "decode failed");
        if (k == 0 && (back.n != size || (size && memcmp(back.data, text, size) != 0)))
            die(names[k], "decode(encode(x)) != x");
        pl_tokenizer_free(f);
        pl_ids_free(&ids);
        pl_ids_free(&again);
        pl_ids_free(&cold);
        pl_bytes_free(&back);
    }
    return 0;
}
