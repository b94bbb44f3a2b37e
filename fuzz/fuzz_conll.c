/* libFuzzer target: the CoNLL reader, WordPiece label alignment and seqeval
 * on arbitrary bytes. Loads $PLAIT_DATA/bert/vocab.txt (default data/) once.
 * The first byte picks the tag column and whether tags are read, the second
 * the sequence length (3..66). Checked properties:
 *  - parsing succeeds or fails with PL_ERR_FORMAT / PL_ERR_NOMEM;
 *  - sentences are non-empty and cover the words in order;
 *  - scoring the tags against themselves finds tp = predicted = true;
 *  - encoding puts every word's first sub-token in exactly one row, with its
 *    label id, and ignores every other position.
 * Seeds: fuzz/seeds/fuzz_conll/. */
#include "finetune/tokcls.h"
#include "finetune/seqeval.h"

#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static pl_tokenizer *tok(void)
{
    static pl_tokenizer *t;
    if (!t) {
        const char *dir = getenv("PLAIT_DATA");
        char path[4096];
        snprintf(path, sizeof path, "%s/bert/vocab.txt", dir && *dir ? dir : "data");
        if (pl_bert_tokenizer_open(&t, path, 1) != PL_OK) {
            fprintf(stderr, "fuzz_conll: %s\n", pl_error_msg());
            abort();
        }
    }
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    pl_conll_spec sp = pl_conll_spec_default();
    sp.tag_col = (data[0] & 3) == 3 ? -1 : (data[0] & 3);
    sp.tags = !(data[0] & 4);
    int64_t seq_len = 3 + data[1] % 64;
    pl_conll_set s;
    pl_status st = pl_conll_parse(&s, (const char *)data + 2, size - 2, "fuzz", &sp);
    if (st != PL_OK) {
        if (st != PL_ERR_FORMAT && st != PL_ERR_NOMEM && st != PL_ERR_ARG)
            abort();
        return 0;
    }
    int64_t next = 0;
    int64_t *len = malloc((size_t)s.n_sent * sizeof *len);
    for (int64_t i = 0; i < s.n_sent; i++) {
        if (s.sent[i].n <= 0 || s.sent[i].first != next)
            abort();
        next += s.sent[i].n;
        len[i] = s.sent[i].n;
    }
    if (next != s.n_words)
        abort();
    pl_ft_labels m = {0};
    if (s.tags) {
        pl_seqeval_result r;
        if (pl_seqeval_score(&r, s.tags, s.tags, len, s.n_sent) != PL_OK || r.tp_all != r.true_all ||
            r.pred_all != r.true_all)
            abort();
        pl_seqeval_result_free(&r);
        if (pl_conll_labels(&s, &m) != PL_OK)
            abort();
    }
    pl_tokcls_rows rows;
    if (pl_tokcls_encode(&rows, tok(), &s, s.tags ? &m : NULL, seq_len) != PL_OK)
        abort();
    int *seen = calloc((size_t)s.n_words + 1, sizeof *seen);
    for (int64_t i = 0; i < rows.n * seq_len; i++) {
        int64_t w = rows.word_pos[i];
        if (w < -1 || w >= s.n_words)
            abort();
        if (w < 0) {
            if (rows.labels[i] != PL_TOKCLS_IGNORE)
                abort();
            continue;
        }
        seen[w]++;
        if (s.tags && rows.labels[i] != (int32_t)pl_ft_labels_find(&m, s.tags[w]))
            abort();
    }
    for (int64_t w = 0; w < s.n_words; w++)
        if (seen[w] != 1)
            abort();
    free(seen);
    free(len);
    pl_tokcls_rows_free(&rows);
    pl_ft_labels_free(&m);
    pl_conll_set_free(&s);
    return 0;
}
