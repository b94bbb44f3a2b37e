/* Test helper for tests/scripts/punkt.sh: splits each document of a file of
 * hex-encoded UTF-8 documents (one per line, so newlines survive) into
 * sentences with plait's Punkt and prints their byte spans, one line per
 * document: "s e s e ...".
 *   punkt_split PARAMS FILE.hex
 * or prints, for every code point but surrogates, pl_punkt_char_classes and
 * the simple lower-case mapping Punkt's types use (utf8proc_tolower), a line each:
 *   punkt_split --classes */
#include "base/alloc.h"
#include "base/fileio.h"
#include "data/punkt.h"

#include <stdio.h>
#include <string.h>
#include <utf8proc.h>

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--classes") == 0) {
        for (int32_t cp = 0; cp < 0x110000; cp++)
            if (cp < 0xD800 || cp > 0xDFFF)
                printf("%d %d\n", pl_punkt_char_classes(cp), (int)utf8proc_tolower(cp));
        return 0;
    }
    if (argc != 3) {
        fprintf(stderr, "usage: punkt_split PARAMS FILE.hex\n");
        return 2;
    }
    pl_punkt *p = NULL;
    char *data = NULL;
    size_t size = 0;
    pl_i64s spans = {0};
    int rc = 1;
    if (pl_punkt_load(&p, argv[1]) != PL_OK || pl_file_read_all(argv[2], &data, &size) != PL_OK) {
        fprintf(stderr, "punkt_split: %s\n", pl_error_msg());
        goto done;
    }
    long line = 0;
    for (char *s = data, *e; s < data + size; s = e + 1) {
        e = memchr(s, '\n', (size_t)(data + size - s));
        if (!e)
            e = data + size;
        line++;
        size_t n = (size_t)(e - s) / 2;
        for (size_t i = 0; i < n; i++) {
            int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
            if (hi < 0 || lo < 0) {
                fprintf(stderr, "punkt_split: %s:%ld: not hex\n", argv[2], line);
                goto done;
            }
            s[i] = (char)(hi << 4 | lo);
        }
        spans.n = 0;
        if (pl_punkt_split(p, s, n, &spans) != PL_OK) {
            fprintf(stderr, "punkt_split: %s:%ld: %s\n", argv[2], line, pl_error_msg());
            goto done;
        }
        for (int64_t i = 0; i < spans.n; i++)
            printf(i ? " %lld" : "%lld", (long long)spans.data[i]);
        printf("\n");
    }
    rc = 0;
done:
    pl_i64s_free(&spans);
    pl_free(data);
    pl_punkt_free(p);
    return rc;
}
