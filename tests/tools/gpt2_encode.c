/* gpt2_encode: encodes a whole file with GPT2BPETokenizer in one call (for script tests
 * and benchmarks).
 *
 *   gpt2_encode [--repeat R] ENCODER_JSON VOCAB_BPE INPUT IDS_OUT [DECODED_OUT]
 *
 * Writes the ids to IDS_OUT, one decimal per line ("-" = stdout); with DECODED_OUT,
 * decodes them and writes the bytes there. On stderr, one line of timing: the encode
 * call alone, on a cold word cache; with --repeat R, the best of R calls, each on a
 * fresh fork (a cold cache again). Exit status 1 on any error, with its message. */
#include "base/alloc.h"
#include "base/fileio.h"
#include "base/log.h"
#include "data/tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(pl_status st)
{
    fprintf(stderr, "gpt2_encode: %s: %s\n", pl_status_str(st), pl_error_msg());
    return 1;
}

int main(int argc, char **argv)
{
    int repeat = 1, a = 1;
    if (a + 1 < argc && strcmp(argv[a], "--repeat") == 0) {
        repeat = atoi(argv[a + 1]);
        a += 2;
    }
    if (argc - a < 4 || argc - a > 5 || repeat < 1) {
        fprintf(stderr, "usage: gpt2_encode [--repeat R] ENCODER_JSON VOCAB_BPE INPUT IDS_OUT "
                        "[DECODED_OUT]\n");
        return 2;
    }
    const char *enc = argv[a], *merges = argv[a + 1], *input = argv[a + 2], *ids_out = argv[a + 3];
    const char *dec_out = argc - a == 5 ? argv[a + 4] : NULL;

    pl_tokenizer *t = NULL;
    char *text = NULL;
    size_t len;
    pl_ids ids = {0};
    pl_bytes back = {0};
    pl_status st;
    double t0 = pl_time_now();
    if ((st = pl_gpt2_tokenizer_open(&t, enc, merges)))
        return fail(st);
    double t_load = pl_time_now() - t0;
    if ((st = pl_file_read_all(input, &text, &len)))
        return fail(st);

    double best = 1e300;
    for (int r = 0; r < repeat; r++) {
        pl_tokenizer *f = NULL;
        if ((st = pl_tokenizer_fork(t, &f)))
            return fail(st);
        ids.n = 0;
        t0 = pl_time_now();
        st = pl_tokenizer_encode(f, text, len, &ids);
        double dt = pl_time_now() - t0;
        pl_tokenizer_free(f);
        if (st)
            return fail(pl_error_wrap(st, "%s", input));
        if (dt < best)
            best = dt;
    }
    fprintf(stderr, "gpt2_encode: %zu bytes -> %lld tokens in %.4f s (%.0f tokens/s, %.1f MB/s; "
                    "best of %d, one thread); vocabulary loaded in %.3f s\n",
            len, (long long)ids.n, best, (double)ids.n / best, (double)len / best / 1e6, repeat,
            t_load);

    FILE *fp = strcmp(ids_out, "-") == 0 ? stdout : fopen(ids_out, "w");
    if (!fp) {
        perror(ids_out);
        return 1;
    }
    for (int64_t i = 0; i < ids.n; i++)
        fprintf(fp, "%d\n", ids.data[i]);
    if (fp != stdout ? fclose(fp) != 0 : fflush(fp) != 0) {
        perror(ids_out);
        return 1;
    }
    if (dec_out) {
        if ((st = pl_tokenizer_decode(t, ids.data, ids.n, &back)))
            return fail(st);
        fp = fopen(dec_out, "wb");
        if (!fp || fwrite(back.data, 1, back.n, fp) != back.n || fclose(fp) != 0) {
            perror(dec_out);
            return 1;
        }
    }
    pl_bytes_free(&back);
    pl_ids_free(&ids);
    pl_free(text);
    pl_tokenizer_free(t);
    return 0;
}
