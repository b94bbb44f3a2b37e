/* MegaMolBART v0.2.0's training samples (see mmb_dataset.h for the sources
 * and what differs). */
#include "data/mmb_dataset.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/vec.h"
#include "data/numpy_rng.h"
#include "data/reader.h"
#include "data/smiles_graph.h"
#include "data/span_mask.h"
#include "data/tokenizer/smiles.h"

#include <stdio.h>
#include <string.h>

/* Philox seed of the span masks: the config seed in the low half, a tag in
 * the high half so masks do not share draws with other users of the seed. */
#define MMB_MASK_SEED_TAG 0x6d6d6231ull /* "mmb1" */

struct pl_mmb_dataset {
    pl_mmb_config cfg;
    const pl_tokenizer *tok;
    const pl_mmb_molecules *mols;
    pl_smiles_mol mol;
    pl_np_rng rng;
    pl_bytes enc_smiles, dec_smiles;
    pl_ids ids;       /* tokens of one side before masking */
    int32_t *masked;  /* span mask output, cap_masked */
    uint8_t *is_mask; /* cap_masked */
    int64_t cap_masked;
};

void pl_mmb_config_default(pl_mmb_config *c)
{
    *c = (pl_mmb_config){.seq_length = 512,
                         .encoder_augment = 1,
                         .encoder_mask = 1,
                         .decoder_augment = 1,
                         .decoder_mask = 0,
                         .canonicalize_input = 1,
                         .mask_prob = 0.1,
                         .span_lambda = 3.0,
                         .seed = 42};
}

/* ---- molecules ---------------------------------------------------------- */

void pl_mmb_molecules_free(pl_mmb_molecules *m)
{
    if (!m)
        return;
    pl_free(m->text);
    pl_free(m->offset);
    pl_free(m->line);
    pl_free(m->file);
    pl_mmb_paths_free(m->paths, m->n_files);
    *m = (pl_mmb_molecules){0};
}

typedef struct mol_lists {
    pl_bytes text;
    pl_i64s offset, line, file;
} mol_lists;

static pl_status load_one(mol_lists *l, const char *path, int32_t file_index, int64_t column,
                          int64_t header_lines)
{
    pl_reader_spec spec;
    pl_reader_doc doc = {0};
    char *data = NULL;
    size_t size = 0, pos = 0;
    int64_t lines = 0, skipped = 0;
    pl_reader_record rec;
    pl_status st = pl_reader_spec_init(&spec, "auto", path);
    if (st != PL_OK)
        return st;
    if (spec.format != PL_READER_CSV)
        return pl_errorf(PL_ERR_ARG, "%s: expected a .csv, .tsv or .smi file of SMILES", path);
    spec.column = column;
    spec.n_keys = 1;
    PL_TRY(pl_file_read_all(path, &data, &size));
    while (pl_reader_next(&spec, data, size, &pos, &lines, &rec)) {
        if (skipped < header_lines) {
            skipped++;
            continue;
        }
        st = pl_reader_parse(&spec, rec.text, rec.len, &doc);
        if (st != PL_OK) {
            st = pl_error_wrap(st, "%s:%lld", path, (long long)rec.line + 1);
            goto fail;
        }
        if (doc.blank)
            continue;
        if (doc.len[0] == 0) {
            st = pl_errorf(PL_ERR_FORMAT, "%s:%lld: empty SMILES in field %lld", path,
                           (long long)rec.line + 1, (long long)column);
            goto fail;
        }
        if (memchr(doc.text[0], '\0', doc.len[0])) {
            st = pl_errorf(PL_ERR_FORMAT, "%s:%lld: NUL byte in the SMILES", path,
                           (long long)rec.line + 1);
            goto fail;
        }
        PL_TRY(pl_i64s_push(&l->offset, (int64_t)l->text.n));
        PL_TRY(pl_i64s_push(&l->line, rec.line + 1));
        PL_TRY(pl_i64s_push(&l->file, file_index));
        PL_TRY(pl_bytes_append(&l->text, doc.text[0], doc.len[0]));
        PL_TRY(pl_bytes_append(&l->text, "", 1));
    }
fail:
    pl_reader_doc_free(&doc);
    pl_free(data);
    return st;
}

pl_status pl_mmb_molecules_load(pl_mmb_molecules *m, const char *const *paths, int32_t n_paths,
                                int64_t column, int64_t header_lines)
{
    mol_lists l = {{0}, {0}, {0}, {0}};
    pl_status st = PL_OK;
    *m = (pl_mmb_molecules){0};
    if (n_paths < 1 || column < 0 || header_lines < 0)
        return pl_errorf(
            PL_ERR_ARG,
            "MegaMolBART molecules: %d files, column %lld, %lld header lines: expected "
            "at least one file, column >= 0, header lines >= 0",
            n_paths, (long long)column, (long long)header_lines);
    m->paths = pl_calloc((size_t)n_paths, sizeof *m->paths);
    if (!m->paths)
        return pl_errorf(PL_ERR_NOMEM, "MegaMolBART molecules: out of memory");
    m->n_files = n_paths;
    for (int32_t i = 0; i < n_paths; i++) {
        m->paths[i] = pl_strdup(paths[i]);
        if (!m->paths[i]) {
            st = pl_errorf(PL_ERR_NOMEM, "MegaMolBART molecules: out of memory");
            goto fail;
        }
        PL_TRY(load_one(&l, paths[i], i, column, header_lines));
    }
    m->n = l.offset.n;
    m->offset = l.offset.data;
    m->line = l.line.data;
    m->text = l.text.data;
    l.offset.data = l.line.data = NULL;
    l.text.data = NULL;
    if (m->n > 0) {
        m->file = pl_malloc((size_t)m->n * sizeof *m->file);
        if (!m->file) {
            st = pl_errorf(PL_ERR_NOMEM, "MegaMolBART molecules: out of memory");
            goto fail;
        }
        for (int64_t i = 0; i < m->n; i++)
            m->file[i] = (int32_t)l.file.data[i];
    }
    pl_i64s_free(&l.file);
    return PL_OK;
fail:
    pl_bytes_free(&l.text);
    pl_i64s_free(&l.offset);
    pl_i64s_free(&l.line);
    pl_i64s_free(&l.file);
    pl_mmb_molecules_free(m);
    return st;
}

void pl_mmb_paths_free(char **paths, int32_t n_paths)
{
    if (!paths)
        return;
    for (int32_t i = 0; i < n_paths; i++)
        pl_free(paths[i]);
    pl_free(paths);
}

/* Reads the decimal digits at *s into *v and their count into *width. */
static int read_digits(const char **s, int64_t *v, int *width)
{
    *v = 0;
    *width = 0;
    while (**s >= '0' && **s <= '9' && *width < 18) {
        *v = *v * 10 + (**s - '0');
        (*s)++;
        (*width)++;
    }
    return *width > 0;
}

pl_status pl_mmb_split_paths(const char *dataset_path, const char *split, const char *spec,
                             char ***paths, int32_t *n_paths)
{
    *paths = NULL;
    *n_paths = 0;
    const char *open = strchr(spec, '['), *close = open ? strchr(open, ']') : NULL;
    int64_t lo = 0, hi = 0;
    int wlo = 0, whi = 0;
    size_t prefix = open ? (size_t)(open - spec) : strlen(spec);
    if (open) {
        const char *p = open + 1;
        int ok = close && read_digits(&p, &lo, &wlo) && strncmp(p, "..", 2) == 0;
        if (ok) {
            p += 2;
            ok = read_digits(&p, &hi, &whi) && p == close && close[1] == '\0' && lo <= hi &&
                 hi - lo < 1000000;
        }
        if (!ok)
            return pl_errorf(PL_ERR_ARG,
                             "MegaMolBART dataset.%s '%s': expected a file name (x000) or an "
                             "inclusive range (x[000..146])",
                             split, spec);
    }
    int64_t n = open ? hi - lo + 1 : 1;
    char **out = pl_calloc((size_t)n, sizeof *out);
    if (!out)
        return pl_errorf(PL_ERR_NOMEM, "MegaMolBART dataset paths: out of memory");
    for (int64_t i = 0; i < n; i++) {
        pl_bytes b = {0};
        pl_status st = open ? pl_bytes_printf(&b, "%s/%s/%.*s%0*lld.csv", dataset_path, split,
                                              (int)prefix, spec, wlo, (long long)(lo + i))
                            : pl_bytes_printf(&b, "%s/%s/%s.csv", dataset_path, split, spec);
        if (st != PL_OK) {
            pl_mmb_paths_free(out, (int32_t)n);
            return st;
        }
        out[i] = b.data;
    }
    *paths = out;
    *n_paths = (int32_t)n;
    return PL_OK;
}

/* ---- the dataset -------------------------------------------------------- */

typedef struct tok_ctx {
    pl_ids *ids;
    int map_unknown;
    int64_t unknown;
    const char *bad; /* first token not in the vocabulary */
    size_t bad_len;
} tok_ctx;

static pl_status on_token(void *ctx, const char *tok, size_t len, int32_t id)
{
    tok_ctx *c = ctx;
    if (id == PL_SMILES_UNK && !(len == 1 && tok[0] == '?')) {
        c->unknown++;
        if (c->map_unknown)
            return pl_ids_push(c->ids, id);
        c->bad = tok;
        c->bad_len = len;
        return PL_ERR_FORMAT;
    }
    return pl_ids_push(c->ids, id);
}

pl_status pl_mmb_dataset_init(pl_mmb_dataset **out, const pl_mmb_config *cfg,
                              const pl_tokenizer *tok, const pl_mmb_molecules *mols)
{
    *out = NULL;
    if (cfg->seq_length < 1 || cfg->seq_length > (1 << 24))
        return pl_errorf(PL_ERR_ARG, "MegaMolBART seq_length %lld: expected 1 .. 2^24",
                         (long long)cfg->seq_length);
    if (!(cfg->mask_prob >= 0.0 && cfg->mask_prob <= 1.0))
        return pl_errorf(PL_ERR_ARG, "MegaMolBART mask_prob %g: expected [0, 1]", cfg->mask_prob);
    if (!(cfg->span_lambda > 0.0 && cfg->span_lambda <= 30.0))
        return pl_errorf(PL_ERR_ARG, "MegaMolBART span_lambda %g: expected (0, 30]",
                         cfg->span_lambda);
    pl_ids none = {0};
    tok_ctx probe = {&none, 0, 0, NULL, 0};
    if (pl_smiles_tokenizer_each(tok, "", 0, on_token, &probe) != PL_OK)
        return pl_error_wrap(PL_ERR_ARG, "MegaMolBART dataset");
    static const struct {
        const char *tok;
        int32_t id;
    } specials[] = {{"<PAD>", PL_SMILES_PAD},
                    {"^", PL_SMILES_BEGIN},
                    {"&", PL_SMILES_END},
                    {"<MASK>", PL_SMILES_MASK}};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++)
        if (pl_tokenizer_token_id(tok, specials[i].tok) != specials[i].id)
            return pl_errorf(PL_ERR_ARG,
                             "MegaMolBART dataset: the tokenizer's '%s' has id %d, expected %d "
                             "(a SmilesTokenizer with MegaMolBART's vocabulary)",
                             specials[i].tok, pl_tokenizer_token_id(tok, specials[i].tok),
                             specials[i].id);
    if (mols->n < 1)
        return pl_errorf(PL_ERR_ARG, "MegaMolBART dataset: no molecules (%d files read)",
                         mols->n_files);
    pl_mmb_dataset *d = pl_calloc(1, sizeof *d);
    if (!d)
        return pl_errorf(PL_ERR_NOMEM, "MegaMolBART dataset: out of memory");
    d->cfg = *cfg;
    d->tok = tok;
    d->mols = mols;
    *out = d;
    return PL_OK;
}

void pl_mmb_dataset_free(pl_mmb_dataset *d)
{
    if (!d)
        return;
    pl_smiles_mol_free(&d->mol);
    pl_bytes_free(&d->enc_smiles);
    pl_bytes_free(&d->dec_smiles);
    pl_ids_free(&d->ids);
    pl_free(d->masked);
    pl_free(d->is_mask);
    pl_free(d);
}

void pl_mmb_dataset_dims(const pl_mmb_dataset *d, int64_t *Te, int64_t *Td)
{
    *Te = d->cfg.seq_length;
    *Td = d->cfg.seq_length + 1;
}

static const char *mol_path(const pl_mmb_dataset *d, int64_t m)
{
    return d->mols->paths[d->mols->file[m]];
}

/* d->ids = the tokens of s; *unknown += tokens mapped to '?' (map_unknown),
 * else a token outside the vocabulary is an error naming molecule m. */
static pl_status tokenize(pl_mmb_dataset *d, int64_t m, const char *s, size_t len, const char *what,
                          int map_unknown, int64_t *unknown)
{
    tok_ctx c = {&d->ids, map_unknown, 0, NULL, 0};
    d->ids.n = 0;
    pl_status st = pl_smiles_tokenizer_each(d->tok, s, len, on_token, &c);
    *unknown += c.unknown;
    if (st == PL_OK || !c.bad)
        return st;
    return pl_errorf(
        PL_ERR_FORMAT, "%s:%lld: token '%.*s' of the %s SMILES %s is not in the vocabulary%s",
        mol_path(d, m), (long long)d->mols->line[m], (int)c.bad_len, c.bad, what, s,
        strcmp(what, "input") ? " (build it from augmented SMILES, or map_unknown)" : "");
}

static pl_status parse(pl_mmb_dataset *d, int64_t m, const char **s)
{
    *s = d->mols->text + d->mols->offset[m];
    pl_status st = pl_smiles_parse(&d->mol, *s, strlen(*s));
    if (st != PL_OK)
        return pl_error_wrap(st, "%s:%lld", mol_path(d, m), (long long)d->mols->line[m]);
    return PL_OK;
}

/* Room for the span mask's output, which pl_span_mask cuts at cap. */
static pl_status reserve_masked(pl_mmb_dataset *d, int64_t cap)
{
    if (cap <= d->cap_masked)
        return PL_OK;
    int32_t *a = pl_realloc(d->masked, (size_t)cap * sizeof *a);
    if (!a)
        return pl_errorf(PL_ERR_NOMEM, "MegaMolBART dataset: out of memory");
    d->masked = a;
    uint8_t *b = pl_realloc(d->is_mask, (size_t)cap);
    if (!b)
        return pl_errorf(PL_ERR_NOMEM, "MegaMolBART dataset: out of memory");
    d->is_mask = b;
    d->cap_masked = cap;
    return PL_OK;
}

/* One side: d->ids masked (or not) and cut to seq_length into out[0..*n).
 * *masks counts the <MASK> tokens written. */
static pl_status side(pl_mmb_dataset *d, int mask, uint64_t stream, int32_t *out, int64_t *n,
                      int64_t *masks, int *truncated)
{
    const int64_t T = d->cfg.seq_length;
    *masks = 0;
    if (!mask) {
        *n = d->ids.n < T ? d->ids.n : T;
        *truncated = d->ids.n > T;
        memcpy(out, d->ids.data, (size_t)*n * sizeof *out);
        return PL_OK;
    }
    pl_status st = reserve_masked(d, T);
    if (st != PL_OK)
        return st;
    pl_span_mask_cfg mc = {d->cfg.mask_prob, d->cfg.span_lambda, PL_SMILES_MASK};
    uint64_t seed = (uint64_t)d->cfg.seed | MMB_MASK_SEED_TAG << 32;
    st = pl_span_mask(d->ids.data, d->ids.n, &mc, seed, stream, d->masked, d->is_mask, T, n,
                      truncated);
    if (st != PL_OK)
        return st;
    memcpy(out, d->masked, (size_t)*n * sizeof *out);
    for (int64_t i = 0; i < *n; i++)
        *masks += d->is_mask[i];
    return PL_OK;
}

pl_status pl_mmb_dataset_sample(pl_mmb_dataset *d, int64_t index, pl_encdec_sample *s,
                                pl_mmb_sample_info *info)
{
    const pl_mmb_config *c = &d->cfg;
    const int64_t Te = c->seq_length, Td = c->seq_length + 1;
    if (index < 0)
        return pl_errorf(PL_ERR_ARG, "MegaMolBART sample index %lld: expected >= 0",
                         (long long)index);
    const int64_t m = index % d->mols->n;
    const char *smiles;
    pl_status st = parse(d, m, &smiles);
    if (st != PL_OK)
        return st;
    pl_np_rng_seed(&d->rng, (uint32_t)((uint64_t)c->seed + (uint64_t)index));
    d->enc_smiles.n = d->dec_smiles.n = 0;
    st = c->encoder_augment ? pl_smiles_write_random(&d->mol, &d->rng, &d->enc_smiles)
                            : pl_bytes_append(&d->enc_smiles, smiles, strlen(smiles));
    if (st == PL_OK)
        st = c->decoder_augment
                 ? pl_smiles_write_random(&d->mol, &d->rng, &d->dec_smiles)
                 : pl_bytes_append(&d->dec_smiles, d->enc_smiles.data, d->enc_smiles.n);
    if (st != PL_OK)
        return pl_error_wrap(st, "%s:%lld", mol_path(d, m), (long long)d->mols->line[m]);

    int64_t enc_masks = 0, dec_masks = 0, n = 0, unknown = 0;
    int enc_trunc = 0, dec_trunc = 0;
    st = tokenize(d, m, d->enc_smiles.data, d->enc_smiles.n, "encoder", c->map_unknown, &unknown);
    if (st != PL_OK)
        return st;
    const int64_t enc_unmasked = d->ids.n;
    st = side(d, c->encoder_mask, 2 * (uint64_t)index, s->enc_tokens, &n, &enc_masks, &enc_trunc);
    if (st != PL_OK)
        return st;
    s->enc_length = n;
    for (int64_t i = n; i < Te; i++)
        s->enc_tokens[i] = PL_SMILES_PAD;

    st = tokenize(d, m, d->dec_smiles.data, d->dec_smiles.n, "decoder", c->map_unknown, &unknown);
    if (st != PL_OK)
        return st;
    /* dec_tokens[1..] doubles as the buffer of the side's tokens. */
    st = side(d, c->decoder_mask, 2 * (uint64_t)index + 1, s->dec_tokens + 1, &n, &dec_masks,
              &dec_trunc);
    if (st != PL_OK)
        return st;
    s->dec_tokens[0] = PL_SMILES_BEGIN;
    memcpy(s->labels, s->dec_tokens + 1, (size_t)n * sizeof *s->labels);
    s->labels[n] = PL_SMILES_END;
    s->dec_length = n + 1;
    for (int64_t i = n + 1; i < Td; i++) {
        s->dec_tokens[i] = PL_SMILES_PAD;
        s->labels[i] = -1;
    }
    if (info)
        *info = (pl_mmb_sample_info){.molecule = m,
                                     .enc_smiles = d->enc_smiles.data,
                                     .dec_smiles = d->dec_smiles.data,
                                     .enc_unmasked = enc_unmasked,
                                     .enc_masks = enc_masks,
                                     .enc_truncated = enc_trunc,
                                     .dec_truncated = dec_trunc,
                                     .unknown = unknown};
    return PL_OK;
}

pl_status pl_mmb_dataset_validate(pl_mmb_dataset *d)
{
    for (int64_t m = 0; m < d->mols->n; m++) {
        const char *s;
        int64_t unknown = 0;
        pl_status st = parse(d, m, &s);
        if (st == PL_OK)
            st = tokenize(d, m, s, strlen(s), "input", 0, &unknown);
        if (st != PL_OK)
            return st;
    }
    return PL_OK;
}
