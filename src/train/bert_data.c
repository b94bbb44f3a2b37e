/* Megatron's masked datasets in plait train: BERT's (--model bert --data-path
 * PREFIX), T5's (--model t5, data/t5_dataset.h) and NeMo's BART's (--model
 * bart with a WordPiece tokenizer, data/bart_dataset.h), the same mapping and
 * masking: the sentences' indexed dataset (`preprocess --split-sentences`
 * output) and each split's sample mapping (data/bert_dataset.h), built by
 * rank 0 and cached, then loaded by the others, as pretrain_bert.py's and
 * pretrain_t5.py's BlendedMegatronDatasetBuilder does with one dataset. Part
 * of the trainer (trainer_internal.h). */
#include "train/trainer_internal.h"

#include "base/alloc.h"
#include "data/bart_dataset.h"
#include "data/bert_dataset.h"
#include "data/indexed.h"
#include "data/t5_dataset.h"

#include <string.h>

typedef struct pl_train_bert_data {
    pl_indexed low;
    int low_up;
    pl_bert_dataset ds[PL_N_SPLITS];
    int up[PL_N_SPLITS];
    int32_t *types; /* (T) token types when the model has none (--bert-no-binary-head) */
} pl_train_bert_data;

/* Opens the sentences and builds (root) or loads (the others) each split's
 * mapping of sizes[s] samples. */
static pl_status build(pl_trainer *t, pl_train_bert_data *d, const int64_t *sizes)
{
    pl_status st = PL_OK;
    const pl_train_args *a = t->a;
    pl_bert_dataset_config c;
    if (t->cfg.family == PL_FAMILY_T5) { /* pretrain_t5.py's configuration */
        pl_t5_dataset_config_defaults(&c);
        c.decoder_seq_length = t->cfg.dec_seq_length;
    } else if (t->cfg.family == PL_FAMILY_BART) { /* NeMo's BARTDataset */
        pl_bart_dataset_config_defaults(&c);
    } else {
        pl_bert_dataset_config_defaults(&c);
    }
    c.seq_length = t->cfg.seq_length;
    c.seed = (uint32_t)a->seed;
    c.split = a->split;
    c.cache_dir = a->data_cache_path;
    c.mask_prob = a->mask_prob;
    c.short_seq_prob = a->short_seq_prob;
    c.binary_head = t->cfg.head.binary_head; /* t5: none */
    /* the description's tokenizer: null, as the GPT datasets' (setup_data) */
    PL_TRY(pl_split_parse(a->split, &c.split_matrix));
    for (int s = 0; s < PL_N_SPLITS; s++) {
        if (sizes[s] <= 0 || !c.split_matrix.present[s])
            continue;
        PL_TRY(pl_bert_dataset_init(&d->ds[s], &d->low, a->data_path.items[0], &c, t->tok,
                                    (pl_split)s, sizes[s]));
        d->up[s] = 1;
    }
fail:
    return st;
}

pl_status pl_train_bert_data_setup(pl_trainer *t, const int64_t sizes[PL_N_SPLITS])
{
    pl_status st = PL_OK;
    const pl_train_args *a = t->a;
    if (a->data_path.n != 1)
        return pl_errorf(PL_ERR_UNSUPPORTED, "--model %s: one --data-path prefix (the "
                         "sentences `plait preprocess --split-sentences` writes); blends of "
                         "masked datasets are not supported yet", a->model);
    if (!t->tok || strncmp(t->tok->type, "BertWordPiece", 13) != 0)
        return pl_errorf(PL_ERR_ARG, "--model %s: masking needs a WordPiece vocabulary: "
                         "--tokenizer-type BertWordPieceLowerCase or BertWordPieceCase with "
                         "--vocab-file", a->model);
    pl_train_bert_data *d = pl_calloc(1, sizeof *d);
    if (!d)
        return pl_errorf(PL_ERR_NOMEM, "out of memory");
    t->bert = d;
    d->types = pl_malloc((size_t)t->cfg.seq_length * sizeof *d->types);
    if (!d->types)
        return pl_errorf(PL_ERR_NOMEM, "out of memory");
    PL_TRY(pl_indexed_open(&d->low, a->data_path.items[0]));
    d->low_up = 1;
    /* rank 0 builds and caches the mappings; the others then load them */
    pl_comm *world = pl_grid_comm(&t->grid, PL_GRID_WORLD);
    for (int pass = 0; pass < 2 && !st; pass++) {
        if ((pass == 0) == pl_train_is_root(t))
            st = build(t, d, sizes);
        int32_t bad = st != PL_OK;
        pl_status cst = pl_comm_allreduce_i32(world, &bad, 1, PL_COMM_MAX);
        if (!st && cst)
            st = cst;
        if (!st && bad)
            st = pl_errorf(PL_ERR_IO, "building the %s sample mappings failed on rank 0",
                           a->model);
    }
fail:
    return st;
}

void pl_train_bert_data_free(pl_trainer *t)
{
    pl_train_bert_data *d = t->bert;
    if (!d)
        return;
    for (int s = 0; s < PL_N_SPLITS; s++)
        if (d->up[s])
            pl_bert_dataset_free(&d->ds[s]);
    if (d->low_up)
        pl_indexed_close(&d->low);
    pl_free(d->types);
    pl_free(d);
    t->bert = NULL;
}

int64_t pl_train_bert_data_len(const pl_trainer *t, pl_split s)
{
    const pl_train_bert_data *d = t->bert;
    return d && d->up[s] ? pl_bert_dataset_len(&d->ds[s]) : 0;
}

pl_status pl_train_bert_data_get(pl_trainer *t, pl_split s, int64_t idx, int32_t *tokens,
                                 int32_t *types, int32_t *labels, int64_t *length,
                                 int32_t *is_random)
{
    pl_train_bert_data *d = t->bert;
    if (!d || !d->up[s])
        return pl_errorf(PL_ERR_INTERNAL, "the %s split has no BERT samples", pl_split_name(s));
    pl_bert_sample out = {tokens, types ? types : d->types, labels, 0, 0};
    pl_status st = pl_bert_dataset_get(&d->ds[s], idx, &out);
    *length = out.length;
    *is_random = out.is_random;
    return st;
}

pl_status pl_train_bert_data_encdec(pl_trainer *t, pl_split s, int64_t idx, pl_encdec_sample *out)
{
    pl_train_bert_data *d = t->bert;
    if (!d || !d->up[s])
        return pl_errorf(PL_ERR_INTERNAL, "the %s split has no %s samples", pl_split_name(s),
                         t->a->model);
    return t->cfg.family == PL_FAMILY_BART ? pl_bart_dataset_get(&d->ds[s], idx, out)
                                           : pl_t5_dataset_get(&d->ds[s], idx, out);
}
