/* ZeRO stages 2-3 inside forward and backward: where the model's views point (the
 * flat layout, or a layer slot of the working buffers), and the DP collectives the
 * fetch and grad-ready hooks queue on the communication queue (parallel/commq.h):
 * stage 3's parameter gathers (the next layer's in flight while this one computes),
 * stages 2-3's gradient reduce-scatters (each layer's in flight while the next layer's
 * backward runs). Every rank queues the same collectives in the same order. */
#include "train/trainer_internal.h"

#include "base/log.h"

#include <math.h>
#include <string.h>

/* The working-buffer slot of layer l: gradients alternate between two slots (one is
 * reduce-scattered while the next layer's backward fills the other), and so do
 * stage 3's parameters when prefetching. */
static int zero_slot(const pl_trainer *t, int64_t l, int grad)
{
    return (grad || t->a->zero3_prefetch) ? (int)(l & 1) : 0;
}

/* Runs op on the ZeRO queue and waits for it, or (wait = 0) leaves it in flight. The
 * caller's time blocked (or, inline, inside the collective) is the step's exposed
 * communication. */
static pl_status zq_post(pl_trainer *t, pl_commq_op *op, int wait)
{
    double t0 = pl_time_now();
    pl_status st = pl_commq_post(t->zq, op);
    if (!st && wait)
        st = pl_commq_wait(t->zq, op);
    t->comm_step.wait += pl_time_now() - t0;
    if (!st && wait)
        pl_commq_overlap_add(&t->zq_overlap, op, t->zq_compute_end);
    return st;
}

static pl_status zq_wait(pl_trainer *t, pl_commq_op *op)
{
    double t0 = pl_time_now();
    pl_status st = pl_commq_wait(t->zq, op);
    t->comm_step.wait += pl_time_now() - t0;
    pl_commq_overlap_add(&t->zq_overlap, op, t->zq_compute_end);
    return st;
}

/* Queues the gather of layer l's parameters (stage 3) into its slot. */
static pl_status zero_gather_post(pl_trainer *t, int64_t l, int wait)
{
    pl_zero *z = &t->zero;
    const pl_zero_region *g = &z->regions[l + 1];
    int s = zero_slot(t, l, 0);
    pl_commq_op *op = &t->zq_gather[s];
    *op = (pl_commq_op){.kind = PL_COMMQ_ALLGATHER, .comm = z->comm, .buf = t->pwork + s * t->work_count,
                        .send = t->pshard + (g->own_lo - z->lo), .counts = g->counts,
                        .displs = g->displs};
    t->zq_gather_layer[s] = wait ? -1 : l;
    return zq_post(t, op, wait);
}

/* Layer l's parameters are in its slot: waits for a prefetched gather, or gathers now. */
static pl_status zero_gather(pl_trainer *t, int64_t l)
{
    int s = zero_slot(t, l, 0);
    if (t->zq_gather_layer[s] == l) {
        t->zq_gather_layer[s] = -1;
        return zq_wait(t, &t->zq_gather[s]);
    }
    if (t->zq_gather_layer[s] >= 0) { /* a gather nobody used: not expected, but finish it */
        t->zq_gather_layer[s] = -1;
        pl_status st = zq_wait(t, &t->zq_gather[s]);
        if (st)
            return st;
    }
    return zero_gather_post(t, l, 1);
}

/* Waits for the gradient reduce-scatter in flight from slot s, if any. */
static pl_status zero_rs_wait(pl_trainer *t, int s)
{
    if (!t->zq_rs_posted[s])
        return PL_OK;
    t->zq_rs_posted[s] = 0;
    return zq_wait(t, &t->zq_rs[s]);
}

/* Where flat element off lives for the model's views under stages 2-3. */
float *pl_train_zero_locate(void *ctx, int64_t off, int grad)
{
    pl_trainer *t = ctx;
    const pl_zero *z = &t->zero;
    int i = pl_zero_region_of(z, off);
    const pl_zero_region *g = &z->regions[i];
    float *nl = grad ? t->gnl : t->pnl, *work = grad ? t->gwork : t->pwork;
    if (i == 0)
        return nl + off;
    if (i == z->nregions - 1)
        return nl + (z->regions[0].hi - z->regions[0].lo) + (off - g->lo);
    return work + zero_slot(t, i - 1, grad) * t->work_count + (off - g->lo);
}

/* The fetch hook: before a layer's backward its gradient scratch is zeroed; at
 * stage 3 every layer's parameters are gathered before its forward and again
 * before its backward, and the embeddings and final norm before the forward. */
pl_status pl_train_zero_fetch(void *ctx, int64_t layer, int backward)
{
    pl_trainer *t = ctx;
    pl_zero *z = &t->zero;
    pl_status st = PL_OK;
    const int64_t L = t->cfg.num_layers;
    if (layer < 0) {
        if (t->zero_stage == 3) {
            int last = z->nregions - 1;
            int64_t emb = z->regions[0].hi;
            pl_commq_op *op = &t->zq_nl;
            *op = (pl_commq_op){.kind = PL_COMMQ_ALLGATHER, .comm = z->comm, .buf = t->pnl,
                                .send = t->pshard + (z->regions[0].own_lo - z->lo),
                                .counts = z->regions[0].counts, .displs = z->regions[0].displs};
            PL_TRY(zq_post(t, op, 1));
            *op = (pl_commq_op){.kind = PL_COMMQ_ALLGATHER, .comm = z->comm, .buf = t->pnl + emb,
                                .send = t->pshard + (z->regions[last].own_lo - z->lo),
                                .counts = z->regions[last].counts, .displs = z->regions[last].displs};
            PL_TRY(zq_post(t, op, 1));
            if (t->a->zero3_prefetch && L > 0)
                PL_TRY(zero_gather_post(t, 0, 0));
        }
        return PL_OK;
    }
    const pl_zero_region *g = &z->regions[layer + 1];
    if (backward) { /* this layer's gradient slot: its last reduce-scatter must be done */
        int s = zero_slot(t, layer, 1);
        PL_TRY(zero_rs_wait(t, s));
        memset(t->gwork + s * t->work_count, 0, (size_t)(g->hi - g->lo) * sizeof(float));
    }
    if (t->zero_stage == 3) {
        PL_TRY(zero_gather(t, layer));
        /* the next layer in this pass, into the other slot (its last user is done) */
        int64_t next = backward ? layer - 1 : layer + 1;
        if (t->a->zero3_prefetch && next >= 0 && next < L)
            PL_TRY(zero_gather_post(t, next, 0));
    }
fail:
    return st;
}

/* Queues the reduce-scatter of region i's gradients (src) that adds this rank's part
 * to gshard, and leaves it in flight in slot s: 0-1 a layer's gradient slot, 2 the
 * final norm, 3 the embeddings. Every operation receives into gtmp and adds from it
 * before the queue runs the next one, so one region's part is enough. */
static pl_status zero_reduce_region(pl_trainer *t, int i, const float *src, int s)
{
    pl_zero *z = &t->zero;
    const pl_zero_region *g = &z->regions[i];
    pl_commq_op *op = &t->zq_rs[s];
    *op = (pl_commq_op){.kind = PL_COMMQ_REDUCE_SCATTER, .comm = z->comm, .buf = (float *)src,
                        .recv = t->gtmp, .acc = t->gshard + (g->own_lo - z->lo),
                        .counts = g->counts, .displs = g->displs};
    t->zq_rs_posted[s] = 1;
    return zq_post(t, op, 0);
}

static pl_status zero_grad_ready(void *ctx, int64_t offset, int64_t count)
{
    pl_trainer *t = ctx;
    (void)count;
    pl_zero *z = &t->zero;
    int i = pl_zero_region_of(z, offset), last = z->nregions - 1;
    int s = zero_slot(t, i - 1, 1);
    /* the final norm's gradients are final once the last layer's backward begins */
    if (i == last - 1) {
        pl_status st = zero_reduce_region(t, last, t->gnl + z->regions[0].hi, 2);
        if (st)
            return st;
    }
    return zero_reduce_region(t, i, t->gwork + s * t->work_count, s);
}

/* One micro-batch's backward under stages 2-3 (see trainer_internal.h). */
pl_status pl_train_zero_backward(pl_trainer *t, int last)
{
    pl_status st = PL_OK;
    PL_TRY(zero_rs_wait(t, 2)); /* the last micro-batch's, still in flight */
    PL_TRY(zero_rs_wait(t, 3));
    memset(t->gnl, 0, (size_t)t->nl_count * sizeof(float));
    PL_TRY(pl_model_backward(&t->model, zero_grad_ready, t));
    t->zq_compute_end = pl_time_now();
    if (t->cfg.num_layers == 0)
        PL_TRY(zero_reduce_region(t, t->zero.nregions - 1, t->gnl + t->zero.regions[0].hi, 2));
    PL_TRY(zero_reduce_region(t, 0, t->gnl, 3));
    if (last)
        for (int s = 0; s < 4; s++)
            PL_TRY(zero_rs_wait(t, s));
    t->zq_compute_end = INFINITY;
fail:
    return st;
}
