/* The BERT dataset's pieces that the numpy comparison (tests/scripts/bert_dataset.sh)
 * does not reach: build_mapping's rules on a corpus worked by hand, a token
 * outside the vocabulary, out-of-range samples, and allocation failures. */
#include "base/alloc.h"
#include "data/bart_dataset.h"
#include "data/bert_dataset.h"
#include "data/indexed.h"
#include "data/tokenizer/bert_wordpiece.h"
#include "data/tokenizer/tokenizer.h"
#include "test.h"

#include <stdlib.h>

#define N_OF(a) (sizeof(a) / sizeof *(a))

/* Documents of sentences; sentence k of the corpus holds ids 2000 + k + j
 * (WordPiece ids of plain words in vocab.txt), a negative length ends a document. */
static void write_corpus(const char *prefix, const int *lengths, int n, int32_t bad_id)
{
    pl_indexed_builder *b = NULL;
    CHECK_OK(pl_indexed_builder_open(&b, prefix, PL_DT_INT32));
    int k = 0;
    for (int i = 0; i < n && b; i++) {
        if (lengths[i] < 0) {
            CHECK_OK(pl_indexed_builder_end_document(b));
            continue;
        }
        int32_t tok[1024];
        for (int j = 0; j < lengths[i]; j++)
            tok[j] = 2000 + k + j;
        if (bad_id && k == 3)
            tok[0] = bad_id;
        CHECK_OK(pl_indexed_builder_add_item(b, tok, lengths[i]));
        k++;
    }
    if (b)
        CHECK_OK(pl_indexed_builder_finish(b));
}

static void tmp_path(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/bertds_%s", test_tmpdir(), name);
}

/* doc 0: five sentences of 6; doc 1: one of 3; doc 2: 600 and 5 (a long
 * sentence); doc 3: empty; doc 4: two of 2. Sentences 0-4, 5, 6-7, -, 8-9. */
static const int hand[] = {6, 6, 6, 6, 6, -1, 3, -1, 600, 5, -1, -1, 2, 2, -1};

static int row_cmp(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    for (int k = 0; k < 3; k++)
        if (x[k] != y[k])
            return x[k] < y[k] ? -1 : 1;
    return 0;
}

static void check_rows(const pl_npy *m, const uint32_t (*want)[3], int n, const char *what)
{
    CHECK(m->shape[0] == n && m->dtype == PL_NPY_U32, "%s: %lld rows, expected %d", what,
          (long long)m->shape[0], n);
    if (m->shape[0] != n)
        return;
    uint32_t got[16][3];
    memcpy(got, m->owned, sizeof(uint32_t) * 3 * (size_t)n);
    qsort(got, (size_t)n, sizeof got[0], row_cmp);
    for (int i = 0; i < n; i++)
        CHECK(row_cmp(got[i], want[i]) == 0, "%s row %d: (%u, %u, %u), expected (%u, %u, %u)",
              what, i, got[i][0], got[i][1], got[i][2], want[i][0], want[i][1], want[i][2]);
}

TEST(mapping_follows_build_mapping_rules_on_a_corpus_worked_by_hand)
{
    char p[512];
    tmp_path(p, sizeof p, "hand");
    write_corpus(p, hand, (int)N_OF(hand), 0);
    pl_indexed low;
    CHECK_OK(pl_indexed_open(&low, p));
    pl_npy m;
    /* Target 10, no short samples, two sentences at least: doc 0 cuts after
     * 12 tokens (0, 2), then keeps its last sentence with the one before
     * (2, 5); doc 1 is too short, doc 2 has a long sentence, doc 4 ends. */
    static const uint32_t two[][3] = {{0, 2, 10}, {2, 5, 10}, {8, 10, 10}};
    CHECK_OK(pl_bert_build_mapping(&low.h, 0, 5, 1, UINT64_MAX, 10, 0.0, 1234, 2, &m));
    check_rows(&m, two, 3, "binary head");
    pl_npy_free(&m);
    /* Without the binary head one sentence is enough: doc 1 joins. */
    static const uint32_t one[][3] = {{0, 2, 10}, {2, 5, 10}, {5, 6, 10}, {8, 10, 10}};
    CHECK_OK(pl_bert_build_mapping(&low.h, 0, 5, 1, UINT64_MAX, 10, 0.0, 1234, 1, &m));
    check_rows(&m, one, 4, "no binary head");
    pl_npy_free(&m);
    /* 4 samples asked for: epochs stop only at an epoch's start (3 < 4, 6 >= 4). */
    static const uint32_t ep[][3] = {{0, 2, 10}, {0, 2, 10}, {2, 5, 10},
                                     {2, 5, 10}, {8, 10, 10}, {8, 10, 10}};
    CHECK_OK(pl_bert_build_mapping(&low.h, 0, 5, 1000, 4, 10, 0.0, 1234, 2, &m));
    check_rows(&m, ep, 6, "two epochs");
    pl_npy_free(&m);
    /* Documents [1, 2): one sentence, no sample: an error, not a hang. */
    CHECK(pl_bert_build_mapping(&low.h, 1, 2, 1000, 4, 10, 0.0, 1234, 2, &m) == PL_ERR_ARG,
          "no sample");
    CHECK(strstr(pl_error_msg(), "give no sample") != NULL, "%s", pl_error_msg());
    pl_indexed_close(&low);
}

static pl_status open_tok_extra(pl_tokenizer **t, int64_t extra)
{
    char vocab[512];
    snprintf(vocab, sizeof vocab, "%s/bert/vocab.txt", test_datadir());
    return pl_bert_tokenizer_open_ex(t, vocab, 1, extra);
}

static pl_status open_tok(pl_tokenizer **t) { return open_tok_extra(t, 0); }

static pl_bert_dataset_config config_of(const char *cache, pl_masked_family f)
{
    pl_bert_dataset_config c;
    if (f == PL_MASKED_T5)
        pl_t5_dataset_config_defaults(&c);
    else if (f == PL_MASKED_BART)
        pl_bart_dataset_config_defaults(&c);
    else
        pl_bert_dataset_config_defaults(&c);
    c.seq_length = 16;
    c.decoder_seq_length = 16;
    c.split = f == PL_MASKED_BART ? "1,0,0" : "1"; /* NeMo's split takes three values */
    pl_split_parse(c.split, &c.split_matrix);
    c.cache_dir = cache;
    c.tokenizer.class_name = "_BertWordPieceTokenizer";
    return c;
}

static pl_bert_dataset_config config(const char *cache) { return config_of(cache, PL_MASKED_BERT); }

TEST(token_outside_the_vocabulary_and_bad_indices_are_errors)
{
    char p[512], cache[600];
    tmp_path(p, sizeof p, "badid");
    snprintf(cache, sizeof cache, "%s_cache", p);
    write_corpus(p, hand, (int)N_OF(hand), 40000);
    pl_tokenizer *t = NULL;
    CHECK_OK(open_tok(&t));
    pl_indexed low;
    CHECK_OK(pl_indexed_open(&low, p));
    pl_bert_dataset_config c = config(cache);
    pl_bert_dataset ds;
    CHECK_OK(pl_bert_dataset_init(&ds, &low, p, &c, t, PL_SPLIT_TRAIN, 10));
    int32_t buf[48];
    pl_bert_sample s = {buf, buf + 16, buf + 32, 0, 0};
    int64_t n = pl_bert_dataset_len(&ds), bad = 0;
    CHECK(n >= 10, "%lld samples", (long long)n);
    for (int64_t i = 0; i < n; i++) {
        pl_status st = pl_bert_dataset_get(&ds, i, &s);
        if (st != PL_OK) {
            bad++;
            CHECK(strstr(pl_error_msg(), "sentence 3 holds token id 40000") != NULL, "%s",
                  pl_error_msg());
        } else {
            CHECK(s.length >= 5 && s.length <= 16 && s.tokens[0] == 101, "sample %lld",
                  (long long)i);
        }
    }
    CHECK(bad > 0, "sentence 3 is in some sample");
    CHECK(pl_bert_dataset_get(&ds, n, &s) == PL_ERR_ARG, "index n");
    CHECK(pl_bert_dataset_get(&ds, -1, &s) == PL_ERR_ARG, "index -1");
    pl_bert_dataset_free(&ds);
    pl_indexed_close(&low);
    pl_tokenizer_free(t);
}

TEST(allocation_failures_are_reported_and_leak_nothing)
{
    char p[512], cache[600];
    tmp_path(p, sizeof p, "fault");
    write_corpus(p, hand, (int)N_OF(hand), 0);
    pl_tokenizer *t = NULL;
    CHECK_OK(open_tok(&t));
    pl_indexed low;
    CHECK_OK(pl_indexed_open(&low, p));
    for (int reuse = 0; reuse < 2; reuse++) {
        int64_t n = 0, live0 = pl_alloc_live();
        pl_status st;
        do {
            snprintf(cache, sizeof cache, "%s_cache_%s%lld", p, reuse ? "r" : "b",
                     reuse ? 0LL : (long long)n);
            pl_bert_dataset_config c = config(cache);
            pl_bert_dataset ds;
            pl_alloc_fail_after(n);
            st = pl_bert_dataset_init(&ds, &low, p, &c, t, PL_SPLIT_TRAIN, 8);
            pl_alloc_fail_after(-1);
            if (st == PL_OK)
                pl_bert_dataset_free(&ds);
            CHECK(st == PL_OK || st == PL_ERR_NOMEM, "reuse %d, failure at %lld: %s", reuse,
                  (long long)n, pl_error_msg());
            CHECK(pl_alloc_live() == live0, "reuse %d, failure at %lld: %lld blocks leaked",
                  reuse, (long long)n, (long long)(pl_alloc_live() - live0));
            n++;
        } while (st != PL_OK && n < 1000);
        CHECK(st == PL_OK && n > 5, "reuse %d: succeeded after %lld failures", reuse,
              (long long)n);
    }
    pl_indexed_close(&low);
    pl_tokenizer_free(t);
}

/* T5 and BART over the same corpora: a token outside the vocabulary named,
 * indices checked, and allocation failures at init clean. */
TEST(t5_and_bart_name_bad_tokens_and_fail_cleanly)
{
    char p[512], q[512], cache[600];
    tmp_path(p, sizeof p, "encdec_badid");
    write_corpus(p, hand, (int)N_OF(hand), 40000);
    tmp_path(q, sizeof q, "encdec_fault");
    write_corpus(q, hand, (int)N_OF(hand), 0);
    pl_tokenizer *t = NULL;
    CHECK_OK(open_tok_extra(&t, 100));
    pl_indexed low, good;
    CHECK_OK(pl_indexed_open(&low, p));
    CHECK_OK(pl_indexed_open(&good, q));
    for (int f = PL_MASKED_T5; f <= PL_MASKED_BART; f++) {
        snprintf(cache, sizeof cache, "%s_cache_%d", p, f);
        pl_bert_dataset_config c = config_of(cache, (pl_masked_family)f);
        pl_bert_dataset ds;
        CHECK_OK(pl_bert_dataset_init(&ds, &low, p, &c, t, PL_SPLIT_TRAIN, 10));
        int32_t buf[48];
        pl_encdec_sample s = {buf, 0, buf + 16, buf + 32, 0};
        int64_t n = pl_bert_dataset_len(&ds), bad = 0;
        for (int64_t i = 0; i < n; i++) {
            pl_status st = f == PL_MASKED_T5 ? pl_t5_dataset_get(&ds, i, &s)
                                             : pl_bart_dataset_get(&ds, i, &s);
            if (st != PL_OK) {
                bad++;
                CHECK(strstr(pl_error_msg(), "sentence 3 holds token id 40000") != NULL,
                      "family %d: %s", f, pl_error_msg());
            } else {
                CHECK(s.enc_length >= 1 && s.enc_length <= 16 && s.dec_length >= 1 &&
                          s.dec_length <= 16 && s.dec_tokens[0] == 30522,
                      "family %d sample %lld: lengths %lld %lld, decoder starts %d", f,
                      (long long)i, (long long)s.enc_length, (long long)s.dec_length,
                      s.dec_tokens[0]);
            }
        }
        CHECK(bad > 0, "family %d: sentence 3 is in some sample", f);
        CHECK((f == PL_MASKED_T5 ? pl_t5_dataset_get(&ds, n, &s) : pl_bart_dataset_get(&ds, n, &s)) ==
                  PL_ERR_ARG,
              "family %d: index n", f);
        pl_bert_dataset_free(&ds);

        int64_t k = 0, live0 = pl_alloc_live();
        pl_status st;
        do {
            snprintf(cache, sizeof cache, "%s_cache_%d_%lld", q, f, (long long)k);
            c = config_of(cache, (pl_masked_family)f);
            pl_alloc_fail_after(k);
            st = pl_bert_dataset_init(&ds, &good, q, &c, t, PL_SPLIT_TRAIN, 8);
            pl_alloc_fail_after(-1);
            if (st == PL_OK)
                pl_bert_dataset_free(&ds);
            CHECK(st == PL_OK || st == PL_ERR_NOMEM, "family %d, failure at %lld: %s", f,
                  (long long)k, pl_error_msg());
            CHECK(pl_alloc_live() == live0, "family %d, failure at %lld: %lld blocks leaked", f,
                  (long long)k, (long long)(pl_alloc_live() - live0));
            k++;
        } while (st != PL_OK && k < 1000);
        CHECK(st == PL_OK && k > 5, "family %d: succeeded after %lld failures", f, (long long)k);
    }
    pl_indexed_close(&good);
    pl_indexed_close(&low);
    pl_tokenizer_free(t);
}

int main(void)
{
    RUN(mapping_follows_build_mapping_rules_on_a_corpus_worked_by_hand);
    RUN(token_outside_the_vocabulary_and_bad_indices_are_errors);
    RUN(allocation_failures_are_reported_and_leak_nothing);
    RUN(t5_and_bart_name_bad_tokens_and_fail_cleanly);
    return test_summary("bert_dataset");
}
