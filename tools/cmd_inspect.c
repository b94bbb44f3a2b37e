/* plait data inspect PREFIX: what an indexed dataset holds. Counts, dtype,
 * token total, length statistics (numpy's median and linear-interpolated
 * 90th percentile), empty documents, and one document's ids (decoded when a
 * tokenizer is given). The dataset is validated by pl_indexed_open first, so
 * a corrupt file is reported with its file and field. */
#include "commands.h"

#include "base/alloc.h"
#include "data/indexed.h"
#include "data/tokenizer/tokenizer.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct inspect_opts {
    const char *tokenizer_type, *vocab_file, *merge_file, *tokenizer_model;
    int64_t vocab_extra_ids;
    int legacy_tokenizer;
    int64_t doc;
    int64_t max_tokens;
} inspect_opts;

#define O(f) offsetof(inspect_opts, f)
static const pl_option table[] = {
    {"--tokenizer-type", PL_OPT_CHOICE, NULL, O(tokenizer_type),
     "decode the shown document with this tokenizer", pl_tokenizer_types, 0},
    {"--vocab-file", PL_OPT_STRING, NULL, O(vocab_file), "vocabulary file", NULL, 0},
    {"--merge-file", PL_OPT_STRING, NULL, O(merge_file), "BPE merges (GPT2BPETokenizer)", NULL, 0},
    {"--tokenizer-model", PL_OPT_STRING, NULL, O(tokenizer_model),
     "HuggingFaceTokenizer directory or SentencePiece tokenizer.model", NULL, 0},
    {"--vocab-extra-ids", PL_OPT_INT, "0", O(vocab_extra_ids), "<extra_id_N> sentinels", NULL, 0},
    {"--legacy-tokenizer", PL_OPT_BOOL, NULL, O(legacy_tokenizer),
     "Megatron's legacy tokenizer classes", NULL, 0},
    {"--doc", PL_OPT_INT, "0", O(doc), "document to show (0-based)", NULL, 0},
    {"--max-tokens", PL_OPT_INT, "256", O(max_tokens), "ids to show at most (0: all)", NULL, 0},
};
#undef O

static const pl_command_spec spec = {
    "data inspect",
    "Print counts, dtype, length statistics and one document of the dataset PREFIX "
    "(usage: plait data inspect PREFIX [options]).",
    table, (int)(sizeof table / sizeof *table), 0};

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* numpy.percentile(a, q) with the default linear method, a sorted. */
static double percentile(const int64_t *a, int64_t n, double q)
{
    double pos = q / 100.0 * (double)(n - 1);
    int64_t lo = (int64_t)floor(pos), hi = lo + 1 < n ? lo + 1 : lo;
    double t = pos - (double)lo;
    return (double)a[lo] + t * (double)(a[hi] - a[lo]);
}

/* Prints "NAME: min A, mean B, median C, p90 D, max E" over v (sorted in place). */
static void print_stats(const char *name, int64_t *v, int64_t n)
{
    if (n == 0) {
        printf("%s: none\n", name);
        return;
    }
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)v[i];
    qsort(v, (size_t)n, sizeof *v, cmp_i64);
    printf("%s: min %lld, mean %.6g, median %.6g, p90 %.6g, max %lld\n", name, (long long)v[0],
           sum / (double)n, percentile(v, n, 50), percentile(v, n, 90), (long long)v[n - 1]);
}

static pl_status show_document(const pl_indexed *ds, const inspect_opts *o, pl_tokenizer *tok)
{
    const pl_indexed_header *h = &ds->h;
    int64_t k = o->doc;
    if (k < 0 || k >= h->n_documents)
        return pl_errorf(PL_ERR_ARG, "--doc %lld: the dataset has %lld documents", (long long)k,
                         (long long)h->n_documents);
    int64_t first = pl_indexed_doc(h, k), last = pl_indexed_doc(h, k + 1), total = 0;
    for (int64_t i = first; i < last; i++)
        total += pl_indexed_length(h, i);
    printf("document %lld: sequences [%lld, %lld), %lld tokens\n", (long long)k, (long long)first,
           (long long)last, (long long)total);
    if (h->dtype == PL_DT_FLOAT32 || h->dtype == PL_DT_FLOAT64)
        return PL_OK;
    int64_t budget = o->max_tokens > 0 ? o->max_tokens : total;
    pl_ids ids = {0};
    pl_bytes text = {0};
    pl_status st = PL_OK;
    for (int64_t i = first; i < last && budget > 0; i++) {
        int64_t len = pl_indexed_length(h, i), n = len < budget ? len : budget;
        ids.n = 0;
        if ((st = pl_ids_reserve(&ids, n)) || (st = pl_indexed_read(ds, i, 0, n, ids.data)))
            goto done;
        ids.n = n;
        budget -= n;
        printf("  sequence %lld (%lld tokens):", (long long)i, (long long)len);
        for (int64_t t = 0; t < n; t++)
            printf(" %d", ids.data[t]);
        printf("%s\n", n < len ? " ..." : "");
        if (tok) {
            text.n = 0;
            if ((st = pl_tokenizer_decode(tok, ids.data, n, &text)))
                goto done;
            printf("  text: %.*s\n", (int)text.n, text.data ? text.data : "");
        }
    }
    if (budget == 0 && o->max_tokens > 0 && total > o->max_tokens)
        printf("  (%lld more tokens; --max-tokens 0 shows all)\n",
               (long long)(total - o->max_tokens));
done:
    pl_ids_free(&ids);
    pl_bytes_free(&text);
    return st;
}

int plait_data_inspect(int argc, char **argv)
{
    if (argc < 1 || (strncmp(argv[0], "--", 2) == 0 && !pl_options_wants_help(argc, argv))) {
        fprintf(stderr, "plait: error: plait data inspect: PREFIX expected first (the dataset "
                        "path without .bin/.idx)\n");
        return 2;
    }
    inspect_opts o;
    int rc = pl_options_wants_help(argc, argv) ? plait_parse(&spec, &o, argc, argv, NULL)
                                               : plait_parse(&spec, &o, argc - 1, argv + 1, NULL);
    if (rc >= 0)
        return rc;
    char prefix[4096];
    size_t n = strlen(argv[0]);
    if (n >= sizeof prefix)
        return plait_report(pl_errorf(PL_ERR_ARG, "PREFIX too long"));
    memcpy(prefix, argv[0], n + 1);
    if (n > 4 && (strcmp(prefix + n - 4, ".idx") == 0 || strcmp(prefix + n - 4, ".bin") == 0))
        prefix[n - 4] = '\0';

    pl_tokenizer *tok = NULL;
    pl_indexed ds;
    int64_t *v = NULL;
    pl_status st = PL_OK;
    if (o.tokenizer_type || o.vocab_file || o.merge_file || o.tokenizer_model) {
        pl_tokenizer_spec ts = {o.tokenizer_type, o.vocab_file, o.merge_file, o.tokenizer_model,
                                o.vocab_extra_ids, o.legacy_tokenizer};
        st = pl_tokenizer_open(&tok, &ts);
        if (st)
            return plait_report(st);
    }
    st = pl_indexed_open(&ds, prefix);
    if (st) {
        pl_tokenizer_free(tok);
        return plait_report(st);
    }
    const pl_indexed_header *h = &ds.h;
    printf("prefix: %s\n", prefix);
    printf("dtype: %s (code %d, %d bytes)\n", pl_indexed_dtype_name(h->dtype), h->dtype,
           h->item_size);
    printf("sequences: %lld\n", (long long)h->n_sequences);
    printf("documents: %lld\n", (long long)h->n_documents);
    int64_t tokens = 0, empty = 0, m = h->n_sequences > h->n_documents ? h->n_sequences
                                                                      : h->n_documents;
    for (int64_t i = 0; i < h->n_sequences; i++)
        tokens += pl_indexed_length(h, i);
    printf("tokens: %lld\n", (long long)tokens);
    if (ds.bin_map.size > h->data_bytes)
        printf("note: %s.bin has %llu bytes past the indexed tokens\n", prefix,
               (unsigned long long)(ds.bin_map.size - h->data_bytes));
    v = pl_malloc((size_t)(m > 0 ? m : 1) * sizeof *v);
    if (!v) {
        st = pl_errorf(PL_ERR_NOMEM, "out of memory for %lld lengths", (long long)m);
        goto done;
    }
    for (int64_t k = 0; k < h->n_documents; k++) {
        int64_t sum = 0;
        for (int64_t i = pl_indexed_doc(h, k); i < pl_indexed_doc(h, k + 1); i++)
            sum += pl_indexed_length(h, i);
        v[k] = sum;
        empty += sum == 0;
    }
    printf("empty documents: %lld\n", (long long)empty);
    print_stats("document tokens", v, h->n_documents);
    for (int64_t i = 0; i < h->n_sequences; i++)
        v[i] = pl_indexed_length(h, i);
    print_stats("sequence tokens", v, h->n_sequences);
    if (h->n_documents > 0 || o.doc != 0)
        st = show_document(&ds, &o, tok);
done:
    pl_free(v);
    pl_indexed_close(&ds);
    pl_tokenizer_free(tok);
    return st ? plait_report(st) : 0;
}
