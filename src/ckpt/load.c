/* Checkpoint load: into any layout, through ckpt/source.h. */
#include "ckpt/checkpoint.h"

#include "base/alloc.h"
#include "ckpt/manifest.h"
#include "ckpt/source.h"

#include <string.h>

pl_status pl_ckpt_read_config(const char *dir, int64_t iteration, pl_model_config *cfg,
                              pl_ckpt_meta *meta, char **strings)
{
    pl_ckpt_source *s;
    *strings = NULL;
    pl_status st = pl_ckpt_source_open(dir, iteration, &s);
    if (st)
        return st;
    *cfg = *pl_ckpt_source_config(s);
    *meta = *pl_ckpt_source_meta(s);
    *strings = pl_ckpt_source_take_strings(s);
    pl_ckpt_source_close(s);
    return PL_OK;
}

pl_status pl_ckpt_load(const char *dir, int64_t iteration, const pl_model_config *cfg,
                       const pl_ckpt_buffers *buf, pl_ckpt_meta *meta, char **strings)
{
    pl_ckpt_source *s;
    *strings = NULL;
    pl_status st = pl_ckpt_source_open(dir, iteration, &s);
    if (st)
        return st;
    const pl_registry *reg = buf->reg;
    pl_model_config run = *cfg; /* the padding follows the TP size: ckpt/source.h */
    run.padded_vocab = pl_ckpt_source_config(s)->padded_vocab;
    PL_TRY(pl_ckpt_config_match(pl_ckpt_source_config(s), &run, pl_ckpt_source_manifest_path(s)));
    PL_TRY(pl_ckpt_source_fill(s, reg, PL_CKPT_PARAMS, buf->params, 0, reg->numel));
    float *m[2] = {buf->exp_avg, buf->exp_avg_sq};
    int64_t lo = 0, hi = reg->numel;
    if (buf->zero) {
        m[0] = buf->zero->exp_avg;
        m[1] = buf->zero->exp_avg_sq;
        lo = buf->zero->lo;
        hi = lo + buf->zero->count;
    }
    for (int k = 0; k < 2; k++)
        if (m[k]) {
            memset(m[k], 0, (size_t)(hi - lo) * sizeof(float));
            PL_TRY(pl_ckpt_source_fill(s, reg, k == 0 ? PL_CKPT_EXP_AVG : PL_CKPT_EXP_AVG_SQ, m[k],
                                       lo, hi));
        }
    *meta = *pl_ckpt_source_meta(s);
    *strings = pl_ckpt_source_take_strings(s);
fail:
    pl_ckpt_source_close(s);
    return st;
}
