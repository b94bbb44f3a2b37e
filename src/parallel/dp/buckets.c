/* Data-parallel gradient buckets over one flat buffer, all-reduced as backward fills them. */
#include "parallel/dp/buckets.h"

#include "base/alloc.h"
#include "parallel/commq.h"
#include "base/log.h"

#include <stdlib.h>
#include <string.h>

typedef struct bucket_pos {
    int64_t offset;
    int index; /* into range[] */
} bucket_pos;

struct pl_dp_buckets {
    pl_comm *dp;
    float *grad;
    int64_t n;
    int nb;
    pl_dp_range *range; /* launch order */
    bucket_pos *by_offset; /* buckets in ascending offset, for lookups */
    int64_t *ready;     /* elements marked this step, per bucket */
    pl_commq *q;        /* NULL when dp = 1 */
    pl_commq_op *op;    /* per bucket, in launch order */
    int next;           /* buckets [0, next) have been posted this step */
    double progress;    /* seconds inside post in ready() this step */
    double t_marked;    /* when the last ready() of this step began: backward's end */
    pl_dp_buckets_stats stats;
};

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

pl_status pl_dp_buckets_split(int64_t n, const int64_t *bounds, int nbounds, int64_t bucket_elems,
                              pl_dp_range **out, int *nout)
{
    pl_status st = PL_OK;
    *out = NULL;
    *nout = 0;
    int64_t *starts = NULL;
    pl_dp_range *r = NULL;
    if (n < 0 || nbounds < 0)
        return pl_errorf(PL_ERR_ARG, "bucket split: negative size (n %lld, %d bounds)", (long long)n,
                         nbounds);
    if (n == 0)
        return PL_OK;
    /* starts = {0} + bounds, sorted, duplicates removed. */
    starts = pl_malloc(((size_t)nbounds + 1) * sizeof *starts);
    if (!starts)
        return pl_errorf(PL_ERR_NOMEM, "bucket split: out of memory for %d parameter bounds", nbounds);
    starts[0] = 0;
    for (int i = 0; i < nbounds; i++) {
        if (bounds[i] < 0 || bounds[i] >= n) {
            st = pl_errorf(PL_ERR_ARG,
                           "bucket split: parameter bound %d is %lld, outside [0, %lld)", i,
                           (long long)bounds[i], (long long)n);
            goto fail;
        }
        starts[i + 1] = bounds[i];
    }
    qsort(starts, (size_t)nbounds + 1, sizeof *starts, cmp_i64);
    int ns = 1;
    for (int i = 1; i <= nbounds; i++)
        if (starts[i] != starts[ns - 1])
            starts[ns++] = starts[i];

    r = pl_malloc((size_t)ns * sizeof *r); /* at most one bucket per parameter */
    if (!r) {
        st = pl_errorf(PL_ERR_NOMEM, "bucket split: out of memory for %d buckets", ns);
        goto fail;
    }
    int nr = 0;
    int64_t end = n;
    for (int i = ns - 1; i >= 0; i--) {
        int close = i == 0 || (bucket_elems > 0 && end - starts[i] >= bucket_elems);
        if (close) {
            r[nr++] = (pl_dp_range){starts[i], end - starts[i]};
            end = starts[i];
        }
    }
    pl_free(starts);
    *out = r;
    *nout = nr;
    return PL_OK;

fail:
    pl_free(starts);
    pl_free(r);
    return st;
}

/* Index into b->by_offset of the bucket holding element x (0 <= x < n). */
static int find_bucket(const pl_dp_buckets *b, int64_t x)
{
    int lo = 0, hi = b->nb - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (b->by_offset[mid].offset <= x)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

static int cmp_pos(const void *a, const void *b)
{
    const bucket_pos *x = a, *y = b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

static void buckets_release(pl_dp_buckets *b)
{
    if (!b)
        return;
    pl_free(b->range);
    pl_free(b->by_offset);
    pl_free(b->ready);
    pl_free(b->op);
    pl_commq_free(b->q);
    pl_free(b);
}

/* Validation and allocation on this rank alone. */
static pl_status buckets_create(pl_dp_buckets **out, pl_comm *dp, float *grad, int64_t n,
                                const pl_dp_range *ranges, int nranges)
{
    pl_status st = PL_OK;
    pl_dp_buckets *b = NULL;
    if (n < 0 || nranges < 0 || (nranges == 0) != (n == 0))
        return pl_errorf(PL_ERR_ARG, "dp buckets: %d ranges for a gradient buffer of %lld elements",
                         nranges, (long long)n);
    if (n > 0 && !grad)
        return pl_errorf(PL_ERR_ARG, "dp buckets: NULL gradient buffer");
    b = pl_calloc(1, sizeof *b);
    if (!b)
        return pl_errorf(PL_ERR_NOMEM, "dp buckets: out of memory");
    b->dp = dp;
    b->grad = grad;
    b->n = n;
    b->nb = nranges;
    size_t nb = nranges > 0 ? (size_t)nranges : 1;
    b->range = pl_malloc(nb * sizeof *b->range);
    b->by_offset = pl_malloc(nb * sizeof *b->by_offset);
    b->ready = pl_calloc(nb, sizeof *b->ready);
    b->op = pl_calloc(nb, sizeof *b->op);
    if (!b->range || !b->by_offset || !b->ready || !b->op) {
        st = pl_errorf(PL_ERR_NOMEM, "dp buckets: out of memory for %d buckets", nranges);
        goto fail;
    }
    for (int i = 0; i < nranges; i++) {
        if (ranges[i].count <= 0 || ranges[i].offset < 0) {
            st = pl_errorf(PL_ERR_ARG, "dp buckets: bucket %d is [%lld, +%lld): needs offset >= 0 "
                           "and count > 0", i, (long long)ranges[i].offset,
                           (long long)ranges[i].count);
            goto fail;
        }
        b->range[i] = ranges[i];
        b->by_offset[i] = (bucket_pos){ranges[i].offset, i};
    }
    qsort(b->by_offset, (size_t)nranges, sizeof *b->by_offset, cmp_pos);
    int64_t pos = 0;
    for (int i = 0; i < nranges; i++) {
        const pl_dp_range *r = &b->range[b->by_offset[i].index];
        if (r->offset != pos) {
            st = pl_errorf(PL_ERR_ARG,
                           "dp buckets: ranges must partition [0, %lld): bucket %d starts at %lld, "
                           "expected %lld (%s)",
                           (long long)n, b->by_offset[i].index, (long long)r->offset, (long long)pos,
                           r->offset < pos ? "overlap" : "gap");
            goto fail;
        }
        pos += r->count;
    }
    if (pos != n) {
        st = pl_errorf(PL_ERR_ARG, "dp buckets: ranges cover [0, %lld), the buffer has %lld elements",
                       (long long)pos, (long long)n);
        goto fail;
    }
    if (dp->size > 1 && (st = pl_commq_init(&b->q, pl_commq_default_mode())) != PL_OK)
        goto fail;
    *out = b;
    return PL_OK;

fail:
    buckets_release(b);
    return st;
}

/* FNV-1a over the layout, cut to 62 bits so that its negation fits an int64. */
static int64_t layout_hash(int64_t n, const pl_dp_range *r, int nr)
{
    uint64_t h = 1469598103934665603ull;
    int64_t head[2] = {n, nr};
    for (int i = 0; i < 2 + 2 * nr; i++) {
        uint64_t v = (uint64_t)(i < 2 ? head[i] : (i % 2 ? r[(i - 2) / 2].count : r[(i - 2) / 2].offset));
        for (int k = 0; k < 8; k++) {
            h ^= (v >> (8 * k)) & 0xff;
            h *= 1099511628211ull;
        }
    }
    return (int64_t)(h >> 2);
}

pl_status pl_dp_buckets_init(pl_dp_buckets **out, pl_comm *dp, float *grad, int64_t n,
                             const pl_dp_range *ranges, int nranges)
{
    *out = NULL;
    pl_dp_buckets *b = NULL;
    pl_status st = buckets_create(&b, dp, grad, n, ranges, nranges);
    if (dp->size > 1) {
        /* One all-reduce tells every rank whether any failed and whether layouts agree. */
        int64_t h = st == PL_OK ? layout_hash(n, ranges, nranges) : 0;
        int64_t v[3] = {st != PL_OK, h, -h};
        pl_status cst = pl_comm_allreduce_i64(dp, v, 3, PL_COMM_MAX);
        if (cst != PL_OK) {
            buckets_release(b);
            return cst;
        }
        if (st == PL_OK && v[0])
            st = pl_errorf(PL_ERR_INTERNAL, "dp buckets: another rank of communicator %s (size %d) "
                           "failed to set up its buckets", dp->name, dp->size);
        else if (st == PL_OK && v[1] != -v[2])
            st = pl_errorf(PL_ERR_ARG, "dp buckets: the ranks of communicator %s have different "
                           "bucket layouts (world rank %d: %lld elements in %d buckets)",
                           dp->name, dp->world_rank, (long long)n, nranges);
    }
    if (st != PL_OK) {
        buckets_release(b);
        return st;
    }
    *out = b;
    return PL_OK;
}

static pl_status start_bucket(pl_dp_buckets *b, int k)
{
    const pl_dp_range *r = &b->range[k];
    pl_commq_op *op = &b->op[k];
    memset(op, 0, sizeof *op);
    op->kind = PL_COMMQ_ALLREDUCE;
    op->comm = b->dp;
    op->buf = b->grad + r->offset;
    op->n = r->count;
    op->scale = (float)(1.0 / b->dp->size);
    return pl_commq_post(b->q, op);
}

pl_status pl_dp_buckets_ready(pl_dp_buckets *b, int64_t offset, int64_t count)
{
    if (offset < 0 || count < 0 || offset > b->n - count)
        return pl_errorf(PL_ERR_ARG, "dp buckets: ready [%lld, +%lld) lies outside [0, %lld)",
                         (long long)offset, (long long)count, (long long)b->n);
    if (count == 0)
        return PL_OK;
    b->t_marked = pl_time_now();
    int64_t pos = offset, end = offset + count;
    for (int i = find_bucket(b, offset); pos < end; i++) {
        int k = b->by_offset[i].index;
        const pl_dp_range *r = &b->range[k];
        int64_t e = end < r->offset + r->count ? end : r->offset + r->count;
        b->ready[k] += e - pos;
        if (b->ready[k] > r->count)
            return pl_errorf(PL_ERR_ARG,
                             "dp buckets: bucket %d [%lld, %lld) has %lld elements marked ready "
                             "but holds %lld: a range was marked twice this step",
                             k, (long long)r->offset, (long long)(r->offset + r->count),
                             (long long)b->ready[k], (long long)r->count);
        pos = e;
    }
    if (b->dp->size <= 1) {
        while (b->next < b->nb && b->ready[b->next] == b->range[b->next].count)
            b->next++;
        return PL_OK;
    }
    double t0 = pl_time_now();
    pl_status st = PL_OK;
    int posted = 0;
    while (st == PL_OK && b->next < b->nb && b->ready[b->next] == b->range[b->next].count) {
        st = start_bucket(b, b->next);
        if (st == PL_OK)
            b->next++;
        posted = 1;
    }
    if (posted)
        b->progress += pl_time_now() - t0;
    return st;
}

static void reset_step(pl_dp_buckets *b)
{
    memset(b->ready, 0, (size_t)(b->nb > 0 ? b->nb : 1) * sizeof *b->ready);
    b->next = 0;
    b->progress = 0;
}

/* Waits for the buckets posted this step; the first error wins. */
static pl_status wait_posted(pl_dp_buckets *b, double t_end, pl_dp_step_stats *s)
{
    pl_status st = PL_OK;
    pl_commq_overlap o = {0};
    for (int k = 0; k < b->next; k++) {
        pl_status w = pl_commq_wait(b->q, &b->op[k]);
        if (w != PL_OK && st == PL_OK)
            st = w;
        pl_commq_overlap_add(&o, &b->op[k], t_end);
    }
    if (s) {
        s->buckets = o.ops;
        s->early = o.early;
        s->busy = o.busy;
        s->before = o.before;
        s->after = o.after;
    }
    return st;
}

void pl_dp_step_stats_add(pl_dp_step_stats *a, const pl_dp_step_stats *s)
{
    a->buckets += s->buckets;
    a->early += s->early;
    a->busy += s->busy;
    a->before += s->before;
    a->after += s->after;
    a->wait += s->wait;
    a->progress += s->progress;
}

pl_status pl_dp_buckets_finish(pl_dp_buckets *b)
{
    pl_status st = PL_OK;
    double t0 = pl_time_now();
    if (b->next < b->nb) {
        int k = b->next;
        st = pl_errorf(PL_ERR_INTERNAL,
                       "dp buckets: finish with bucket %d [%lld, %lld) holding %lld of %lld "
                       "elements marked ready (world rank %d); the other ranks of %s will hang",
                       k, (long long)b->range[k].offset,
                       (long long)(b->range[k].offset + b->range[k].count), (long long)b->ready[k],
                       (long long)b->range[k].count, b->dp->world_rank, b->dp->name);
        char keep[512];
        snprintf(keep, sizeof keep, "%s", pl_error_msg());
        if (b->q)
            wait_posted(b, t0, NULL); /* MPI must be done with the buffer */
        reset_step(b);
        return pl_errorf(st, "%s", keep);
    }
    if (b->dp->size > 1 && b->nb > 0) {
        pl_dp_step_stats s = {0};
        st = wait_posted(b, b->t_marked, &s);
        s.wait = pl_time_now() - t0;
        s.progress = b->progress;
        if (st == PL_OK) {
            b->stats.last = s;
            pl_dp_step_stats_add(&b->stats.total, &s);
        }
    }
    if (st == PL_OK)
        b->stats.steps++;
    reset_step(b);
    return st;
}

const pl_dp_buckets_stats *pl_dp_buckets_stats_get(const pl_dp_buckets *b) { return &b->stats; }

void pl_dp_buckets_stats_reset(pl_dp_buckets *b) { memset(&b->stats, 0, sizeof b->stats); }

int pl_dp_buckets_count(const pl_dp_buckets *b) { return b->nb; }

int pl_dp_buckets_threaded(const pl_dp_buckets *b)
{
    return b->q && pl_commq_mode_of(b->q) == PL_COMMQ_THREAD;
}

void pl_dp_buckets_free(pl_dp_buckets *b)
{
    if (!b)
        return;
    if (b->q)
        pl_commq_drain(b->q);
    buckets_release(b);
}
