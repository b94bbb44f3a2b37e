/* mpi_check: the parallel layer (dist, comm, grid, DP buckets) under a real launcher.
 *
 *   mpi_check WORLD [--layouts TPxPP,TPxPP,...] [--steps N] [--verbose]
 *
 * WORLD is the world size the launch is meant to have: the first check is that
 * MPI_Comm_size equals it, which catches the singleton pitfall (a binary started by the
 * other implementation's mpirun runs as WORLD processes of size 1, and would "pass").
 * Without --layouts every (tp, pp) with tp*pp dividing WORLD is checked. --steps sets
 * the bucketed backward steps per layout (default 3; fewer for MPICH when
 * oversubscribed, where each collective costs 5-30 ms). --verbose shows the messages of
 * the error paths.
 *
 * Every expected value is computed locally from the rank formula written out again here
 * (coordinates by enumerating pp, dp, tp in nested loops), not from the library's
 * helpers. A check passes when it passes on every rank; rank 0 prints "ok NAME" or
 * "not ok NAME" and ends with "mpi_check: N passed, N failed". Failures print on the
 * rank that saw them. Exit code 0 only if everything passed. */
#include "base/alloc.h"
#include "base/log.h"
#include "base/status.h"
#include "parallel/comm.h"
#include "parallel/dist.h"
#include "parallel/commq.h"
#include "parallel/dp/buckets.h"
#include "parallel/grid.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

/* ---- harness -------------------------------------------------------------------------- */

static int n_passed, n_failed, cur_failed, my_rank, verbose;
static char cur_name[96];

/* With --verbose, rank 0 shows the message an error path produced. */
static void show(const char *what)
{
    if (verbose && my_rank == 0)
        printf("    %s: %s\n", what, pl_error_msg());
}

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            cur_failed = 1;                                                                        \
            fprintf(stderr, "  FAIL [rank %d] %s (%s:%d): %s: ", my_rank, cur_name, __FILE__,      \
                    __LINE__, #cond);                                                              \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
        }                                                                                          \
    } while (0)

#define CHECK_OK(expr)                                                                             \
    do {                                                                                           \
        pl_status check_st_ = (expr);                                                              \
        CHECK(check_st_ == PL_OK, "%s: %s", pl_status_str(check_st_), pl_error_msg());            \
    } while (0)

/* Runs one check on every rank; it passes if it passed everywhere. */
static void run(const char *layout, const char *name, void (*fn)(void *), void *arg)
{
    snprintf(cur_name, sizeof cur_name, "%s%s%s", layout, *layout ? "/" : "", name);
    cur_failed = 0;
    fn(arg);
    int ok = !cur_failed;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (ok)
        n_passed++;
    else
        n_failed++;
    if (my_rank == 0) {
        printf("%s %s\n", ok ? "ok" : "not ok", cur_name);
        fflush(stdout);
    }
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int64_t rand_below(uint64_t *s, int64_t n) { return (int64_t)(splitmix(s) % (uint64_t)n); }

/* ---- the layout under test, with coordinates computed independently ------------------ */

typedef struct coords {
    int t, d, p;
} coords;

typedef struct layout_ctx {
    int world, tp, pp, dp, steps;
    uint64_t seed;
    coords *at; /* at[rank], from nested enumeration */
    pl_grid *grid;
    char name[48];
} layout_ctx;

static void enumerate_coords(layout_ctx *L)
{
    int r = 0;
    for (int p = 0; p < L->pp; p++)
        for (int d = 0; d < L->dp; d++)
            for (int t = 0; t < L->tp; t++)
                L->at[r++] = (coords){t, d, p};
}

/* Ascending world ranks of `rank`'s group of kind k (ascending is the group order for
 * every kind: the varying coordinates have positive strides). */
static int expected_members(const layout_ctx *L, int k, int rank, int *out)
{
    coords me = L->at[rank];
    int n = 0;
    if (k == PL_GRID_EMBD && me.p != 0 && me.p != L->pp - 1)
        return 0;
    for (int r = 0; r < L->world; r++) {
        coords c = L->at[r];
        int in = 0;
        switch (k) {
        case PL_GRID_TP: in = c.d == me.d && c.p == me.p; break;
        case PL_GRID_DP: in = c.t == me.t && c.p == me.p; break;
        case PL_GRID_PP: in = c.t == me.t && c.d == me.d; break;
        case PL_GRID_MP: in = c.d == me.d; break;
        case PL_GRID_EMBD: in = c.t == me.t && c.d == me.d && (c.p == 0 || c.p == L->pp - 1); break;
        case PL_GRID_WORLD: in = 1; break;
        }
        if (in)
            out[n++] = r;
    }
    return n;
}

/* ---- dist ---------------------------------------------------------------------------- */

typedef struct dist_ctx {
    pl_dist *dist;
    int expected;
} dist_ctx;

static void dist_reports_rank_size_and_launcher(void *arg)
{
    dist_ctx *c = arg;
    int r, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    CHECK(c->dist->rank == r && c->dist->size == n, "dist says %d of %d, MPI %d of %d",
          c->dist->rank, c->dist->size, r, n);
    CHECK(c->dist->thread_level >= MPI_THREAD_FUNNELED, "thread level %d", c->dist->thread_level);
    /* One machine: every rank shares memory with every other. */
    CHECK(c->dist->local_size == n && c->dist->local_rank >= 0 && c->dist->local_rank < n,
          "local %d of %d", c->dist->local_rank, c->dist->local_size);
    const pl_dist_launcher *l = &c->dist->launcher;
    CHECK(l->size < 0 || (l->size == c->expected && l->rank == r),
          "launcher %s says rank %d of %d", l->name, l->rank, l->size);
    if (c->expected > 1)
        CHECK(l->size == c->expected, "no launcher detected in a %d-rank run (%s)", c->expected,
              l->name);
}

/* ---- grid ---------------------------------------------------------------------------- */

static void grid_coordinates_follow_megatron_order(void *arg)
{
    layout_ctx *L = arg;
    pl_grid *g = L->grid;
    coords want = L->at[g->rank];
    CHECK(g->layout.tp == L->tp && g->layout.pp == L->pp && g->layout.dp == L->dp &&
              g->layout.world == L->world,
          "layout %dx%dx%d of %d", g->layout.tp, g->layout.dp, g->layout.pp, g->layout.world);
    CHECK(g->tp_rank == want.t && g->dp_rank == want.d && g->pp_rank == want.p,
          "rank %d at (%d,%d,%d), expected (%d,%d,%d)", g->rank, g->tp_rank, g->dp_rank, g->pp_rank,
          want.t, want.d, want.p);
    CHECK(pl_grid_is_first_stage(g) == (want.p == 0) && pl_grid_is_last_stage(g) == (want.p == L->pp - 1),
          "first/last stage");
}

static void grid_groups_have_expected_members(void *arg)
{
    layout_ctx *L = arg;
    pl_grid *g = L->grid;
    int *want = malloc(sizeof(int) * (size_t)L->world * 3);
    int *got = want + L->world, *helper = got + L->world;
    for (int k = 0; k < PL_GRID_NGROUPS; k++) {
        pl_comm *c = pl_grid_comm(g, (pl_grid_group)k);
        int n = expected_members(L, k, g->rank, want);
        int h = pl_grid_group_members(&g->layout, (pl_grid_group)k, g->rank, helper);
        CHECK(h == n && memcmp(helper, want, sizeof(int) * (size_t)n) == 0,
              "%s: pl_grid_group_members disagrees (%d vs %d members)", c->name, h, n);
        CHECK(strcmp(c->name, pl_grid_group_name((pl_grid_group)k)) == 0, "name %s", c->name);
        if (n == 0) {
            CHECK(!pl_comm_is_member(c), "%s: rank %d should not be a member", c->name, g->rank);
            continue;
        }
        CHECK(c->size == n, "%s: size %d, expected %d", c->name, c->size, n);
        if (c->size != n)
            continue;
        int pos = -1;
        for (int i = 0; i < n; i++)
            if (want[i] == g->rank)
                pos = i;
        CHECK(c->rank == pos, "%s: rank %d in group, expected %d", c->name, c->rank, pos);
        /* Ask the communicator itself who is in it, in its rank order. */
        MPI_Allgather(&g->rank, 1, MPI_INT, got, 1, MPI_INT, c->mpi);
        for (int i = 0; i < n; i++)
            CHECK(got[i] == want[i], "%s: member %d is world rank %d, expected %d", c->name, i,
                  got[i], want[i]);
    }
    free(want);
}

/* ---- collectives on every group ------------------------------------------------------ */

/* Rank-dependent inputs whose reductions are exact in float (small integers and
 * multiples of 1/4), so results are compared with == whatever the summation order. */
static float f_in(int rank, int i) { return (float)(rank + 1) * (float)(i % 13 + 1) * 0.25f; }

static void collectives_on(pl_comm *c, const int *members, int nm)
{
    enum { N = 37, B = 5, G = 3, BYTES = 13 };
    const int me = members[c->rank];
    float f[N], fw[N];
    double d[N], dw[N];
    int32_t mn[N], mx[N];
    int64_t i64[N], i64w[N];
    for (int i = 0; i < N; i++) {
        f[i] = f_in(me, i);
        d[i] = (me + 0.5) * i;
        i64[i] = (int64_t)me << 33 | i;
        fw[i] = 0, dw[i] = 0, i64w[i] = 0;
        mn[i] = INT32_MAX, mx[i] = INT32_MIN;
        for (int m = 0; m < nm; m++) {
            int r = members[m];
            fw[i] += f_in(r, i);
            dw[i] += (r + 0.5) * i;
            int32_t v = (r * 7 + i * 3) % 11 - 5;
            mn[i] = v < mn[i] ? v : mn[i];
            mx[i] = v > mx[i] ? v : mx[i];
            i64w[i] += (int64_t)r << 33 | i;
        }
    }
    CHECK_OK(pl_comm_allreduce_f32(c, f, N, PL_COMM_SUM));
    CHECK_OK(pl_comm_allreduce_f64(c, d, N, PL_COMM_SUM));
    CHECK_OK(pl_comm_allreduce_i64(c, i64, N, PL_COMM_SUM));
    for (int i = 0; i < N; i++) {
        CHECK(f[i] == fw[i], "%s: f32 sum[%d] = %g, expected %g", c->name, i, f[i], fw[i]);
        CHECK(d[i] == dw[i], "%s: f64 sum[%d] = %g, expected %g", c->name, i, d[i], dw[i]);
        CHECK(i64[i] == i64w[i], "%s: i64 sum[%d]", c->name, i);
    }

    /* Maxima: each rank contributes a permuted ramp; MAX over f32, f64; MIN/MAX over i32. */
    int32_t a[N], b[N];
    for (int i = 0; i < N; i++) {
        f[i] = (float)((me * 5 + i) % 17);
        d[i] = -(double)((me * 3 + i) % 19);
        a[i] = b[i] = (me * 7 + i * 3) % 11 - 5;
    }
    CHECK_OK(pl_comm_allreduce_f32(c, f, N, PL_COMM_MAX));
    CHECK_OK(pl_comm_allreduce_f64(c, d, N, PL_COMM_MAX));
    CHECK_OK(pl_comm_allreduce_i32(c, a, N, PL_COMM_MIN));
    CHECK_OK(pl_comm_allreduce_i32(c, b, N, PL_COMM_MAX));
    for (int i = 0; i < N; i++) {
        float fm = -1;
        double dm = -1e9;
        for (int m = 0; m < nm; m++) {
            float v = (float)((members[m] * 5 + i) % 17);
            double w = -(double)((members[m] * 3 + i) % 19);
            fm = v > fm ? v : fm;
            dm = w > dm ? w : dm;
        }
        CHECK(f[i] == fm && d[i] == dm, "%s: max[%d] %g %g, expected %g %g", c->name, i, f[i], d[i],
              fm, dm);
        CHECK(a[i] == mn[i] && b[i] == mx[i], "%s: i32 min/max[%d] %d %d, expected %d %d", c->name,
              i, a[i], b[i], mn[i], mx[i]);
    }

    /* Non-blocking all-reduce: poll with test, then wait. */
    for (int i = 0; i < N; i++)
        f[i] = f_in(me, i);
    pl_comm_req req;
    CHECK_OK(pl_comm_iallreduce_f32(c, f, N, PL_COMM_SUM, &req));
    int done = 0;
    for (int spin = 0; spin < 100 && !done; spin++)
        CHECK_OK(pl_comm_test(&req, &done));
    CHECK_OK(pl_comm_wait(&req));
    CHECK(req.mpi == MPI_REQUEST_NULL, "%s: request not released", c->name);
    for (int i = 0; i < N; i++)
        CHECK(f[i] == fw[i], "%s: iallreduce[%d] = %g, expected %g", c->name, i, f[i], fw[i]);

    /* Reduce-scatter: element j of the full vector from rank r is f_in(r, j). */
    int full = B * c->size;
    float *rs = malloc(sizeof(float) * (size_t)full * 2), *out = rs + full;
    for (int inplace = 0; inplace < 2; inplace++) {
        for (int j = 0; j < full; j++)
            rs[j] = f_in(me, j);
        float *dst = inplace ? rs : out;
        CHECK_OK(pl_comm_reduce_scatter_f32(c, rs, dst, B));
        for (int i = 0; i < B; i++) {
            float w = 0;
            for (int m = 0; m < nm; m++)
                w += f_in(members[m], c->rank * B + i);
            CHECK(dst[i] == w, "%s: reduce-scatter%s[%d] = %g, expected %g", c->name,
                  inplace ? " (in place)" : "", i, dst[i], w);
        }
    }
    /* All-gather: rank at position m contributes members[m]*100 + i. */
    int gfull = G * c->size;
    float *ag = malloc(sizeof(float) * (size_t)gfull), shard[G];
    for (int inplace = 0; inplace < 2; inplace++) {
        for (int j = 0; j < gfull; j++)
            ag[j] = -1;
        for (int i = 0; i < G; i++)
            shard[i] = ag[c->rank * G + i] = (float)(me * 100 + i);
        CHECK_OK(pl_comm_allgather_f32(c, inplace ? ag + c->rank * G : shard, ag, G));
        for (int j = 0; j < gfull; j++)
            CHECK(ag[j] == (float)(members[j / G] * 100 + j % G), "%s: all-gather%s[%d] = %g",
                  c->name, inplace ? " (in place)" : "", j, ag[j]);
    }
    free(ag);
    free(rs);

    /* Broadcast from the last rank of the group. */
    unsigned char bytes[BYTES];
    int root = c->size - 1;
    for (int i = 0; i < BYTES; i++)
        bytes[i] = c->rank == root ? (unsigned char)(members[root] * 31 + i) : 0;
    CHECK_OK(pl_comm_bcast(c, bytes, BYTES, root));
    for (int i = 0; i < BYTES; i++)
        CHECK(bytes[i] == (unsigned char)(members[root] * 31 + i), "%s: bcast[%d] = %d", c->name, i,
              bytes[i]);
    CHECK_OK(pl_comm_barrier(c));
}

static void collectives_match_local_values_on_every_group(void *arg)
{
    layout_ctx *L = arg;
    int *members = malloc(sizeof(int) * (size_t)L->world);
    for (int k = 0; k < PL_GRID_NGROUPS; k++) {
        pl_comm *c = pl_grid_comm(L->grid, (pl_grid_group)k);
        int n = expected_members(L, k, L->grid->rank, members);
        if (n == 0 || c->size != n)
            continue; /* membership is checked above */
        collectives_on(c, members, n);
    }
    free(members);
}

/* ---- point to point ------------------------------------------------------------------ */

static void point_to_point_along_pipeline_and_rings(void *arg)
{
    layout_ctx *L = arg;
    pl_grid *g = L->grid;
    enum { N = 11 };
    float buf[N], in[N];
    /* Pipeline chain on pp: stage s receives from s-1, then sends to s+1 (no deadlock). */
    pl_comm *pp = pl_grid_comm(g, PL_GRID_PP);
    int s = pp->rank;
    if (s > 0) {
        CHECK_OK(pl_comm_recv_f32(pp, in, N, s - 1, 7));
        for (int i = 0; i < N; i++)
            CHECK(in[i] == (float)(1000 * (s - 1) + i), "pp recv[%d] = %g", i, in[i]);
    }
    for (int i = 0; i < N; i++)
        buf[i] = (float)(1000 * s + i);
    if (s < pp->size - 1)
        CHECK_OK(pl_comm_send_f32(pp, buf, N, s + 1, 7));

    /* Ring on world with sendrecv: receive the left neighbour's world rank pattern. */
    pl_comm *w = pl_grid_comm(g, PL_GRID_WORLD);
    int right = (w->rank + 1) % w->size, left = (w->rank + w->size - 1) % w->size;
    for (int i = 0; i < N; i++)
        buf[i] = (float)(w->rank * 10 + i);
    CHECK_OK(pl_comm_sendrecv_f32(w, buf, N, right, in, N, left, 3));
    for (int i = 0; i < N; i++)
        CHECK(in[i] == (float)(left * 10 + i), "world sendrecv[%d] = %g", i, in[i]);

    /* Ring on tp with isend/irecv and waitall. */
    pl_comm *tp = pl_grid_comm(g, PL_GRID_TP);
    right = (tp->rank + 1) % tp->size;
    left = (tp->rank + tp->size - 1) % tp->size;
    pl_comm_req r[2];
    for (int i = 0; i < N; i++)
        buf[i] = (float)(tp->rank * 3 + i);
    CHECK_OK(pl_comm_irecv_f32(tp, in, N, left, 5, &r[0]));
    CHECK_OK(pl_comm_isend_f32(tp, buf, N, right, 5, &r[1]));
    CHECK_OK(pl_comm_waitall(r, 2));
    for (int i = 0; i < N; i++)
        CHECK(in[i] == (float)(left * 3 + i), "tp ring[%d] = %g", i, in[i]);
}

/* ---- counters ------------------------------------------------------------------------ */

static void counters_equal_the_byte_formulas(void *arg)
{
    layout_ctx *L = arg;
    pl_grid *g = L->grid;
    pl_comm *w = pl_grid_comm(g, PL_GRID_WORLD);
    const int64_t N = w->size;
    const int64_t n = 48 * N; /* floats; divisible by N so the formulas are whole bytes */
    float *x = calloc((size_t)n * 2, sizeof(float));
    pl_grid_stats_reset(g);
    pl_comm_stats before = w->stats;
    CHECK_OK(pl_comm_allreduce_f32(w, x, n, PL_COMM_SUM));
    CHECK_OK(pl_comm_allreduce_f32(w, x, n, PL_COMM_MAX));
    pl_comm_req req;
    CHECK_OK(pl_comm_iallreduce_f32(w, x, n, PL_COMM_SUM, &req));
    CHECK_OK(pl_comm_wait(&req));
    CHECK_OK(pl_comm_reduce_scatter_f32(w, x, x + n, n / N));
    CHECK_OK(pl_comm_allgather_f32(w, x + n, x, n / N));
    CHECK_OK(pl_comm_bcast(w, x, 100, 0));
    int right = (int)((w->rank + 1) % N), left = (int)((w->rank + N - 1) % N);
    CHECK_OK(pl_comm_sendrecv_f32(w, x, 10, right, x + n, 10, left, 9));
    CHECK_OK(pl_comm_barrier(w));
    free(x);

    const pl_comm_counter *k = w->stats.kind;
    int64_t bytes = n * 4;
    /* Ring all-reduce: reduce-scatter then all-gather, each (N-1)/N of the vector. */
    int64_t ar_wire = 3 * (2 * (N - 1) * bytes / N);
    CHECK(k[PL_COMM_ALLREDUCE].calls == 3 && k[PL_COMM_ALLREDUCE].bytes == 3 * bytes &&
              k[PL_COMM_ALLREDUCE].wire_bytes == ar_wire,
          "all-reduce calls %lld bytes %lld wire %lld (expected 3, %lld, %lld)",
          (long long)k[PL_COMM_ALLREDUCE].calls, (long long)k[PL_COMM_ALLREDUCE].bytes,
          (long long)k[PL_COMM_ALLREDUCE].wire_bytes, (long long)(3 * bytes), (long long)ar_wire);
    CHECK(k[PL_COMM_REDUCE_SCATTER].calls == 1 && k[PL_COMM_REDUCE_SCATTER].bytes == bytes &&
              k[PL_COMM_REDUCE_SCATTER].wire_bytes == (N - 1) * bytes / N,
          "reduce-scatter bytes %lld wire %lld", (long long)k[PL_COMM_REDUCE_SCATTER].bytes,
          (long long)k[PL_COMM_REDUCE_SCATTER].wire_bytes);
    CHECK(k[PL_COMM_ALLGATHER].calls == 1 && k[PL_COMM_ALLGATHER].bytes == bytes &&
              k[PL_COMM_ALLGATHER].wire_bytes == (N - 1) * bytes / N,
          "all-gather bytes %lld wire %lld", (long long)k[PL_COMM_ALLGATHER].bytes,
          (long long)k[PL_COMM_ALLGATHER].wire_bytes);
    /* Broadcast as a chain from rank 0: everyone but rank N-1 forwards the 100 bytes. */
    int64_t bc_wire = N > 1 && w->rank != N - 1 ? 100 : 0;
    CHECK(k[PL_COMM_BROADCAST].calls == 1 && k[PL_COMM_BROADCAST].bytes == 100 &&
              k[PL_COMM_BROADCAST].wire_bytes == bc_wire,
          "bcast wire %lld, expected %lld", (long long)k[PL_COMM_BROADCAST].wire_bytes,
          (long long)bc_wire);
    CHECK(k[PL_COMM_SENDRECV].calls == 1 && k[PL_COMM_SENDRECV].bytes == 20 * 4 &&
              k[PL_COMM_SENDRECV].wire_bytes == 10 * 4,
          "sendrecv bytes %lld wire %lld", (long long)k[PL_COMM_SENDRECV].bytes,
          (long long)k[PL_COMM_SENDRECV].wire_bytes);
    CHECK(k[PL_COMM_BARRIER].calls == 1 && k[PL_COMM_BARRIER].bytes == 0, "barrier");
    for (int i = 0; i < PL_COMM_NKINDS; i++)
        CHECK(k[i].seconds >= 0 && k[i].seconds < 60, "%s seconds %g", pl_comm_kind_name(i), k[i].seconds);

    /* Snapshots: the delta from `before` (all zero) is the whole; the grid total adds the
     * other groups (all idle here); the reset zeroes. */
    pl_comm_stats delta, total;
    pl_comm_stats_sub(&delta, &w->stats, &before);
    pl_grid_stats_total(g, &total);
    CHECK(memcmp(&delta, &w->stats, sizeof delta) == 0, "snapshot delta differs");
    CHECK(total.kind[PL_COMM_ALLREDUCE].bytes == 3 * bytes, "grid total %lld",
          (long long)total.kind[PL_COMM_ALLREDUCE].bytes);
    pl_grid_stats_reset(g);
    CHECK(w->stats.kind[PL_COMM_ALLREDUCE].calls == 0, "reset");
}

/* ---- DP buckets ------------------------------------------------------------------------ */

/* Random parameter bounds and bucket size, the same on every rank of the layout. */
static pl_status random_buckets(layout_ctx *L, uint64_t salt, int64_t *n_out, pl_dp_range **r,
                                int *nr)
{
    uint64_t s = L->seed ^ salt;
    int64_t n = 200 + rand_below(&s, 40000);
    int nb = (int)rand_below(&s, 40);
    int64_t bounds[40];
    for (int i = 0; i < nb; i++)
        bounds[i] = 1 + rand_below(&s, n - 1);
    int64_t bucket_elems = rand_below(&s, 4) == 0 ? 0 : 1 + rand_below(&s, n / 2);
    *n_out = n;
    return pl_dp_buckets_split(n, bounds, nb, bucket_elems, r, nr);
}

/* Marks [0, n) in pieces of random length, in a random order private to this rank. */
static void mark_randomly(pl_dp_buckets *b, int64_t n, uint64_t *s)
{
    enum { MAXP = 256 };
    pl_dp_range piece[MAXP];
    int np = 0;
    int64_t pos = 0, maxlen = n / 40 + 1;
    while (pos < n) {
        int64_t len = np == MAXP - 1 ? n - pos : 1 + rand_below(s, maxlen);
        if (len > n - pos)
            len = n - pos;
        piece[np++] = (pl_dp_range){pos, len};
        pos += len;
    }
    for (int i = np - 1; i > 0; i--) {
        int j = (int)rand_below(s, i + 1);
        pl_dp_range t = piece[i];
        piece[i] = piece[j];
        piece[j] = t;
    }
    for (int i = 0; i < np; i++)
        CHECK_OK(pl_dp_buckets_ready(b, piece[i].offset, piece[i].count));
}

static void buckets_equal_plain_allreduce_for_random_orders(void *arg)
{
    layout_ctx *L = arg;
    pl_comm *dp = pl_grid_comm(L->grid, PL_GRID_DP);
    int64_t n;
    pl_dp_range *r = NULL;
    int nr = 0;
    CHECK_OK(random_buckets(L, 0x51, &n, &r, &nr));
    float *grad = malloc(sizeof(float) * (size_t)n * 2), *ref = grad + n;
    pl_dp_buckets *b = NULL;
    CHECK_OK(pl_dp_buckets_init(&b, dp, grad, n, r, nr));
    if (!b)
        goto out;
    CHECK(pl_dp_buckets_count(b) == nr, "count %d", pl_dp_buckets_count(b));
    pl_comm_stats_reset(dp);
    uint64_t order = L->seed * 31 + (uint64_t)L->grid->rank; /* differs per rank */
    for (int step = 0; step < L->steps; step++) {
        /* Multiples of 1/8 in [-8, 8]: sums over <= 8 ranks are exact in float, so the
         * bucketed and the plain all-reduce agree bit for bit in any summation order. */
        uint64_t data = L->seed + 1000 * (uint64_t)step + 7 * (uint64_t)L->grid->rank;
        for (int64_t i = 0; i < n; i++)
            grad[i] = ref[i] = (float)(rand_below(&data, 129) - 64) / 8.0f;
        CHECK_OK(pl_comm_allreduce_f32(dp, ref, n, PL_COMM_SUM));
        const float scale = (float)(1.0 / L->dp);
        for (int64_t i = 0; i < n; i++)
            ref[i] *= scale;
        mark_randomly(b, n, &order);
        CHECK_OK(pl_dp_buckets_finish(b));
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; i < n; i++)
            if (grad[i] != ref[i] && bad++ == 0)
                first = i;
        CHECK(bad == 0, "step %d: %lld of %lld elements differ, first [%lld] %g vs %g", step,
              (long long)bad, (long long)n, (long long)first, first >= 0 ? grad[first] : 0.0,
              first >= 0 ? ref[first] : 0.0);
    }
    const pl_dp_buckets_stats *s = pl_dp_buckets_stats_get(b);
    CHECK(s->steps == L->steps, "steps %lld", (long long)s->steps);
    const pl_comm_counter *ar = &dp->stats.kind[PL_COMM_ALLREDUCE];
    if (L->dp == 1) {
        /* dp = 1: no MPI at all, only the reference all-reduces were counted. */
        CHECK(s->total.buckets == 0 && s->total.busy == 0 && ar->calls == L->steps,
              "dp = 1 did MPI: %lld bucket all-reduces, %lld calls", (long long)s->total.buckets,
              (long long)ar->calls);
    } else {
        CHECK(s->total.buckets == (int64_t)L->steps * nr, "allreduces %lld, expected %lld",
              (long long)s->total.buckets, (long long)L->steps * nr);
        CHECK(ar->calls == (int64_t)L->steps * (nr + 1), "dp all-reduce calls %lld",
              (long long)ar->calls);
        /* Every step all-reduces the buffer twice (reference + buckets). */
        CHECK(ar->bytes == 2 * L->steps * n * 4, "dp bytes %lld", (long long)ar->bytes);
        const pl_dp_step_stats *t = &s->total;
        CHECK(t->busy >= 0 && t->wait >= 0 && t->before >= 0 && t->after >= 0 &&
                  t->early >= 0 && t->early <= t->buckets &&
                  fabs(t->before + t->after - t->busy) <= 1e-9 * (1 + t->busy),
              "busy %g before %g after %g wait %g early %lld", t->busy, t->before, t->after,
              t->wait, (long long)t->early);
        /* Thread mode unless MPI refused MULTIPLE or PLAIT_COMM_THREAD=0 asked otherwise. */
        CHECK(pl_dp_buckets_threaded(b) == (pl_commq_default_mode() == PL_COMMQ_THREAD),
              "threaded %d", pl_dp_buckets_threaded(b));
    }
    pl_dp_buckets_stats_reset(b);
    CHECK(pl_dp_buckets_stats_get(b)->steps == 0, "stats reset");
out:
    pl_dp_buckets_free(b);
    pl_free(r);
    free(grad);
}

static void buckets_are_deterministic_and_identical_across_dp(void *arg)
{
    layout_ctx *L = arg;
    pl_comm *dp = pl_grid_comm(L->grid, PL_GRID_DP);
    int64_t n;
    pl_dp_range *r = NULL;
    int nr = 0;
    CHECK_OK(random_buckets(L, 0xd7, &n, &r, &nr));
    float *grad = malloc(sizeof(float) * (size_t)n * 3), *in = grad + n, *first = in + n;
    uint64_t data = L->seed * 17 + (uint64_t)L->grid->rank;
    for (int64_t i = 0; i < n; i++) /* arbitrary floats: rounding depends on the order */
        in[i] = (float)((double)splitmix(&data) / 18446744073709551616.0 - 0.5) * 3.7f;
    pl_dp_buckets *b = NULL;
    CHECK_OK(pl_dp_buckets_init(&b, dp, grad, n, r, nr));
    uint64_t order = L->seed * 131 + (uint64_t)L->grid->rank;
    for (int rep = 0; b && rep < 2; rep++) {
        memcpy(grad, in, sizeof(float) * (size_t)n);
        mark_randomly(b, n, &order);
        CHECK_OK(pl_dp_buckets_finish(b));
        if (rep == 0)
            memcpy(first, grad, sizeof(float) * (size_t)n);
        else
            CHECK(memcmp(first, grad, sizeof(float) * (size_t)n) == 0,
                  "two identical steps gave different gradients");
    }
    /* Every DP rank must hold the same bits, or replicas drift apart. */
    memcpy(in, grad, sizeof(float) * (size_t)n);
    CHECK_OK(pl_comm_bcast(dp, in, sizeof(float) * (size_t)n, 0));
    CHECK(memcmp(in, grad, sizeof(float) * (size_t)n) == 0,
          "dp rank %d's reduced gradients differ from dp rank 0's", dp->rank);
    pl_dp_buckets_free(b);
    pl_free(r);
    free(grad);
}

/* ---- error paths ------------------------------------------------------------------------ */

static void invalid_layouts_fail_on_every_rank_with_the_flags(void *arg)
{
    layout_ctx *L = arg;
    pl_grid g2;
    int world = L->world;
    /* tp = world + 1 never divides the world. */
    pl_status st = pl_grid_init(&g2, MPI_COMM_WORLD, world + 1, 1);
    char want[64];
    snprintf(want, sizeof want, "world size %d", world);
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "--tensor-model-parallel-size") &&
              strstr(pl_error_msg(), "--pipeline-model-parallel-size") && strstr(pl_error_msg(), want),
          "tp %d: %s: %s", world + 1, pl_status_str(st), pl_error_msg());
    show("tp = world + 1");
    st = pl_grid_init(&g2, MPI_COMM_WORLD, 1, 0);
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "--pipeline-model-parallel-size must be"),
          "pp 0: %s", pl_error_msg());
    if (world > 1) {
        /* Rank 0 asks for another layout than the rest: every rank must refuse. */
        st = pl_grid_init(&g2, MPI_COMM_WORLD, my_rank == 0 ? 1 : world, 1);
        CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "disagree"), "mixed tp: %s: %s",
              pl_status_str(st), pl_error_msg());
        show("ranks disagree");
    }
    /* The grid is usable again afterwards (nothing half-built left behind). */
    CHECK_OK(pl_grid_init(&g2, MPI_COMM_WORLD, 1, world));
    pl_grid_free(&g2);
}

static void mpi_errors_name_the_operation_and_communicator(void *arg)
{
    layout_ctx *L = arg;
    pl_comm *w = pl_grid_comm(L->grid, PL_GRID_WORLD);
    float x[4] = {0};
    /* MPI detects the invalid rank (MPI_ERRORS_RETURN): no message is sent. */
    pl_status st = pl_comm_send_f32(w, x, 4, w->size + 3, 0);
    const char *m = pl_error_msg();
    CHECK(st == PL_ERR_IO && strstr(m, "MPI_Send") && strstr(m, "communicator world") &&
              strstr(m, "world rank"),
          "%s: %s", pl_status_str(st), m);
    show("send to an invalid rank");
    CHECK(strstr(m, "failed: ") && strlen(strstr(m, "failed: ")) > 10, "no MPI error string: %s", m);
    /* A count MPI cannot express is refused before MPI sees it. */
    st = pl_comm_allreduce_f32(w, x, (int64_t)INT_MAX + 1, PL_COMM_SUM);
    CHECK(st == PL_ERR_UNSUPPORTED && strstr(pl_error_msg(), "exceeds"), "%s", pl_error_msg());
    show("count too large");
    /* A rank outside a group. */
    pl_comm none;
    CHECK_OK(pl_comm_init(&none, MPI_COMM_NULL, "embd", 0));
    st = pl_comm_allreduce_f32(&none, x, 4, PL_COMM_SUM);
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "not a member of communicator embd"), "%s",
          pl_error_msg());
    pl_comm_free(&none);
    /* A short message: pairs (0,1), (2,3), ...; the receiver expects 4 floats, gets 3. */
    if (w->size > 1 && !(w->size % 2 == 1 && w->rank == w->size - 1)) {
        if (w->rank % 2 == 0) {
            CHECK_OK(pl_comm_send_f32(w, x, 3, w->rank + 1, 11));
        } else {
            st = pl_comm_recv_f32(w, x, 4, w->rank - 1, 11);
            CHECK(st == PL_ERR_IO && strstr(pl_error_msg(), "received 3 floats"), "%s",
                  pl_error_msg());
        }
    }
}

static void bucket_setup_errors_reach_every_dp_rank(void *arg)
{
    layout_ctx *L = arg;
    pl_comm *dp = pl_grid_comm(L->grid, PL_GRID_DP);
    float g[64];
    pl_dp_buckets *b = NULL;
    pl_dp_range two[] = {{32, 32}, {0, 32}}, other[] = {{16, 48}, {0, 16}};
    int64_t live = pl_alloc_live();
    if (L->dp > 1) {
        /* dp rank 0 has another layout. */
        pl_status st = pl_dp_buckets_init(&b, dp, g, 64, dp->rank == 0 ? other : two, 2);
        CHECK(st == PL_ERR_ARG && b == NULL && strstr(pl_error_msg(), "different bucket layouts"),
              "%s: %s", pl_status_str(st), pl_error_msg());
        show("bucket layouts differ");
        /* dp rank 0 runs out of memory; the others learn of it. */
        if (dp->rank == 0)
            pl_alloc_fail_after(1);
        st = pl_dp_buckets_init(&b, dp, g, 64, two, 2);
        pl_alloc_fail_after(-1);
        CHECK(b == NULL, "buckets returned on failure");
        if (dp->rank == 0)
            CHECK(st == PL_ERR_NOMEM, "%s: %s", pl_status_str(st), pl_error_msg());
        else
            CHECK(st == PL_ERR_INTERNAL && strstr(pl_error_msg(), "another rank"), "%s: %s",
                  pl_status_str(st), pl_error_msg());
    }
    /* Every rank fails the same way: NOMEM everywhere, nothing leaked. */
    for (int64_t k = 0; k < 6; k++) {
        pl_alloc_fail_after(k);
        pl_status st = pl_dp_buckets_init(&b, dp, g, 64, two, 2);
        pl_alloc_fail_after(-1);
        CHECK(st == PL_OK || st == PL_ERR_NOMEM, "fail after %lld: %s", (long long)k, pl_error_msg());
        pl_dp_buckets_free(b);
        b = NULL;
    }
    CHECK(pl_alloc_live() == live, "%lld blocks leaked", (long long)(pl_alloc_live() - live));
}

static void grid_free_releases_every_communicator(void *arg)
{
    layout_ctx *L = arg;
    pl_grid_free(L->grid);
    for (int k = 0; k < PL_GRID_NGROUPS; k++)
        CHECK(L->grid->comm[k].mpi == MPI_COMM_NULL && !pl_comm_is_member(&L->grid->comm[k]),
              "%s still holds a communicator", pl_grid_group_name((pl_grid_group)k));
    pl_grid_free(L->grid); /* a second free is harmless */
}

/* ---- main ------------------------------------------------------------------------------ */

static int parse_layouts(const char *s, int (*out)[2], int cap)
{
    int n = 0;
    while (*s && n < cap) {
        int tp, pp, used;
        if (sscanf(s, "%dx%d%n", &tp, &pp, &used) != 2)
            return -1;
        out[n][0] = tp;
        out[n][1] = pp;
        n++;
        s += used;
        if (*s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return n;
}

int main(int argc, char **argv)
{
    if (argc < 2 || atoi(argv[1]) < 1) {
        fprintf(stderr, "usage: mpi_check WORLD [--layouts TPxPP,...] [--steps N] [--verbose]\n");
        return 2;
    }
    int expected = atoi(argv[1]), steps = 3, nlayouts = -1, layouts[64][2];
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--layouts") == 0 && i + 1 < argc)
            nlayouts = parse_layouts(argv[++i], layouts, 64);
        else if (strcmp(argv[i], "--verbose") == 0)
            verbose = 1;
        else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
            steps = atoi(argv[++i]);
        else
            nlayouts = -2;
        if (nlayouts == -2 || nlayouts == 0 || steps < 1) {
            fprintf(stderr, "mpi_check: bad argument %s\n", argv[i]);
            return 2;
        }
    }
    double t0 = pl_time_now();
    pl_dist dist;
    pl_status st = pl_dist_init(&dist, &argc, &argv);
    if (st != PL_OK)
        fprintf(stderr, "mpi_check: pl_dist_init: %s\n", pl_error_msg());
    /* The singleton pitfall: nothing below means anything in the wrong world. */
    if (st != PL_OK || dist.size != expected) {
        fprintf(stderr,
                "mpi_check: world size %d, expected %d (launcher: %s, %s=%d; library: %s): the "
                "binary and the launcher are from different MPI implementations, or the launch "
                "has the wrong -n\n",
                dist.size, expected, dist.launcher.name,
                dist.launcher.size_var[0] ? dist.launcher.size_var : "size", dist.launcher.size,
                dist.library);
        printf("mpi_check: 0 passed, 1 failed\n");
        pl_dist_finalize(&dist);
        return 1;
    }
    my_rank = dist.rank;
    if (my_rank == 0)
        printf("ok world_size_is_%d (%s, launcher: %s)\n", expected, dist.library,
               dist.launcher.name);
    n_passed++;

    dist_ctx dc = {&dist, expected};
    run("", "dist_reports_rank_size_and_launcher", dist_reports_rank_size_and_launcher, &dc);

    if (nlayouts < 0) { /* every (tp, pp) with tp*pp | world */
        nlayouts = 0;
        for (int tp = 1; tp <= expected; tp++)
            for (int pp = 1; pp <= expected; pp++)
                if (expected % (tp * pp) == 0 && nlayouts < 64) {
                    layouts[nlayouts][0] = tp;
                    layouts[nlayouts][1] = pp;
                    nlayouts++;
                }
    }
    coords *at = malloc(sizeof(coords) * (size_t)expected);
    for (int li = 0; li < nlayouts; li++) {
        layout_ctx L = {.world = expected, .tp = layouts[li][0], .pp = layouts[li][1], .steps = steps,
                        .seed = 0x9137 + 7919 * (uint64_t)li, .at = at};
        L.dp = L.tp * L.pp > 0 ? expected / (L.tp * L.pp) : 0;
        snprintf(L.name, sizeof L.name, "tp%d.pp%d.dp%d", L.tp, L.pp, L.dp);
        pl_grid grid;
        st = pl_grid_init(&grid, MPI_COMM_WORLD, L.tp, L.pp);
        int ok = st == PL_OK;
        MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!ok) {
            if (st != PL_OK)
                fprintf(stderr, "  FAIL [rank %d] %s/grid_init: %s\n", my_rank, L.name, pl_error_msg());
            if (my_rank == 0)
                printf("not ok %s/grid_init\n", L.name);
            n_failed++;
            if (st == PL_OK)
                pl_grid_free(&grid);
            continue;
        }
        L.grid = &grid;
        enumerate_coords(&L);
        run(L.name, "grid_coordinates_follow_megatron_order", grid_coordinates_follow_megatron_order, &L);
        run(L.name, "grid_groups_have_expected_members", grid_groups_have_expected_members, &L);
        run(L.name, "collectives_match_local_values_on_every_group",
            collectives_match_local_values_on_every_group, &L);
        run(L.name, "point_to_point_along_pipeline_and_rings", point_to_point_along_pipeline_and_rings, &L);
        run(L.name, "counters_equal_the_byte_formulas", counters_equal_the_byte_formulas, &L);
        run(L.name, "buckets_equal_plain_allreduce_for_random_orders",
            buckets_equal_plain_allreduce_for_random_orders, &L);
        run(L.name, "buckets_are_deterministic_and_identical_across_dp",
            buckets_are_deterministic_and_identical_across_dp, &L);
        if (li == 0) {
            run(L.name, "invalid_layouts_fail_on_every_rank_with_the_flags",
                invalid_layouts_fail_on_every_rank_with_the_flags, &L);
            run(L.name, "mpi_errors_name_the_operation_and_communicator",
                mpi_errors_name_the_operation_and_communicator, &L);
        }
        run(L.name, "bucket_setup_errors_reach_every_dp_rank", bucket_setup_errors_reach_every_dp_rank, &L);
        run(L.name, "grid_free_releases_every_communicator", grid_free_releases_every_communicator, &L);
    }
    free(at);
    if (my_rank == 0) {
        printf("mpi_check: world %d, %d layout%s, %.2f s\n", expected, nlayouts,
               nlayouts == 1 ? "" : "s", pl_time_now() - t0);
        printf("mpi_check: %d passed, %d failed\n", n_passed, n_failed);
    }
    st = pl_dist_finalize(&dist);
    if (st != PL_OK)
        fprintf(stderr, "mpi_check: %s\n", pl_error_msg());
    return n_failed || st != PL_OK ? 1 : 0;
}
