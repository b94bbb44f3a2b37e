/* Test helper for tests/scripts/bert_reference.sh: encodes each line of a
 * file of hex-encoded texts (so any byte, NUL and newline included, can be
 * given) with a BERT WordPiece tokenizer and prints the ids of each text,
 * space-separated, one line per input line.
 *   bert_encode VOCAB lower|cased FILE.hex */
#include "base/alloc.h"
#include "base/fileio.h"
#include "data/tokenizer/tokenizer.h"

#include <stdio.h>
#include <string.h>

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

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[2], "lower") != 0 && strcmp(argv[2], "cased") != 0)) {
        fprintf(stderr, "usage: bert_encode VOCAB lower|cased FILE.hex\n");
        return 2;
    }
    pl_tokenizer *t = NULL;
    char *data = NULL;
    size_t size = 0;
    pl_ids ids = {0};
    int rc = 1;
    pl_status st = pl_bert_tokenizer_open(&t, argv[1], strcmp(argv[2], "lower") == 0);
    if (st == PL_OK)
        st = pl_file_read_all(argv[3], &data, &size);
    if (st != PL_OK) {
        fprintf(stderr, "bert_encode: %s\n", pl_error_msg());
        goto done;
    }
    long line = 0;
    for (char *p = data, *e; p < data + size; p = e + 1) {
        e = memchr(p, '\n', (size_t)(data + size - p));
        if (!e)
            e = data + size;
        *e = '\0';
        line++;
        size_t n = (size_t)(e - p) / 2;
        for (size_t i = 0; i < n; i++) {
            int hi = hexval(p[2 * i]), lo = hexval(p[2 * i + 1]);
            if (hi < 0 || lo < 0) {
                fprintf(stderr, "bert_encode: %s:%ld: not hex\n", argv[3], line);
                goto done;
            }
            p[i] = (char)(hi << 4 | lo);
        }
        ids.n = 0;
        st = pl_tokenizer_encode(t, p, n, &ids);
        if (st != PL_OK) {
            fprintf(stderr, "bert_encode: %s:%ld: %s\n", argv[3], line, pl_error_msg());
            goto done;
        }
        for (int64_t i = 0; i < ids.n; i++)
            printf(i ? " %d" : "%d", ids.data[i]);
        printf("\n");
    }
    rc = 0;
done:
    pl_ids_free(&ids);
    pl_free(data);
    pl_tokenizer_free(t);
    return rc;
}
