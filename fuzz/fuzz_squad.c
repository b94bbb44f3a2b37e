/* libFuzzer target: the SQuAD v1.1 reader, features and span decoding on
 * arbitrary bytes. Loads $PLAIT_DATA/bert/vocab.txt (default data/) once.
 * Checked properties:
 *  - parsing succeeds or fails with PL_ERR_FORMAT / PL_ERR_UNSUPPORTED /
 *    PL_ERR_NOMEM, never crashes; parsed strings are valid UTF-8;
 *  - features (32 / 8 / 8): every row is [CLS] ... [SEP] with the window in
 *    range, answer positions 0 or inside the window with start <= end;
 *  - decoding logits made from the input gives valid UTF-8;
 *  - every question's EM/F1 against itself is 1 unless it normalizes to "".
 * Seeds: fuzz/seeds/fuzz_squad/. */
#include "base/utf8.h"
#include "finetune/squad.h"
#include "finetune/squad_eval.h"

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
            fprintf(stderr, "fuzz_squad: %s\n", pl_error_msg());
            abort();
        }
    }
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pl_squad_set s;
    pl_status st = pl_squad_parse(&s, (const char *)data, size, "fuzz");
    if (st != PL_OK) {
        if (st != PL_ERR_FORMAT && st != PL_ERR_UNSUPPORTED && st != PL_ERR_NOMEM)
            abort();
        return 0;
    }
    for (int64_t i = 0; i < s.n_q; i++) {
        if (!pl_utf8_valid(s.q[i].question, strlen(s.q[i].question)) || s.q[i].context < 0 ||
            s.q[i].context >= s.n_contexts)
            abort();
        int em;
        double f1;
        if (pl_squad_em_f1(s.q[i].question, s.q[i].question, &em, &f1) != PL_OK || !em)
            abort();
    }
    pl_tokenizer *t = tok();
    pl_squad_config cfg = {.max_seq_len = 32, .doc_stride = 8, .max_query_len = 8};
    pl_squad_features fs = {0};
    if (pl_squad_features_build(&fs, t, &s, &cfg) != PL_OK)
        abort();
    int32_t cls = pl_tokenizer_token_id(t, "[CLS]"), sep = pl_tokenizer_token_id(t, "[SEP]");
    for (int64_t i = 0; i < fs.n; i++) {
        const pl_squad_feature *f = &fs.f[i];
        const int32_t *row = fs.ids + i * 32;
        if (row[0] != cls || row[f->doc_offset - 1] != sep || row[f->doc_offset + f->doc_len] != sep)
            abort();
        if (f->start < 0 || f->end < f->start || f->end >= 32 ||
            (f->start > 0 && (f->start < f->doc_offset || f->end >= f->doc_offset + f->doc_len)))
            abort();
    }
    float *sl = malloc((size_t)(fs.n * 32 + 1) * sizeof *sl), *el = malloc((size_t)(fs.n * 32 + 1) * sizeof *el);
    int64_t *feats = malloc((size_t)(fs.n + 1) * sizeof *feats);
    for (int64_t i = 0; i < fs.n * 32; i++) {
        sl[i] = (float)data[(size_t)i % size];
        el[i] = (float)data[(size_t)(i * 7) % size];
    }
    pl_squad_doc doc = {0};
    int64_t cur = -1;
    pl_squad_decode_config dc = {.n_best = 5, .max_answer_len = 10};
    for (int64_t i = 0; i < fs.n;) {
        int64_t q = fs.f[i].question, nf = 0;
        while (i + nf < fs.n && fs.f[i + nf].question == q)
            feats[nf] = i + nf, nf++;
        if (s.q[q].context != cur) {
            pl_squad_doc_free(&doc);
            cur = s.q[q].context;
            if (pl_squad_doc_init(&doc, t, s.contexts[cur]) != PL_OK)
                abort();
        }
        pl_bytes out = {0};
        if (pl_squad_decode(t, &fs, &doc, feats, nf, sl + i * 32, el + i * 32, &dc, &out, NULL) != PL_OK)
            abort();
        if (out.data && !pl_utf8_valid(out.data, out.n))
            abort();
        pl_bytes_free(&out);
        i += nf;
    }
    pl_squad_doc_free(&doc);
    free(sl), free(el), free(feats);
    pl_squad_features_free(&fs);
    pl_squad_set_free(&s);
    return 0;
}
