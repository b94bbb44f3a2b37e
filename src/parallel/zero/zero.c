/* ZeRO partition arithmetic and the per-region collectives. */
#include "parallel/zero/zero.h"

#include "base/alloc.h"

#include <limits.h>
#include <string.h>

pl_status pl_zero_init(pl_zero *z, pl_comm *comm, int stage, int64_t n, const int64_t *starts,
                       int nstarts)
{
    memset(z, 0, sizeof *z);
    z->stage = stage;
    z->comm = comm;
    z->dp = comm->size;
    z->rank = comm->rank;
    z->n = n;
    z->shard = (n + z->dp - 1) / z->dp;
    z->padded = z->shard * z->dp;
    z->lo = z->rank * z->shard;
    z->hi = z->lo + z->shard;
    if (z->shard > INT_MAX)
        return pl_errorf(PL_ERR_UNSUPPORTED, "ZeRO shard of %lld elements exceeds MPI's int count",
                         (long long)z->shard);
    if (nstarts <= 0)
        return PL_OK;
    if (starts[0] != 0)
        return pl_errorf(PL_ERR_INTERNAL, "ZeRO regions must start at element 0");
    z->regions = pl_calloc((size_t)nstarts, sizeof *z->regions);
    z->ints = pl_calloc((size_t)nstarts * 2 * (size_t)z->dp, sizeof *z->ints);
    if (!z->regions || !z->ints) {
        pl_zero_free(z);
        return pl_errorf(PL_ERR_NOMEM, "out of memory planning ZeRO regions");
    }
    z->nregions = nstarts;
    for (int i = 0; i < nstarts; i++) {
        pl_zero_region *g = &z->regions[i];
        g->lo = starts[i];
        g->hi = i + 1 < nstarts ? starts[i + 1] : z->padded;
        if (g->hi <= g->lo || g->hi - g->lo > INT_MAX) {
            pl_zero_free(z);
            return pl_errorf(PL_ERR_INTERNAL, "ZeRO region %d [%lld, %lld) is empty or too large",
                             i, (long long)g->lo, (long long)g->hi);
        }
        g->counts = z->ints + (size_t)i * 2 * (size_t)z->dp;
        g->displs = g->counts + z->dp;
        for (int r = 0; r < z->dp; r++) {
            int64_t a = r * z->shard > g->lo ? r * z->shard : g->lo;
            int64_t b = (r + 1) * z->shard < g->hi ? (r + 1) * z->shard : g->hi;
            if (b < a)
                b = a = (r * z->shard >= g->hi) ? g->hi : g->lo;
            g->counts[r] = (int)(b - a);
            g->displs[r] = (int)(a - g->lo);
            if (r == z->rank) {
                g->own_lo = a;
                g->own_count = b - a;
            }
        }
    }
    return PL_OK;
}

void pl_zero_free(pl_zero *z)
{
    pl_free(z->regions);
    pl_free(z->ints);
    z->regions = NULL;
    z->ints = NULL;
    z->nregions = 0;
}

int pl_zero_region_of(const pl_zero *z, int64_t offset)
{
    int a = 0, b = z->nregions - 1;
    if (z->nregions == 0 || offset < 0 || offset >= z->padded)
        return -1;
    while (a < b) {
        int mid = (a + b + 1) / 2;
        if (z->regions[mid].lo <= offset)
            a = mid;
        else
            b = mid - 1;
    }
    return a;
}

pl_status pl_zero_reduce_scatter(pl_zero *z, int i, const float *send, float *recv)
{
    const pl_zero_region *g = &z->regions[i];
    return pl_comm_reduce_scatter_v_f32(z->comm, send, recv, g->counts, g->displs);
}

pl_status pl_zero_allgather(pl_zero *z, int i, const float *own, float *out)
{
    const pl_zero_region *g = &z->regions[i];
    return pl_comm_allgather_v_f32(z->comm, own, out, g->counts, g->displs);
}

pl_status pl_zero_reduce_scatter_all(pl_zero *z, float *grads)
{
    return pl_comm_reduce_scatter_f32(z->comm, grads, grads, z->shard);
}

pl_status pl_zero_allgather_all(pl_zero *z, float *params)
{
    return pl_comm_allgather_f32(z->comm, params + z->lo, params, z->shard);
}

pl_zero_bytes pl_zero_model_bytes(int stage, int64_t n, int dp)
{
    double p = 4.0 * (double)n, d = (double)dp;
    pl_zero_bytes b = {p, p, 2 * p};
    if (stage >= 1)
        b.optim /= d;
    if (stage >= 2)
        b.grads /= d;
    if (stage >= 3)
        b.params /= d;
    return b;
}
