/* tok_encode: any tokenizer by its Megatron flags, for script tests and benchmarks.
 *
 *   tok_encode [options] TYPE lines FILE.hex OUT        one text per line, hex UTF-8;
 *                                                        OUT: the ids of each text,
 *                                                        space-separated, a line each
 *   tok_encode [options] TYPE roundtrip FILE.hex OUT    each text's decode(encode(x)),
 *                                                        hex, a line each
 *   tok_encode [options] TYPE whole FILE OUT            the whole file in one call; OUT:
 *                                                        one id a line; timing on stderr
 *   tok_encode [options] TYPE info - OUT                vocab_size and eod
 * options: --model PATH (--tokenizer-model), --vocab PATH, --merges PATH, --legacy,
 *          --extra-ids N, --repeat R (whole: best of R calls, each on a fresh fork).
 * Exit status 1 on any error, with its message. */
#include "base/alloc.h"
#include "base/fileio.h"
#include "base/log.h"
#include "data/tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(pl_status st)
{
    fprintf(stderr, "tok_encode: %s: %s\n", pl_status_str(st), pl_error_msg());
    return 1;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decodes the hex line [p, e) into buf; returns its length or -1. */
static long unhex(const char *p, const char *e, char *buf)
{
    long n = 0;
    for (; p + 1 < e; p += 2) {
        int a = hexval(p[0]), b = hexval(p[1]);
        if (a < 0 || b < 0)
            return -1;
        buf[n++] = (char)(a * 16 + b);
    }
    return p == e ? n : -1;
}

int main(int argc, char **argv)
{
    pl_tokenizer_spec spec = {0};
    int repeat = 1, a = 1;
    for (; a < argc && strncmp(argv[a], "--", 2) == 0; a++) {
        const char *o = argv[a];
        if (strcmp(o, "--legacy") == 0) {
            spec.legacy = 1;
            continue;
        }
        if (a + 1 >= argc)
            break;
        const char *v = argv[++a];
        if (strcmp(o, "--model") == 0)
            spec.tokenizer_model = v;
        else if (strcmp(o, "--vocab") == 0)
            spec.vocab_file = v;
        else if (strcmp(o, "--merges") == 0)
            spec.merge_file = v;
        else if (strcmp(o, "--extra-ids") == 0)
            spec.vocab_extra_ids = atoll(v);
        else if (strcmp(o, "--repeat") == 0)
            repeat = atoi(v);
        else
            a = argc;
    }
    if (argc - a != 4 || repeat < 1) {
        fprintf(stderr, "usage: tok_encode [--model P] [--vocab P] [--merges P] [--legacy] "
                        "[--extra-ids N] [--repeat R] TYPE lines|roundtrip|whole|info IN OUT\n");
        return 2;
    }
    spec.type = argv[a];
    const char *mode = argv[a + 1], *in = argv[a + 2], *outp = argv[a + 3];
    pl_tokenizer *t = NULL;
    pl_status st;
    double t0 = pl_time_now();
    if ((st = pl_tokenizer_open(&t, &spec)))
        return fail(st);
    double t_load = pl_time_now() - t0;
    FILE *fp = strcmp(outp, "-") == 0 ? stdout : fopen(outp, "w");
    if (!fp) {
        perror(outp);
        return 1;
    }
    if (strcmp(mode, "info") == 0) {
        fprintf(fp, "vocab_size %lld\neod %d\n", (long long)t->vocab_size, t->eod);
        fclose(fp);
        pl_tokenizer_free(t);
        return 0;
    }
    char *text = NULL;
    size_t len;
    pl_ids ids = {0};
    pl_bytes back = {0};
    if ((st = pl_file_read_all(in, &text, &len)))
        return fail(st);
    if (strcmp(mode, "whole") == 0) {
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
                return fail(pl_error_wrap(st, "%s", in));
            if (dt < best)
                best = dt;
        }
        fprintf(stderr, "tok_encode: %s: %zu bytes -> %lld tokens in %.4f s (%.0f tokens/s, %.1f MB/s; "
                        "best of %d, one thread); loaded in %.3f s\n", spec.type, len,
                (long long)ids.n, best, (double)ids.n / best, (double)len / best / 1e6, repeat, t_load);
        for (int64_t i = 0; i < ids.n; i++)
            fprintf(fp, "%d\n", ids.data[i]);
    } else if (strcmp(mode, "lines") == 0 || strcmp(mode, "roundtrip") == 0) {
        int rt = mode[0] == 'r';
        char *buf = pl_malloc(len / 2 + 1);
        const char *p = text, *end = text + len;
        long line = 0;
        while (p < end) {
            const char *e = memchr(p, '\n', (size_t)(end - p));
            if (!e)
                e = end;
            line++;
            long n = unhex(p, e, buf);
            if (n < 0) {
                fprintf(stderr, "tok_encode: %s:%ld: not hex\n", in, line);
                return 1;
            }
            ids.n = 0;
            if ((st = pl_tokenizer_encode(t, buf, (size_t)n, &ids)))
                return fail(pl_error_wrap(st, "%s:%ld", in, line));
            if (rt) {
                back.n = 0;
                if ((st = pl_tokenizer_decode(t, ids.data, ids.n, &back)))
                    return fail(pl_error_wrap(st, "%s:%ld", in, line));
                for (size_t i = 0; i < back.n; i++)
                    fprintf(fp, "%02x", (unsigned char)back.data[i]);
            } else {
                for (int64_t i = 0; i < ids.n; i++)
                    fprintf(fp, i ? " %d" : "%d", ids.data[i]);
            }
            fputc('\n', fp);
            p = e + 1;
        }
        pl_free(buf);
    } else {
        fprintf(stderr, "tok_encode: unknown mode %s\n", mode);
        return 2;
    }
    if (fp != stdout ? fclose(fp) != 0 : fflush(fp) != 0) {
        perror(outp);
        return 1;
    }
    pl_bytes_free(&back);
    pl_ids_free(&ids);
    pl_free(text);
    pl_tokenizer_free(t);
    return 0;
}
