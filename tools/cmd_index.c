/* plait data index: build (or reuse) the GPT sample indices Megatron-LM would
 * build for the same flags, in Megatron's cache files, and print a summary;
 * optionally the first samples each data-parallel rank would read. */
#include "commands.h"

#include "base/alloc.h"
#include "data/blended.h"
#include "data/sampler.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef struct index_opts {
    pl_strlist data_path;
    const char *split;
    int64_t seq_length;
    int64_t train_iters, train_samples;
    int64_t global_batch_size, micro_batch_size;
    int64_t eval_interval, eval_iters;
    int64_t seed;
    const char *data_cache_path;
    double surplus;
    const char *tokenizer_type, *vocab_file, *merge_file;
    int64_t dp_size, consumed_samples;
    int64_t print_samples, print_tokens;
    const char *print_split;
} index_opts;

enum { OPT_SPLIT = 1, OPT_GBS = 5 };

static const pl_option index_table[] = {
    {"--data-path", PL_OPT_LIST, NULL, offsetof(index_opts, data_path),
     "dataset prefixes, or weight-prefix pairs: 0.3 A 0.7 B", NULL, PL_OPT_REQUIRED},
    {"--split", PL_OPT_STRING, NULL, offsetof(index_opts, split),
     "train,valid,test weights, e.g. 969,30,1 or 98/2/0 (default: \"" PL_DEFAULT_SPLIT "\")", NULL,
     0},
    {"--seq-length", PL_OPT_INT, NULL, offsetof(index_opts, seq_length),
     "tokens per sample (each sample reads seq-length + 1)", NULL, PL_OPT_REQUIRED},
    {"--train-iters", PL_OPT_INT, NULL, offsetof(index_opts, train_iters),
     "training iterations (train samples = iters x global batch)", NULL, 0},
    {"--train-samples", PL_OPT_INT, NULL, offsetof(index_opts, train_samples),
     "training samples (instead of --train-iters)", NULL, 0},
    {"--global-batch-size", PL_OPT_INT, NULL, offsetof(index_opts, global_batch_size),
     "samples per iteration (default: micro batch x data-parallel size)", NULL, 0},
    {"--micro-batch-size", PL_OPT_INT, "1", offsetof(index_opts, micro_batch_size),
     "samples per micro batch and data-parallel rank", NULL, 0},
    {"--eval-interval", PL_OPT_INT, "1000", offsetof(index_opts, eval_interval),
     "iterations between evaluations", NULL, 0},
    {"--eval-iters", PL_OPT_INT, "100", offsetof(index_opts, eval_iters),
     "iterations per evaluation", NULL, 0},
    {"--seed", PL_OPT_INT, "1234", offsetof(index_opts, seed),
     "numpy RandomState seed of the shuffles", NULL, 0},
    {"--data-cache-path", PL_OPT_STRING, NULL, offsetof(index_opts, data_cache_path),
     "directory of the index caches (default: PREFIX/cache/GPTDataset_indices; blends are "
     "cached only here)",
     NULL, 0},
    {"--mid-level-dataset-surplus", PL_OPT_FLOAT, "0.005", offsetof(index_opts, surplus),
     "extra fraction of samples each blended dataset builds", NULL, 0},
    {"--tokenizer-type", PL_OPT_CHOICE, NULL, offsetof(index_opts, tokenizer_type),
     "recorded in the cache description as Megatron does (for identical cache names)",
     "GPT2BPETokenizer", 0},
    {"--vocab-file", PL_OPT_STRING, NULL, offsetof(index_opts, vocab_file),
     "tokenizer vocab file, as given to Megatron (description only)", NULL, 0},
    {"--merge-file", PL_OPT_STRING, NULL, offsetof(index_opts, merge_file),
     "tokenizer merge file, as given to Megatron (description only)", NULL, 0},
    {"--data-parallel-size", PL_OPT_INT, "1", offsetof(index_opts, dp_size),
     "data-parallel ranks for --print-samples", NULL, 0},
    {"--consumed-samples", PL_OPT_INT, "0", offsetof(index_opts, consumed_samples),
     "samples already consumed (resume point) for --print-samples", NULL, 0},
    {"--print-samples", PL_OPT_INT, "0", offsetof(index_opts, print_samples),
     "print the first N samples each data-parallel rank reads, with their tokens", NULL, 0},
    {"--print-tokens", PL_OPT_INT, "16", offsetof(index_opts, print_tokens),
     "tokens printed per sample (-1: all seq-length + 1)", NULL, 0},
    {"--print-split", PL_OPT_CHOICE, "train", offsetof(index_opts, print_split),
     "split whose samples --print-samples prints", "train|valid|test", 0},
};
static const pl_command_spec index_cmd = {
    "data index",
    "Build or reuse the GPT document/sample/shuffle indices Megatron-LM builds for these flags",
    index_table, (int)(sizeof index_table / sizeof *index_table), 0};

static void print_gpt(const pl_gpt_dataset *g, const char *pad)
{
    printf("%sGPTDataset %s: sequences [%lld, %lld) of %lld\n", pad, g->path, (long long)g->beg,
           (long long)g->end, (long long)g->low->h.n_sequences);
    char req[32] = "None";
    if (g->num_samples >= 0)
        snprintf(req, sizeof req, "%lld", (long long)g->num_samples);
    printf("%s    documents %lld  tokens %lld  epochs %lld  samples %lld (requested %s)  "
           "separate last epoch: %s\n",
           pad, (long long)(g->end - g->beg), (long long)g->tokens_per_epoch,
           (long long)g->num_epochs, (long long)pl_gpt_dataset_len(g), req,
           g->separate_final_epoch ? "yes" : "no");
    printf("%s    cache %s in %.3f s:\n", pad, g->built ? "built" : "reused", g->seconds);
    for (int f = 0; f < PL_GPT_N_FILES; f++)
        printf("%s        %s\n", pad, g->files[f]);
}

static void print_summary(const pl_blend_data *d, const pl_blend_spec *spec, const index_opts *o,
                          const char *split)
{
    printf("plait data index: %d dataset%s%s, split \"%s\", seq-length %lld, seed %lld\n", d->n,
           d->n == 1 ? "" : "s", spec->weights ? " (weighted)" : "", split,
           (long long)o->seq_length, (long long)o->seed);
    printf("samples requested: train %lld  valid %lld  test %lld\n",
           (long long)d->requested[0], (long long)d->requested[1], (long long)d->requested[2]);
    for (int s = 0; s < PL_N_SPLITS; s++) {
        const char *name = pl_split_name((pl_split)s);
        if (!d->present[s]) {
            printf("%s: none (--split gives it no share)\n", name);
            continue;
        }
        if (!d->blended) {
            printf("%s: %lld samples\n", name, (long long)pl_blend_data_len(d, (pl_split)s));
            print_gpt(&d->mid[s], "    ");
            continue;
        }
        const pl_blend_dataset *b = &d->top[s];
        printf("%s: BlendedDataset of %d, size %lld (requested %lld)\n", name, b->n,
               (long long)b->size, (long long)d->requested[s]);
        if (b->files[0]) {
            printf("    cache %s in %.3f s:\n", b->built ? "built" : "reused", b->seconds);
            for (int f = 0; f < PL_BLEND_N_FILES; f++)
                printf("        %s\n", b->files[f]);
        } else {
            printf("    not cached (no --data-cache-path), built in %.3f s\n", b->seconds);
        }
        for (int ds = 0; ds < b->n; ds++) {
            char w[32];
            int64_t draws = 0;
            for (int64_t i = 0; i < b->size; i++)
                draws += pl_npy_get(&b->dataset_index, i) == ds;
            pl_py_float_repr(b->weights[ds], w);
            printf("    [%d] weight %s, draws %lld:\n", ds, w, (long long)draws);
            print_gpt(b->members[ds], "        ");
        }
    }
}

static pl_status print_samples(const pl_blend_data *d, const index_opts *o)
{
    pl_split s = strcmp(o->print_split, "valid") == 0  ? PL_SPLIT_VALID
                 : strcmp(o->print_split, "test") == 0 ? PL_SPLIT_TEST
                                                       : PL_SPLIT_TRAIN;
    if (!d->present[s])
        return pl_errorf(PL_ERR_ARG, "--print-split %s: the split is absent under --split",
                         o->print_split);
    int64_t width = o->seq_length + 1;
    int32_t *tokens = pl_malloc((size_t)width * sizeof *tokens);
    int64_t *idx = pl_malloc((size_t)o->micro_batch_size * sizeof *idx);
    pl_status st = PL_OK;
    if (!tokens || !idx) {
        st = pl_errorf(PL_ERR_NOMEM, "out of memory");
        goto done;
    }
    printf("samples of %s: consumed %lld, micro batch %lld x data-parallel %lld\n",
           o->print_split, (long long)o->consumed_samples, (long long)o->micro_batch_size,
           (long long)o->dp_size);
    for (int64_t r = 0; r < o->dp_size; r++) {
        pl_sampler sm;
        if ((st = pl_sampler_init(&sm, pl_blend_data_len(d, s), o->consumed_samples,
                                  o->micro_batch_size, r, o->dp_size)) != PL_OK)
            goto done;
        int64_t printed = 0;
        while (printed < o->print_samples && pl_sampler_next(&sm, idx)) {
            for (int64_t k = 0; k < o->micro_batch_size && printed < o->print_samples; k++) {
                int ds;
                int64_t j, n_real;
                if ((st = pl_blend_data_get(d, s, idx[k], tokens, &n_real, &ds, &j)) != PL_OK)
                    goto done;
                printf("rank %lld sample %lld: dataset %d sample %lld tokens", (long long)r,
                       (long long)idx[k], ds, (long long)j);
                int64_t shown = o->print_tokens < 0 || o->print_tokens > width ? width
                                                                               : o->print_tokens;
                for (int64_t t = 0; t < shown; t++)
                    printf(" %d", tokens[t]);
                printf("%s\n", shown < width ? " ..." : "");
                printed++;
            }
        }
    }
done:
    pl_free(tokens);
    pl_free(idx);
    return st;
}

int plait_data_index(int argc, char **argv)
{
    index_opts o;
    unsigned char given[sizeof index_table / sizeof *index_table];
    int rc = plait_parse(&index_cmd, &o, argc, argv, given);
    if (rc >= 0)
        return rc;
    pl_status st = PL_OK;
    pl_blend_spec spec = {0};
    pl_blend_data data = {0};
    pl_blend_config cfg;
    pl_gpt_dataset_config_defaults(&cfg.gpt);
    cfg.mid_level_dataset_surplus = o.surplus;

    if (o.seed < 0 || o.seed > (int64_t)UINT32_MAX) {
        st = pl_errorf(PL_ERR_ARG, "--seed %lld: numpy's RandomState takes 0 to 2^32 - 1",
                       (long long)o.seed);
        goto done;
    }
    if (o.micro_batch_size <= 0 || o.dp_size <= 0) {
        st = pl_errorf(PL_ERR_ARG, "--micro-batch-size %lld and --data-parallel-size %lld must be "
                       "positive",
                       (long long)o.micro_batch_size, (long long)o.dp_size);
        goto done;
    }
    if (!given[OPT_GBS])
        o.global_batch_size = o.micro_batch_size * o.dp_size;
    if (o.global_batch_size <= 0 || o.global_batch_size % (o.micro_batch_size * o.dp_size) != 0) {
        st = pl_errorf(PL_ERR_ARG,
                       "--global-batch-size %lld must be a positive multiple of --micro-batch-size "
                       "%lld x --data-parallel-size %lld",
                       (long long)o.global_batch_size, (long long)o.micro_batch_size,
                       (long long)o.dp_size);
        goto done;
    }
    if (o.surplus < 0) {
        st = pl_errorf(PL_ERR_ARG, "--mid-level-dataset-surplus %g must not be negative", o.surplus);
        goto done;
    }
    if ((o.vocab_file || o.merge_file) && !o.tokenizer_type) {
        st = pl_errorf(PL_ERR_ARG, "--vocab-file/--merge-file need --tokenizer-type");
        goto done;
    }
    if (o.tokenizer_type && (!o.vocab_file || !o.merge_file)) {
        st = pl_errorf(PL_ERR_ARG, "--tokenizer-type %s needs --vocab-file and --merge-file",
                       o.tokenizer_type);
        goto done;
    }
    cfg.gpt.seq_length = o.seq_length;
    cfg.gpt.seed = (uint32_t)o.seed;
    cfg.gpt.cache_dir = o.data_cache_path;
    if (o.tokenizer_type) {
        cfg.gpt.tokenizer.class_name = "_GPT2BPETokenizer";
        cfg.gpt.tokenizer.paths[0] = o.vocab_file;
        cfg.gpt.tokenizer.paths[1] = o.merge_file;
        cfg.gpt.tokenizer.n_paths = 2;
    }
    if (given[OPT_SPLIT]) {
        cfg.gpt.split = o.split;
        if ((st = pl_split_parse(o.split, &cfg.gpt.split_matrix)) != PL_OK)
            goto done;
    }
    if (o.seq_length < 2) {
        st = pl_errorf(PL_ERR_ARG, "--seq-length %lld: expected at least 2", (long long)o.seq_length);
        goto done;
    }
    pl_sample_request req = {o.train_iters, o.train_samples, o.global_batch_size, o.eval_interval,
                             o.eval_iters};
    int64_t sizes[PL_N_SPLITS];
    if ((st = pl_gpt_num_samples(&req, sizes)) != PL_OK)
        goto done;
    if ((st = pl_blend_spec_parse(&spec, o.data_path.items, o.data_path.n)) != PL_OK)
        goto done;
    if ((st = pl_blend_build(&data, &spec, &cfg, sizes)) != PL_OK)
        goto done;
    print_summary(&data, &spec, &o, cfg.gpt.split);
    if (o.print_samples > 0)
        st = print_samples(&data, &o);
done:
    pl_blend_data_free(&data);
    pl_blend_spec_free(&spec);
    pl_options_free(&index_cmd, &o);
    fflush(stdout);
    return st == PL_OK ? 0 : plait_report(st);
}
