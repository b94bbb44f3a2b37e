/* Test helper for tests/scripts/bert_dataset.sh.
 *
 *   bert_samples make VOCAB TEXT PREFIX LINES
 *     Writes PREFIX.bin/.idx as preprocess_data.py --split-sentences does (one
 *     item per sentence, documents grouping them), from the first LINES lines
 *     of TEXT, each line a sentence tokenized with BertWordPieceLowerCase.
 *     Documents take a cycle of sizes (empty and one-sentence ones included),
 *     and every 17th document gets a sentence over 512 tokens (30 lines joined).
 *
 *   bert_samples dump VOCAB PREFIX key=value...
 *     Opens the BERT dataset and prints its cache files, length and samples:
 *       files DESCRIPTION SAMPLE_INDEX / built 0|1 / len N, then per sample
 *       "sample I LENGTH IS_RANDOM" and lines "tokens ...", "types ...",
 *       "labels ...". keys: split (the --split text), which (train|valid|test),
 *       n (num_samples, -1 = None), seq, seed, mask, short, binary (1|0),
 *       ngram (max n-gram), wholeword (1|0),
 *       cache (directory), first, count, gpt2 (a GPT-2 tokenizer directory to
 *       open instead of the vocabulary, for the error path).
 *       With t5=1 it opens the T5 dataset instead (pretrain_t5.py's masking
 *       unless ngram/wholeword/geometric say otherwise; seq is the encoder's
 *       length, dec the decoder's, extra the --vocab-extra-ids) and prints per
 *       sample "sample I ENC_LENGTH DEC_LENGTH" and lines "enc ...",
 *       "dec ...", "labels ...". With bart=1 the same for NeMo's BART
 *       dataset (seq is both lengths; delete = delete_mask_prob). */
#include "base/alloc.h"
#include "base/fileio.h"
#include "data/bert_dataset.h"
#include "data/bart_dataset.h"
#include "data/indexed.h"
#include "data/t5_dataset.h"
#include "data/tokenizer/bert_wordpiece.h"
#include "data/tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what)
{
    fprintf(stderr, "bert_samples: %s: %s\n", what, pl_error_msg());
    return 1;
}

static int make(const char *vocab, const char *text, const char *prefix, long lines)
{
    static const int sizes[] = {4, 1, 7, 2, 0, 12, 3, 25, 5, 9, 2, 40, 6};
    enum { N_SIZES = sizeof sizes / sizeof *sizes, LONG_JOIN = 30 };
    pl_tokenizer *t = NULL;
    pl_indexed_builder *b = NULL;
    char *data = NULL;
    size_t size = 0;
    pl_ids ids = {0};
    int rc = 1;
    if (pl_bert_tokenizer_open(&t, vocab, 1) != PL_OK || pl_file_read_all(text, &data, &size) != PL_OK ||
        pl_indexed_builder_open(&b, prefix, pl_indexed_best_dtype(t->vocab_size)) != PL_OK) {
        rc = fail("make");
        goto done;
    }
    char *p = data, *end = data + size;
    long used = 0;
    for (long doc = 0; used < lines && p < end; doc++) {
        int want = sizes[doc % N_SIZES] + (doc % 17 == 5 ? 1 : 0);
        for (int s = 0; s < want && used < lines && p < end; s++) {
            int join = doc % 17 == 5 && s == want - 1 ? LONG_JOIN : 1;
            ids.n = 0;
            for (int j = 0; j < join && p < end; j++, used++) {
                char *e = memchr(p, '\n', (size_t)(end - p));
                if (!e)
                    e = end;
                if (pl_tokenizer_encode(t, p, (size_t)(e - p), &ids) != PL_OK) {
                    rc = fail("encode");
                    goto done;
                }
                p = e < end ? e + 1 : end;
            }
            if (ids.n > 0 && pl_indexed_builder_add_item(b, ids.data, ids.n) != PL_OK) {
                rc = fail("add_item");
                goto done;
            }
        }
        if (pl_indexed_builder_end_document(b) != PL_OK) {
            rc = fail("end_document");
            goto done;
        }
    }
    pl_status st = pl_indexed_builder_finish(b);
    b = NULL;
    rc = st == PL_OK ? 0 : fail("finish");
done:
    if (b)
        pl_indexed_builder_abort(b);
    pl_ids_free(&ids);
    pl_free(data);
    pl_tokenizer_free(t);
    return rc;
}

static const char *arg(int argc, char **argv, const char *key, const char *dflt)
{
    size_t n = strlen(key);
    for (int i = 0; i < argc; i++)
        if (strncmp(argv[i], key, n) == 0 && argv[i][n] == '=')
            return argv[i] + n + 1;
    return dflt;
}

static void print_row(const char *name, const int32_t *a, int64_t n)
{
    printf("%s", name);
    for (int64_t i = 0; i < n; i++)
        printf(" %d", a[i]);
    printf("\n");
}

static int dump(const char *vocab, const char *prefix, int argc, char **argv)
{
    pl_tokenizer *t = NULL;
    pl_indexed low;
    pl_bert_dataset ds;
    int32_t *buf = NULL;
    int rc = 1, opened = 0, inited = 0;
    pl_bert_dataset_config cfg;
    int bart = atoi(arg(argc, argv, "bart", "0"));
    int t5 = atoi(arg(argc, argv, "t5", "0")) || bart; /* an encoder-decoder sample */
    if (bart)
        pl_bart_dataset_config_defaults(&cfg);
    else if (t5)
        pl_t5_dataset_config_defaults(&cfg);
    else
        pl_bert_dataset_config_defaults(&cfg);
    cfg.split = arg(argc, argv, "split", PL_DEFAULT_SPLIT);
    cfg.seq_length = atoll(arg(argc, argv, "seq", "128"));
    cfg.seed = (uint32_t)strtoul(arg(argc, argv, "seed", "1234"), NULL, 10);
    cfg.mask_prob = atof(arg(argc, argv, "mask", "0.15"));
    cfg.short_seq_prob = atof(arg(argc, argv, "short", "0.1"));
    cfg.binary_head = atoi(arg(argc, argv, "binary", t5 ? "0" : "1"));
    cfg.cache_dir = arg(argc, argv, "cache", NULL);
    cfg.max_ngram = atoi(arg(argc, argv, "ngram", t5 ? "10" : "3"));
    cfg.whole_word = atoi(arg(argc, argv, "wholeword", "1"));
    cfg.geometric = atoi(arg(argc, argv, "geometric", t5 ? "1" : "0"));
    cfg.decoder_seq_length = atoll(arg(argc, argv, "dec", "128"));
    int64_t extra = atoll(arg(argc, argv, "extra", t5 && !bart ? "100" : "0"));
    cfg.delete_mask_prob = atof(arg(argc, argv, "delete", "0"));
    cfg.tokenizer.class_name = "_BertWordPieceTokenizer";
    cfg.tokenizer.paths[0] = vocab;
    cfg.tokenizer.n_paths = 1;
    const char *which = arg(argc, argv, "which", "train");
    pl_split s = strcmp(which, "valid") == 0 ? PL_SPLIT_VALID
                 : strcmp(which, "test") == 0 ? PL_SPLIT_TEST
                                              : PL_SPLIT_TRAIN;
    int64_t n = atoll(arg(argc, argv, "n", "-1"));
    int64_t first = atoll(arg(argc, argv, "first", "0"));
    int64_t count = atoll(arg(argc, argv, "count", "10"));
    const char *gpt2 = arg(argc, argv, "gpt2", NULL);
    char enc[4096], bpe[4096];
    if (gpt2) {
        snprintf(enc, sizeof enc, "%s/encoder.json", gpt2);
        snprintf(bpe, sizeof bpe, "%s/vocab.bpe", gpt2);
    }
    if (pl_split_parse(cfg.split, &cfg.split_matrix) != PL_OK ||
        (gpt2 ? pl_gpt2_tokenizer_open(&t, enc, bpe)
              : pl_bert_tokenizer_open_ex(&t, vocab, 1, extra)) != PL_OK) {
        rc = fail("dump");
        goto done;
    }
    if (pl_indexed_open(&low, prefix) != PL_OK) {
        rc = fail(prefix);
        goto done;
    }
    opened = 1;
    if (pl_bert_dataset_init(&ds, &low, prefix, &cfg, t, s, n) != PL_OK) {
        rc = fail("init");
        goto done;
    }
    inited = 1;
    int64_t T = cfg.seq_length, Td = bart ? T : t5 ? cfg.decoder_seq_length : 0;
    buf = pl_malloc(sizeof *buf * (size_t)(3 * T + 2 * Td));
    if (!buf) {
        fprintf(stderr, "bert_samples: out of memory\n");
        goto done;
    }
    printf("files %s %s\nbuilt %d\nlen %lld\n", ds.files[PL_BERT_DESC], ds.files[PL_BERT_SAMPLE],
           ds.built, (long long)pl_bert_dataset_len(&ds));
    pl_bert_sample smp = {buf, buf + T, buf + 2 * T, 0, 0};
    pl_encdec_sample es = {buf, 0, buf + T, buf + T + Td, 0};
    for (int64_t i = first; t5 && i < first + count && i < pl_bert_dataset_len(&ds); i++) {
        if ((bart ? pl_bart_dataset_get(&ds, i, &es) : pl_t5_dataset_get(&ds, i, &es)) != PL_OK) {
            rc = fail("get");
            goto done;
        }
        printf("sample %lld %lld %lld\n", (long long)i, (long long)es.enc_length,
               (long long)es.dec_length);
        print_row("enc", es.enc_tokens, T);
        print_row("dec", es.dec_tokens, Td);
        print_row("labels", es.labels, Td);
    }
    for (int64_t i = first; !t5 && i < first + count && i < pl_bert_dataset_len(&ds); i++) {
        if (pl_bert_dataset_get(&ds, i, &smp) != PL_OK) {
            rc = fail("get");
            goto done;
        }
        printf("sample %lld %lld %d\n", (long long)i, (long long)smp.length, smp.is_random);
        print_row("tokens", smp.tokens, T);
        print_row("types", smp.types, T);
        print_row("labels", smp.labels, T);
    }
    rc = 0;
done:
    pl_free(buf);
    if (inited)
        pl_bert_dataset_free(&ds);
    if (opened)
        pl_indexed_close(&low);
    pl_tokenizer_free(t);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 6 && strcmp(argv[1], "make") == 0)
        return make(argv[2], argv[3], argv[4], atol(argv[5]));
    if (argc >= 4 && strcmp(argv[1], "dump") == 0)
        return dump(argv[2], argv[3], argc - 4, argv + 4);
    fprintf(stderr, "usage: bert_samples make VOCAB TEXT PREFIX LINES\n"
                    "       bert_samples dump VOCAB PREFIX key=value...\n");
    return 2;
}
