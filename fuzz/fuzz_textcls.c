/* libFuzzer target: the TSV / JSON-lines classification readers and the BERT
 * pair encoding on arbitrary bytes. Loads $PLAIT_DATA/bert/vocab.txt (default
 * data/) once. The first byte picks the format, header and columns, the
 * second the sequence length (3..66). Checked properties:
 *  - parsing succeeds or fails with PL_ERR_FORMAT / PL_ERR_NOMEM / PL_ERR_ARG;
 *  - examples are valid UTF-8 with increasing line numbers and a label;
 *  - the label map holds every label; encoding gives [CLS] first, a mask of
 *    ones then zeros, [SEP] at the last unmasked place, types 0 then 1, and
 *    [PAD] after.
 * Seeds: fuzz/seeds/fuzz_textcls/. */
#include "base/utf8.h"
#include "finetune/textcls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static pl_tokenizer *tok(void)
{
    static pl_tokenizer *t;
    if (!t) {
        const char *dir = getenv("PLAIT_DATA");
        char path[4096];
        snprintf(path, sizeof path, "%s/bert/vocab.txt", dir && *dir ? dir : "data");
        if (pl_bert_tokenizer_open(&t, path, 1) != PL_OK) {
            fprintf(stderr, "fuzz_textcls: %s\n", pl_error_msg());
            abort();
        }
    }
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    pl_textcls_spec sp = pl_textcls_spec_default();
    sp.jsonl = data[0] & 1;
    sp.header = (data[0] >> 1) & 1;
    sp.col_b = (data[0] >> 2) & 1 ? 1 : -1;
    sp.col_label = (data[0] >> 3) & 1 ? -1 : 2;
    int64_t L = 3 + data[1] % 64;
    pl_textcls_set s;
    pl_status st = pl_textcls_parse(&s, (const char *)data + 2, size - 2, "fuzz", &sp);
    if (st != PL_OK) {
        if (st != PL_ERR_FORMAT && st != PL_ERR_NOMEM && st != PL_ERR_ARG)
            abort();
        return 0;
    }
    for (int64_t i = 0; i < s.n; i++) {
        const pl_textcls_example *e = &s.ex[i];
        if (!e->label || !e->label[0] || !pl_utf8_valid(e->a, strlen(e->a)) ||
            (e->b && !pl_utf8_valid(e->b, strlen(e->b))) || (i && e->line <= s.ex[i - 1].line))
            abort();
    }
    pl_ft_labels m;
    if (pl_textcls_labels(&s, &m) != PL_OK)
        abort();
    size_t cells = (size_t)(s.n * L);
    int32_t *ids = malloc(cells * 4), *ty = malloc(cells * 4), *mk = malloc(cells * 4), *lab = malloc((size_t)s.n * 4);
    pl_bert_specials b;
    if (pl_bert_tokenizer_specials(tok(), &b) != PL_OK ||
        pl_textcls_encode_set(tok(), &s, &m, L, ids, ty, mk, lab, NULL) != PL_OK)
        abort();
    for (int64_t i = 0; i < s.n; i++) {
        const int32_t *r = ids + i * L, *t = ty + i * L, *k = mk + i * L;
        int64_t n = 0;
        while (n < L && k[n])
            n++;
        for (int64_t p = n; p < L; p++)
            if (k[p] || r[p] != b.pad || t[p])
                abort();
        if (r[0] != b.cls || n < 2 || r[n - 1] != b.sep || lab[i] < 0 || lab[i] >= m.n ||
            strcmp(m.names[lab[i]], s.ex[i].label) != 0)
            abort();
        for (int64_t p = 1; p < n; p++)
            if (t[p] < t[p - 1] || (!s.ex[i].b && t[p]))
                abort();
    }
    free(ids), free(ty), free(mk), free(lab);
    pl_ft_labels_free(&m);
    pl_textcls_set_free(&s);
    return 0;
}
