/* Megatron core's T5MaskedWordPieceDataset: samples over the BERT dataset's
 * mapping and masking (see t5_dataset.h). */
#include "data/t5_dataset.h"

void pl_t5_dataset_config_defaults(pl_t5_dataset_config *c)
{
    pl_bert_dataset_config_family(c, PL_MASKED_T5);
}

pl_status pl_t5_dataset_get(const pl_t5_dataset *ds, int64_t index, pl_encdec_sample *out)
{
    int64_t Te = ds->seq_length, Td = ds->decoder_seq_length;
    pl_masked_text m;
    pl_status st = pl_bert_dataset_masked_text(ds, index, &m);
    if (st != PL_OK)
        return st;
    const int32_t *tok = m.tokens, *lab = m.labels, *spans = m.spans;
    int64_t len = m.len, n_spans = m.n_spans;
    if (n_spans > ds->n_sentinels)
        return pl_errorf(PL_ERR_ARG,
                         "%s: T5 sample %lld has %lld masked spans, more than the tokenizer's "
                         "%lld sentinels (raise --vocab-extra-ids)",
                         ds->path, (long long)index, (long long)n_spans,
                         (long long)ds->n_sentinels);
    /* The decoder: [BOS] + each span's sentinel and labels; its length. */
    int64_t dec = 1 + n_spans;
    for (int64_t i = 0; i < len; i++)
        dec += lab[i] != -1;
    if (dec > Td)
        return pl_errorf(PL_ERR_ARG,
                         "%s: T5 sample %lld needs %lld decoder positions, more than "
                         "--decoder-seq-length %lld (Megatron asserts here too)",
                         ds->path, (long long)index, (long long)dec, (long long)Td);

    int32_t *enc = out->enc_tokens, *din = out->dec_tokens, *dout = out->labels;
    int64_t ne = 0, nd = 0, from = 0;
    din[nd] = ds->bos;
    for (int64_t k = 0; k < n_spans; k++) {
        int32_t sentinel = ds->sentinels[k];
        for (int64_t i = from; i < spans[2 * k]; i++)
            enc[ne++] = tok[i];
        enc[ne++] = sentinel;
        din[++nd] = sentinel;
        dout[nd - 1] = sentinel;
        /* A span's labels: its masked positions between its first and last
         * (a [CLS] / [SEP] inside is not masked and is dropped, as Megatron
         * drops it from the encoder too). */
        for (int64_t i = spans[2 * k]; i <= spans[2 * k + 1]; i++)
            if (lab[i] != -1) {
                din[++nd] = lab[i];
                dout[nd - 1] = lab[i];
            }
        from = spans[2 * k + 1] + 1;
    }
    for (int64_t i = from; i < len; i++)
        enc[ne++] = tok[i];
    dout[nd++] = ds->eos;
    if (ne > Te)
        return pl_errorf(PL_ERR_INTERNAL, "%s: T5 sample %lld: encoder %lld > %lld", ds->path,
                         (long long)index, (long long)ne, (long long)Te);
    for (int64_t i = ne; i < Te; i++)
        enc[i] = ds->pad;
    for (int64_t i = nd; i < Td; i++) {
        din[i] = ds->pad;
        dout[i] = -1;
    }
    out->enc_length = ne;
    out->dec_length = nd;
    return PL_OK;
}
