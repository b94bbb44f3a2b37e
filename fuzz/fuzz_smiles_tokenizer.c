/* libFuzzer target: the SMILES tokenizer on arbitrary bytes. Builds a
 * vocabulary once (a few SMILES, plus $PLAIT_DATA/smiles/first_5K.smi when
 * present) with the default 272 layout, so the <UNUSED_i> extra tokens are
 * matched too, writes it under /tmp and opens it.
 * Invariants: the tokens are contiguous pieces of the input that together
 * cover it, skipping only newlines; every id is in range; decode succeeds. */
#include "base/alloc.h"
#include "base/fileio.h"
#include "base/vec.h"
#include "data/tokenizer/smiles.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *what)
{
    fprintf(stderr, "fuzz_smiles_tokenizer: %s: %s\n", what, pl_error_msg());
    abort();
}

static pl_tokenizer *open_vocab(void)
{
    static const char *seed[] = {"CC(=O)Oc1ccccc1C(=O)O", "C[N+](=O)[O-]", "[nH]1cccc1",
                                 "C%12CC%12", "BrC\\C=C/Cl", "[Na+].[Cl-]"};
    pl_smiles_vocab_builder *b;
    if (pl_smiles_vocab_builder_init(&b) != PL_OK)
        die("builder");
    for (size_t i = 0; i < sizeof seed / sizeof *seed; i++)
        if (pl_smiles_vocab_builder_add(b, seed[i], strlen(seed[i])) != PL_OK)
            die("builder add");
    const char *dir = getenv("PLAIT_DATA");
    char path[4096];
    snprintf(path, sizeof path, "%s/smiles/first_5K.smi", dir && *dir ? dir : "data");
    char *text = NULL;
    size_t n = 0;
    if (pl_file_read_all(path, &text, &n) == PL_OK) {
        for (char *p = text, *e; p < text + n; p = e + 1) {
            e = memchr(p, '\n', (size_t)(text + n - p));
            if (!e)
                e = text + n;
            char *tab = memchr(p, '\t', (size_t)(e - p));
            pl_smiles_vocab_builder_add(b, p, (size_t)((tab ? tab : e) - p));
        }
        pl_free(text);
    }
    snprintf(path, sizeof path, "/tmp/plait-fuzz-smiles-%d.vocab", (int)getpid());
    if (pl_smiles_vocab_builder_write(b, path, PL_SMILES_CHEM_TOKENS_START, 1, NULL) != PL_OK)
        die("builder write");
    pl_smiles_vocab_builder_free(b);
    pl_tokenizer *t;
    if (pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "SmilesTokenizer", .vocab_file = path}) != PL_OK)
        die("open");
    unlink(path);
    return t;
}

typedef struct walk {
    const char *base, *end;
    const char *pos; /* where the next token must start, after skipped newlines */
    int64_t vocab_size;
} walk;

static pl_status on_token(void *ctx, const char *tok, size_t len, int32_t id)
{
    walk *w = ctx;
    while (w->pos < tok && *w->pos == '\n')
        w->pos++;
    if (tok != w->pos || len == 0 || tok + len > w->end) {
        fprintf(stderr, "token at offset %td (len %zu), expected offset %td\n", tok - w->base, len,
                w->pos - w->base);
        abort();
    }
    if (id < 0 || id >= w->vocab_size) {
        fprintf(stderr, "id %d out of range\n", id);
        abort();
    }
    w->pos = tok + len;
    return PL_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static pl_tokenizer *t;
    if (!t)
        t = open_vocab();
    const char *s = (const char *)data;
    walk w = {s, s + size, s, t->vocab_size};
    if (pl_smiles_tokenizer_each(t, s, size, on_token, &w) != PL_OK)
        die("each");
    while (w.pos < w.end && *w.pos == '\n')
        w.pos++;
    if (w.pos != w.end) {
        fprintf(stderr, "tokens stop at offset %td of %zu\n", w.pos - s, size);
        abort();
    }
    pl_ids ids = {0};
    pl_bytes out = {0};
    if (pl_tokenizer_encode(t, s, size, &ids) != PL_OK)
        die("encode");
    if (pl_tokenizer_decode(t, ids.data, ids.n, &out) != PL_OK)
        die("decode");
    pl_ids_free(&ids);
    pl_bytes_free(&out);
    return 0;
}
