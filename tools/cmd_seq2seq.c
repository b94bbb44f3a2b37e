/* plait seq2seq: decoding of an encoder-decoder checkpoint (--model t5 or bart),
 * greedy, sampled (--temperature, --top-k, --top-p) or by beam search
 * (--beam-size, --length-penalty, --early-stopping: Hugging Face's
 * generate(num_beams=...), model/beam.h), with the self- and
 * cross-attention KV caches (model/encdec_generate.h).
 * Each line of --input is a source (text, tokenized with the checkpoint's
 * tokenizer, cut to the encoder's length), and the decoder's output is written as
 * one line of text. With --mmb (a MegaMolBART checkpoint, SMILES tokenizer),
 * --input is a file of SMILES read as training reads them (.csv: MegaMolBART's
 * "zinc_id,SMILES"; else the SMILES first on each line) and the encoder input of
 * molecule i is MegaMolBART's training corruption of it (data/mmb_dataset.h: a
 * random atom order, span-masked, keyed by --seed and i; the checkpoint's
 * MegaMolBART switches, mask_prob and span_lambda as trained, unless
 * --encoder-augment, --encoder-mask, --decoder-augment, --decoder-mask,
 * --mask-prob or --span-lambda say otherwise); each
 * output line is "input SMILES <TAB> encoder input <TAB> generated SMILES", what
 * tests/scripts and bench/megamolbart_eval.sh score with RDKit. With --mmb the
 * run ends with plait's own figures (data/smiles_eval.h: validity,
 * reconstruction, uniqueness of the best output of each molecule): a summary
 * line on standard error and, with --eval-json FILE, a JSON object. With --ids each
 * input line is space-separated token ids and each output the ids decoded. With
 * --num-return N (beam search) each source gives N lines, best first, each its
 * output line, a tab and the hypothesis' score (N = 1 too, when given). With
 * --batch-size S the beam search runs S sources together (model/beam.h's
 * pl_beam_batch: their beams the rows of one decoder step), giving the same output.
 * Under mpirun with the checkpoint's TP size as ranks (rank 0 writes). */
#include "commands.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/vec.h"
#include "ckpt/checkpoint.h"
#include "data/mmb_dataset.h"
#include "data/smiles_eval.h"
#include "data/tokenizer/tokenizer.h"
#include "model/beam.h"
#include "model/encdec_generate.h"
#include "model/spec.h"
#include "parallel/dist.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef struct s2s_opts {
    const char *load, *input, *output;
    const char *lp_form, *eval_json;
    int64_t max_new_tokens, seed, limit, top_k, beam_size, num_return, batch_size;
    double mask_prob, temperature, top_p, length_penalty;
    int mmb, early_stopping, ids;
    const char *mmb_switch[5]; /* "true", "false", NULL: the checkpoint's */
    double span_lambda;
    int mask_given, lambda_given;
    int beam, scores; /* --beam-size, --num-return given */
} s2s_opts;

#define F(x) offsetof(s2s_opts, x)
static const pl_option s2s_options[] = {
    {"--load", PL_OPT_STRING, NULL, F(load), "checkpoint directory (t5 or bart)", NULL,
     PL_OPT_REQUIRED},
    {"--input", PL_OPT_STRING, NULL, F(input), "sources, one per line (--mmb: SMILES file)",
     NULL, PL_OPT_REQUIRED},
    {"--output", PL_OPT_STRING, "-", F(output), "where to write ('-': standard output)", NULL, 0},
    {"--max-new-tokens", PL_OPT_INT, "0", F(max_new_tokens),
     "tokens to generate at most (0: the decoder's length)", NULL, 0},
    {"--limit", PL_OPT_INT, "0", F(limit), "the first N sources only (0: all)", NULL, 0},
    {"--mmb", PL_OPT_BOOL, NULL, F(mmb),
     "MegaMolBART: the encoder input is the training corruption of each molecule", NULL, 0},
    {"--mask-prob", PL_OPT_FLOAT, "0.1", F(mask_prob),
     "--mmb: span-masking probability (default: the checkpoint's, else 0.1)", NULL, 0},
    {"--span-lambda", PL_OPT_FLOAT, "3", F(span_lambda),
     "--mmb: mean masked span length (default: the checkpoint's, else 3)", NULL, 0},
    {"--encoder-augment", PL_OPT_CHOICE, NULL, F(mmb_switch[0]),
     "--mmb: the encoder's SMILES in a random atom order (default: the checkpoint's, else true)",
     "true|false", 0},
    {"--encoder-mask", PL_OPT_CHOICE, NULL, F(mmb_switch[1]),
     "--mmb: span-mask the encoder (default: the checkpoint's, else true)", "true|false", 0},
    {"--decoder-augment", PL_OPT_CHOICE, NULL, F(mmb_switch[2]),
     "--mmb: the decoder's side as trained (no effect on decoding; default: the checkpoint's)",
     "true|false", 0},
    {"--decoder-mask", PL_OPT_CHOICE, NULL, F(mmb_switch[3]),
     "--mmb: the decoder's side as trained (no effect on decoding; default: the checkpoint's)",
     "true|false", 0},
    {"--seed", PL_OPT_INT, "1234", F(seed), "sampling's seed, and --mmb's corruption's", NULL, 0},
    {"--temperature", PL_OPT_FLOAT, "0", F(temperature), "softmax temperature (0: greedy)", NULL, 0},
    {"--top-k", PL_OPT_INT, "0", F(top_k), "sample among the k most likely (0: all)", NULL, 0},
    {"--top-p", PL_OPT_FLOAT, "1.0", F(top_p), "nucleus sampling mass (1: off)", NULL, 0},
    {"--beam-size", PL_OPT_INT, "1", F(beam_size),
     "beam search with this many beams (Hugging Face's num_beams; not with --temperature > 0)",
     NULL, 0},
    {"--length-penalty", PL_OPT_FLOAT, "1.0", F(length_penalty),
     "beam search: a hypothesis scores sum(log p) / len^A (Hugging Face's length_penalty)", NULL,
     0},
    {"--length-penalty-form", PL_OPT_CHOICE, "hf", F(lp_form),
     "beam search: hf len^A, or gnmt ((5 + len) / 6)^A (NeMo's beam search penalty)", "hf|gnmt",
     0},
    {"--early-stopping", PL_OPT_BOOL, NULL, F(early_stopping),
     "beam search: stop once --beam-size hypotheses are finished (Hugging Face's "
     "early_stopping=True)", NULL, 0},
    {"--num-return", PL_OPT_INT, "1", F(num_return),
     "beam search: write the N best hypotheses per source, each with its score (given: the "
     "scores written, N = 1 too)", NULL, 0},
    {"--batch-size", PL_OPT_INT, "1", F(batch_size),
     "beam search: sources searched together, their beams the rows of one decoder step (the "
     "output is the same)", NULL, 0},
    {"--eval-json", PL_OPT_STRING, NULL, F(eval_json),
     "--mmb: write validity, reconstruction and uniqueness (plait's molecule checks) to this "
     "JSON file", NULL, 0},
    {"--ids", PL_OPT_BOOL, NULL, F(ids),
     "sources and outputs as space-separated token ids instead of text", NULL, 0},
};
#undef F
static const pl_command_spec s2s_cmd = {
    "seq2seq", "Decoding of an encoder-decoder checkpoint, greedy, sampled or by beam search "
               "(KV-cached self- "
               "and cross-attention; under mpirun with the checkpoint's TP size as ranks).",
    s2s_options, (int)(sizeof s2s_options / sizeof *s2s_options), 0};

typedef struct s2s {
    pl_comm tp;
    int tp_up;
    pl_registry reg;
    float *params;
    pl_gemm *gemm;
    pl_encdec_generator gen;
    int gen_up;
    pl_beam_batch beam;
    int beam_up;
    int32_t *bsrc;     /* beam search: (batch, Te) the batch's sources */
    int64_t *blen;     /* [batch] their lengths */
    const int32_t **bpre; /* [batch] the decoder prefix of each ([BOS]) */
    int64_t *bplen;    /* [batch] its length (1) */
    pl_tokenizer *tok;
    pl_model_config cfg;
    pl_mmb_molecules mols;
    pl_mmb_dataset *mmb;
    pl_smiles_eval eval;
    int32_t *src, *out, *dec, *lab;
    pl_ids ids;
    pl_bytes text, line;
    char *strings;
    FILE *fp;
} s2s;

static pl_status setup(s2s *s, const s2s_opts *o)
{
    pl_status st = PL_OK;
    int64_t it = -1;
    PL_TRY(pl_ckpt_latest(o->load, &it));
    if (it == -1)
        return pl_errorf(PL_ERR_ARG, "--load %s: no latest_checkpointed_iteration.txt", o->load);
    pl_ckpt_meta meta;
    PL_TRY(pl_ckpt_read_config(o->load, it, &s->cfg, &meta, &s->strings));
    if (!pl_model_is_encdec(&s->cfg))
        return pl_errorf(PL_ERR_UNSUPPORTED, "--load %s: a %s checkpoint; seq2seq decodes an "
                         "encoder-decoder (t5, bart); `plait generate` continues a causal model",
                         o->load, pl_family_get(s->cfg.family)->name);
    if (meta.tp != s->tp.size)
        return pl_errorf(PL_ERR_ARG, "--load %s: saved with --tensor-model-parallel-size %d: run "
                         "seq2seq on %d ranks, not %d", o->load, meta.tp, meta.tp, s->tp.size);
    if (!meta.tokenizer_type)
        return pl_errorf(PL_ERR_ARG, "--load %s: the checkpoint names no tokenizer", o->load);
    PL_TRY(pl_tokenizer_open(&s->tok, &(pl_tokenizer_spec){meta.tokenizer_type, meta.vocab_file,
                                                           meta.merge_file, meta.tokenizer_model,
                                                           meta.vocab_extra_ids,
                                                           meta.legacy_tokenizer}));
    pl_registry_init(&s->reg, s->tp.size, s->tp.rank, 0);
    PL_TRY(pl_model_register(&s->reg, &s->cfg, 1));
    s->params = pl_calloc((size_t)s->reg.numel, sizeof(float));
    const int64_t Te = s->cfg.seq_length, Td = s->cfg.dec_seq_length;
    s->src = pl_calloc((size_t)(Te + 3 * Td), sizeof(int32_t));
    if (!s->params || !s->src)
        return pl_errorf(PL_ERR_NOMEM, "out of memory for the model");
    s->out = s->src + Te, s->dec = s->out + Td, s->lab = s->dec + Td;
    pl_ckpt_buffers buf = {&s->reg, s->params, NULL, NULL, NULL, 0};
    char *more = NULL;
    st = pl_ckpt_load(o->load, it, &s->cfg, &buf, &meta, &more);
    pl_free(more);
    PL_TRY(st);
    PL_TRY(pl_gemm_init(&s->gemm));
    const int64_t S = o->beam ? o->batch_size : 1;
    if (o->beam)
        PL_TRY(pl_beam_check_width(o->beam_size, s->cfg.vocab_size));
    PL_TRY(pl_encdec_generator_init(&s->gen, &s->cfg, &s->reg, s->params,
                                    s->tp.size > 1 ? &s->tp : NULL, s->gemm,
                                    o->beam ? S * o->beam_size : 1));
    s->gen_up = 1;
    if (o->beam) {
        const pl_beam_opts bo = {o->beam_size, o->length_penalty, o->early_stopping,
                                 strcmp(o->lp_form, "gnmt") ? PL_BEAM_HF : PL_BEAM_GNMT};
        PL_TRY(pl_beam_batch_init(&s->beam, &s->gen.dec, &bo, S));
        s->beam_up = 1;
        s->bsrc = pl_calloc((size_t)(S * Te), sizeof *s->bsrc);
        s->blen = pl_calloc((size_t)(2 * S), sizeof *s->blen);
        s->bpre = pl_calloc((size_t)S, sizeof *s->bpre);
        if (!s->bsrc || !s->blen || !s->bpre)
            return pl_errorf(PL_ERR_NOMEM, "out of memory for --batch-size %lld", (long long)S);
        s->bplen = s->blen + S;
    }
    if (o->mmb) {
        const size_t n = strlen(o->input);
        const int csv = n >= 4 && strcmp(o->input + n - 4, ".csv") == 0;
        pl_mmb_config c;
        pl_mmb_config_default(&c);
        c.seq_length = Te;
        c.seed = (uint32_t)o->seed;
        if (meta.mmb) { /* the training run's switches (ckpt/manifest_mmb.c) */
            c.encoder_augment = meta.mmb_switch[0], c.encoder_mask = meta.mmb_switch[1];
            c.decoder_augment = meta.mmb_switch[2], c.decoder_mask = meta.mmb_switch[3];
            c.canonicalize_input = meta.mmb_switch[4];
            c.mask_prob = meta.mmb_mask_prob, c.span_lambda = meta.mmb_span_lambda;
        }
        int *sw[4] = {&c.encoder_augment, &c.encoder_mask, &c.decoder_augment, &c.decoder_mask};
        for (int k = 0; k < 4; k++)
            if (o->mmb_switch[k])
                *sw[k] = strcmp(o->mmb_switch[k], "true") == 0;
        if (o->mask_given || !meta.mmb)
            c.mask_prob = o->mask_prob;
        if (o->lambda_given || !meta.mmb)
            c.span_lambda = o->span_lambda;
        if (s->tp.rank == 0)
            fprintf(stderr, "seq2seq --mmb: encoder_augment %d encoder_mask %d mask_prob %g "
                    "span_lambda %g (%s)\n", c.encoder_augment, c.encoder_mask, c.mask_prob,
                    c.span_lambda, meta.mmb ? "the checkpoint's unless given" : "defaults");
        PL_TRY(pl_mmb_molecules_load(&s->mols, &o->input, 1, csv ? 1 : 0, csv ? 1 : 0));
        PL_TRY(pl_mmb_dataset_init(&s->mmb, &c, s->tok, &s->mols));
    }
fail:
    return st;
}

/* The source of line or molecule i into s->src; its length. */
static pl_status source(s2s *s, const s2s_opts *o, int64_t i, const char *text, int64_t *len)
{
    const int64_t Te = s->cfg.seq_length;
    if (o->mmb) {
        pl_encdec_sample x = {s->src, 0, s->dec, s->lab, 0};
        pl_status st = pl_mmb_dataset_sample(s->mmb, i, &x, NULL);
        *len = x.enc_length;
        return st;
    }
    s->ids.n = 0;
    pl_status st = PL_OK;
    if (o->ids) { /* space-separated ids, each in the vocabulary */
        const char *bad = NULL;
        st = pl_ids_parse(&s->ids, text, s->cfg.vocab_size, &bad);
        if (st == PL_ERR_ARG)
            return pl_errorf(PL_ERR_FORMAT, "%s:%lld: --ids: '%.20s' is not a token id "
                             "(0 to %lld)", o->input, (long long)i + 1, bad,
                             (long long)s->cfg.vocab_size - 1);
        if (st)
            return st;
    } else {
        PL_TRY(pl_tokenizer_encode(s->tok, text, strlen(text), &s->ids));
    }
    if (s->ids.n == 0)
        return pl_errorf(PL_ERR_FORMAT, "%s:%lld: an empty source", o->input, (long long)i + 1);
    *len = s->ids.n < Te ? s->ids.n : Te;
    memcpy(s->src, s->ids.data, (size_t)*len * sizeof(int32_t));
fail:
    return st;
}

/* The output tokens as text (or ids) appended to s->line. */
static pl_status append_output(s2s *s, const s2s_opts *o, const int32_t *tok, int64_t n)
{
    pl_status st = PL_OK;
    if (o->ids) {
        for (int64_t k = 0; k < n; k++) {
            char num[16];
            const int w = snprintf(num, sizeof num, k ? " %d" : "%d", (int)tok[k]);
            PL_TRY(pl_bytes_append(&s->line, num, (size_t)w));
        }
        return PL_OK;
    }
    s->text.n = 0;
    PL_TRY(pl_tokenizer_decode(s->tok, tok, n, &s->text));
    PL_TRY(pl_bytes_append(&s->line, s->text.data, s->text.n));
fail:
    return st;
}

/* The beam flags' values, and their combinations with the others; given: which
 * flags the user set. */
static pl_status check_flags(const s2s_opts *o, const unsigned char *given)
{
    if (o->temperature < 0 || o->top_k < 0 || o->top_p <= 0 || o->top_p > 1)
        return pl_errorf(PL_ERR_ARG, "plait seq2seq: need --temperature >= 0, --top-k >= 0 and "
                         "0 < --top-p <= 1");
    if (!o->beam) {
        static const char *const beam_only[] = {"--length-penalty", "--length-penalty-form",
                                                "--early-stopping", "--num-return"};
        int any = 0;
        for (size_t k = 0; k < sizeof beam_only / sizeof *beam_only; k++)
            any |= given[pl_options_index(&s2s_cmd, beam_only[k])];
        if (any || given[pl_options_index(&s2s_cmd, "--batch-size")])
            return pl_errorf(PL_ERR_ARG, "--length-penalty, --length-penalty-form, "
                             "--early-stopping, --num-return and --batch-size are beam "
                             "search's: give --beam-size too");
        return PL_OK;
    }
    if (o->batch_size < 1)
        return pl_errorf(PL_ERR_ARG, "--batch-size %lld: need at least 1", (long long)o->batch_size);
    return pl_beam_check_flags(o->beam_size, o->num_return, o->temperature, o->top_k, o->top_p);
}

static pl_status write_line(s2s *s, const s2s_opts *o, int64_t i, const int32_t *src,
                            int64_t len, const int32_t *tok, int64_t got, double score);

/* Beam search of the batch's k sources (the last one source i), and their lines. */
/* --mmb: the decoded molecule of source i (tok, got) into the evaluation's figures. */
static pl_status mmb_eval(s2s *s, const s2s_opts *o, int64_t i, const int32_t *tok, int64_t got)
{
    pl_status st = PL_OK;
    if (!o->mmb)
        return PL_OK;
    const char *in = s->mols.text + s->mols.offset[i];
    s->text.n = 0;
    PL_TRY(pl_tokenizer_decode(s->tok, tok, got, &s->text));
    PL_TRY(pl_smiles_eval_add(&s->eval, in, strlen(in), s->text.data, s->text.n, NULL, NULL));
fail:
    return st;
}

static pl_status beam_batch(s2s *s, const s2s_opts *o, int64_t i, int64_t k, int32_t bos,
                            int32_t eos, int64_t max_new)
{
    pl_status st = PL_OK;
    const int64_t Te = s->cfg.seq_length;
    for (int64_t j = 0; j < k; j++)
        s->bpre[j] = &bos, s->bplen[j] = 1;
    PL_TRY(pl_beam_batch_search(&s->beam, &s->gen.dec, k, s->bpre, s->bplen, eos, max_new,
                                pl_encdec_positions(&s->gen)));
    for (int64_t j = 0; j < k && s->tp.rank == 0; j++)
        for (int64_t h = 0; h < o->num_return; h++) {
            const int32_t *tok;
            int64_t got;
            double score;
            pl_beam_result(&s->beam.src[j], h, &tok, &got, &score);
            PL_TRY(write_line(s, o, i - k + 1 + j, s->bsrc + j * Te, s->blen[j], tok, got, score));
            if (h == 0)
                PL_TRY(mmb_eval(s, o, i - k + 1 + j, tok, got));
        }
fail:
    return st;
}

static double frac(int64_t a, int64_t b) { return b > 0 ? (double)a / (double)b : 0.0; }

/* --mmb's figures: a summary line on stderr, and the --eval-json file. */
static pl_status report_eval(s2s *s, const s2s_opts *o)
{
    pl_smiles_eval_summary r;
    pl_status st = pl_smiles_eval_summarize(&s->eval, &r);
    if (st != PL_OK)
        return st;
    fprintf(stderr, "molecules %lld: valid %lld (%.1f%%), reconstructed %lld (%.1f%%), unique "
            "%lld of the valid (%.1f%%)%s\n", (long long)r.n, (long long)r.valid,
            100 * frac(r.valid, r.n), (long long)r.reconstructed, 100 * frac(r.reconstructed, r.n),
            (long long)r.unique, 100 * frac(r.unique, r.valid),
            r.inputs_invalid ? " (some inputs fail plait's molecule checks)" : "");
    if (!o->eval_json)
        return PL_OK;
    FILE *fp = fopen(o->eval_json, "w");
    if (!fp)
        return pl_errorf(PL_ERR_IO, "--eval-json %s: cannot open for writing: %s", o->eval_json,
                         strerror(errno));
    fprintf(fp, "{\"molecules\": %lld, \"valid\": %lld, \"reconstructed\": %lld, "
            "\"unique_valid\": %lld, \"inputs_invalid\": %lld, \"valid_fraction\": %.6f, "
            "\"reconstructed_fraction\": %.6f, \"unique_valid_fraction\": %.6f}\n",
            (long long)r.n, (long long)r.valid, (long long)r.reconstructed, (long long)r.unique,
            (long long)r.inputs_invalid, frac(r.valid, r.n), frac(r.reconstructed, r.n),
            frac(r.unique, r.valid));
    if (fclose(fp))
        return pl_errorf(PL_ERR_IO, "--eval-json %s: write failed", o->eval_json);
    return PL_OK;
}

static pl_status decode_all(s2s *s, const s2s_opts *o)
{
    pl_status st = PL_OK;
    const int smiles = !strcmp(s->tok->type, "SmilesTokenizer");
    int32_t bos = pl_tokenizer_token_id(s->tok, smiles ? "^" : "[BOS]");
    int32_t eos = pl_tokenizer_token_id(s->tok, smiles ? "&" : "[EOS]");
    const int32_t t5_eos = pl_tokenizer_token_id(s->tok, "</s>");
    if (bos < 0 && !smiles && t5_eos >= 0 && s->cfg.block.pos == PL_POS_RELATIVE) {
        bos = 0; /* transformers' T5: decoder_start_token_id 0 (<pad>), eos </s> */
        eos = t5_eos;
    }
    if (bos < 0 || eos < 0)
        return pl_errorf(PL_ERR_ARG, "the tokenizer has no %s / %s tokens%s", smiles ? "^" : "[BOS]",
                         smiles ? "&" : "[EOS]",
                         smiles ? "" : " (nor </s>, with which a T5 with relative positions starts "
                                       "from token 0 as transformers' T5 does)");
    const int64_t Td = s->cfg.dec_seq_length;
    const int64_t max_new = o->max_new_tokens > 0 && o->max_new_tokens < Td ? o->max_new_tokens
                                                                             : Td;
    char *all = NULL;
    size_t size = 0;
    int64_t n_src = s->mols.n;
    if (!o->mmb) {
        PL_TRY(pl_file_read_all(o->input, &all, &size));
        n_src = 0;
        for (size_t k = 0; k < size; k++)
            n_src += all[k] == '\n' || (k + 1 == size && all[k] != '\n');
    }
    if (o->limit > 0 && o->limit < n_src)
        n_src = o->limit;
    char *cursor = all;
    int64_t k = 0; /* beam search: sources in the batch */
    for (int64_t i = 0; i < n_src; i++) {
        const char *text = NULL;
        if (!o->mmb) {
            char *nl = strchr(cursor, '\n');
            if (nl)
                *nl = 0;
            text = cursor;
            cursor = nl ? nl + 1 : cursor + strlen(cursor);
        }
        int64_t len = 0, got = 0;
        PL_TRY(source(s, o, i, text, &len));
        const pl_decode_opts how = {o->temperature, o->top_p, o->top_k, (uint64_t)o->seed,
                                    (uint64_t)i};
        if (o->beam) { /* its cross-attention cache into the batch, searched when full */
            PL_TRY(pl_encdec_encode(&s->gen, s->src, len));
            PL_TRY(pl_beam_batch_take_source(&s->beam, k, &s->gen.dec));
            memcpy(s->bsrc + k * s->cfg.seq_length, s->src, (size_t)len * sizeof *s->src);
            s->blen[k++] = len;
            if (k == s->beam.S || i + 1 == n_src) {
                PL_TRY(beam_batch(s, o, i, k, bos, eos, max_new));
                k = 0;
            }
            continue;
        }
        PL_TRY(pl_encdec_decode(&s->gen, s->src, len, bos, eos, max_new, &how, s->out, &got));
        if (s->tp.rank == 0) {
            PL_TRY(write_line(s, o, i, s->src, len, s->out, got, 0));
            PL_TRY(mmb_eval(s, o, i, s->out, got));
        }
    }
    if (s->tp.rank == 0 && fflush(s->fp))
        st = pl_errorf(PL_ERR_IO, "--output %s: write failed", o->output);
    if (st == PL_OK && s->tp.rank == 0 && o->mmb)
        st = report_eval(s, o);
fail:
    pl_free(all);
    return st;
}

/* One output line: (--mmb: the molecule and its encoder input,) the output (and
 * with --num-return its score), tab-separated. */
static pl_status write_line(s2s *s, const s2s_opts *o, int64_t i, const int32_t *src,
                            int64_t len, const int32_t *tok, int64_t got, double score)
{
    pl_status st = PL_OK;
    s->line.n = 0;
    if (o->mmb) {
            const char *in = s->mols.text + s->mols.offset[i];
            PL_TRY(pl_bytes_append(&s->line, in, strlen(in)));
            PL_TRY(pl_bytes_append(&s->line, "\t", 1));
            s->text.n = 0;
            PL_TRY(pl_tokenizer_decode(s->tok, src, len, &s->text));
            PL_TRY(pl_bytes_append(&s->line, s->text.data, s->text.n));
            PL_TRY(pl_bytes_append(&s->line, "\t", 1));
        }
    PL_TRY(append_output(s, o, tok, got));
    if (o->scores) {
        char num[32];
        const int w = snprintf(num, sizeof num, "\t%.9g", score);
        PL_TRY(pl_bytes_append(&s->line, num, (size_t)w));
    }
    fprintf(s->fp, "%.*s\n", (int)s->line.n, s->line.data);
fail:
    return st;
}

static void s2s_free(s2s *s)
{
    if (s->fp && s->fp != stdout)
        fclose(s->fp);
    if (s->beam_up)
        pl_beam_batch_free(&s->beam);
    pl_free(s->bsrc);
    pl_free(s->blen);
    pl_free(s->bpre);
    if (s->gen_up)
        pl_encdec_generator_free(&s->gen);
    pl_mmb_dataset_free(s->mmb);
    pl_smiles_eval_free(&s->eval);
    pl_mmb_molecules_free(&s->mols);
    pl_gemm_free(s->gemm);
    pl_free(s->params);
    pl_free(s->src);
    pl_registry_free(&s->reg);
    pl_tokenizer_free(s->tok);
    pl_ids_free(&s->ids);
    pl_bytes_free(&s->text);
    pl_bytes_free(&s->line);
    pl_free(s->strings);
    if (s->tp_up)
        pl_comm_free(&s->tp);
}

int plait_cmd_seq2seq(int argc, char **argv)
{
    s2s_opts o;
    unsigned char given[sizeof s2s_options / sizeof *s2s_options] = {0};
    int rc = plait_parse(&s2s_cmd, &o, argc, argv, given);
    if (rc >= 0)
        return rc;
    o.beam = given[pl_options_index(&s2s_cmd, "--beam-size")];
    o.scores = given[pl_options_index(&s2s_cmd, "--num-return")];
    o.mask_given = given[pl_options_index(&s2s_cmd, "--mask-prob")];
    o.lambda_given = given[pl_options_index(&s2s_cmd, "--span-lambda")];
    pl_status bad = check_flags(&o, given);
    static const char *const mmb_only[] = {"--mask-prob", "--span-lambda", "--encoder-augment",
                                            "--encoder-mask", "--decoder-augment",
                                            "--decoder-mask"};
    for (size_t k = 0; k < sizeof mmb_only / sizeof *mmb_only && !bad && !o.mmb; k++)
        if (given[pl_options_index(&s2s_cmd, mmb_only[k])])
            bad = pl_errorf(PL_ERR_ARG, "%s is MegaMolBART's corruption: give --mmb too",
                            mmb_only[k]);
    if (!bad && o.eval_json && !o.mmb)
        bad = pl_errorf(PL_ERR_ARG, "--eval-json scores molecules: give --mmb too");
    if (bad)
        return plait_report(bad);
    s2s s;
    memset(&s, 0, sizeof s);
    pl_dist dist;
    pl_status st = pl_dist_init(&dist, NULL, NULL);
    if (st)
        return plait_report(st);
    if (!(st = pl_comm_init(&s.tp, MPI_COMM_WORLD, "tp", 0)))
        s.tp_up = 1;
    if (!st)
        st = pl_comm_agree(&s.tp, setup(&s, &o));
    if (!st && s.tp.rank == 0) {
        s.fp = strcmp(o.output, "-") ? fopen(o.output, "w") : stdout;
        if (!s.fp)
            st = pl_errorf(PL_ERR_IO, "--output %s: cannot open for writing", o.output);
    }
    if (!st)
        st = pl_comm_agree(&s.tp, st);
    if (!st)
        st = pl_comm_agree(&s.tp, decode_all(&s, &o));
    rc = st ? (s.tp.rank == 0 ? plait_report(st) : plait_exit_code(st)) : 0;
    s2s_free(&s);
    pl_dist_finalize(&dist);
    return rc;
}
