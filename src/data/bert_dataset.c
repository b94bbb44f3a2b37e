/* Megatron core's BERTMaskedWordPieceDataset: mapping, cache, samples.
 * Each rule names the Megatron-LM code it reproduces (see bert_dataset.h). */
#include "data/bert_dataset.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/log.h"
#include "base/md5.h"
#include "data/tokenizer/bert_wordpiece.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pl_bert_dataset_config_defaults(pl_bert_dataset_config *c)
{
    pl_bert_dataset_config_family(c, PL_MASKED_BERT);
}

void pl_bert_dataset_config_family(pl_bert_dataset_config *c, pl_masked_family f)
{
    memset(c, 0, sizeof *c);
    c->seed = 1234;
    c->split = PL_DEFAULT_SPLIT;
    pl_split_parse(PL_DEFAULT_SPLIT, &c->split_matrix);
    c->mask_prob = 0.15;
    c->short_seq_prob = 0.1;
    c->binary_head = 1;
    c->max_ngram = 3;
    c->whole_word = 1;
    c->family = f;
    if (f != PL_MASKED_BERT) { /* pretrain_t5.py; NeMo's BARTDataset defaults */
        c->binary_head = 0;
        c->max_ngram = 10;
        c->geometric = 1;
    }
}

static const char *class_name(pl_masked_family f)
{
    return f == PL_MASKED_T5     ? "T5MaskedWordPieceDataset"
           : f == PL_MASKED_BART ? "BARTDataset"
                                 : "BERTMaskedWordPieceDataset";
}

/* ---- helpers.cpp build_mapping -------------------------------------------- */

/* get_target_sample_len: one std::mt19937 draw per call when the ratio is set. */
static int32_t target_len(int32_t short_seq_ratio, int32_t max_length, pl_np_rng *gen)
{
    if (short_seq_ratio == 0)
        return max_length;
    uint64_t r = pl_np_rng_next32(gen);
    if (r % (uint64_t)short_seq_ratio == 0)
        return (int32_t)(2 + r % (uint64_t)(max_length - 1));
    return max_length;
}

/* One pass of build_mapping_impl's two: counts the rows, and writes them when
 * maps is not NULL. Returns the number of rows. */
static uint64_t mapping_pass(const pl_indexed_header *h, int64_t doc_beg, int64_t doc_end,
                             int32_t num_epochs, uint64_t max_num_samples, int32_t max_seq_length,
                             int32_t short_seq_ratio, int32_t seed, int32_t min_num_sent,
                             uint32_t *maps)
{
    pl_np_rng gen; /* std::mt19937 rand32_gen(seed): numpy's generator and seeding */
    pl_np_rng_seed(&gen, (uint32_t)seed);
    uint64_t map_index = 0;
    for (int32_t epoch = 0; epoch < num_epochs; ++epoch) {
        if (map_index >= max_num_samples)
            break;
        if (epoch == 1 && map_index == 0)
            break; /* the caller reports it */
        for (int64_t doc = doc_beg; doc < doc_end; ++doc) {
            int64_t first = pl_indexed_doc(h, doc), last = pl_indexed_doc(h, doc + 1);
            int64_t prev_start = first, remain = last - first;
            int long_sentence = 0;
            if (remain > 1)
                for (int64_t s = first; s < last && !long_sentence; ++s)
                    long_sentence = pl_indexed_length(h, s) > PL_BERT_LONG_SENTENCE_LEN;
            if (remain < min_num_sent || long_sentence)
                continue;
            int64_t seq_len = 0;
            int32_t num_sent = 0;
            int32_t target = target_len(short_seq_ratio, max_seq_length, &gen);
            for (int64_t s = first; s < last; ++s) {
                seq_len += pl_indexed_length(h, s);
                ++num_sent;
                --remain;
                if ((seq_len >= target && remain > 1 && num_sent >= min_num_sent) || remain == 0) {
                    if (maps) {
                        maps[3 * map_index] = (uint32_t)prev_start;
                        maps[3 * map_index + 1] = (uint32_t)(s + 1);
                        maps[3 * map_index + 2] = (uint32_t)target;
                    }
                    ++map_index;
                    prev_start = s + 1;
                    target = target_len(short_seq_ratio, max_seq_length, &gen);
                    seq_len = 0;
                    num_sent = 0;
                }
            }
        }
    }
    return map_index;
}

pl_status pl_bert_build_mapping(const pl_indexed_header *h, int64_t doc_beg, int64_t doc_end,
                                int32_t num_epochs, uint64_t max_num_samples,
                                int32_t max_seq_length, double short_seq_prob, int32_t seed,
                                int32_t min_num_sent, pl_npy *out)
{
    memset(out, 0, sizeof *out);
    if (num_epochs < 1 || max_seq_length < 2 || !(short_seq_prob >= 0.0 && short_seq_prob <= 1.0) ||
        seed < 1 || seed == INT32_MAX || min_num_sent < 1 || doc_beg < 0 || doc_end <= doc_beg ||
        doc_end > h->n_documents)
        return pl_errorf(PL_ERR_ARG,
                         "BERT sample mapping: epochs %d, max length %d, short-seq-prob %g, seed "
                         "%d, documents [%lld, %lld) of %lld: expected epochs >= 1, length >= 2, "
                         "probability in [0, 1], seed in [1, 2^31 - 2], a non-empty range",
                         num_epochs, max_seq_length, short_seq_prob, seed, (long long)doc_beg,
                         (long long)doc_end, (long long)h->n_documents);
    if ((uint64_t)h->n_sequences > UINT32_MAX)
        return pl_errorf(PL_ERR_ARG,
                         "BERT sample mapping: %lld sentences; more than 2^32 (Megatron's uint64 "
                         "mapping) is not supported",
                         (long long)h->n_sequences);
    /* short_seq_ratio = static_cast<int32_t>(round(1.0 / short_seq_prob)) */
    int32_t ratio = 0;
    if (short_seq_prob > 0) {
        double r = round(1.0 / short_seq_prob);
        if (r > INT32_MAX)
            return pl_errorf(PL_ERR_ARG, "--short-seq-prob %g: 1 / p overflows int32 in "
                                         "Megatron's build_mapping; use 0 or at least 5e-10",
                             short_seq_prob);
        ratio = (int32_t)r;
    }
    uint64_t n = mapping_pass(h, doc_beg, doc_end, num_epochs, max_num_samples, max_seq_length,
                              ratio, seed, min_num_sent, NULL);
    if (n == 0 && max_num_samples > 0)
        return pl_errorf(PL_ERR_ARG,
                         "BERT sample mapping: documents [%lld, %lld) give no sample (each needs "
                         "at least %d sentences and none over %d tokens)",
                         (long long)doc_beg, (long long)doc_end, min_num_sent,
                         PL_BERT_LONG_SENTENCE_LEN);
    if (n > (uint64_t)(INT64_MAX / 3))
        return pl_errorf(PL_ERR_ARG, "BERT sample mapping: %llu samples overflow",
                         (unsigned long long)n);
    pl_status st = pl_npy_alloc(out, PL_NPY_U32, 2, (int64_t)n, 3);
    if (st != PL_OK)
        return st;
    uint32_t *maps = out->owned;
    mapping_pass(h, doc_beg, doc_end, num_epochs, max_num_samples, max_seq_length, ratio, seed,
                 min_num_sent, maps);
    /* std::mt19937_64 rand64_gen(seed + 1); j = rand64_gen() % (i + 1); swap rows. */
    pl_mt64 g64;
    pl_mt64_seed(&g64, (uint64_t)(seed + 1));
    for (int64_t i = (int64_t)n - 1; i > 0; --i) {
        int64_t j = (int64_t)(pl_mt64_next(&g64) % (uint64_t)(i + 1));
        for (int k = 0; k < 3; k++) {
            uint32_t t = maps[3 * i + k];
            maps[3 * i + k] = maps[3 * j + k];
            maps[3 * j + k] = t;
        }
    }
    return PL_OK;
}

/* ---- description (megatron_dataset.py + masked_dataset.py + bert_dataset.py) */

static pl_status add_field(pl_bytes *b, const char *key, const char *value)
{
    pl_status st = pl_bytes_append(b, ",", 1);
    if (st == PL_OK && (st = pl_dataset_describe_indent(b, 1)) == PL_OK)
        st = pl_bytes_printf(b, "\"%s\": %s", key, value);
    return st;
}

/* The base identifiers, then MaskedWordPieceDatasetConfig's key attributes
 * and classification_head (BERT) or sequence_length_decoder (T5), as
 * json.dumps(indent=4) writes them. */
static pl_status describe(pl_bytes *b, const pl_bert_dataset *ds, const pl_bert_dataset_config *cfg)
{
    pl_dataset_identity id = {class_name(ds->family), ds->path, ds->num_samples, ds->split,
                              cfg->seed, cfg->seq_length, cfg->split, &cfg->split_matrix,
                              &cfg->tokenizer};
    char mp[32], sp[32], ng[32], dl[32];
    pl_py_float_repr(cfg->mask_prob, mp);
    pl_py_float_repr(cfg->short_seq_prob, sp);
    snprintf(ng, sizeof ng, "%d", cfg->max_ngram);
    snprintf(dl, sizeof dl, "%lld", (long long)cfg->decoder_seq_length);
    pl_status st = pl_dataset_describe_head(b, &id);
    if (st == PL_OK)
        st = add_field(b, "masking_probability", mp);
    if (st == PL_OK)
        st = add_field(b, "short_sequence_probability", sp);
    if (st == PL_OK)
        st = add_field(b, "masking_max_ngram", ng);
    if (st == PL_OK)
        st = add_field(b, "masking_do_full_word", cfg->whole_word ? "true" : "false");
    if (st == PL_OK)
        st = add_field(b, "masking_do_permutation", "false");
    if (st == PL_OK)
        st = add_field(b, "masking_use_longer_ngrams", "false");
    if (st == PL_OK)
        st = add_field(b, "masking_use_geometric_distribution", cfg->geometric ? "true" : "false");
    if (st == PL_OK && ds->family == PL_MASKED_T5)
        st = add_field(b, "sequence_length_decoder", dl);
    else if (st == PL_OK && ds->family == PL_MASKED_BERT)
        st = add_field(b, "classification_head", cfg->binary_head ? "true" : "false");
    if (st == PL_OK && (st = pl_dataset_describe_indent(b, 0)) == PL_OK)
        st = pl_bytes_append(b, "}", 1);
    return st;
}

/* ---- init ------------------------------------------------------------------- */

static pl_status check_config(const pl_bert_dataset_config *cfg)
{
    if (cfg->family == PL_MASKED_BART) {
        if (cfg->seq_length < 4 || cfg->seq_length > INT32_MAX)
            return pl_errorf(PL_ERR_ARG, "--seq-length %lld: BART needs at least 4 (a target of "
                                         "at least 2, plus [BOS] / [EOS])",
                             (long long)cfg->seq_length);
        if (!(cfg->delete_mask_prob >= 0.0 && cfg->delete_mask_prob <= 1.0))
            return pl_errorf(PL_ERR_ARG, "delete_mask_prob %g: expected a value in [0, 1]",
                             cfg->delete_mask_prob);
        if (cfg->binary_head)
            return pl_errorf(PL_ERR_INTERNAL, "BART dataset with a binary head");
    } else if (cfg->family == PL_MASKED_T5) {
        /* build_mapping's targets are in [2, --encoder-seq-length - 2]. */
        if (cfg->seq_length < 4 || cfg->seq_length > INT32_MAX)
            return pl_errorf(PL_ERR_ARG, "--encoder-seq-length %lld: T5 needs at least 4 (a "
                                         "target of at least 2, plus 2)",
                             (long long)cfg->seq_length);
        if (cfg->decoder_seq_length < 1 || cfg->decoder_seq_length > INT32_MAX)
            return pl_errorf(PL_ERR_ARG, "--decoder-seq-length %lld: expected at least 1",
                             (long long)cfg->decoder_seq_length);
        if (cfg->binary_head)
            return pl_errorf(PL_ERR_INTERNAL, "T5 dataset with a binary head");
    } else if (cfg->seq_length < 5 || cfg->seq_length > INT32_MAX)
        return pl_errorf(PL_ERR_ARG, "--seq-length %lld: BERT needs at least 5 ([CLS], two "
                                     "[SEP] and a target of at least 2)",
                         (long long)cfg->seq_length);
    if (cfg->seed < 1 || cfg->seed >= INT32_MAX)
        return pl_errorf(PL_ERR_ARG, "--seed %lu: Megatron's build_mapping takes a seed in "
                                     "[1, 2^31 - 2] (an int32, and seed + 1)",
                         (unsigned long)cfg->seed);
    if (!(cfg->mask_prob > 0.0 && cfg->mask_prob < 1.0))
        return pl_errorf(PL_ERR_ARG, "--mask-prob %g: expected a value in (0, 1)", cfg->mask_prob);
    if (!(cfg->short_seq_prob >= 0.0 && cfg->short_seq_prob <= 1.0))
        return pl_errorf(PL_ERR_ARG, "--short-seq-prob %g: expected a value in [0, 1]",
                         cfg->short_seq_prob);
    if (cfg->max_ngram < 1 || cfg->max_ngram > PL_BERT_MAX_NGRAM)
        return pl_errorf(PL_ERR_ARG, "masking max n-gram %d: expected 1..%d", cfg->max_ngram,
                         PL_BERT_MAX_NGRAM);
    return PL_OK;
}

/* nprobs = 1.0 / arange(1, N + 1); nprobs /= nprobs.sum(); then, per
 * candidate, p = nprobs[:N] / nprobs[:N].sum() (the n-gram list always has
 * N entries): two normalisations, each by numpy's sum. */
static void ngram_weights(int n, double *p)
{
    double np_[PL_BERT_MAX_NGRAM];
    for (int k = 0; k < n; k++)
        np_[k] = 1.0 / (double)(k + 1);
    double s = pl_np_sum_f64(np_, n);
    for (int k = 0; k < n; k++)
        np_[k] = np_[k] / s;
    s = pl_np_sum_f64(np_, n);
    for (int k = 0; k < n; k++)
        p[k] = np_[k] / s;
}

/* NeMo's base_dataset_utils.get_train_valid_test_split_ (what its BART
 * dataset splits by): exactly three values separated by ',' (or else '/'),
 * normalised; boundaries are running sums of Python round(part * n), all
 * shifted so the last is n. Sets [beg, end) for split s. */
static pl_status nemo_split_range(const char *text, int64_t n, pl_split s, int64_t *beg,
                                  int64_t *end)
{
    char sep = strchr(text, ',') ? ',' : strchr(text, '/') ? '/' : 0;
    double w[3], sum = 0.0;
    int k = 0;
    const char *p = text;
    for (;;) {
        char *e;
        double v = strtod(p, &e);
        while (*e == ' ' || *e == '\t')
            e++;
        if (e == p || k == 3 || (*e && *e != sep))
            break;
        w[k++] = v;
        sum += v;
        if (!*e) {
            p = NULL;
            break;
        }
        p = e + 1;
    }
    if (p || k != 3 || !(sum > 0.0))
        return pl_errorf(PL_ERR_ARG, "--split '%s': NeMo's BART dataset takes three values "
                                     "separated by ',' or '/' with a positive sum",
                         text);
    int64_t idx[4] = {0, 0, 0, 0};
    for (int i = 0; i < 3; i++)
        idx[i + 1] = idx[i] + (int64_t)pl_py_round(w[i] / sum * (double)n);
    int64_t diff = idx[3] - n;
    for (int i = 1; i < 4; i++)
        idx[i] -= diff;
    *beg = idx[s];
    *end = idx[s + 1];
    return PL_OK;
}

static char *join3(const char *a, const char *b, const char *c)
{
    size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
    char *s = pl_malloc(n);
    if (s)
        snprintf(s, n, "%s%s%s", a, b, c);
    return s;
}

static pl_status tokenizer_tables(pl_bert_dataset *ds, const pl_tokenizer *tok)
{
    pl_bert_specials sp;
    pl_status st = pl_bert_tokenizer_specials(tok, &sp);
    if (st != PL_OK)
        return st;
    ds->cls = sp.cls;
    ds->sep = sp.sep;
    ds->mask = sp.mask;
    ds->pad = sp.pad;
    ds->bos = sp.bos;
    ds->eos = sp.eos;
    if (ds->family == PL_MASKED_T5) {
        /* T5MaskedWordPieceDatasetConfig: assert len(additional_special_tokens_ids) > 0 */
        if (sp.n_extra < 1)
            return pl_errorf(PL_ERR_ARG, "tokenizer %s has no sentinels: T5 needs "
                                         "--vocab-extra-ids > 0 (<extra_id_i> tokens)",
                             tok->type);
        ds->sentinels = pl_malloc(sizeof *ds->sentinels * (size_t)sp.n_extra);
        if (!ds->sentinels)
            return pl_errorf(PL_ERR_NOMEM, "out of memory for %lld sentinels",
                             (long long)sp.n_extra);
        memcpy(ds->sentinels, sp.extra, sizeof *ds->sentinels * (size_t)sp.n_extra);
        ds->n_sentinels = sp.n_extra;
    }
    ds->vocab_size = tok->vocab_size;
    ds->continuation = pl_malloc((size_t)ds->vocab_size);
    if (!ds->continuation)
        return pl_errorf(PL_ERR_NOMEM, "out of memory for a %lld-token vocabulary",
                         (long long)ds->vocab_size);
    for (int64_t id = 0; id < ds->vocab_size; id++) {
        size_t len = 0;
        const char *piece = pl_bert_tokenizer_piece(tok, (int32_t)id, &len);
        if (!piece)
            return pl_errorf(PL_ERR_INTERNAL, "BERT tokenizer has no piece for id %lld",
                             (long long)id);
        ds->continuation[id] = len >= 2 && piece[0] == '#' && piece[1] == '#';
    }
    return PL_OK;
}

static pl_status load_cached(pl_bert_dataset *ds)
{
    pl_status st = pl_gpt_cache_check_description(ds->files[PL_BERT_DESC], ds->description, "dataset");
    if (st != PL_OK)
        return st;
    st = pl_npy_load(&ds->sample_index, ds->files[PL_BERT_SAMPLE], PL_NPY_U32, 2, 3);
    if (st != PL_OK)
        return pl_gpt_cache_error(st);
    if (ds->num_samples >= 0 && ds->sample_index.shape[0] < ds->num_samples)
        return pl_errorf(PL_ERR_FORMAT, "%s: %lld samples, fewer than the %lld asked for (delete "
                                        "it to rebuild)",
                         ds->files[PL_BERT_SAMPLE], (long long)ds->sample_index.shape[0],
                         (long long)ds->num_samples);
    return PL_OK;
}

static pl_status build(pl_bert_dataset *ds, const pl_bert_dataset_config *cfg, const char *dir)
{
    /* masked_dataset.py: num_epochs = int32 max - 1 with a sample count, else 1.
     * BERT: seq - 3 ([CLS], 2 [SEP]), 2 sentences with the binary head;
     * T5: seq - 2 ("the single <bos> and single <eos>"), 1 sentence. */
    int32_t epochs = ds->num_samples >= 0 ? INT32_MAX - 1 : 1;
    uint64_t max = ds->num_samples >= 0 ? (uint64_t)ds->num_samples : UINT64_MAX;
    int t5 = ds->family != PL_MASKED_BERT; /* T5 and NeMo's BART: MAX_SEQ_LENGTH_DELTA 2 */
    pl_status st = pl_bert_build_mapping(&ds->low->h, ds->beg, ds->end, epochs, max,
                                         (int32_t)(cfg->seq_length - (t5 ? 2 : 3)),
                                         cfg->short_seq_prob, (int32_t)cfg->seed,
                                         cfg->binary_head ? 2 : 1, &ds->sample_index);
    if (st != PL_OK)
        return pl_error_wrap(st, "%s (%s split)", ds->path, pl_split_name(ds->split));
    if ((st = pl_mkdirs(dir)) != PL_OK ||
        (st = pl_npy_save(ds->files[PL_BERT_SAMPLE], &ds->sample_index)) != PL_OK ||
        (st = pl_file_write_atomic(ds->files[PL_BERT_DESC], ds->description,
                                   strlen(ds->description))) != PL_OK) {
        if (st == PL_ERR_IO)
            pl_error_wrap(st, "cannot write the index cache (set --data-cache-path to a "
                              "writable directory)");
        return st;
    }
    return PL_OK;
}

pl_status pl_bert_dataset_init(pl_bert_dataset *ds, const pl_indexed *low, const char *path,
                               const pl_bert_dataset_config *cfg, const pl_tokenizer *tok,
                               pl_split s, int64_t num_samples)
{
    static const char *suffix[PL_BERT_N_FILES] = {"description.txt", "sample_index.npy"};
    pl_status st = PL_OK;
    char *dir = NULL;
    pl_bytes desc = {0};
    double t0 = pl_time_now();
    memset(ds, 0, sizeof *ds);
    ds->low = low;
    ds->split = s;
    ds->num_samples = num_samples;
    ds->seq_length = cfg->seq_length;
    ds->seed = cfg->seed;
    ds->mask_prob = cfg->mask_prob;
    ds->binary_head = cfg->binary_head != 0;
    ds->max_ngram = cfg->max_ngram;
    ds->whole_word = cfg->whole_word != 0;
    ds->geometric = cfg->geometric != 0;
    ds->family = cfg->family;
    ds->decoder_seq_length = cfg->family == PL_MASKED_BART ? cfg->seq_length
                                                           : cfg->decoder_seq_length;
    ds->delete_mask_prob = cfg->delete_mask_prob;
    PL_TRY(check_config(cfg));
    if (!cfg->split_matrix.present[s]) {
        st = pl_errorf(PL_ERR_INTERNAL, "%s: split %s is absent from --split '%s'", path,
                       pl_split_name(s), cfg->split);
        goto fail;
    }
    ngram_weights(ds->max_ngram, ds->ngram_p);
    PL_TRY(tokenizer_tables(ds, tok));
    ds->path = pl_strdup(path);
    ds->work = pl_malloc(sizeof *ds->work *
                         (size_t)((ds->family != PL_MASKED_BERT ? 7 : 3) * cfg->seq_length + 1));
    if (!ds->path || !ds->work) {
        st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    /* The split is over documents (MaskedWordPieceDataset.numel_low_level_dataset;
     * NeMo's get_train_valid_test_split_ for BART). */
    if (ds->family == PL_MASKED_BART)
        PL_TRY(nemo_split_range(cfg->split, low->h.n_documents, s, &ds->beg, &ds->end));
    else
        pl_split_range(&cfg->split_matrix, s, low->h.n_documents, &ds->beg, &ds->end);
    if (ds->end <= ds->beg) {
        st = pl_errorf(PL_ERR_ARG,
                       "%s: --split '%s' gives the %s split no document (documents [%lld, %lld) "
                       "of %lld; Megatron fails on it too): use a larger dataset or another "
                       "--split",
                       path, cfg->split, pl_split_name(s), (long long)ds->beg, (long long)ds->end,
                       (long long)low->h.n_documents);
        goto fail;
    }
    PL_TRY(describe(&desc, ds, cfg));
    ds->description = desc.data;
    desc.data = NULL;
    pl_md5_hex(ds->description, strlen(ds->description), ds->hash);

    /* masked_dataset.py _build_sample_index: cache directory and names. */
    char sub[64];
    snprintf(sub, sizeof sub, "%s_indices", class_name(ds->family));
    dir = cfg->cache_dir ? pl_strdup(cfg->cache_dir)
                         : join3(path, "/cache/", sub);
    if (!dir) {
        st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    int hit = 1;
    for (int f = 0; f < PL_BERT_N_FILES; f++) {
        size_t n = strlen(dir) + strlen(ds->hash) + strlen(suffix[f]) + 40;
        ds->files[f] = pl_malloc(n);
        if (!ds->files[f]) {
            st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory", path);
            goto fail;
        }
        snprintf(ds->files[f], n, "%s/%s-%s-%s", dir, ds->hash, class_name(ds->family),
                 suffix[f]);
        hit = hit && pl_file_exists(ds->files[f]);
    }
    if (hit) {
        PL_TRY(load_cached(ds));
    } else {
        pl_log_debug("building the %s %s indices of %s", class_name(ds->family),
                     pl_split_name(s), path);
        PL_TRY(build(ds, cfg, dir));
        ds->built = 1;
    }
    ds->seconds = pl_time_now() - t0;
    pl_free(dir);
    return PL_OK;
fail:
    pl_bytes_free(&desc);
    pl_free(dir);
    pl_bert_dataset_free(ds);
    return st;
}

void pl_bert_dataset_free(pl_bert_dataset *ds)
{
    pl_npy_free(&ds->sample_index);
    pl_free(ds->path);
    pl_free(ds->description);
    pl_free(ds->continuation);
    pl_free(ds->sentinels);
    pl_free(ds->work);
    for (int f = 0; f < PL_BERT_N_FILES; f++)
        pl_free(ds->files[f]);
    memset(ds, 0, sizeof *ds);
}

int64_t pl_bert_dataset_len(const pl_bert_dataset *ds) { return ds->sample_index.shape[0]; }

/* ---- one sample (bert_dataset.py __getitem__) -------------------------------- */

static const char *origin(const pl_bert_dataset *ds)
{
    return ds->files[PL_BERT_SAMPLE] ? ds->files[PL_BERT_SAMPLE] : ds->path;
}

/* A segment: the concatenation of sentences [s0, s1), tokens [lo, hi) of it. */
typedef struct segment {
    int64_t s0, s1, lo, hi;
} segment;

static int64_t sentences_length(const pl_indexed_header *h, int64_t s0, int64_t s1)
{
    int64_t n = 0;
    for (int64_t s = s0; s < s1; s++)
        n += pl_indexed_length(h, s);
    return n;
}

/* Copies the tokens of seg to dst, checking each id against the vocabulary. */
static pl_status read_segment(const pl_bert_dataset *ds, const segment *seg, int32_t *dst)
{
    int64_t at = 0, got = 0;
    for (int64_t s = seg->s0; s < seg->s1 && got < seg->hi - seg->lo; s++) {
        int64_t len = pl_indexed_length(&ds->low->h, s);
        int64_t a = seg->lo > at ? seg->lo - at : 0, b = seg->hi - at < len ? seg->hi - at : len;
        if (b > a) {
            pl_status st = pl_indexed_read(ds->low, s, a, b - a, dst + got);
            if (st != PL_OK)
                return st;
            for (int64_t k = got; k < got + (b - a); k++)
                if (dst[k] < 0 || dst[k] >= ds->vocab_size)
                    return pl_errorf(PL_ERR_FORMAT,
                                     "%s: sentence %lld holds token id %d, outside the "
                                     "tokenizer's %lld ids",
                                     ds->path, (long long)s, dst[k], (long long)ds->vocab_size);
            got += b - a;
        }
        at += len;
    }
    return PL_OK;
}

/* _get_token_mask. BERT: 80% [MASK], else half a random id (token_lookup =
 * sorted(inv_vocab), the ids 0..V-1), half the original. T5 (and NeMo's
 * masking_style "t5" for BART): [MASK], no draw. */
static int32_t token_mask(const pl_bert_dataset *ds, pl_np_rng *r, int32_t original)
{
    if (ds->family != PL_MASKED_BERT || pl_np_rng_random(r) < 0.8)
        return ds->mask;
    if (pl_np_rng_random(r) >= 0.5)
        return (int32_t)pl_np_rng_randint(r, 0, ds->vocab_size);
    return original;
}

/* _create_masked_lm_predictions with permutation off (see the header). */
int64_t pl_bert_dataset_mask(const pl_bert_dataset *ds, pl_np_rng *r, int32_t *tokens,
                             int32_t *labels, int64_t len, int64_t target, int32_t *spans,
                             int32_t *work)
{
    /* pos: the positions that are not [CLS] / [SEP]; first[c]: candidate c's
     * first entry in pos (its positions are pos[first[c] .. first[c + 1])). */
    int32_t *pos = work, *first = work + len, *perm = work + 2 * len + 1;
    int64_t n_pos = 0, n_cand = 0;
    for (int64_t i = 0; i < len; i++) {
        if (tokens[i] == ds->cls || tokens[i] == ds->sep)
            continue;
        int join = ds->continuation[tokens[i]] && ds->whole_word && n_cand > 0;
        if (!join)
            first[n_cand++] = (int32_t)n_pos;
        pos[n_pos++] = (int32_t)i;
    }
    first[n_cand] = (int32_t)n_pos;

    double p = ds->mask_prob;
    double by_length = (double)(int64_t)pl_py_round((double)len * p);
    double n_maskings = p * (double)target;
    if ((by_length > 1.0 ? by_length : 1.0) < n_maskings)
        n_maskings = by_length > 1.0 ? by_length : 1.0;
    int nemo = ds->family == PL_MASKED_BART;
    if (nemo && n_maskings < 1.0) /* masking_style != "bert": max(1, num_to_predict) */
        n_maskings = 1.0;

    for (int64_t c = 0; c < n_cand; c++)
        perm[c] = (int32_t)c;
    pl_np_rng_shuffle_i32(r, perm, n_cand);

    int64_t n_masked = 0, n_spans = 0;
    for (int64_t j = 0; j < n_cand; j++) {
        if ((double)n_masked >= n_maskings)
            break;
        int64_t c = perm[j], n;
        if (ds->geometric) { /* SpanBERT: min(geometric(0.2), max n-gram) */
            n = pl_np_rng_geometric(r, 0.2);
            n = n < ds->max_ngram ? n : ds->max_ngram;
        } else {
            n = pl_np_rng_choice_p(r, ds->ngram_p, ds->max_ngram) + 1;
        }
        int64_t beg = first[c], end = 0;
        int skip = 0;
        if (nemo) { /* n, then n - 2, n - 3, ..., 1 (see the header) */
            end = first[c + n < n_cand ? c + n : n_cand];
            for (n = n - 1; (double)(n_masked + (end - beg)) > n_maskings && n != 0; n--)
                if (n - 1 >= 1)
                    end = first[c + n - 1 < n_cand ? c + n - 1 : n_cand];
            skip = (double)(n_masked + (end - beg)) > n_maskings;
        }
        for (; !nemo;) {
            int64_t last = c + n < n_cand ? c + n : n_cand; /* candidates[c : c + n] */
            end = first[last];
            n = n - 1;
            if (n_maskings >= (double)(n_masked + (end - beg)))
                break;
            if (n == 0) {
                skip = 1;
                break;
            }
        }
        if (skip)
            continue;
        int covered = 0;
        for (int64_t q = beg; q < end && !covered; q++)
            covered = labels[pos[q]] != -1;
        if (covered)
            continue;
        for (int64_t q = beg; q < end; q++) {
            int32_t at = pos[q], original = tokens[at];
            labels[at] = original;
            tokens[at] = token_mask(ds, r, original);
            n_masked++;
        }
        if (spans) { /* masked_spans sorted by first position: insert in order */
            int64_t k = n_spans++;
            for (; k > 0 && spans[2 * (k - 1)] > pos[beg]; k--) {
                spans[2 * k] = spans[2 * (k - 1)];
                spans[2 * k + 1] = spans[2 * (k - 1) + 1];
            }
            spans[2 * k] = pos[beg];
            spans[2 * k + 1] = pos[end - 1];
        }
    }
    /* Both shuffle the candidates once more here. Only BART draws after it
     * (one random() per span); the contents no longer matter. */
    if (nemo)
        pl_np_rng_shuffle_i32(r, perm, n_cand);
    return n_spans;
}

pl_status pl_bert_dataset_get(const pl_bert_dataset *ds, int64_t index, pl_bert_sample *out)
{
    const pl_indexed_header *h = &ds->low->h;
    int64_t n_samples = pl_bert_dataset_len(ds), T = ds->seq_length;
    if (index < 0 || index >= n_samples)
        return pl_errorf(PL_ERR_ARG, "%s: BERT sample %lld out of range [0, %lld)", ds->path,
                         (long long)index, (long long)n_samples);
    int64_t b = pl_npy_get(&ds->sample_index, 3 * index);
    int64_t e = pl_npy_get(&ds->sample_index, 3 * index + 1);
    int64_t target = pl_npy_get(&ds->sample_index, 3 * index + 2);
    int64_t lo = pl_indexed_doc(h, ds->beg), hi = pl_indexed_doc(h, ds->end);
    int min_sent = ds->binary_head ? 2 : 1;
    if (b < lo || e > hi || e - b < min_sent || target < 2 || target > T - 3)
        return pl_errorf(PL_ERR_FORMAT,
                         "%s: row %lld (%lld, %lld, %lld): expected sentences within [%lld, "
                         "%lld), at least %d of them, and a target in [2, %lld]",
                         origin(ds), (long long)index, (long long)b, (long long)e,
                         (long long)target, (long long)lo, (long long)hi, min_sent,
                         (long long)(T - 3));

    pl_np_rng r;
    pl_np_rng_seed(&r, (uint32_t)((uint64_t)ds->seed + (uint64_t)index));

    /* Segments A and B; with the binary head, a random pivot and a swap. */
    int64_t n = e - b, pivot = n;
    int is_random = 0;
    if (ds->binary_head) {
        pivot = 1;
        if (n >= 3)
            pivot = pl_np_rng_randint(&r, 1, n);
        is_random = pl_np_rng_random(&r) < 0.5;
    }
    segment A = {b, b + pivot, 0, 0}, B = {b + pivot, e, 0, 0};
    A.hi = sentences_length(h, A.s0, A.s1);
    B.hi = sentences_length(h, B.s0, B.s1);
    if (is_random) {
        segment t = A;
        A = B;
        B = t;
    }
    /* Trim the longer segment (B on a tie) from a random end. */
    while ((A.hi - A.lo) + (B.hi - B.lo) > target) {
        segment *cut = (A.hi - A.lo) > (B.hi - B.lo) ? &A : &B;
        if (pl_np_rng_random(&r) < 0.5)
            cut->lo++;
        else
            cut->hi--;
    }
    int64_t la = A.hi - A.lo, lb = B.hi - B.lo;

    /* [CLS] A [SEP] (B [SEP]), token types 0 then 1. */
    int32_t *tok = out->tokens;
    int64_t len = 0;
    tok[len++] = ds->cls;
    pl_status st = read_segment(ds, &A, tok + len);
    if (st != PL_OK)
        return st;
    len += la;
    tok[len++] = ds->sep;
    if (lb > 0) {
        if ((st = read_segment(ds, &B, tok + len)) != PL_OK)
            return st;
        len += lb;
        tok[len++] = ds->sep;
    }
    for (int64_t i = 0; i < T; i++)
        out->labels[i] = -1;
    pl_bert_dataset_mask(ds, &r, tok, out->labels, len, target, NULL, ds->work);
    for (int64_t i = 0; i < T; i++)
        out->types[i] = i >= la + 2 && i < len ? 1 : 0;
    for (int64_t i = len; i < T; i++)
        tok[i] = ds->pad;
    out->length = len;
    out->is_random = is_random;
    return PL_OK;
}

/* ---- the text of a T5 / BART sample (t5_dataset.py, bart_dataset.py) --------- */

pl_status pl_bert_dataset_masked_text(const pl_bert_dataset *ds, int64_t index,
                                      pl_masked_text *out)
{
    const pl_indexed_header *h = &ds->low->h;
    const char *name = ds->family == PL_MASKED_BART ? "BART" : "T5";
    int64_t n_samples = pl_bert_dataset_len(ds), T = ds->seq_length;
    if (index < 0 || index >= n_samples)
        return pl_errorf(PL_ERR_ARG, "%s: %s sample %lld out of range [0, %lld)", ds->path, name,
                         (long long)index, (long long)n_samples);
    if (ds->family == PL_MASKED_BART && (uint64_t)ds->seed + (uint64_t)index > UINT32_MAX)
        return pl_errorf(PL_ERR_ARG, "%s: BART sample %lld: seed %lu + index is past 2^32 - 1 "
                                     "(NeMo's RandomState(seed + idx) refuses it)",
                         ds->path, (long long)index, (unsigned long)ds->seed);
    int64_t b = pl_npy_get(&ds->sample_index, 3 * index);
    int64_t e = pl_npy_get(&ds->sample_index, 3 * index + 1);
    int64_t target = pl_npy_get(&ds->sample_index, 3 * index + 2);
    int64_t lo = pl_indexed_doc(h, ds->beg), hi = pl_indexed_doc(h, ds->end);
    if (b < lo || e > hi || e <= b || target < 2 || target > T - 2)
        return pl_errorf(PL_ERR_FORMAT,
                         "%s: row %lld (%lld, %lld, %lld): expected sentences within [%lld, "
                         "%lld), at least 1 of them, and a target in [2, %lld]",
                         origin(ds), (long long)index, (long long)b, (long long)e,
                         (long long)target, (long long)lo, (long long)hi, (long long)(T - 2));
    /* tokens = flattened sentences, tokens[:target] */
    int64_t len = 0;
    for (int64_t s = b; s < e && len < target; s++)
        len += pl_indexed_length(h, s);
    len = len < target ? len : target;
    out->tokens = ds->work;
    out->labels = out->tokens + T;
    out->spans = out->labels + T;
    segment seg = {b, e, 0, len};
    pl_status st = read_segment(ds, &seg, out->tokens);
    if (st != PL_OK)
        return st;
    for (int64_t i = 0; i < len; i++)
        out->labels[i] = -1;
    pl_np_rng_seed(&out->rng, (uint32_t)((uint64_t)ds->seed + (uint64_t)index));
    out->len = len;
    out->n_spans = pl_bert_dataset_mask(ds, &out->rng, out->tokens, out->labels, len, target,
                                        out->spans, out->spans + 2 * T);
    return PL_OK;
}
