/* ZeRO stages 2-3 inside forward and backward: where the model's views point (the
 * flat layout, or a layer slot of the working buffers), and the DP collectives the
 * fetch and grad-ready hooks queue on the communication queue (parallel/commq.h):
 * stage 3's parameter gathers (the next layer's in flight while this one computes),
 * stages 2-3's gradient reduce-scatters (each layer's in flight while the next layer's
 * backward runs). Every rank queues the same collectives in the same order.
 *
 * Pipelined (docs/pipeline.md), the stage's schedule interleaves the micro-batches'
 * forwards and backwards: layers work as without pipelining, action by action, except
 * that a parameter slot keeps its layer for the rest of the step (the parameters move
 * only at the optimizer step), so a pass that starts where the last one ended gathers
 * nothing again; the regions outside the layers are gathered once per step and their
 * gradients, accumulated over the micro-batches, summed over the embedding group
 * (tied embeddings) and reduce-scattered once. */
#include "train/trainer_internal.h"

#include "base/log.h"

#include <math.h>
#include <string.h>

static int pipelined(const pl_trainer *t) { return t->grid.layout.pp > 1; }

/* The working-buffer slot of the stage's layer j: gradients alternate between two slots
 * (one is reduce-scattered while the next layer's backward fills the other), and so do
 * stage 3's parameters when prefetching. */
static int zero_slot(const pl_trainer *t, int64_t j, int grad)
{
    return (grad || t->a->zero3_prefetch) ? (int)(j & 1) : 0;
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

/* Waits for the gather in flight into parameter slot s, if any (an operation
 * belongs to the queue until waited for, so a slot's next gather waits first). */
static pl_status zero_gather_settle(pl_trainer *t, int s)
{
    if (t->zq_gather_layer[s] < 0)
        return PL_OK;
    t->zq_gather_layer[s] = -1;
    return zq_wait(t, &t->zq_gather[s]);
}

/* Queues the gather of the stage's layer j's parameters (stage 3) into its slot. */
static pl_status zero_gather_post(pl_trainer *t, int64_t j, int wait)
{
    pl_zero *z = &t->zero;
    const pl_zero_region *g = &z->regions[t->zr_l0 + j];
    int s = zero_slot(t, j, 0);
    pl_status st = zero_gather_settle(t, s);
    if (st)
        return st;
    pl_commq_op *op = &t->zq_gather[s];
    *op = (pl_commq_op){.kind = PL_COMMQ_ALLGATHER, .comm = z->comm, .buf = t->pwork + s * t->work_count,
                        .send = t->pshard + (g->own_lo - z->lo), .counts = g->counts,
                        .displs = g->displs};
    t->zq_gather_layer[s] = wait ? -1 : j;
    t->zq_slot_layer[s] = j;
    return zq_post(t, op, wait);
}

/* 1 if layer j's parameters are in (or on their way to) its slot and, pipelined, may
 * be used again: the slot keeps them until the step ends. */
static int zero_slot_holds(const pl_trainer *t, int64_t j)
{
    int s = zero_slot(t, j, 0);
    return t->zq_gather_layer[s] == j || (pipelined(t) && t->zq_slot_layer[s] == j);
}

/* Layer j's parameters are in its slot: waits for a prefetched gather, keeps what the
 * slot holds (pipelined), or gathers now. */
static pl_status zero_gather(pl_trainer *t, int64_t j)
{
    int s = zero_slot(t, j, 0);
    if (t->zq_gather_layer[s] == j)
        return zero_gather_settle(t, s);
    pl_status st = zero_gather_settle(t, s); /* a gather nobody used: finish it */
    if (st || (pipelined(t) && t->zq_slot_layer[s] == j))
        return st;
    return zero_gather_post(t, j, 1);
}

/* Stage 3: the embeddings and the final norm + output layer this stage holds, into pnl. */
static pl_status zero_gather_top(pl_trainer *t)
{
    pl_zero *z = &t->zero;
    pl_status st = PL_OK;
    const int idx[2] = {t->zr_emb, t->zr_tail};
    float *dst[2] = {t->pnl, t->pnl + t->nl_emb};
    for (int k = 0; k < 2 && !st; k++) {
        if (idx[k] < 0)
            continue;
        const pl_zero_region *g = &z->regions[idx[k]];
        pl_commq_op *op = &t->zq_nl;
        *op = (pl_commq_op){.kind = PL_COMMQ_ALLGATHER, .comm = z->comm, .buf = dst[k],
                            .send = t->pshard + (g->own_lo - z->lo), .counts = g->counts,
                            .displs = g->displs};
        st = zq_post(t, op, 1);
    }
    return st;
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
    PL_ASSERT(i >= 0);
    const pl_zero_region *g = &z->regions[i];
    float *nl = grad ? t->gnl : t->pnl, *work = grad ? t->gwork : t->pwork;
    if (i == t->zr_emb)
        return nl + off;
    if (i == t->zr_tail)
        return nl + t->nl_emb + (off - g->lo);
    return work + zero_slot(t, i - t->zr_l0, grad) * t->work_count + (off - g->lo);
}

/* The fetch hook, for the chunk's layer j (or -1: the embedding): before a
 * layer's backward its gradient scratch is zeroed; at stage 3 every layer's
 * parameters are in its slot before its forward and again before its backward, and
 * (not pipelined) the embeddings and final norm are gathered before the forward. */
pl_status pl_train_zero_fetch(void *ctx, int64_t j, int backward)
{
    const pl_zero_chunk *cc = ctx; /* the chunk's layers are the rank's [lo, hi) */
    pl_trainer *t = cc->t;
    pl_zero *z = &t->zero;
    pl_status st = PL_OK;
    const int64_t lo = cc->base, hi = cc->base + cc->nl, layer = lo + j;
    if (j < 0) {
        if (t->zero_stage == 3) {
            if (!pipelined(t)) /* pipelined: once per step, in pl_train_zero_begin */
                PL_TRY(zero_gather_top(t));
            if (t->a->zero3_prefetch && hi > lo && !zero_slot_holds(t, lo))
                PL_TRY(zero_gather_post(t, lo, 0));
        }
        return PL_OK;
    }
    const pl_zero_region *g = &z->regions[t->zr_l0 + layer];
    if (backward == 1) { /* this layer's gradient slot: its last reduce-scatter must be done
                          * (a split backward's input half adds no gradient: 2) */
        int s = zero_slot(t, layer, 1);
        PL_TRY(zero_rs_wait(t, s));
        memset(t->gwork + s * t->work_count, 0, (size_t)(g->hi - g->lo) * sizeof(float));
    }
    if (t->zero_stage == 3) {
        PL_TRY(zero_gather(t, layer));
        /* the next layer in this pass, into the other slot (its last user is done) */
        int64_t next = backward ? layer - 1 : layer + 1;
        if (t->a->zero3_prefetch && next >= lo && next < hi && !zero_slot_holds(t, next))
            PL_TRY(zero_gather_post(t, next, 0));
    }
fail:
    return st;
}

/* Queues the reduce-scatter of region i's gradients (src) that adds this rank's part
 * to gshard, and leaves it in flight in slot s: 0-1 a layer's gradient slot, 2 the
 * final norm, 3 the embeddings. Every operation receives into gtmp and adds from it
 * before the queue runs the next one, so one region's part is enough; a region reduced
 * once per step (once = 1: pipelined, outside the layers) lands in the shard directly,
 * whose part is still zero. */
static pl_status zero_reduce_region(pl_trainer *t, int i, const float *src, int s, int once)
{
    pl_zero *z = &t->zero;
    const pl_zero_region *g = &z->regions[i];
    pl_commq_op *op = &t->zq_rs[s];
    float *part = t->gshard + (g->own_lo - z->lo);
    *op = (pl_commq_op){.kind = PL_COMMQ_REDUCE_SCATTER, .comm = z->comm, .buf = (float *)src,
                        .recv = once ? part : t->gtmp, .acc = once ? NULL : part,
                        .counts = g->counts, .displs = g->displs};
    t->zq_rs_posted[s] = 1;
    return zq_post(t, op, 0);
}

static pl_status zero_grad_ready(void *ctx, int64_t offset, int64_t count)
{
    pl_trainer *t = ctx;
    (void)count;
    pl_zero *z = &t->zero;
    int i = pl_zero_region_of(z, offset);
    int s = zero_slot(t, i - t->zr_l0, 1);
    /* the final norm's gradients are final once the last layer's backward begins
     * (pipelined: once the step's last micro-batch's has) */
    if (!pipelined(t) && t->zr_tail >= 0 && i == t->zr_tail - 1) {
        pl_status st = zero_reduce_region(t, t->zr_tail, t->gnl + t->nl_emb, 2, 0);
        if (st)
            return st;
    }
    return zero_reduce_region(t, i, t->gwork + s * t->work_count, s, 0);
}

/* Before one micro-batch's forward under stages 2-3 (see trainer_internal.h):
 * the gradients outside the layers start from zero for it, once the last
 * micro-batch's are reduced (the fused LM head adds its gradients in the
 * forward). */
pl_status pl_train_zero_forward_begin(pl_trainer *t)
{
    pl_status st = PL_OK;
    PL_TRY(zero_rs_wait(t, 2)); /* the last micro-batch's, still in flight */
    PL_TRY(zero_rs_wait(t, 3));
    memset(t->gnl, 0, (size_t)t->nl_count * sizeof(float));
fail:
    return st;
}

/* One micro-batch's backward under stages 2-3 (see trainer_internal.h). */
pl_status pl_train_zero_backward(pl_trainer *t, int last)
{
    pl_status st = PL_OK;
    PL_TRY(pl_train_backward(t, &t->model, zero_grad_ready, t)); /* t5: both stacks */
    t->zq_compute_end = pl_time_now();
    if (t->cfg.num_layers == 0)
        PL_TRY(zero_reduce_region(t, t->zr_tail, t->gnl + t->nl_emb, 2, 0));
    PL_TRY(zero_reduce_region(t, t->zr_emb, t->gnl, 3, 0));
    if (last)
        for (int s = 0; s < 4; s++)
            PL_TRY(zero_rs_wait(t, s));
    t->zq_compute_end = INFINITY;
fail:
    return st;
}

pl_status pl_train_zero_begin(pl_trainer *t)
{
    pl_status st = PL_OK;
    /* A gather still in flight holds the last step's parameters (full recompute's
     * rerun forward prefetches a layer the backward then gathers again): finish it
     * and forget it, so that no layer counts as held. */
    for (int s = 0; s < 2; s++) {
        PL_TRY(zero_gather_settle(t, s));
        t->zq_slot_layer[s] = -1;
    }
    if (!pipelined(t))
        return PL_OK;
    if (t->gnl)
        memset(t->gnl, 0, (size_t)t->nl_count * sizeof(float));
    if (t->zero_stage == 3)
        PL_TRY(zero_gather_top(t));
fail:
    return st;
}

pl_status pl_train_zero_pp_backward(pl_trainer *t, pl_model *m)
{
    return pl_model_backward(m, zero_grad_ready, t);
}

pl_status pl_train_zero_pp_backward_weight(pl_trainer *t, pl_model *m)
{
    return pl_model_backward_weight(m, zero_grad_ready, t);
}

pl_status pl_train_zero_pp_finish(pl_trainer *t)
{
    pl_status st = PL_OK;
    if (t->zr_tail >= 0)
        PL_TRY(zero_reduce_region(t, t->zr_tail, t->gnl + t->nl_emb, 2, 1));
    if (t->zr_emb >= 0)
        PL_TRY(zero_reduce_region(t, t->zr_emb, t->gnl, 3, 1));
    for (int s = 0; s < 4; s++)
        PL_TRY(zero_rs_wait(t, s));
    t->zq_compute_end = INFINITY;
fail:
    return st;
}
