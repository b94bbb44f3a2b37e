/* The rank grid: tensor (TP) x data (DP) x pipeline (PP) parallelism over MPI ranks.
 *
 * Every process is one rank at coordinates (tp_rank, dp_rank, pp_rank) with
 *     rank = tp_rank + TP * (dp_rank + DP * pp_rank)
 * (Megatron-LM's order "tp-cp-ep-dp-pp" with cp = ep = 1, and DeepSpeed's
 * PipeModelDataParallelTopology): TP neighbours are adjacent ranks, so TP stays inside a
 * node. The groups, each a pl_comm whose rank order is the member order listed here:
 *   tp     same (dp, pp), tp_rank 0..TP-1          e.g. TP=2, PP=4, 16 ranks: [0,1], [2,3], ...
 *   dp     same (tp, pp), dp_rank 0..DP-1          [0,2], [1,3], [4,6], ...
 *   pp     same (tp, dp), pp_rank 0..PP-1          [0,4,8,12], [1,5,9,13], ...
 *   mp     model-parallel, same dp, all TP x PP    [0,1,4,5,8,9,12,13], [2,3,6,7,...]
 *          in ascending rank order (tp fastest)
 *   embd   the first and last stage of each pp group (tied word embeddings): [0,12], ...;
 *          the single stage when PP = 1; middle stages are not members
 *   world  every rank (a duplicate of the communicator given to pl_grid_init)
 *
 * The pure arithmetic (pl_grid_layout_*) needs no MPI and is unit-tested against
 * Megatron's example. pl_grid_init builds the communicators; it is collective over the
 * world communicator and every rank returns the same status.
 * What it is not: global. A pl_grid is a value passed explicitly (by pointer: its
 * communicators are pointed at by requests and buckets, so do not copy it after init). */
#ifndef PL_PARALLEL_GRID_H
#define PL_PARALLEL_GRID_H

#include "parallel/comm.h"

typedef enum pl_grid_group {
    PL_GRID_TP,
    PL_GRID_DP,
    PL_GRID_PP,
    PL_GRID_MP,
    PL_GRID_EMBD,
    PL_GRID_WORLD,
    PL_GRID_NGROUPS
} pl_grid_group;

typedef struct pl_grid_layout {
    int world, tp, dp, pp;
} pl_grid_layout;

/* Checks tp >= 1, pp >= 1 and world % (tp*pp) == 0 and sets dp = world / (tp*pp). The
 * message names --tensor-model-parallel-size, --pipeline-model-parallel-size and the
 * world size. */
pl_status pl_grid_layout_init(pl_grid_layout *l, int world, int tp, int pp);

/* The rank at coordinates (each within its range). */
int pl_grid_rank(const pl_grid_layout *l, int tp_rank, int dp_rank, int pp_rank);

/* The coordinates of rank (0 <= rank < world). */
void pl_grid_coords(const pl_grid_layout *l, int rank, int *tp_rank, int *dp_rank, int *pp_rank);

/* Members of the group of kind g that holds rank, in group-rank order, written to
 * members[0..count) (room for pl_grid_group_size entries). Returns the count: 0 when the
 * rank is in no such group (a middle stage and embd). */
int pl_grid_group_members(const pl_grid_layout *l, pl_grid_group g, int rank, int *members);

/* Members per group of kind g (embd: 2, or 1 when PP = 1). */
int pl_grid_group_size(const pl_grid_layout *l, pl_grid_group g);

/* How many groups of kind g partition the (member) ranks, and which one holds rank
 * (0..count-1, or -1 if none). */
int pl_grid_group_count(const pl_grid_layout *l, pl_grid_group g);
int pl_grid_group_index(const pl_grid_layout *l, pl_grid_group g, int rank);

/* "tp", "dp", "pp", "mp", "embd", "world". */
const char *pl_grid_group_name(pl_grid_group g);

typedef struct pl_grid {
    pl_grid_layout layout;
    int rank; /* in the world communicator */
    int tp_rank, dp_rank, pp_rank;
    pl_comm comm[PL_GRID_NGROUPS]; /* indexed by pl_grid_group */
} pl_grid;

/* Builds the grid over `world` (usually MPI_COMM_WORLD, which is duplicated, never
 * modified). Collective: first checks that every rank passed the same tp and pp, then
 * the layout, then splits. On failure nothing is left allocated and *g is zeroed. */
pl_status pl_grid_init(pl_grid *g, MPI_Comm world, int tp, int pp);

/* Frees every communicator (collective in MPI's sense: call on every rank). */
void pl_grid_free(pl_grid *g);

static inline pl_comm *pl_grid_comm(pl_grid *g, pl_grid_group which) { return &g->comm[which]; }
static inline int pl_grid_is_first_stage(const pl_grid *g) { return g->pp_rank == 0; }
static inline int pl_grid_is_last_stage(const pl_grid *g) { return g->pp_rank == g->layout.pp - 1; }

/* Sum of the counters of every group (the world group included), and a reset of all. */
void pl_grid_stats_total(const pl_grid *g, pl_comm_stats *out);
void pl_grid_stats_reset(pl_grid *g);

#endif
