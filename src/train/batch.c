/* A micro-batch's tokens, targets and loss weights, from the data (or mock
 * tokens), with every token id checked against the vocabulary; and the loss of
 * a micro-batch. Part of the trainer (trainer_internal.h). */
#include "train/trainer_internal.h"

#include "base/rng.h"
#include "data/blended.h"
#include "data/tokenizer/tokenizer.h"
#include "model/model.h"

#include <string.h>

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

/* The loss weights of a micro-batch whose targets are set: d objective / d
 * loss[n] = scale / (loss tokens) where a target is (the mean over this
 * micro-batch's loss tokens), and with the binary head scale / B on each
 * labelled sample (pretrain_bert.py: lm loss + sop loss, both means). */
void pl_train_loss_weights(pl_model *m, double scale, int64_t *n_loss)
{
    int64_t count = 0, nbin = 0;
    for (int64_t n = 0; n < m->N; n++)
        count += m->targets[n] >= 0;
    const float w = count ? (float)(scale / (double)count) : 0.0f;
    for (int64_t n = 0; n < m->N; n++)
        m->dloss[n] = m->targets[n] >= 0 ? w : 0.0f;
    for (int64_t b = 0; m->labels && b < m->B; b++)
        nbin += m->labels[b] >= 0;
    for (int64_t b = 0; m->labels && b < m->B; b++)
        m->dbin[b] = m->labels[b] >= 0 ? (float)(scale / (double)nbin) : 0.0f;
    *n_loss = count;
}

/* BERT's micro-batch: Megatron's sample (tokens, token types, labels at the masked
 * positions, the length, is_random) for each of its samples, from the BERT
 * dataset (bert_data.c); with --mock-data a synthetic one keyed by (seed, split,
 * sample index), so every layout sees the same (plait's own, not Megatron's mock
 * dataset). */
static pl_status load_bert(pl_trainer *t, pl_split s, const int64_t *idx, double scale,
                           int64_t *n_loss)
{
    pl_model *m = &t->model;
    const int64_t T = m->T;
    const uint64_t seed = (uint64_t)t->a->seed, base = 0x62657274u + 16 * (uint64_t)s;
    for (int64_t b = 0; b < t->mbs; b++) {
        const uint64_t i = (uint64_t)idx[b];
        m->sample[b] = idx[b];
        int32_t *tok = m->tokens + b * T, *typ = m->types ? m->types + b * T : NULL;
        int32_t *lab = m->targets + b * T;
        if (!t->a->mock_data) {
            int64_t len;
            int32_t is_random;
            pl_status st = pl_train_bert_data_get(t, s, idx[b], tok, typ, lab, &len, &is_random);
            if (st)
                return st;
            if (m->lengths)
                m->lengths[b] = (int32_t)len;
            if (m->labels)
                m->labels[b] = is_random;
            continue;
        }
        const int64_t len = T / 2 + (int64_t)(pl_rng_uniform(seed, base, i) * (double)(T - T / 2 + 1));
        const int64_t cut = 1 + (int64_t)(pl_rng_uniform(seed, base + 1, i) * (double)(len - 1));
        for (int64_t k = 0; k < T; k++) {
            const uint64_t j = i * (uint64_t)T + (uint64_t)k;
            tok[k] = k < len ? (int32_t)(pl_rng_uniform(seed, base + 2, j) *
                                         (double)t->cfg.vocab_size) : 0;
            if (typ)
                typ[k] = k >= cut && k < len;
            lab[k] = k > 0 && k < len && pl_rng_uniform(seed, base + 3, j) < 0.15 ? tok[k] : -1;
        }
        if (lab[1] < 0) /* at least one masked position a sample */
            lab[1] = tok[1];
        if (m->lengths)
            m->lengths[b] = (int32_t)(len > T ? T : len);
        if (m->labels)
            m->labels[b] = pl_rng_uniform(seed, base + 4, i) < 0.5;
    }
    pl_train_loss_weights(m, scale, n_loss);
    return PL_OK;
}

/* Fills the model's tokens/targets/dloss with micro-batch `idx` (mbs global
 * sample indices) of split s; returns the number of loss tokens. */
pl_status pl_train_load_micro_batch(pl_trainer *t, pl_split s, const int64_t *idx, double scale,
                                  int64_t *n_loss)
{
    pl_model *m = &t->model;
    const int64_t T = m->T;
    if (t->ft) { /* plait finetune: a task's rows */
        pl_status st = pl_train_ft_fill(t, s, idx);
        if (!st)
            pl_train_loss_weights(m, scale, n_loss);
        return st;
    }
    if (t->ed)
        return pl_train_encdec_load(t, s, idx, scale, n_loss);
    if (t->cfg.family == PL_FAMILY_BERT)
        return load_bert(t, s, idx, scale, n_loss);
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
        }
    }
    pl_train_loss_weights(m, scale, n_loss);
    return PL_OK;
}

void pl_train_micro_batch_losses(const pl_model *m, double scale, double out[2])
{
    double sum = 0, bin = 0;
    for (int64_t n = 0; n < m->N; n++)
        sum += (double)m->dloss[n] * (double)m->loss[n];
    for (int64_t b = 0; m->labels && b < m->B; b++)
        bin += (double)m->dbin[b] * (double)m->bin_loss[b];
    out[0] = scale ? sum / scale : 0.0;
    out[1] = scale ? bin / scale : 0.0;
    if (PL_TASK_POOLED(m->cfg.head.task) || m->cfg.head.task == PL_TASK_SPAN) {
        out[0] = out[1]; /* a fine-tuning head's loss is per sample: the loss */
        out[1] = 0.0;
    }
}

void pl_train_copy_batch(const pl_model *from, pl_model *to)
{
    memcpy(to->tokens, from->tokens, (size_t)to->N * sizeof *to->tokens);
    memcpy(to->targets, from->targets, (size_t)to->N * sizeof *to->targets);
    memcpy(to->dloss, from->dloss, (size_t)to->N * sizeof *to->dloss);
    memcpy(to->sample, from->sample, (size_t)to->B * sizeof *to->sample);
    if (to->types)
        memcpy(to->types, from->types, (size_t)to->N * sizeof *to->types);
    if (to->lengths)
        memcpy(to->lengths, from->lengths, (size_t)to->B * sizeof *to->lengths);
    if (to->labels) {
        memcpy(to->labels, from->labels, (size_t)to->B * sizeof *to->labels);
        memcpy(to->dbin, from->dbin, (size_t)to->B * sizeof *to->dbin);
    }
}
