/* The TP x DP x PP rank grid: layout arithmetic and one communicator per group. */
#include "parallel/grid.h"

#include <string.h>

static const char *const group_names[PL_GRID_NGROUPS] = {"tp", "dp", "pp", "mp", "embd", "world"};

const char *pl_grid_group_name(pl_grid_group g)
{
    return (unsigned)g < PL_GRID_NGROUPS ? group_names[g] : "unknown";
}

/* ---- layout arithmetic (no MPI) ---------------------------------------------------- */

pl_status pl_grid_layout_init(pl_grid_layout *l, int world, int tp, int pp)
{
    memset(l, 0, sizeof *l);
    if (world < 1)
        return pl_errorf(PL_ERR_ARG, "world size must be at least 1, got %d", world);
    if (tp < 1)
        return pl_errorf(PL_ERR_ARG, "--tensor-model-parallel-size must be at least 1, got %d", tp);
    if (pp < 1)
        return pl_errorf(PL_ERR_ARG, "--pipeline-model-parallel-size must be at least 1, got %d",
                         pp);
    int64_t mp = (int64_t)tp * pp;
    if (world % mp != 0)
        return pl_errorf(PL_ERR_ARG,
                         "world size %d is not divisible by --tensor-model-parallel-size (%d) x "
                         "--pipeline-model-parallel-size (%d) = %lld; launch a multiple of %lld "
                         "processes or change the sizes",
                         world, tp, pp, (long long)mp, (long long)mp);
    l->world = world;
    l->tp = tp;
    l->pp = pp;
    l->dp = (int)(world / mp);
    return PL_OK;
}

int pl_grid_rank(const pl_grid_layout *l, int tp_rank, int dp_rank, int pp_rank)
{
    return tp_rank + l->tp * (dp_rank + l->dp * pp_rank);
}

void pl_grid_coords(const pl_grid_layout *l, int rank, int *tp_rank, int *dp_rank, int *pp_rank)
{
    *tp_rank = rank % l->tp;
    *dp_rank = rank / l->tp % l->dp;
    *pp_rank = rank / (l->tp * l->dp);
}

int pl_grid_group_size(const pl_grid_layout *l, pl_grid_group g)
{
    switch (g) {
    case PL_GRID_TP: return l->tp;
    case PL_GRID_DP: return l->dp;
    case PL_GRID_PP: return l->pp;
    case PL_GRID_MP: return l->tp * l->pp;
    case PL_GRID_EMBD: return l->pp > 1 ? 2 : 1;
    case PL_GRID_WORLD: return l->world;
    case PL_GRID_NGROUPS: break;
    }
    return 0;
}

int pl_grid_group_count(const pl_grid_layout *l, pl_grid_group g)
{
    switch (g) {
    case PL_GRID_TP: return l->dp * l->pp;
    case PL_GRID_DP: return l->tp * l->pp;
    case PL_GRID_PP: return l->tp * l->dp;
    case PL_GRID_MP: return l->dp;
    case PL_GRID_EMBD: return l->tp * l->dp;
    case PL_GRID_WORLD: return 1;
    case PL_GRID_NGROUPS: break;
    }
    return 0;
}

static int is_embd_stage(const pl_grid_layout *l, int pp_rank)
{
    return pp_rank == 0 || pp_rank == l->pp - 1;
}

int pl_grid_group_index(const pl_grid_layout *l, pl_grid_group g, int rank)
{
    int t, d, p;
    pl_grid_coords(l, rank, &t, &d, &p);
    switch (g) {
    case PL_GRID_TP: return d + l->dp * p;
    case PL_GRID_DP: return t + l->tp * p;
    case PL_GRID_PP: return t + l->tp * d;
    case PL_GRID_MP: return d;
    case PL_GRID_EMBD: return is_embd_stage(l, p) ? t + l->tp * d : -1;
    case PL_GRID_WORLD: return 0;
    case PL_GRID_NGROUPS: break;
    }
    return -1;
}

/* This rank's position in its group's member list (its rank in the group communicator). */
static int group_position(const pl_grid_layout *l, pl_grid_group g, int rank)
{
    int t, d, p;
    pl_grid_coords(l, rank, &t, &d, &p);
    switch (g) {
    case PL_GRID_TP: return t;
    case PL_GRID_DP: return d;
    case PL_GRID_PP: return p;
    case PL_GRID_MP: return t + l->tp * p;
    case PL_GRID_EMBD: return p == 0 ? 0 : 1;
    case PL_GRID_WORLD: return rank;
    case PL_GRID_NGROUPS: break;
    }
    return -1;
}

int pl_grid_group_members(const pl_grid_layout *l, pl_grid_group g, int rank, int *members)
{
    int t, d, p, n = 0;
    pl_grid_coords(l, rank, &t, &d, &p);
    switch (g) {
    case PL_GRID_TP:
        for (int i = 0; i < l->tp; i++)
            members[n++] = pl_grid_rank(l, i, d, p);
        break;
    case PL_GRID_DP:
        for (int i = 0; i < l->dp; i++)
            members[n++] = pl_grid_rank(l, t, i, p);
        break;
    case PL_GRID_PP:
        for (int i = 0; i < l->pp; i++)
            members[n++] = pl_grid_rank(l, t, d, i);
        break;
    case PL_GRID_MP:
        for (int s = 0; s < l->pp; s++)
            for (int i = 0; i < l->tp; i++)
                members[n++] = pl_grid_rank(l, i, d, s);
        break;
    case PL_GRID_EMBD:
        if (!is_embd_stage(l, p))
            break;
        members[n++] = pl_grid_rank(l, t, d, 0);
        if (l->pp > 1)
            members[n++] = pl_grid_rank(l, t, d, l->pp - 1);
        break;
    case PL_GRID_WORLD:
        for (int i = 0; i < l->world; i++)
            members[n++] = i;
        break;
    case PL_GRID_NGROUPS: break;
    }
    return n;
}

/* ---- communicators ------------------------------------------------------------------ */

void pl_grid_free(pl_grid *g)
{
    for (int i = 0; i < PL_GRID_NGROUPS; i++)
        pl_comm_free(&g->comm[i]);
}

pl_status pl_grid_init(pl_grid *g, MPI_Comm world, int tp, int pp)
{
    pl_status st = PL_OK;
    memset(g, 0, sizeof *g);
    PL_TRY(pl_comm_dup(&g->comm[PL_GRID_WORLD], world, "world"));
    pl_comm *w = &g->comm[PL_GRID_WORLD];

    /* Every rank must build the same grid: a rank with other sizes would split differently
     * and the collectives would hang or mix groups. */
    int64_t v[4] = {tp, -(int64_t)tp, pp, -(int64_t)pp};
    PL_TRY(pl_comm_allreduce_i64(w, v, 4, PL_COMM_MAX));
    if (v[0] != -v[1] || v[2] != -v[3]) {
        st = pl_errorf(PL_ERR_ARG,
                       "the %d ranks disagree on the layout: --tensor-model-parallel-size ranges "
                       "over %lld..%lld and --pipeline-model-parallel-size over %lld..%lld "
                       "(world rank %d has %d and %d)",
                       w->size, (long long)-v[1], (long long)v[0], (long long)-v[3],
                       (long long)v[2], w->rank, tp, pp);
        goto fail;
    }
    PL_TRY(pl_grid_layout_init(&g->layout, w->size, tp, pp));
    g->rank = w->rank;
    pl_grid_coords(&g->layout, g->rank, &g->tp_rank, &g->dp_rank, &g->pp_rank);

    for (int k = 0; k < PL_GRID_NGROUPS; k++) {
        if (k == PL_GRID_WORLD)
            continue;
        int index = pl_grid_group_index(&g->layout, (pl_grid_group)k, g->rank);
        int pos = group_position(&g->layout, (pl_grid_group)k, g->rank);
        MPI_Comm c = MPI_COMM_NULL;
        int rc = MPI_Comm_split(w->mpi, index < 0 ? MPI_UNDEFINED : index, pos, &c);
        if (rc != MPI_SUCCESS) {
            char s[MPI_MAX_ERROR_STRING];
            int len = 0;
            MPI_Error_string(rc, s, &len);
            st = pl_errorf(PL_ERR_IO, "MPI_Comm_split for the %s group on world rank %d: %.*s",
                           group_names[k], g->rank, len, s);
            goto fail;
        }
        PL_TRY(pl_comm_init(&g->comm[k], c, group_names[k], 1));
        const pl_comm *gc = &g->comm[k];
        int want_size = index < 0 ? 0 : pl_grid_group_size(&g->layout, (pl_grid_group)k);
        if (gc->size != want_size || (index >= 0 && gc->rank != pos)) {
            st = pl_errorf(PL_ERR_INTERNAL,
                           "%s group on world rank %d: rank %d of %d, expected %d of %d",
                           group_names[k], g->rank, gc->rank, gc->size, pos, want_size);
            goto fail;
        }
    }
    pl_grid_stats_reset(g); /* construction is not training traffic */
    return PL_OK;

fail:
    pl_grid_free(g);
    memset(g, 0, sizeof *g);
    return st;
}

void pl_grid_stats_total(const pl_grid *g, pl_comm_stats *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < PL_GRID_NGROUPS; i++)
        pl_comm_stats_add(out, &g->comm[i].stats);
}

void pl_grid_stats_reset(pl_grid *g)
{
    for (int i = 0; i < PL_GRID_NGROUPS; i++)
        pl_comm_stats_reset(&g->comm[i]);
}
