/* NeMo's BARTDataset: samples over the masked dataset's mapping and NeMo's
 * masking (see bart_dataset.h). */
#include "data/bart_dataset.h"

void pl_bart_dataset_config_defaults(pl_bart_dataset_config *c)
{
    pl_bert_dataset_config_family(c, PL_MASKED_BART);
}

pl_status pl_bart_dataset_get(const pl_bart_dataset *ds, int64_t index, pl_encdec_sample *out)
{
    int64_t T = ds->seq_length;
    pl_masked_text m;
    pl_status st = pl_bert_dataset_masked_text(ds, index, &m);
    if (st != PL_OK)
        return st;
    const int32_t *tok = m.tokens, *lab = m.labels, *spans = m.spans;
    int64_t len = m.len, n_spans = m.n_spans;

    /* Decoder input [BOS] + original, labels original + [EOS]. */
    int32_t *enc = out->enc_tokens, *din = out->dec_tokens, *dout = out->labels;
    din[0] = ds->bos;
    for (int64_t i = 0; i < len; i++) {
        int32_t original = lab[i] != -1 ? lab[i] : tok[i];
        din[i + 1] = original;
        dout[i] = original;
    }
    dout[len] = ds->eos;
    /* Encoder: each span collapsed to one [MASK], kept when random() >= delete_mask_prob. */
    int64_t ne = 0, from = 0;
    for (int64_t k = 0; k < n_spans; k++) {
        for (int64_t i = from; i < spans[2 * k]; i++)
            enc[ne++] = tok[i];
        if (pl_np_rng_random(&m.rng) >= ds->delete_mask_prob)
            enc[ne++] = ds->mask;
        from = spans[2 * k + 1] + 1;
    }
    for (int64_t i = from; i < len; i++)
        enc[ne++] = tok[i];
    for (int64_t i = ne; i < T; i++)
        enc[i] = ds->pad;
    for (int64_t i = len + 1; i < T; i++) {
        din[i] = ds->pad;
        dout[i] = -1;
    }
    out->enc_length = ne;
    out->dec_length = len + 1;
    return PL_OK;
}
