/* --async-save: the checkpoint's files are written by a background thread while
 * training goes on.
 *
 * At the step boundary of a save, every rank takes a snapshot of what it writes (its
 * parameters when it writes its slice's model file, its Adam moments or its ZeRO
 * shard's) into one buffer allocated at the first save and kept: the extra memory is
 * bounded by one copy of this rank's part of the checkpoint. The collective parts of
 * a save (ckpt/checkpoint.h: begin, end) stay on the training thread; the writer thread
 * only writes and checksums this rank's files (pl_ckpt_save_write: no communication,
 * so MPI needs no thread support beyond funneled). After each later step every rank
 * asks whether all writers are done (one 4-byte allreduce while a save is pending, as
 * Megatron's maybe_finalize_async_save does); when they are, the checksums are gathered
 * and rank 0 writes the manifest and publishes the iteration, on a second background
 * thread (its fsyncs would stall the step), whose end the next steps ask about the same
 * way. A new save, the end of training and an exit signal wait for the pending one
 * first. Until its publication
 * the iteration lives under iter_XXXXXXX.tmp/ and `latest` names the previous one, so
 * a crash mid-write leaves the previous checkpoint loadable (ckpt/publish.h). */
#include "train/trainer_internal.h"

#include "base/alloc.h"
#include "base/log.h"
#include "ckpt/checkpoint.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

typedef struct pl_train_async {
    pthread_t thread;
    int state;             /* IDLE, WRITING (every rank's writer), PUBLISHING (rank 0's) */
    int rank0;             /* this rank publishes */
    atomic_int finished;   /* the running thread has returned */
    pl_ckpt_pending pending;
    pl_ckpt_meta meta;     /* its strings point into the run's arguments */
    pl_ckpt_zero zero;
    pl_ckpt_buffers buf;   /* over the snapshot */
    const pl_model_config *cfg;
    const char *dir;
    int64_t keep_last_n;   /* --keep-last-n, applied after the publication */
    float *snap;           /* the snapshot: parameters, then the moments */
    size_t snap_floats;
    double t_start, stall;  /* when the save began; training-thread seconds spent on it */
    double t_written;       /* when this rank's writer returned */
} pl_train_async;

enum { IDLE, WRITING, PUBLISHING };

static void *writer(void *arg)
{
    pl_train_async *as = arg;
    pl_ckpt_save_write(&as->pending, as->zero.dp_rank, as->meta.pp, &as->buf);
    as->t_written = pl_time_now();
    atomic_store(&as->finished, 1);
    return NULL;
}

static void *publisher(void *arg)
{
    pl_train_async *as = arg;
    pl_ckpt_pending *p = &as->pending;
    if (pl_ckpt_save_publish(as->dir, as->cfg, &as->meta, &as->buf, p) == PL_OK &&
        as->keep_last_n > 0 && (p->st = pl_train_keep_last(as->dir, as->keep_last_n)))
        snprintf(p->err, sizeof p->err, "%s", pl_error_msg());
    atomic_store(&as->finished, 1);
    return NULL;
}

static pl_status start(pl_train_async *as, void *(*fn)(void *), const char *what)
{
    atomic_store(&as->finished, 0);
    int err = pthread_create(&as->thread, NULL, fn, as);
    if (err)
        return pl_errorf(PL_ERR_IO, "--async-save: cannot start the %s thread: %s", what,
                         strerror(err));
    return PL_OK;
}

/* Floats of the snapshot of what this rank writes out of buf: its model file's tensors
 * (DP rank 0: the parameters, and the moments without ZeRO) and its ZeRO shard's moments. */
static size_t snap_floats(const pl_ckpt_buffers *buf, int dp_rank)
{
    const int model = dp_rank == 0;
    const int moments = model && !buf->zero && buf->exp_avg;
    const int64_t zc = buf->zero ? buf->zero->count : 0;
    return (size_t)(model ? buf->reg->numel : 0) * (moments ? 3 : 1) + 2 * (size_t)zc;
}

/* The snapshot buffer grown to need floats, its pages faulted in now (the first touch
 * of ~1.5 GB costs seconds: at start-up, not inside a save's stall). */
static pl_status snap_reserve(pl_train_async *as, size_t need)
{
    if (need <= as->snap_floats)
        return PL_OK;
    pl_free(as->snap);
    as->snap_floats = 0;
    as->snap = pl_malloc((need ? need : 1) * sizeof(float));
    if (!as->snap)
        return pl_errorf(PL_ERR_NOMEM, "--async-save: out of memory for the checkpoint's "
                         "snapshot (%.1f MiB)", (double)need * sizeof(float) / (1 << 20));
    memset(as->snap, 0, need * sizeof(float));
    as->snap_floats = need;
    return PL_OK;
}

static pl_train_async *async_state(pl_trainer *t)
{
    if (!t->async)
        t->async = pl_calloc(1, sizeof *t->async);
    return t->async;
}

pl_status pl_train_async_reserve(pl_trainer *t, const pl_ckpt_buffers *buf)
{
    pl_train_async *as = async_state(t);
    if (!as)
        return pl_errorf(PL_ERR_NOMEM, "--async-save: out of memory");
    return snap_reserve(as, snap_floats(buf, t->grid.dp_rank));
}

/* Copies what this rank writes out of buf into the snapshot and points as->buf at it. */
static pl_status snapshot(pl_train_async *as, const pl_ckpt_buffers *buf, int dp_rank)
{
    const int64_t numel = buf->reg->numel;
    const int model = dp_rank == 0;                 /* this rank writes its slice's model file */
    const int moments = model && !buf->zero && buf->exp_avg;
    const int64_t zc = buf->zero ? buf->zero->count : 0;
    pl_status st = snap_reserve(as, snap_floats(buf, dp_rank));
    if (st)
        return st;
    float *at = as->snap;
    as->buf = *buf;
    as->buf.params = as->buf.exp_avg = as->buf.exp_avg_sq = NULL;
    const float *src[3] = {buf->params, buf->exp_avg, buf->exp_avg_sq};
    float **dst[3] = {&as->buf.params, &as->buf.exp_avg, &as->buf.exp_avg_sq};
    for (int k = 0; k < (moments ? 3 : model ? 1 : 0); k++) {
        memcpy(at, src[k], (size_t)numel * sizeof(float));
        *dst[k] = at;
        at += numel;
    }
    if (!model) /* end reads only the registry; write reads no parameters here */
        as->buf.params = NULL;
    if (buf->zero) {
        as->zero = *buf->zero;
        memcpy(at, buf->zero->exp_avg, (size_t)zc * sizeof(float));
        as->zero.exp_avg = at;
        at += zc;
        memcpy(at, buf->zero->exp_avg_sq, (size_t)zc * sizeof(float));
        as->zero.exp_avg_sq = at;
        as->buf.zero = &as->zero;
    } else {
        memset(&as->zero, 0, sizeof as->zero);
    }
    as->zero.dp_rank = dp_rank; /* the writer's DP rank (stage 0 too) */
    return PL_OK;
}

pl_status pl_train_async_begin(pl_trainer *t, const char *dir, const pl_ckpt_meta *meta,
                               const pl_ckpt_buffers *buf)
{
    pl_train_async *as = async_state(t);
    if (!as)
        return pl_errorf(PL_ERR_NOMEM, "--async-save: out of memory");
    PL_ASSERT(as->state == IDLE);
    const double t0 = pl_time_now();
    pl_comm *world = pl_grid_comm(&t->grid, PL_GRID_WORLD);
    pl_status st = pl_ckpt_save_begin(dir, world, meta->iteration, &as->pending);
    if (st)
        return st;
    as->meta = *meta;
    as->cfg = &t->cfg;
    as->dir = dir;
    as->keep_last_n = t->a->keep_last_n;
    as->rank0 = world->rank == 0;
    if ((st = snapshot(as, buf, t->grid.dp_rank)) || (st = start(as, writer, "writer")))
        return st;
    as->state = WRITING;
    as->t_start = t0;
    as->stall = pl_time_now() - t0;
    return PL_OK;
}

/* Has every rank's thread of this state returned? (collective; wait: join it) */
static pl_status all_finished(pl_train_async *as, pl_comm *world, int wait, int *yes)
{
    int32_t done = wait || atomic_load(&as->finished) || (as->state == PUBLISHING && !as->rank0);
    *yes = 1;
    if (!wait) {
        pl_status st = pl_comm_allreduce_i32(world, &done, 1, PL_COMM_MIN);
        if (st)
            return st;
        *yes = done;
    }
    if (*yes && (as->state == WRITING || as->rank0))
        pthread_join(as->thread, NULL);
    return PL_OK;
}

pl_status pl_train_async_poll(pl_trainer *t, int wait)
{
    pl_train_async *as = t->async;
    if (!as || as->state == IDLE)
        return PL_OK;
    pl_comm *world = pl_grid_comm(&t->grid, PL_GRID_WORLD);
    const double t0 = pl_time_now();
    pl_status st = PL_OK;
    int yes;
    if (as->state == WRITING) {
        if ((st = all_finished(as, world, wait, &yes)) || !yes)
            goto out;
        as->state = IDLE; /* from here a failure ends the save */
        if ((st = pl_ckpt_save_agree(world, t->grid.dp_rank, &as->buf, &as->pending)))
            goto out;
        if (as->rank0 && (st = start(as, publisher, "publisher")))
            goto out;
        as->state = PUBLISHING;
    }
    if ((st = all_finished(as, world, wait, &yes)) || !yes)
        goto out;
    as->state = IDLE;
    st = pl_ckpt_publish_agree(world, &as->pending);
    pl_ckpt_pending_free(&as->pending);
    as->stall += pl_time_now() - t0;
    if (!st && pl_train_is_root(t))
        pl_log_info(" saved checkpoint at iteration %lld to %s (async: files written in %.2f s, "
                    "published after %.2f s; training stalled %.3f s)",
                    (long long)as->meta.iteration, as->dir, as->t_written - as->t_start,
                    pl_time_now() - as->t_start, as->stall);
    return st;
out:
    as->stall += pl_time_now() - t0;
    return st;
}

void pl_train_async_free(pl_trainer *t)
{
    pl_train_async *as = t->async;
    if (!as)
        return;
    /* a failed run: let a running thread finish; the .tmp stays unpublished */
    if (as->state == WRITING || (as->state == PUBLISHING && as->rank0))
        pthread_join(as->thread, NULL);
    pl_ckpt_pending_free(&as->pending);
    pl_free(as->snap);
    pl_free(as);
    t->async = NULL;
}
