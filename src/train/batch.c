/* A micro-batch's tokens, targets and loss weights, from the data (or mock
 * tokens), with every token id checked against the vocabulary; and the loss of
 * a micro-batch. Part of the trainer (trainer_internal.h). */
#include "train/trainer_internal.h"

#include "base/rng.h"
#include "data/blended.h"
#include "data/tokenizer/tokenizer.h"
#include "model/model.h"

/* A token id outside [-1, vocab) at position k of sample j of member ds (sample
 * idx of split s): an error naming the dataset, the sample, the document and the
 * id. Megatron would index past its embedding (or train a padding row); plait
 * used to mask it silently. */
static pl_status bad_token(const pl_trainer *t, pl_split s, int64_t idx, int ds, int64_t j,
                           int64_t k)
{
    const pl_gpt_dataset *g = pl_blend_data_member(&t->data, s, ds);
    const int32_t id = t->sample[k];
    int64_t seq, off;
    pl_status st = pl_gpt_dataset_locate(g, j, k, &seq, &off);
    if (st)
        return st;
    return pl_errorf(PL_ERR_FORMAT, "%s: token id %ld in document %lld (token %lld of it), "
                     "%s sample %lld of this dataset (%lld of the run), is outside the "
                     "vocabulary [0, %lld)%s; only -1 (Megatron's pad) may lie outside it. "
                     "Was the data tokenized with another tokenizer?",
                     g->path, (long)id, (long long)seq, (long long)off, pl_split_name(s),
                     (long long)j, (long long)idx, (long long)t->cfg.vocab_size,
                     t->tok ? " of the tokenizer" : " (--vocab-size)");
}

/* Fills the model's tokens/targets/dloss with micro-batch `idx` (mbs global
 * sample indices) of split s; returns the number of loss tokens. */
pl_status pl_train_load_micro_batch(pl_trainer *t, pl_split s, const int64_t *idx, double scale,
                                  int64_t *n_loss)
{
    pl_model *m = &t->model;
    const int64_t T = m->T;
    int64_t count = 0;
    for (int64_t b = 0; b < t->mbs; b++) {
        m->sample[b] = idx[b]; /* the dropout masks' key: the same in any layout */
        if (t->a->mock_data) {
            for (int64_t k = 0; k <= T; k++)
                t->sample[k] = (int32_t)(pl_rng_uniform((uint64_t)t->a->seed, 0x6d6f636bu + (uint64_t)s,
                                                        (uint64_t)(idx[b] * (T + 1) + k)) *
                                         (double)t->cfg.vocab_size);
        } else {
            int ds;
            int64_t j;
            pl_status st = pl_blend_data_get(&t->data, s, idx[b], t->sample, NULL, &ds, &j);
            if (st)
                return st;
            for (int64_t k = 0; k <= T; k++)
                if (t->sample[k] < -1 || t->sample[k] >= t->cfg.vocab_size)
                    return bad_token(t, s, idx[b], ds, j, k);
        }
        for (int64_t k = 0; k < T; k++) {
            int32_t tok = t->sample[k], tgt = t->sample[k + 1];
            if (tok < 0)
                tok = 0; /* Megatron's pad (-1) fed as token 0; its target is masked */
            int mask = tgt >= 0 && !(t->a->eod_mask_loss && t->tok && tgt == t->tok->eod);
            m->tokens[b * T + k] = tok;
            m->targets[b * T + k] = mask ? tgt : -1;
            m->dloss[b * T + k] = (float)mask;
            count += mask;
        }
    }
    /* d objective / d loss: the mean over this micro-batch's loss tokens, scaled. */
    float w = count ? (float)(scale / (double)count) : 0.0f;
    for (int64_t n = 0; n < m->N; n++)
        m->dloss[n] *= w;
    *n_loss = count;
    return PL_OK;
}

/* Mean loss of the current micro-batch (dloss holds mask / count * scale). */
double pl_train_micro_batch_loss(const pl_model *m, double scale)
{
    double sum = 0;
    for (int64_t n = 0; n < m->N; n++)
        sum += (double)m->dloss[n] * (double)m->loss[n];
    return scale ? sum / scale : 0.0;
}
