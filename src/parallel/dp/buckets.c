/* Data-parallel gradient buckets over one flat buffer, all-reduced as backward fills them. */
#include "parallel/dp/buckets.h"

#include "base/alloc.h"
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
    pl_comm_req *req;   /* per bucket, in launch order */
    int next;           /* buckets [0, next) have started this step */
    double t_first;     /* when bucket 0 started this step */
    double progress;    /* seconds inside MPI in ready() this step */
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
        return pl_errorf(PL_ERR_NOMEM, "bucket split: %d parameter bounds", nbounds);
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
        st = pl_errorf(PL_ERR_NOMEM, "bucket split: %d buckets", ns);
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
    pl_free(b->req);
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
        return pl_errorf(PL_ERR_NOMEM, "dp buckets");
    b->dp = dp;
    b->grad = grad;
    b->n = n;
    b->nb = nranges;
    size_t nb = nranges > 0 ? (size_t)nranges : 1;
    b->range = pl_malloc(nb * sizeof *b->range);
    b->by_offset = pl_malloc(nb * sizeof *b->by_offset);
    b->ready = pl_calloc(nb, sizeof *b->ready);
    b->req = pl_malloc(nb * sizeof *b->req);
    if (!b->range || !b->by_offset || !b->ready || !b->req) {
        st = pl_errorf(PL_ERR_NOMEM, "dp buckets: %d buckets", nranges);
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
        b->req[i] = PL_COMM_REQ_NULL;
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
    if (k == 0)
        b->t_first = pl_time_now();
    const pl_dp_range *r = &b->range[k];
    pl_status st = pl_comm_iallreduce_f32(b->dp, b->grad + r->offset, r->count, PL_COMM_SUM, &b->req[k]);
    if (st == PL_OK)
        b->stats.allreduces++;
    return st;
}

pl_status pl_dp_buckets_ready(pl_dp_buckets *b, int64_t offset, int64_t count)
{
    if (offset < 0 || count < 0 || offset > b->n - count)
        return pl_errorf(PL_ERR_ARG, "dp buckets: ready [%lld, +%lld) lies outside [0, %lld)",
                         (long long)offset, (long long)count, (long long)b->n);
    if (count == 0)
        return PL_OK;
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
    while (st == PL_OK && b->next < b->nb && b->ready[b->next] == b->range[b->next].count) {
        st = start_bucket(b, b->next);
        if (st == PL_OK)
            b->next++;
    }
    if (st == PL_OK && b->next > 0) {
        int done;
        st = pl_comm_testall(b->req, b->next, &done);
    }
    if (b->next > 0)
        b->progress += pl_time_now() - (b->t_first > t0 ? b->t_first : t0);
    return st;
}

static void reset_step(pl_dp_buckets *b)
{
    memset(b->ready, 0, (size_t)(b->nb > 0 ? b->nb : 1) * sizeof *b->ready);
    b->next = 0;
    b->progress = 0;
}

pl_status pl_dp_buckets_finish(pl_dp_buckets *b)
{
    pl_status st = PL_OK;
    if (b->next < b->nb) {
        int k = b->next;
        st = pl_errorf(PL_ERR_INTERNAL,
                       "dp buckets: finish with bucket %d [%lld, %lld) holding %lld of %lld "
                       "elements marked ready (world rank %d); the other ranks of %s will hang",
                       k, (long long)b->range[k].offset,
                       (long long)(b->range[k].offset + b->range[k].count), (long long)b->ready[k],
                       (long long)b->range[k].count, b->dp->world_rank, b->dp->name);
        pl_comm_waitall(b->req, b->next); /* MPI must be done with the buffer */
        reset_step(b);
        return st;
    }
    int dp = b->dp->size;
    if (dp > 1 && b->nb > 0) {
        double t0 = pl_time_now();
        st = pl_comm_waitall(b->req, b->nb);
        double t1 = pl_time_now();
        if (st == PL_OK) {
            double window = t1 - b->t_first, wait = t1 - t0;
            double overlap = window > wait ? window - wait : 0.0;
            b->stats.window_seconds += window;
            b->stats.wait_seconds += wait;
            b->stats.overlap_seconds += overlap;
            b->stats.last_window = window;
            b->stats.last_wait = wait;
            b->stats.last_overlap = overlap;
            b->stats.progress_seconds += b->progress;
            b->stats.last_progress = b->progress;
            const float scale = (float)(1.0 / dp);
            float *g = b->grad;
            const int64_t n = b->n;
#pragma omp parallel for simd if (n > (1 << 20)) schedule(static)
            for (int64_t i = 0; i < n; i++)
                g[i] *= scale;
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

void pl_dp_buckets_free(pl_dp_buckets *b)
{
    if (!b)
        return;
    if (b->next > 0)
        pl_comm_waitall(b->req, b->next);
    buckets_release(b);
}
