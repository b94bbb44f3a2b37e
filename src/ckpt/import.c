/* A model assembled in one process, written in any layout (ckpt/import.h). */
#include "ckpt/import.h"

#include "base/alloc.h"
#include "base/log.h"
#include "model/spec.h"

#include <stdio.h>

/* reg's rank's slices of the global model g into local (reg's layout). */
static pl_status slice(const pl_registry *reg, const pl_registry *g, const float *global,
                       float *local)
{
    for (int i = 0; i < reg->n; i++) {
        const pl_param *p = &reg->params[i];
        if (p->offset < 0)
            continue;
        const char *orig = p->tied_copy ? pl_model_tied_original(p->name) : NULL;
        const pl_param *gp = pl_registry_find(g, orig ? orig : p->name);
        if (!gp || gp->shape[1] != p->shape[1])
            return pl_errorf(PL_ERR_ARG, "plait's %s is not in the assembled model", p->name);
        const int64_t rows = p->local_shape[0], cols = p->local_shape[1];
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) {
                const int64_t gi = pl_param_global_index(p, r, c), row = gi / p->shape[1];
                local[p->offset + r * cols + c] =
                    row < gp->shape[0] ? global[gp->offset + gi] : 0.0f;
            }
    }
    return PL_OK;
}

pl_status pl_ckpt_import_write(const char *out, const pl_model_config *cfg, const pl_ckpt_meta *meta,
                               const pl_registry *g, const float *global, int tp, int pp)
{
    char tmp[4200];
    pl_registry reg;
    pl_registry_init(&reg, tp, 0, 0);
    float *local = NULL;
    pl_status st = pl_ckpt_write_begin(out, PL_CKPT_RELEASE, tmp, sizeof tmp);
    for (int t = 0; t < tp && !st; t++)
        for (int p = 0; p < pp && !st; p++) {
            pl_registry_free(&reg);
            pl_registry_init(&reg, tp, t, p);
            if ((st = pl_model_register(&reg, cfg, pp)))
                break;
            pl_free(local);
            local = pl_calloc((size_t)(reg.numel > 0 ? reg.numel : 1), sizeof(float));
            if (!local) {
                st = pl_errorf(PL_ERR_NOMEM, "out of memory for TP rank %d, stage %d", t, p);
                break;
            }
            if ((st = slice(&reg, g, global, local)))
                break;
            pl_ckpt_buffers b = {&reg, local, NULL, NULL, NULL, 0};
            st = pl_ckpt_write_rank(tmp, pp, &b);
        }
    if (!st)
        st = pl_ckpt_write_finish(out, tmp, cfg, meta, &reg, PL_CKPT_RELEASE);
    pl_free(local);
    pl_registry_free(&reg);
    return st;
}

void pl_ckpt_import_log(const char *out, const char *source, const pl_model_config *src,
                        int src_tp, int src_pp, const pl_model_config *target, int tp, int pp)
{
    pl_log_info("wrote %s/release: %s %s (TP %d x PP %d, %lld layers, vocabulary %lld padded to "
                "%lld) as TP %d x PP %d", out, source, pl_family_get(src->family)->name, src_tp,
                src_pp, (long long)src->num_layers, (long long)target->vocab_size,
                (long long)target->padded_vocab, tp, pp);
}
