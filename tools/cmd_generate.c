/* plait generate: sample text from a checkpoint with a KV cache.
 *
 * Alone (no launcher) it runs without MPI and needs a checkpoint saved with
 * --tensor-model-parallel-size 1. Under mpirun or srun with as many ranks as
 * the checkpoint's TP size, rank r loads mp_rank_r and the ranks generate
 * together as one tensor-parallel group (model/generate.h); every rank draws
 * the same tokens and rank 0 prints them. Every step that one rank could fail
 * alone is agreed on (pl_comm_agree), so all ranks stop together with the
 * same status and rank 0 reports it.
 *
 * --beam-size W searches instead (model/beam.h: Hugging Face's
 * generate(num_beams=W, length_penalty, early_stopping), one KV cache per beam,
 * the W beams fed as the rows of one step)
 * and prints the prompt and the best continuation, or with --num-return N the N
 * best, one a line, each followed by a tab and its score. --ids: the prompt is
 * space-separated token ids and the output the continuation's ids. */
#include "commands.h"

#include "base/alloc.h"
#include "base/log.h"
#include "base/rng.h"
#include "ckpt/checkpoint.h"
#include "data/tokenizer/tokenizer.h"
#include "model/beam.h"
#include "model/generate.h"
#include "model/spec.h"
#include "parallel/dist.h"
#include "parallel/grid.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef struct gen_opts {
    const char *load, *prompt, *tokenizer_type, *vocab_file, *merge_file, *tokenizer_model;
    const char *lp_form;
    int64_t max_new_tokens, top_k, seed, beam_size, num_return;
    double temperature, top_p, length_penalty;
    int early_stopping, ids;
    int beam, scores; /* --beam-size, --num-return given */
} gen_opts;

#define F(x) offsetof(gen_opts, x)
static const pl_option gen_options[] = {
    {"--load", PL_OPT_STRING, NULL, F(load), "checkpoint directory", NULL, PL_OPT_REQUIRED},
    {"--prompt", PL_OPT_STRING, "", F(prompt), "text to continue", NULL, 0},
    {"--max-new-tokens", PL_OPT_INT, "64", F(max_new_tokens), "tokens to generate", NULL, 0},
    {"--temperature", PL_OPT_FLOAT, "1.0", F(temperature), "softmax temperature (0: greedy)", NULL, 0},
    {"--top-k", PL_OPT_INT, "0", F(top_k), "sample among the k most likely (0: all)", NULL, 0},
    {"--top-p", PL_OPT_FLOAT, "1.0", F(top_p), "nucleus sampling mass (1: off)", NULL, 0},
    {"--seed", PL_OPT_INT, "1234", F(seed), "sampling seed", NULL, 0},
    {"--tokenizer-type", PL_OPT_STRING, NULL, F(tokenizer_type), "override the checkpoint's tokenizer", NULL, 0},
    {"--vocab-file", PL_OPT_STRING, NULL, F(vocab_file), "override the checkpoint's vocabulary file", NULL, 0},
    {"--merge-file", PL_OPT_STRING, NULL, F(merge_file), "override the checkpoint's merges file", NULL, 0},
    {"--tokenizer-model", PL_OPT_STRING, NULL, F(tokenizer_model), "override the checkpoint's tokenizer model", NULL, 0},
    {"--beam-size", PL_OPT_INT, "1", F(beam_size),
     "beam search with this many beams (Hugging Face's num_beams; not with --temperature)", NULL,
     0},
    {"--length-penalty", PL_OPT_FLOAT, "1.0", F(length_penalty),
     "beam search: a hypothesis scores sum(log p) / len^A, len counting the prompt", NULL, 0},
    {"--length-penalty-form", PL_OPT_CHOICE, "hf", F(lp_form),
     "beam search: hf len^A, or gnmt ((5 + len) / 6)^A", "hf|gnmt", 0},
    {"--early-stopping", PL_OPT_BOOL, NULL, F(early_stopping),
     "beam search: stop once --beam-size hypotheses are finished", NULL, 0},
    {"--num-return", PL_OPT_INT, "1", F(num_return),
     "beam search: print the N best, each with its score", NULL, 0},
    {"--ids", PL_OPT_BOOL, NULL, F(ids),
     "the prompt as space-separated token ids; print the new tokens' ids", NULL, 0},
};
static const pl_command_spec gen_cmd = {"generate", "Generate text from a checkpoint (KV-cached; "
                                        "under mpirun with the checkpoint's TP size as ranks).",
                                        gen_options, (int)(sizeof gen_options / sizeof *gen_options), 0};

/* The processes generating together: MPI and a grid whose one TP group is the
 * whole world when a launcher started this process, nothing otherwise. */
typedef struct gen_world {
    int mpi, grid_up;
    pl_dist dist;
    pl_grid grid;
    int rank, size;
    pl_comm *all; /* the world communicator, NULL without MPI (pl_comm_agree: no-op) */
} gen_world;

static pl_status world_init(gen_world *w)
{
    memset(w, 0, sizeof *w);
    w->size = 1;
    pl_dist_launcher l;
    pl_dist_launcher_detect(&l);
    if (l.size <= 0)
        return PL_OK;
    pl_status st = pl_dist_init(&w->dist, NULL, NULL);
    if (st)
        return st;
    w->mpi = 1;
    w->rank = w->dist.rank;
    w->size = w->dist.size;
    /* collective; every rank returns the same status */
    if ((st = pl_grid_init(&w->grid, MPI_COMM_WORLD, w->size, 1)))
        return st;
    w->grid_up = 1;
    w->all = pl_grid_comm(&w->grid, PL_GRID_WORLD);
    return PL_OK;
}

static void world_free(gen_world *w)
{
    if (w->grid_up)
        pl_grid_free(&w->grid);
    if (w->mpi)
        pl_dist_finalize(&w->dist);
}

/* The checkpoint's TP size must be the number of ranks (one TP group); its
 * pipeline stages, any number, are read into the one model. */
static pl_status check_layout(const gen_opts *o, int64_t it, const pl_ckpt_meta *meta,
                              const gen_world *w)
{
    /* pipeline stages: every stage's file is read (pl_ckpt_load), one model here */
    if (meta->tp == w->size)
        return PL_OK;
    if (meta->tp == 1)
        return pl_errorf(PL_ERR_ARG, "--load %s: iteration %lld was saved with "
                         "--tensor-model-parallel-size 1: run generate as one process (without "
                         "mpirun, or mpirun -n 1), not %d ranks", o->load, (long long)it, w->size);
    return pl_errorf(PL_ERR_ARG, "--load %s: iteration %lld was saved with "
                     "--tensor-model-parallel-size %d: launch generate with %d ranks (mpirun -n "
                     "%d plait generate ...); this run has %d", o->load, (long long)it, meta->tp,
                     meta->tp, meta->tp, w->size);
}

/* Model state of one rank: its registry slice, parameters and generator. */
typedef struct gen_model {
    pl_registry reg;
    float *params, *scratch; /* scratch: 2 V floats for the sampler */
    pl_gemm *gemm;
    pl_generator gen;
} gen_model;

static pl_status model_load(gen_model *m, const gen_opts *o, int64_t it, const pl_model_config *cfg,
                            gen_world *w)
{
    pl_status st = PL_OK;
    char *strings = NULL;
    pl_ckpt_meta meta;
    pl_comm *tp = w->grid_up ? pl_grid_comm(&w->grid, PL_GRID_TP) : NULL;
    pl_registry_init(&m->reg, w->size, w->rank, 0);
    PL_TRY(pl_model_register(&m->reg, cfg, 1));
    m->params = pl_calloc((size_t)m->reg.numel, sizeof(float));
    m->scratch = pl_malloc((size_t)(2 * cfg->vocab_size) * sizeof(float));
    if (!m->params || !m->scratch) {
        st = pl_errorf(PL_ERR_NOMEM, "out of memory for the model");
        goto fail;
    }
    pl_ckpt_buffers buf = {&m->reg, m->params, NULL, NULL, NULL, 0};
    PL_TRY(pl_ckpt_load(o->load, it, cfg, &buf, &meta, &strings));
    PL_TRY(pl_gemm_init(&m->gemm));
    /* beam search: the beams are the rows of one step */
    if (o->beam)
        PL_TRY(pl_beam_check_width(o->beam_size, cfg->vocab_size));
    PL_TRY(pl_generator_init_rows(&m->gen, cfg, &m->reg, m->params, tp, m->gemm,
                                  o->beam ? o->beam_size : 1));
fail:
    pl_free(strings);
    return st;
}

static void model_free(gen_model *m)
{
    pl_generator_free(&m->gen);
    pl_gemm_free(m->gemm);
    pl_free(m->params);
    pl_free(m->scratch);
    pl_registry_free(&m->reg);
}

/* The prompt's ids, with room reserved for every token to come, and the text
 * buffer of one token's decoding: the generation loop then allocates nothing
 * (a token whose text exceeds the reserve would grow it once). */
static pl_status prompt_ids(pl_tokenizer *tok, const gen_opts *o, const pl_model_config *cfg,
                            pl_ids *ids, pl_bytes *text)
{
    pl_status st = PL_OK;
    if (o->ids) {
        const char *bad = NULL;
        st = pl_ids_parse(ids, o->prompt, cfg->vocab_size, &bad);
        if (st == PL_ERR_ARG)
            return pl_errorf(PL_ERR_ARG, "--prompt with --ids: '%.20s' is not a token id (0 "
                             "to %lld)", bad, (long long)cfg->vocab_size - 1);
    } else {
        st = pl_tokenizer_encode(tok, o->prompt, strlen(o->prompt), ids);
    }
    if (!st && ids->n == 0 && tok->eod >= 0) /* an empty prompt starts after an end of document */
        st = pl_ids_push(ids, tok->eod);
    if (st)
        return st;
    if (ids->n + o->max_new_tokens > cfg->max_positions)
        return pl_errorf(PL_ERR_ARG, "prompt (%lld tokens) + --max-new-tokens %lld exceeds the "
                         "model's %lld positions", (long long)ids->n, (long long)o->max_new_tokens,
                         (long long)cfg->max_positions);
    st = pl_ids_reserve(ids, ids->n + o->max_new_tokens);
    return st ? st : pl_bytes_reserve(text, 4096);
}

/* The new tokens as text or ids, then with --num-return the score, one line. */
static pl_status print_hypothesis(const gen_opts *o, pl_tokenizer *tok, pl_ids *ids,
                                  int64_t n_prompt, pl_bytes *text, double score)
{
    pl_status st = PL_OK;
    if (o->ids) {
        for (int64_t k = n_prompt; k < ids->n; k++)
            printf(k > n_prompt ? " %d" : "%d", (int)ids->data[k]);
    } else {
        text->n = 0;
        PL_TRY(pl_tokenizer_decode(tok, ids->data, ids->n, text));
        fwrite(text->data, 1, text->n, stdout);
    }
    if (o->scores)
        printf("\t%.9g", score);
    fputc('\n', stdout);
fail:
    return st;
}

/* Beam search after the prompt ids->data[0, n_prompt); rank 0 prints. */
static pl_status beam_generate(const gen_opts *o, gen_world *w, gen_model *m, pl_tokenizer *tok,
                               pl_ids *ids, pl_bytes *text)
{
    pl_status st = PL_OK;
    pl_beam b;
    memset(&b, 0, sizeof b);
    const pl_beam_opts bo = {o->beam_size, o->length_penalty, o->early_stopping,
                             strcmp(o->lp_form, "gnmt") ? PL_BEAM_HF : PL_BEAM_GNMT};
    PL_TRY(pl_comm_agree(w->all, pl_beam_init(&b, &m->gen, &bo)));
    const int64_t n_prompt = ids->n;
    PL_TRY(pl_comm_agree(w->all, pl_beam_search(&b, &m->gen, ids->data, n_prompt, tok->eod,
                                                o->max_new_tokens, m->gen.cfg.max_positions)));
    pl_status printed = PL_OK; /* rank 0's, agreed on */
    for (int64_t h = 0; h < o->num_return && w->rank == 0 && !printed; h++) {
        const int32_t *new;
        int64_t n;
        double score;
        pl_beam_result(&b, h, &new, &n, &score);
        ids->n = n_prompt;
        printed = pl_ids_append(ids, new, n);
        if (!printed)
            printed = print_hypothesis(o, tok, ids, n_prompt, text, score);
    }
    fflush(stdout);
    st = pl_comm_agree(w->all, printed);
fail:
    pl_beam_free(&b);
    return st;
}

/* The beam flags against the others (given: which flags the user set). */
static pl_status check_beam_flags(const gen_opts *o, const unsigned char *given)
{
    static const char *const beam_only[] = {"--length-penalty", "--length-penalty-form",
                                            "--early-stopping", "--num-return"};
    if (!o->beam) {
        for (size_t k = 0; k < sizeof beam_only / sizeof *beam_only; k++)
            if (given[pl_options_index(&gen_cmd, beam_only[k])])
                return pl_errorf(PL_ERR_ARG, "%s is beam search's: give --beam-size too",
                                 beam_only[k]);
        return PL_OK;
    }
    /* the default temperature (1) is sampling's: only one given contradicts beam search */
    const int temp = given[pl_options_index(&gen_cmd, "--temperature")];
    return pl_beam_check_flags(o->beam_size, o->num_return, temp ? o->temperature : 0,
                               o->top_k, o->top_p);
}

static pl_status generate(const gen_opts *o, gen_world *w)
{
    pl_status st = PL_OK;
    char *strings = NULL;
    pl_tokenizer *tok = NULL;
    gen_model m;
    memset(&m, 0, sizeof m);
    pl_ids ids = {0};
    pl_bytes text = {0};
    pl_comm *all = w->all;
    if (o->max_new_tokens < 0 || o->temperature < 0 || o->top_k < 0 || o->top_p <= 0 || o->top_p > 1)
        return pl_errorf(PL_ERR_ARG, "plait generate: need --max-new-tokens >= 0, --temperature "
                         ">= 0, --top-k >= 0 and 0 < --top-p <= 1");
    int64_t it = -1;
    st = pl_ckpt_latest(o->load, &it);
    if (!st && it == -1)
        st = pl_errorf(PL_ERR_ARG, "--load %s: no latest_checkpointed_iteration.txt", o->load);
    PL_TRY(pl_comm_agree(all, st));
    pl_model_config cfg;
    pl_ckpt_meta meta;
    PL_TRY(pl_comm_agree(all, pl_ckpt_read_config(o->load, it, &cfg, &meta, &strings)));
    PL_TRY(pl_comm_agree(all, check_layout(o, it, &meta, w)));
    if (cfg.block.mask != PL_MASK_CAUSAL) { /* before the tokenizer: nothing to continue */
        st = pl_errorf(PL_ERR_UNSUPPORTED, "--load %s: a %s checkpoint; generation needs a causal "
                       "model (gpt, llama)", o->load, pl_family_get(cfg.family)->name);
        goto fail;
    }
    const char *tt = o->tokenizer_type ? o->tokenizer_type : meta.tokenizer_type;
    const char *vf = o->vocab_file ? o->vocab_file : meta.vocab_file;
    const char *mf = o->merge_file ? o->merge_file : meta.merge_file;
    const char *tm = o->tokenizer_model ? o->tokenizer_model : meta.tokenizer_model;
    if (!tt)
        st = pl_errorf(PL_ERR_ARG, "--load %s: the checkpoint names no tokenizer; give "
                       "--tokenizer-type and --vocab-file", o->load);
    else
        st = pl_tokenizer_open(&tok, &(pl_tokenizer_spec){tt, vf, mf, tm, meta.vocab_extra_ids,
                                                          meta.legacy_tokenizer});
    PL_TRY(pl_comm_agree(all, st));
    PL_TRY(pl_comm_agree(all, model_load(&m, o, it, &cfg, w)));
    PL_TRY(pl_comm_agree(all, prompt_ids(tok, o, &cfg, &ids, &text)));
    if (w->mpi && w->rank == 0)
        pl_log_info("plait generate: world %d = tp %d x dp 1 x pp 1 | %s/iter_%07lld, "
                    "mp_rank_00..%02d", w->size, w->size, o->load, (long long)it, w->size - 1);
    if (o->beam) {
        st = beam_generate(o, w, &m, tok, &ids, &text);
        goto fail;
    }
    const int print = w->rank == 0;
    if (print && !o->ids)
        fputs(o->prompt, stdout);
    const int64_t n_prompt = ids.n;
    /* Each new token is shown as what it adds to the decoded text of all ids so
     * far, so tokenizers that join tokens (PretokenizedTokenizer's spaces,
     * WordPiece's "##", SentencePiece's leading "▁") print as a whole decode would. */
    size_t shown = 0;
    if (print && !o->ids) {
        text.n = 0;
        PL_TRY(pl_tokenizer_decode(tok, ids.data, n_prompt, &text));
        shown = text.n;
    }
    for (int64_t pos = 0; pos < n_prompt + o->max_new_tokens - 1; pos++) {
        /* collective over TP; a failure is agreed on before anyone goes on */
        PL_TRY(pl_comm_agree(all, pl_generator_step(&m.gen, ids.data[pos], pos)));
        if (pos + 1 < n_prompt)
            continue;
        /* the logits are the same bits on every rank (all-gathered), and so
         * are u and therefore the token */
        double u = pl_rng_uniform((uint64_t)o->seed, 0x67656e, (uint64_t)pos);
        int32_t next = pl_sample_logits(m.gen.logits, cfg.vocab_size, o->temperature, o->top_k,
                                        o->top_p, u, m.scratch);
        if (next == tok->eod)
            break;
        ids.data[ids.n++] = next; /* reserved by prompt_ids */
        pl_status decoded = PL_OK;
        if (print && o->ids) {
            printf(ids.n > n_prompt + 1 ? " %d" : "%d", (int)next);
        } else if (print) {
            text.n = 0;
            decoded = pl_tokenizer_decode(tok, ids.data, ids.n, &text);
            if (!decoded && text.n > shown) {
                fwrite(text.data + shown, 1, text.n - shown, stdout);
                fflush(stdout);
                shown = text.n;
            }
        }
        PL_TRY(pl_comm_agree(all, decoded));
    }
    if (print)
        fputc('\n', stdout);
fail:
    pl_bytes_free(&text);
    pl_ids_free(&ids);
    model_free(&m);
    pl_free(strings);
    pl_tokenizer_free(tok);
    return st;
}

int plait_cmd_generate(int argc, char **argv)
{
    gen_opts o;
    unsigned char given[sizeof gen_options / sizeof *gen_options] = {0};
    int rc = plait_parse(&gen_cmd, &o, argc, argv, given);
    if (rc >= 0)
        return rc;
    o.beam = given[pl_options_index(&gen_cmd, "--beam-size")];
    o.scores = given[pl_options_index(&gen_cmd, "--num-return")];
    pl_status bad = check_beam_flags(&o, given);
    if (bad)
        return plait_report(bad);
    gen_world w;
    pl_status st = world_init(&w);
    if (!st)
        st = generate(&o, &w);
    /* the status is agreed on: rank 0 speaks for all */
    rc = st ? (w.rank == 0 ? plait_report(st) : plait_exit_code(st)) : 0;
    world_free(&w);
    return rc;
}
