/* Pipeline schedules as data: what each pipeline stage does in one training step, in order.
 *
 * A schedule is a pure function of (kind, stages P, stage r, micro-batches m, chunks v)
 * giving the list of actions stage r runs in one step. This module builds those lists
 * and checks them; it calls no MPI and runs no model. One small interpreter (the
 * training step) executes a list action by action.
 *
 * Virtual stages (Megatron's interleaving): with v chunks per rank, chunk k of rank r is
 * virtual stage s = k*P + r, of S = P*v in all; e.g. 16 layers, P=4, v=2: rank 0 holds
 * layers 1-2 (s=0) and 9-10 (s=4). Activations flow s -> s+1 (rank (s+1) % P), gradients
 * s+1 -> s. Virtual stage 0 (rank 0, chunk 0) reads the data and receives no activation;
 * virtual stage S-1 (rank P-1, chunk v-1) computes the loss, sends no activation and
 * starts the backward itself. With v = 1 the virtual stage is the rank.
 *
 * The action vocabulary (mb = micro-batch 0..m-1, chunk = this rank's chunk 0..v-1):
 *   FWD(mb, chunk)         forward of mb through the chunk; keeps its activations
 *   BWD(mb, chunk)         full backward: input and weight gradients; frees them
 *   BWD_INPUT(mb, chunk)   the input-gradient half of a backward (what the previous
 *                          stage waits for); frees what the weight half does not need
 *   BWD_WEIGHT(mb, chunk)  the weight-gradient half, after BWD_INPUT, possibly much later
 *   RECV_ACT / SEND_ACT    the activation entering / leaving (mb, chunk), from / to peer
 *   RECV_GRAD / SEND_GRAD  the gradient of the chunk's output / input, from / to peer
 * A send is non-blocking: posted at its place in the list and completed later by the
 * runtime (its buffer must stay untouched until then). A receive blocks until the data
 * has arrived; an interpreter may post it earlier (irecv) but must complete it at its
 * place in the list. Receives sit just before the computation that needs them, sends
 * just after the computation that produced them.
 *
 * A transfer is named by its direction, micro-batch and the virtual-stage boundary it
 * crosses (pl_pp_transfer_id); that number is unique within a step, so it can serve as
 * the MPI tag and messages between the same two ranks never need to arrive in order.
 *
 * The kinds:
 *   NONE         no pipelining (P = 1): F, B for each micro-batch (Megatron's
 *                forward_backward_no_pipelining: gradient accumulation)
 *   GPIPE        all m forwards, then all m backwards in ascending micro-batch order
 *   1F1B         Megatron's forward_backward_pipelining_without_interleaving:
 *                min(P-r-1, m) warmup forwards, (m - warmup) x (F, B), warmup backwards
 *   INTERLEAVED  Megatron's forward_backward_pipelining_with_interleaving (v >= 2,
 *                P >= 2, m a multiple of P; microbatch_group_size_per_vp_stage = P):
 *                warmup min(2(P-r-1) + (v-1)P, m*v) forwards over the virtual
 *                micro-batch table (groups of P micro-batches per chunk), then F, B
 *                pairs, then the remaining backwards; backwards walk the same table
 *                with the chunks reversed
 *   ZB_H1        zero-bubble H1 (Qi et al. 2023): 1F1B's order with every backward split
 *                into BWD_INPUT, sent upstream at once, and BWD_WEIGHT; stage r keeps r
 *                weight halves pending (W(k - r) follows BWD_INPUT(k)) and runs the last
 *                r at the end, filling 1F1B's cooldown bubble; v = 1
 * See docs/pipeline.md for timelines, the bubble formulas and the checker's rules.
 *
 * What it is not: a runtime. Nothing here sends, computes or times anything real; the
 * "time" of pl_pp_schedule_check is a unit-cost model (F = 1, B = 2, BWD_INPUT =
 * BWD_WEIGHT = 1, communication free). Not global: a pl_pp_schedule is a value. */
#ifndef PL_PARALLEL_PP_SCHEDULE_H
#define PL_PARALLEL_PP_SCHEDULE_H

#include "base/status.h"

#include <stdint.h>

typedef enum pl_pp_kind {
    PL_PP_NONE,
    PL_PP_GPIPE,
    PL_PP_1F1B,
    PL_PP_INTERLEAVED,
    PL_PP_ZB_H1,
    PL_PP_NKINDS
} pl_pp_kind;

typedef enum pl_pp_op {
    PL_PP_FWD,
    PL_PP_BWD,
    PL_PP_BWD_INPUT,
    PL_PP_BWD_WEIGHT,
    PL_PP_RECV_ACT,
    PL_PP_SEND_ACT,
    PL_PP_RECV_GRAD,
    PL_PP_SEND_GRAD,
    PL_PP_NOPS
} pl_pp_op;

typedef struct pl_pp_action {
    pl_pp_op op;
    int mb;    /* micro-batch, 0..m-1 */
    int chunk; /* this rank's model chunk, 0..v-1 (virtual stage chunk*P + rank) */
    int peer;  /* the other stage (pipeline rank) of a transfer; -1 for computation */
} pl_pp_action;

typedef struct pl_pp_spec {
    pl_pp_kind kind;
    int stages;        /* P, --pipeline-model-parallel-size */
    int micro_batches; /* m, micro-batches per step per data-parallel rank */
    int chunks;        /* v, model chunks per rank (1 unless interleaved) */
} pl_pp_spec;

/* "none", "gpipe", "1f1b", "interleaved", "zb-h1". */
const char *pl_pp_kind_name(pl_pp_kind kind);

/* Parses a schedule name (the names above, or the aliases "no-pipelining",
 * "pipedream-flush", "interleaved-1f1b", "zbh1", "zero-bubble-h1"; case-insensitive).
 * PL_ERR_ARG names the input and lists the accepted names. */
pl_status pl_pp_kind_parse(const char *name, pl_pp_kind *out);

/* Megatron's choice (get_forward_backward_func): NONE when P = 1, INTERLEAVED when
 * v > 1, else 1F1B. */
pl_pp_kind pl_pp_kind_default(int stages, int chunks);

/* "FWD", "BWD", "BWD_INPUT", "BWD_WEIGHT", "RECV_ACT", "SEND_ACT", "RECV_GRAD",
 * "SEND_GRAD". */
const char *pl_pp_op_name(pl_pp_op op);

/* Writes "RECV_GRAD mb 3 chunk 0 from 2" (or "FWD mb 3 chunk 0") to buf; returns buf. */
char *pl_pp_action_format(const pl_pp_action *a, char *buf, size_t cap);

/* Checks that spec is a valid configuration of its kind: P, m, v >= 1; NONE needs P = 1;
 * only INTERLEAVED takes v > 1 and it needs v >= 2, P >= 2 and m % P == 0. PL_ERR_ARG
 * names the flag or quantity that is wrong and what was expected. */
pl_status pl_pp_spec_validate(const pl_pp_spec *spec);

/* Stage `rank`'s actions, written to out[0..*n). Pure: no allocation. With out == NULL
 * only *n is set (count, then fill); *n <= 7 * m * v. Validates spec and rank. */
pl_status pl_pp_schedule_rank(const pl_pp_spec *spec, int rank, pl_pp_action *out, int *n);

/* Largest number of micro-batch activations stage `rank` may hold at once: forwards done
 * minus backwards done (BWD or BWD_INPUT), over the whole step:
 *   NONE 1; GPIPE m; 1F1B and ZB_H1 min(P - r, m);
 *   INTERLEAVED min(warmup + 1, m*v), warmup = min(2(P-r-1) + (v-1)P, m*v)
 * (counted in chunk activations; each is 1/v of a stage's layers). The activation
 * plan sizes its slots from this. spec must be valid. */
int pl_pp_in_flight_bound(const pl_pp_spec *spec, int rank);

/* The bubble fraction the kind promises under unit costs, num / den of the ideal time
 * (3 * m * v per rank):
 *   NONE, GPIPE, 1F1B: (P-1) / m;  INTERLEAVED: (P-1) / (v*m);
 *   ZB_H1: (P - 1 + max(0, P - m)) / (3m)
 * (ZB_H1 under unit costs: every rank idles P-1 units, a third of 1F1B's 3(P-1); with
 * m < P the last stage alternates F and BWD_INPUT with nothing between, and the step
 * grows by P - m). spec must be valid. */
void pl_pp_bubble_formula(const pl_pp_spec *spec, int64_t *num, int64_t *den);

/* Every stage's list, built once. */
typedef struct pl_pp_schedule {
    pl_pp_spec spec;
    pl_pp_action *action; /* all lists back to back */
    int *first;           /* stage r's list is action[first[r] .. first[r+1]); P+1 entries */
} pl_pp_schedule;

/* Validates spec and builds every stage's list (two allocations). On failure *s is
 * zeroed and nothing is left allocated. */
pl_status pl_pp_schedule_init(pl_pp_schedule *s, const pl_pp_spec *spec);

/* Frees the lists; *s is zeroed (freeing a zeroed schedule is a no-op). */
void pl_pp_schedule_free(pl_pp_schedule *s);

static inline const pl_pp_action *pl_pp_schedule_list(const pl_pp_schedule *s, int rank, int *n)
{
    *n = s->first[rank + 1] - s->first[rank];
    return s->action + s->first[rank];
}

/* The id of the transfer a RECV_* / SEND_* action of stage `rank` takes part in, in
 * [0, pl_pp_transfer_count): direction (activation or gradient), micro-batch and the
 * virtual-stage boundary crossed (b between virtual stages b and b+1). The send and the
 * receive of one transfer have the same id. The action must be well formed (the
 * checker's first rule); returns -1 for a computation or a transfer that crosses no
 * boundary. */
int pl_pp_transfer_id(const pl_pp_spec *spec, int rank, const pl_pp_action *a);
int pl_pp_transfer_count(const pl_pp_spec *spec);

/* What the unit-cost simulation of pl_pp_schedule_check measured. */
typedef struct pl_pp_stats {
    int64_t makespan;  /* time the last action of any stage ends */
    int64_t busy;      /* compute time of each stage: 3 * m * v */
    int max_in_flight; /* the largest in-flight count of any stage */
} pl_pp_stats;

/* Checks every stage's list against the rules below, in this order, and stops at the
 * first broken one with PL_ERR_INTERNAL (a built schedule must always pass) and a
 * message naming the stage, the action's index and the action (PL_ERR_ARG if s->spec
 * itself is invalid):
 *  1 well formed: op, mb, chunk in range; a transfer crosses an existing boundary and
 *    names the stage on its other side as peer; computation has peer -1;
 *  2 matching: every transfer is sent exactly once and received exactly once;
 *  3 per stage, every (mb, chunk) has one FWD and either one BWD or one BWD_INPUT and
 *    one BWD_WEIGHT; FWD precedes the backward, BWD_INPUT precedes BWD_WEIGHT;
 *    RECV_ACT precedes FWD, SEND_ACT follows it; RECV_GRAD precedes the backward
 *    (BWD or BWD_INPUT), SEND_GRAD follows it;
 *  4 in flight: forwards minus backwards never exceed pl_pp_in_flight_bound;
 *  5 no deadlock: all stages run together, each through its list in order; a receive
 *    waits until its send has run; sends never wait; every list must finish.
 * Rule 5 also times the step: an action starts when its stage's previous action has
 * ended and, for a receive, when its send ran; FWD = 1, BWD = 2, BWD_INPUT = BWD_WEIGHT
 * = 1, transfers 0. stats (may be NULL) gets the result and idle (NULL, or P entries)
 * each stage's idle time before its last action ends (its end minus busy); the bubble
 * fraction is (makespan - busy) / busy. Allocates work arrays (PL_ERR_NOMEM). */
pl_status pl_pp_schedule_check(const pl_pp_schedule *s, pl_pp_stats *stats, int64_t *idle);

/* The same simulation with measured costs: cost[r * 4 + k] is the time stage r spends
 * in one FWD (k 0), BWD (1), BWD_INPUT (2) or BWD_WEIGHT (3) of one chunk (transfers
 * free). *makespan gets the step's length, idle[r] (P entries) the time stage r waits
 * in it: each schedule's bubble for the costs a run measured. */
pl_status pl_pp_schedule_simulate(const pl_pp_schedule *s, const double *cost, double *makespan,
                                  double *idle);

/* The simulated timeline as text, one row per stage and one cell per time unit: F, B
 * (two cells), I (BWD_INPUT), W (BWD_WEIGHT) followed by the micro-batch, and the chunk
 * as a letter (a = 0, b = 1, ...) when v > 1; "." is idle. Ends with the makespan and
 * the bubble. *out is pl_malloc'ed (pl_free it). Fails as check does on a broken
 * schedule. */
pl_status pl_pp_schedule_timeline(const pl_pp_schedule *s, char **out);

#endif
