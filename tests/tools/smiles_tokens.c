/* Test helper for tests/scripts/smiles_reference.sh: splits each line of a
 * file of hex-encoded strings with a SmilesTokenizer and prints, per line,
 * the tokens (bytes outside '!'..'~' and the backslash written \xHH),
 * space-separated, a tab, and the ids, space-separated.
 *   smiles_tokens VOCAB CHEM_TOKENS_START|-1 FILE.hex */
#include "base/alloc.h"
#include "base/fileio.h"
#include "data/tokenizer/smiles.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct line_out {
    pl_bytes toks;
    pl_bytes ids;
} line_out;

static pl_status on_token(void *ctx, const char *tok, size_t len, int32_t id)
{
    line_out *o = ctx;
    pl_status st = PL_OK;
    if (o->toks.n && (st = pl_bytes_append(&o->toks, " ", 1)) != PL_OK)
        return st;
    for (size_t i = 0; i < len && st == PL_OK; i++) {
        unsigned char c = (unsigned char)tok[i];
        st = (c > ' ' && c < 0x7f && c != '\\') ? pl_bytes_append(&o->toks, tok + i, 1)
                                                 : pl_bytes_printf(&o->toks, "\\x%02x", c);
    }
    if (st == PL_OK)
        st = pl_bytes_printf(&o->ids, o->ids.n ? " %d" : "%d", id);
    return st;
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

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: smiles_tokens VOCAB CHEM_TOKENS_START|-1 FILE.hex\n");
        return 2;
    }
    pl_tokenizer *t = NULL;
    char *data = NULL;
    size_t size = 0;
    line_out o = {{0}, {0}};
    int rc = 1;
    pl_status st = pl_smiles_tokenizer_open_ex(&t, argv[1], atoll(argv[2]));
    if (st == PL_OK)
        st = pl_file_read_all(argv[3], &data, &size);
    if (st != PL_OK) {
        fprintf(stderr, "smiles_tokens: %s\n", pl_error_msg());
        goto done;
    }
    long line = 0;
    for (char *p = data, *e; p < data + size; p = e + 1) {
        e = memchr(p, '\n', (size_t)(data + size - p));
        if (!e)
            e = data + size;
        line++;
        size_t n = (size_t)(e - p) / 2;
        for (size_t i = 0; i < n; i++) {
            int hi = hexval(p[2 * i]), lo = hexval(p[2 * i + 1]);
            if (hi < 0 || lo < 0) {
                fprintf(stderr, "smiles_tokens: %s:%ld: not hex\n", argv[3], line);
                goto done;
            }
            p[i] = (char)(hi << 4 | lo);
        }
        o.toks.n = o.ids.n = 0;
        st = pl_smiles_tokenizer_each(t, p, n, on_token, &o);
        if (st != PL_OK) {
            fprintf(stderr, "smiles_tokens: %s:%ld: %s\n", argv[3], line, pl_error_msg());
            goto done;
        }
        printf("%.*s\t%.*s\n", (int)o.toks.n, o.toks.data ? o.toks.data : "", (int)o.ids.n,
               o.ids.data ? o.ids.data : "");
    }
    rc = 0;
done:
    pl_bytes_free(&o.toks);
    pl_bytes_free(&o.ids);
    pl_free(data);
    pl_tokenizer_free(t);
    return rc;
}
