/* libFuzzer target: GPT2BPETokenizer on arbitrary bytes.
 *
 * Loads data/gpt2/{encoder.json,vocab.bpe} once ($PLAIT_DATA overrides data/; run
 * from the repository root). For each input, whether it is valid UTF-8 is decided by
 * utf8proc (an independent decoder), then:
 *   valid:   encode succeeds, decode(encode(x)) == x, and encoding again (warm word
 *            cache) and, for one input in 8, on a fresh fork (cold cache) gives the
 *            same ids;
 *   invalid: encode fails with PL_ERR_FORMAT naming the offset of the first bad
 *            sequence, and leaves the output as it was.
 * Any mismatch aborts. */
#include "base/alloc.h"
#include "data/tokenizer/tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static pl_tokenizer *tok;

static void die(const char *what)
{
    fprintf(stderr, "fuzz_gpt2_tokenizer: %s (%s)\n", what, pl_error_msg());
    abort();
}

static void load(void)
{
    const char *dir = getenv("PLAIT_DATA");
    char enc[4096], bpe[4096];
    if (!dir || !*dir)
        dir = "data";
    snprintf(enc, sizeof enc, "%s/gpt2/encoder.json", dir);
    snprintf(bpe, sizeof bpe, "%s/gpt2/vocab.bpe", dir);
    if (pl_gpt2_tokenizer_open(&tok, enc, bpe) != PL_OK)
        die("cannot load the GPT-2 vocabulary");
}

/* Offset of the first invalid UTF-8 sequence, or -1 if s is valid. */
static int64_t first_invalid(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0)
            return (int64_t)i;
        i += (size_t)k;
    }
    return -1;
}

static int same_ids(const pl_ids *a, const pl_ids *b)
{
    return a->n == b->n && (a->n == 0 || memcmp(a->data, b->data, (size_t)a->n * sizeof *a->data) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!tok)
        load();
    const char *text = (const char *)data;
    pl_ids ids = {0}, again = {0}, cold = {0};
    pl_bytes back = {0};
    int64_t bad = first_invalid(data, size);
    if (pl_ids_push(&ids, 42) != PL_OK)
        die("push");
    pl_status st = pl_tokenizer_encode(tok, text, size, &ids);
    if (bad >= 0) {
        char want[64];
        snprintf(want, sizeof want, "byte offset %lld", (long long)bad);
        if (st != PL_ERR_FORMAT)
            die("invalid UTF-8 accepted");
        if (!strstr(pl_error_msg(), want))
            die("invalid UTF-8 reported at the wrong offset");
        if (ids.n != 1 || ids.data[0] != 42)
            die("output changed on error");
    } else {
        if (st != PL_OK)
            die("valid UTF-8 rejected");
        if (pl_tokenizer_decode(tok, ids.data + 1, ids.n - 1, &back) != PL_OK)
            die("decode failed");
        if (back.n != size || (size && memcmp(back.data, data, size) != 0))
            die("decode(encode(x)) != x");
        if (pl_ids_push(&again, 42) != PL_OK || pl_tokenizer_encode(tok, text, size, &again) != PL_OK ||
            !same_ids(&ids, &again))
            die("second encode differs (warm cache)");
        pl_tokenizer *f = NULL; /* a fork costs 2 MB of cache: one input in 8 */
        if (size % 8 == 0 && (pl_tokenizer_fork(tok, &f) != PL_OK || pl_ids_push(&cold, 42) != PL_OK ||
                              pl_tokenizer_encode(f, text, size, &cold) != PL_OK ||
                              !same_ids(&ids, &cold)))
            die("encode on a fresh fork differs (cold cache)");
        pl_tokenizer_free(f);
    }
    pl_bytes_free(&back);
    pl_ids_free(&ids);
    pl_ids_free(&again);
    pl_ids_free(&cold);
    return 0;
}
