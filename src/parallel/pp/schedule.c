/* Pipeline schedules: building each stage's action list, and the checker with its
 * unit-cost simulation. See schedule.h for the vocabulary and docs/pipeline.md. */
#include "parallel/pp/schedule.h"

#include "base/alloc.h"

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <string.h>

/* ---- names ---------------------------------------------------------------------------- */

static const struct {
    const char *name;
    pl_pp_kind kind;
} kind_names[] = {
    /* the canonical names first, in pl_pp_kind order */
    {"none", PL_PP_NONE},
    {"gpipe", PL_PP_GPIPE},
    {"1f1b", PL_PP_1F1B},
    {"interleaved", PL_PP_INTERLEAVED},
    {"zb-h1", PL_PP_ZB_H1},
    /* aliases */
    {"no-pipelining", PL_PP_NONE},
    {"pipedream-flush", PL_PP_1F1B},
    {"interleaved-1f1b", PL_PP_INTERLEAVED},
    {"zbh1", PL_PP_ZB_H1},
    {"zero-bubble-h1", PL_PP_ZB_H1},
};

static const char *const op_names[PL_PP_NOPS] = {
    "FWD", "BWD", "BWD_INPUT", "BWD_WEIGHT", "RECV_ACT", "SEND_ACT", "RECV_GRAD", "SEND_GRAD",
};

/* Unit costs of the simulation: a full backward is twice a forward; its halves one each. */
static const int op_cost[PL_PP_NOPS] = {1, 2, 1, 1, 0, 0, 0, 0};

/* Cell letters of the timeline. */
static const char op_letter[PL_PP_NOPS] = {'F', 'B', 'I', 'W', 'r', 's', 'r', 's'};

const char *pl_pp_kind_name(pl_pp_kind kind)
{
    return (unsigned)kind < PL_PP_NKINDS ? kind_names[kind].name : "unknown";
}

const char *pl_pp_op_name(pl_pp_op op)
{
    return (unsigned)op < PL_PP_NOPS ? op_names[op] : "?";
}

static int same_name(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b))
            return 0;
    return *a == *b;
}

pl_status pl_pp_kind_parse(const char *name, pl_pp_kind *out)
{
    for (size_t i = 0; i < sizeof kind_names / sizeof *kind_names; i++)
        if (same_name(name, kind_names[i].name)) {
            *out = kind_names[i].kind;
            return PL_OK;
        }
    return pl_errorf(PL_ERR_ARG,
                     "unknown pipeline schedule '%s'; expected none, gpipe, 1f1b, interleaved or "
                     "zb-h1 (aliases no-pipelining, pipedream-flush, interleaved-1f1b, zbh1, "
                     "zero-bubble-h1)",
                     name);
}

pl_pp_kind pl_pp_kind_default(int stages, int chunks)
{
    if (stages <= 1)
        return PL_PP_NONE;
    return chunks > 1 ? PL_PP_INTERLEAVED : PL_PP_1F1B;
}

static int is_transfer(pl_pp_op op) { return op >= PL_PP_RECV_ACT && op <= PL_PP_SEND_GRAD; }
static int is_recv(pl_pp_op op) { return op == PL_PP_RECV_ACT || op == PL_PP_RECV_GRAD; }

char *pl_pp_action_format(const pl_pp_action *a, char *buf, size_t cap)
{
    if (is_transfer(a->op))
        snprintf(buf, cap, "%s mb %d chunk %d %s %d", pl_pp_op_name(a->op), a->mb, a->chunk,
                 is_recv(a->op) ? "from" : "to", a->peer);
    else
        snprintf(buf, cap, "%s mb %d chunk %d", pl_pp_op_name(a->op), a->mb, a->chunk);
    return buf;
}

/* ---- validation and the formulas -------------------------------------------------------- */

pl_status pl_pp_spec_validate(const pl_pp_spec *spec)
{
    int P = spec->stages, m = spec->micro_batches, v = spec->chunks;
    if ((unsigned)spec->kind >= PL_PP_NKINDS)
        return pl_errorf(PL_ERR_ARG, "unknown pipeline schedule kind %d", (int)spec->kind);
    const char *name = pl_pp_kind_name(spec->kind);
    if (P < 1)
        return pl_errorf(PL_ERR_ARG, "--pipeline-model-parallel-size must be at least 1, got %d", P);
    if (m < 1)
        return pl_errorf(PL_ERR_ARG,
                         "the %s schedule needs at least 1 micro-batch per step, got %d "
                         "(micro-batches = global batch / (micro batch x data-parallel size))",
                         name, m);
    if (v < 1)
        return pl_errorf(PL_ERR_ARG, "the %s schedule needs at least 1 model chunk per rank, got %d",
                         name, v);
    if (spec->kind == PL_PP_NONE && P != 1)
        return pl_errorf(PL_ERR_ARG,
                         "the none schedule (no pipelining) needs --pipeline-model-parallel-size 1, "
                         "got %d",
                         P);
    if (spec->kind == PL_PP_INTERLEAVED) {
        if (v < 2)
            return pl_errorf(PL_ERR_ARG,
                             "the interleaved schedule needs at least 2 model chunks per rank "
                             "(--num-layers-per-virtual-pipeline-stage or "
                             "--virtual-pipeline-model-parallel-size), got %d",
                             v);
        if (P < 2)
            return pl_errorf(PL_ERR_ARG,
                             "the interleaved schedule needs --pipeline-model-parallel-size of at "
                             "least 2, got %d",
                             P);
        if (m % P != 0)
            return pl_errorf(PL_ERR_ARG,
                             "micro-batches (%d) must be a multiple of the pipeline size %d for the "
                             "interleaved schedule (Megatron's microbatch group size per virtual "
                             "stage is the pipeline size)",
                             m, P);
    } else if (v != 1) {
        return pl_errorf(PL_ERR_ARG,
                         "the %s schedule runs one model chunk per rank, got %d "
                         "(--num-layers-per-virtual-pipeline-stage and "
                         "--virtual-pipeline-model-parallel-size need the interleaved schedule)",
                         name, v);
    }
    /* At most 7 actions per (mb, chunk) per stage; all stages' lists are indexed by int. */
    if ((int64_t)7 * m * v > INT_MAX / P)
        return pl_errorf(PL_ERR_ARG,
                         "the %s schedule is too large: %d stages x %d micro-batches x %d chunks",
                         name, P, m, v);
    return PL_OK;
}

/* Megatron's interleaved warmup: (P-r-1)*2 forwards to fill the pipeline of virtual
 * stages, plus (v-1) groups of P so that every chunk has started, capped at m*v. */
static int interleaved_warmup(const pl_pp_spec *spec, int rank)
{
    int64_t total = (int64_t)spec->micro_batches * spec->chunks;
    int64_t w = (int64_t)(spec->stages - rank - 1) * 2 + (int64_t)(spec->chunks - 1) * spec->stages;
    return (int)(w < total ? w : total);
}

static int min_int(int a, int b) { return a < b ? a : b; }

int pl_pp_in_flight_bound(const pl_pp_spec *spec, int rank)
{
    int P = spec->stages, m = spec->micro_batches;
    switch (spec->kind) {
    case PL_PP_NONE: return 1;
    case PL_PP_GPIPE: return m;
    case PL_PP_1F1B:
    case PL_PP_ZB_H1: return min_int(P - rank, m);
    case PL_PP_INTERLEAVED: return min_int(interleaved_warmup(spec, rank) + 1, m * spec->chunks);
    case PL_PP_NKINDS: break;
    }
    return 0;
}

void pl_pp_bubble_formula(const pl_pp_spec *spec, int64_t *num, int64_t *den)
{
    int64_t P = spec->stages, m = spec->micro_batches, v = spec->chunks;
    *num = P - 1;
    *den = m;
    if (spec->kind == PL_PP_INTERLEAVED)
        *den = v * m;
    if (spec->kind == PL_PP_ZB_H1) {
        *num = P - 1 + (P > m ? P - m : 0);
        *den = 3 * m;
    }
}

/* ---- building --------------------------------------------------------------------------- */

/* Appends actions to out (or only counts them when out is NULL). */
typedef struct emitter {
    const pl_pp_spec *spec;
    int rank;
    pl_pp_action *out;
    int n;
} emitter;

static void put(emitter *e, pl_pp_op op, int mb, int chunk, int peer)
{
    if (e->out)
        e->out[e->n] = (pl_pp_action){.op = op, .mb = mb, .chunk = chunk, .peer = peer};
    e->n++;
}

/* Forward of (mb, chunk) with its receive before and its send after. */
static void emit_fwd(emitter *e, int mb, int chunk)
{
    int P = e->spec->stages, s = chunk * P + e->rank, last = P * e->spec->chunks - 1;
    if (s > 0)
        put(e, PL_PP_RECV_ACT, mb, chunk, (s - 1) % P);
    put(e, PL_PP_FWD, mb, chunk, -1);
    if (s < last)
        put(e, PL_PP_SEND_ACT, mb, chunk, (s + 1) % P);
}

/* The input-gradient part of a backward (op BWD or BWD_INPUT), with the output gradient
 * received before and the input gradient sent after. */
static void emit_bwd(emitter *e, pl_pp_op op, int mb, int chunk)
{
    int P = e->spec->stages, s = chunk * P + e->rank, last = P * e->spec->chunks - 1;
    if (s < last)
        put(e, PL_PP_RECV_GRAD, mb, chunk, (s + 1) % P);
    put(e, op, mb, chunk, -1);
    if (s > 0)
        put(e, PL_PP_SEND_GRAD, mb, chunk, (s - 1) % P);
}

static void build_none(emitter *e)
{
    for (int mb = 0; mb < e->spec->micro_batches; mb++) {
        emit_fwd(e, mb, 0);
        emit_bwd(e, PL_PP_BWD, mb, 0);
    }
}

static void build_gpipe(emitter *e)
{
    for (int mb = 0; mb < e->spec->micro_batches; mb++)
        emit_fwd(e, mb, 0);
    for (int mb = 0; mb < e->spec->micro_batches; mb++)
        emit_bwd(e, PL_PP_BWD, mb, 0);
}

static void build_1f1b(emitter *e)
{
    int m = e->spec->micro_batches, warmup = min_int(e->spec->stages - e->rank - 1, m);
    for (int i = 0; i < warmup; i++)
        emit_fwd(e, i, 0);
    for (int i = 0; i < m - warmup; i++) {
        emit_fwd(e, warmup + i, 0);
        emit_bwd(e, PL_PP_BWD, i, 0);
    }
    for (int i = m - warmup; i < m; i++)
        emit_bwd(e, PL_PP_BWD, i, 0);
}

/* 1F1B's order with split backwards; stage r runs W(k - r) after I(k), so it keeps r
 * weight halves pending through the steady state and runs them at the end, where 1F1B's
 * cooldown would leave it idle. Stage 0 has nobody downstream to wait for and runs each
 * weight half at once. */
static void build_zb_h1(emitter *e)
{
    int m = e->spec->micro_batches, r = e->rank, warmup = min_int(e->spec->stages - r - 1, m);
    for (int i = 0; i < warmup; i++)
        emit_fwd(e, i, 0);
    for (int k = 0; k < m; k++) {
        if (k < m - warmup)
            emit_fwd(e, warmup + k, 0);
        emit_bwd(e, PL_PP_BWD_INPUT, k, 0);
        if (k >= r)
            put(e, PL_PP_BWD_WEIGHT, k - r, 0, -1);
    }
    for (int k = m - r > 0 ? m - r : 0; k < m; k++)
        put(e, PL_PP_BWD_WEIGHT, k, 0, -1);
}

/* Megatron's virtual micro-batch table (get_schedule_table with group size P): virtual
 * micro-batch k runs micro-batches in groups of P, each group through chunk 0, 1, ...,
 * v-1 in turn. Backward k takes the same micro-batch with the chunks reversed. E.g.
 * P=2, v=2, m=4: forward (mb,chunk) = (0,0) (1,0) (0,1) (1,1) (2,0) (3,0) (2,1) (3,1). */
static void virtual_microbatch(const pl_pp_spec *spec, int k, int forward, int *mb, int *chunk)
{
    int P = spec->stages, v = spec->chunks;
    int group = k / (P * v), in_group = k % (P * v);
    *mb = group * P + in_group % P;
    *chunk = forward ? in_group / P : v - 1 - in_group / P;
}

static void build_interleaved(emitter *e)
{
    int total = e->spec->micro_batches * e->spec->chunks;
    int warmup = interleaved_warmup(e->spec, e->rank), mb, chunk;
    for (int k = 0; k < warmup; k++) {
        virtual_microbatch(e->spec, k, 1, &mb, &chunk);
        emit_fwd(e, mb, chunk);
    }
    for (int k = 0; k < total - warmup; k++) {
        virtual_microbatch(e->spec, warmup + k, 1, &mb, &chunk);
        emit_fwd(e, mb, chunk);
        virtual_microbatch(e->spec, k, 0, &mb, &chunk);
        emit_bwd(e, PL_PP_BWD, mb, chunk);
    }
    for (int k = total - warmup; k < total; k++) {
        virtual_microbatch(e->spec, k, 0, &mb, &chunk);
        emit_bwd(e, PL_PP_BWD, mb, chunk);
    }
}

pl_status pl_pp_schedule_rank(const pl_pp_spec *spec, int rank, pl_pp_action *out, int *n)
{
    *n = 0;
    pl_status st = pl_pp_spec_validate(spec);
    if (st != PL_OK)
        return st;
    if (rank < 0 || rank >= spec->stages)
        return pl_errorf(PL_ERR_ARG, "pipeline rank %d is outside 0..%d", rank, spec->stages - 1);
    emitter e = {.spec = spec, .rank = rank, .out = out, .n = 0};
    switch (spec->kind) {
    case PL_PP_NONE: build_none(&e); break;
    case PL_PP_GPIPE: build_gpipe(&e); break;
    case PL_PP_1F1B: build_1f1b(&e); break;
    case PL_PP_INTERLEAVED: build_interleaved(&e); break;
    case PL_PP_ZB_H1: build_zb_h1(&e); break;
    case PL_PP_NKINDS: break;
    }
    *n = e.n;
    return PL_OK;
}

void pl_pp_schedule_free(pl_pp_schedule *s)
{
    pl_free(s->action);
    pl_free(s->first);
    memset(s, 0, sizeof *s);
}

pl_status pl_pp_schedule_init(pl_pp_schedule *s, const pl_pp_spec *spec)
{
    pl_status st = PL_OK;
    memset(s, 0, sizeof *s);
    PL_TRY(pl_pp_spec_validate(spec));
    s->spec = *spec;
    int P = spec->stages, n;
    s->first = pl_malloc(sizeof(int) * (size_t)(P + 1));
    if (!s->first) {
        st = pl_errorf(PL_ERR_NOMEM, "pipeline schedule: out of memory for %d stage offsets", P + 1);
        goto fail;
    }
    s->first[0] = 0;
    for (int r = 0; r < P; r++) {
        PL_TRY(pl_pp_schedule_rank(spec, r, NULL, &n));
        s->first[r + 1] = s->first[r] + n;
    }
    s->action = pl_malloc(sizeof(pl_pp_action) * (size_t)s->first[P] + 1);
    if (!s->action) {
        st = pl_errorf(PL_ERR_NOMEM, "pipeline schedule: out of memory for %d actions", s->first[P]);
        goto fail;
    }
    for (int r = 0; r < P; r++)
        PL_TRY(pl_pp_schedule_rank(spec, r, s->action + s->first[r], &n));
    return PL_OK;

fail:
    pl_pp_schedule_free(s);
    return st;
}

/* ---- transfers -------------------------------------------------------------------------- */

int pl_pp_transfer_count(const pl_pp_spec *spec)
{
    return 2 * spec->micro_batches * (spec->stages * spec->chunks - 1);
}

/* The direction (0 activation, 1 gradient) and boundary of a transfer action, or -1. */
static int transfer_boundary(const pl_pp_spec *spec, int rank, const pl_pp_action *a, int *dir)
{
    int s = a->chunk * spec->stages + rank, b;
    switch (a->op) {
    case PL_PP_SEND_ACT: *dir = 0, b = s; break;
    case PL_PP_RECV_ACT: *dir = 0, b = s - 1; break;
    case PL_PP_SEND_GRAD: *dir = 1, b = s - 1; break;
    case PL_PP_RECV_GRAD: *dir = 1, b = s; break;
    default: return -1;
    }
    return b >= 0 && b < spec->stages * spec->chunks - 1 ? b : -1;
}

int pl_pp_transfer_id(const pl_pp_spec *spec, int rank, const pl_pp_action *a)
{
    int dir = 0, b = transfer_boundary(spec, rank, a, &dir);
    if (b < 0)
        return -1;
    return (dir * spec->micro_batches + a->mb) * (spec->stages * spec->chunks - 1) + b;
}

/* ---- the checker ------------------------------------------------------------------------ */

/* Work arrays of one check, allocated together. */
typedef struct check_work {
    int *sends, *recvs;  /* per transfer id: how many sends and receives */
    int *count, *pos;    /* per (op, chunk, mb) of one stage: occurrences, last index */
    int *cursor;         /* per stage: next action to run */
    double *sent;        /* per transfer id: time its send ran, -1 before */
    double *clock;       /* per stage: time its previous action ended */
    double *busy;        /* per stage: compute time */
    const double *cost;  /* NULL: unit costs (op_cost); else [P x 4] measured seconds */
} check_work;

static pl_status broken(const pl_pp_schedule *s, int rank, int at, const char *fmt, ...)
    PL_PRINTF(4, 5);

/* PL_ERR_INTERNAL "1f1b P=4 m=8 v=1: rank 2 action 5 (RECV_GRAD mb 1 chunk 0 from 3): ..." */
static pl_status broken(const pl_pp_schedule *s, int rank, int at, const char *fmt, ...)
{
    char what[768], act[112] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (at >= 0) {
        char buf[80];
        snprintf(act, sizeof act, " action %d (%s)", at,
                 pl_pp_action_format(&s->action[s->first[rank] + at], buf, sizeof buf));
    }
    if (rank >= 0)
        return pl_errorf(PL_ERR_INTERNAL, "%s schedule P=%d m=%d v=%d: rank %d%s: %s",
                         pl_pp_kind_name(s->spec.kind), s->spec.stages, s->spec.micro_batches,
                         s->spec.chunks, rank, act, what);
    return pl_errorf(PL_ERR_INTERNAL, "%s schedule P=%d m=%d v=%d: %s", pl_pp_kind_name(s->spec.kind),
                     s->spec.stages, s->spec.micro_batches, s->spec.chunks, what);
}

/* Rule 1: every action is well formed. */
static pl_status check_well_formed(const pl_pp_schedule *s)
{
    const pl_pp_spec *sp = &s->spec;
    int P = sp->stages, S = P * sp->chunks;
    for (int r = 0; r < P; r++) {
        int n;
        const pl_pp_action *list = pl_pp_schedule_list(s, r, &n);
        for (int i = 0; i < n; i++) {
            const pl_pp_action *a = &list[i];
            if ((unsigned)a->op >= PL_PP_NOPS)
                return broken(s, r, i, "unknown operation %d", (int)a->op);
            if (a->mb < 0 || a->mb >= sp->micro_batches)
                return broken(s, r, i, "micro-batch outside 0..%d", sp->micro_batches - 1);
            if (a->chunk < 0 || a->chunk >= sp->chunks)
                return broken(s, r, i, "chunk outside 0..%d", sp->chunks - 1);
            if (!is_transfer(a->op)) {
                if (a->peer != -1)
                    return broken(s, r, i, "a computation names peer %d (expected -1)", a->peer);
                continue;
            }
            int dir = 0, vs = a->chunk * P + r, b = transfer_boundary(sp, r, a, &dir);
            if (b < 0)
                return broken(s, r, i, "virtual stage %d is the %s of %d and has no %s", vs,
                              vs == 0 ? "first" : "last", S,
                              a->op == PL_PP_SEND_ACT || a->op == PL_PP_RECV_GRAD
                                  ? "next stage (it computes the loss)"
                                  : "previous stage (it reads the data)");
            int other = b == vs ? vs + 1 : vs - 1;
            if (a->peer != other % P)
                return broken(s, r, i, "its peer, virtual stage %d, is on rank %d, not %d", other,
                              other % P, a->peer);
        }
    }
    return PL_OK;
}

/* Rule 2: each transfer is sent once and received once. */
static pl_status check_matching(const pl_pp_schedule *s, check_work *w)
{
    const pl_pp_spec *sp = &s->spec;
    int T = pl_pp_transfer_count(sp), P = sp->stages, S = P * sp->chunks;
    memset(w->sends, 0, sizeof(int) * (size_t)T);
    memset(w->recvs, 0, sizeof(int) * (size_t)T);
    for (int r = 0; r < P; r++) {
        int n;
        const pl_pp_action *list = pl_pp_schedule_list(s, r, &n);
        for (int i = 0; i < n; i++) {
            int id = pl_pp_transfer_id(sp, r, &list[i]);
            if (id >= 0)
                (is_recv(list[i].op) ? w->recvs : w->sends)[id]++;
        }
    }
    for (int id = 0; id < T; id++) {
        if (w->sends[id] == 1 && w->recvs[id] == 1)
            continue;
        int b = id % (S - 1), mb = id / (S - 1) % sp->micro_batches, dir = id / (S - 1) / sp->micro_batches;
        int from = dir == 0 ? b : b + 1, to = dir == 0 ? b + 1 : b;
        return broken(s, -1, -1,
                      "the %s of micro-batch %d from virtual stage %d (rank %d chunk %d) to %d "
                      "(rank %d chunk %d) is sent %d times and received %d times, expected once each",
                      dir == 0 ? "activation" : "gradient", mb, from, from % P, from / P, to, to % P,
                      to / P, w->sends[id], w->recvs[id]);
    }
    return PL_OK;
}

/* Rule 3 for one stage: each (mb, chunk) computed once, in dependency order. */
static pl_status check_stage_order(const pl_pp_schedule *s, int r, check_work *w)
{
    const pl_pp_spec *sp = &s->spec;
    int m = sp->micro_batches, v = sp->chunks, P = sp->stages, S = P * v, n;
    const pl_pp_action *list = pl_pp_schedule_list(s, r, &n);
    size_t cells = (size_t)PL_PP_NOPS * (size_t)v * (size_t)m;
/* index of (op, chunk, mb) in count and pos */
#define AT(op, c, mb) (((size_t)(op) * (size_t)v + (size_t)(c)) * (size_t)m + (size_t)(mb))
    memset(w->count, 0, sizeof(int) * cells);
    for (int i = 0; i < n; i++) {
        w->count[AT(list[i].op, list[i].chunk, list[i].mb)]++;
        w->pos[AT(list[i].op, list[i].chunk, list[i].mb)] = i;
    }
    for (int c = 0; c < v; c++) {
        int vs = c * P + r;
        for (int mb = 0; mb < m; mb++) {
            int nf = w->count[AT(PL_PP_FWD, c, mb)], nb = w->count[AT(PL_PP_BWD, c, mb)];
            int ni = w->count[AT(PL_PP_BWD_INPUT, c, mb)], nw = w->count[AT(PL_PP_BWD_WEIGHT, c, mb)];
            if (nf != 1)
                return broken(s, r, -1, "micro-batch %d chunk %d has %d FWD, expected 1", mb, c, nf);
            if (!((nb == 1 && ni == 0 && nw == 0) || (nb == 0 && ni == 1 && nw == 1)))
                return broken(s, r, -1,
                              "micro-batch %d chunk %d has %d BWD, %d BWD_INPUT and %d BWD_WEIGHT; "
                              "expected one BWD, or one BWD_INPUT and one BWD_WEIGHT",
                              mb, c, nb, ni, nw);
            int f = w->pos[AT(PL_PP_FWD, c, mb)];
            int b = nb ? w->pos[AT(PL_PP_BWD, c, mb)] : w->pos[AT(PL_PP_BWD_INPUT, c, mb)];
            if (b < f)
                return broken(s, r, b, "comes before its FWD (action %d)", f);
            if (ni && w->pos[AT(PL_PP_BWD_WEIGHT, c, mb)] < b)
                return broken(s, r, w->pos[AT(PL_PP_BWD_WEIGHT, c, mb)],
                              "comes before its BWD_INPUT (action %d)", b);
            /* Each transfer below exists exactly once (rules 1 and 2). */
            if (vs > 0 && w->pos[AT(PL_PP_RECV_ACT, c, mb)] > f)
                return broken(s, r, w->pos[AT(PL_PP_RECV_ACT, c, mb)],
                              "comes after the FWD that needs it (action %d)", f);
            if (vs > 0 && w->pos[AT(PL_PP_SEND_GRAD, c, mb)] < b)
                return broken(s, r, w->pos[AT(PL_PP_SEND_GRAD, c, mb)],
                              "comes before the backward that computes it (action %d)", b);
            if (vs < S - 1 && w->pos[AT(PL_PP_SEND_ACT, c, mb)] < f)
                return broken(s, r, w->pos[AT(PL_PP_SEND_ACT, c, mb)],
                              "comes before the FWD that computes it (action %d)", f);
            if (vs < S - 1 && w->pos[AT(PL_PP_RECV_GRAD, c, mb)] > b)
                return broken(s, r, w->pos[AT(PL_PP_RECV_GRAD, c, mb)],
                              "comes after the backward that needs it (action %d)", b);
        }
    }
#undef AT
    return PL_OK;
}

/* Rule 4 for one stage; returns the stage's largest in-flight count in *peak. */
static pl_status check_in_flight(const pl_pp_schedule *s, int r, int *peak)
{
    int n, now = 0, bound = pl_pp_in_flight_bound(&s->spec, r);
    const pl_pp_action *list = pl_pp_schedule_list(s, r, &n);
    *peak = 0;
    for (int i = 0; i < n; i++) {
        if (list[i].op == PL_PP_FWD && ++now > bound)
            return broken(s, r, i, "%d activations in flight, above the %s bound %d", now,
                          pl_pp_kind_name(s->spec.kind), bound);
        if (list[i].op == PL_PP_BWD || list[i].op == PL_PP_BWD_INPUT)
            now--;
        if (now > *peak)
            *peak = now;
    }
    return PL_OK;
}

/* Rule 5: runs all stages together under unit costs. start (NULL, or one entry per
 * action of s) gets each action's start time. */
/* The cost of action a on stage r: unit costs, or the measured ones (FWD, BWD,
 * BWD_INPUT, BWD_WEIGHT of stage r), transfers free. */
static double action_cost(const check_work *w, int r, const pl_pp_action *a)
{
    if (!w->cost || a->op > PL_PP_BWD_WEIGHT)
        return op_cost[a->op];
    return w->cost[r * 4 + (int)a->op];
}

static pl_status simulate(const pl_pp_schedule *s, check_work *w, int64_t *start)
{
    const pl_pp_spec *sp = &s->spec;
    int P = sp->stages, T = pl_pp_transfer_count(sp);
    for (int id = 0; id < T; id++)
        w->sent[id] = -1;
    for (int r = 0; r < P; r++) {
        w->cursor[r] = 0;
        w->clock[r] = 0;
        w->busy[r] = 0;
    }
    for (;;) {
        int progress = 0, finished = 0;
        for (int r = 0; r < P; r++) {
            int n;
            const pl_pp_action *list = pl_pp_schedule_list(s, r, &n);
            for (; w->cursor[r] < n; w->cursor[r]++, progress = 1) {
                const pl_pp_action *a = &list[w->cursor[r]];
                double t = w->clock[r];
                int id = pl_pp_transfer_id(sp, r, a);
                if (is_recv(a->op)) {
                    if (w->sent[id] < 0)
                        break; /* blocked until the peer sends */
                    if (w->sent[id] > t)
                        t = w->sent[id];
                } else if (id >= 0) {
                    w->sent[id] = t;
                }
                if (start)
                    start[s->first[r] + w->cursor[r]] = (int64_t)t;
                w->clock[r] = t + action_cost(w, r, a);
                w->busy[r] += action_cost(w, r, a);
            }
            finished += w->cursor[r] == n;
        }
        if (finished == P)
            return PL_OK;
        if (!progress)
            break;
    }
    /* Deadlock: name what every unfinished stage waits for. */
    char msg[640] = "deadlock:";
    size_t len = strlen(msg);
    for (int r = 0; r < P && len < sizeof msg - 1; r++) {
        int n;
        const pl_pp_action *list = pl_pp_schedule_list(s, r, &n);
        if (w->cursor[r] == n)
            continue;
        char buf[80];
        int k = snprintf(msg + len, sizeof msg - len, " rank %d waits at action %d (%s);", r,
                         w->cursor[r], pl_pp_action_format(&list[w->cursor[r]], buf, sizeof buf));
        len = k < 0 ? sizeof msg : len + (size_t)k;
    }
    return broken(s, -1, -1, "%s", msg);
}

static void check_work_free(check_work *w)
{
    pl_free(w->sends);
    pl_free(w->sent);
    memset(w, 0, sizeof *w);
}

/* Validates sp first: the sizes below come from it. */
static pl_status check_work_init(check_work *w, const pl_pp_spec *sp)
{
    memset(w, 0, sizeof *w);
    pl_status st = pl_pp_spec_validate(sp);
    if (st != PL_OK)
        return st;
    size_t T = (size_t)pl_pp_transfer_count(sp), P = (size_t)sp->stages;
    size_t cells = (size_t)PL_PP_NOPS * (size_t)sp->chunks * (size_t)sp->micro_batches;
    w->sends = pl_malloc(sizeof(int) * (2 * T + 2 * cells + P));
    w->sent = pl_malloc(sizeof(double) * (T + 2 * P));
    if (!w->sends || !w->sent) {
        check_work_free(w);
        return pl_errorf(PL_ERR_NOMEM, "pipeline schedule check: out of memory for the work arrays of %zu transfers", T);
    }
    w->recvs = w->sends + T;
    w->count = w->recvs + T;
    w->pos = w->count + cells;
    w->cursor = w->pos + cells;
    w->clock = w->sent + T;
    w->busy = w->clock + P;
    return PL_OK;
}

/* Rules 1-4, then the simulation into w (start as in simulate). w comes from
 * check_work_init, which validated the spec. */
static pl_status check_run(const pl_pp_schedule *s, check_work *w, int64_t *start, int *peak)
{
    pl_status st;
    if ((st = check_well_formed(s)) != PL_OK || (st = check_matching(s, w)) != PL_OK)
        return st;
    *peak = 0;
    for (int r = 0; r < s->spec.stages; r++) {
        int p;
        if ((st = check_stage_order(s, r, w)) != PL_OK || (st = check_in_flight(s, r, &p)) != PL_OK)
            return st;
        if (p > *peak)
            *peak = p;
    }
    return simulate(s, w, start);
}

pl_status pl_pp_schedule_check(const pl_pp_schedule *s, pl_pp_stats *stats, int64_t *idle)
{
    check_work w;
    int peak;
    pl_status st = check_work_init(&w, &s->spec);
    if (st != PL_OK)
        return st;
    st = check_run(s, &w, NULL, &peak);
    if (st == PL_OK) {
        pl_pp_stats out = {.makespan = 0, .busy = 0, .max_in_flight = peak};
        for (int r = 0; r < s->spec.stages; r++) { /* unit costs: whole numbers, exact */
            if ((int64_t)w.clock[r] > out.makespan)
                out.makespan = (int64_t)w.clock[r];
            if ((int64_t)w.busy[r] > out.busy)
                out.busy = (int64_t)w.busy[r];
            if (idle)
                idle[r] = (int64_t)(w.clock[r] - w.busy[r]);
        }
        if (stats)
            *stats = out;
    }
    check_work_free(&w);
    return st;
}

/* ---- the timeline ----------------------------------------------------------------------- */

/* "F12" or, with chunks, "F12b"; returns the length. */
static int cell_label(const pl_pp_spec *sp, const pl_pp_action *a, char *buf, size_t cap)
{
    if (sp->chunks > 1)
        return snprintf(buf, cap, "%c%d%c", op_letter[a->op], a->mb, 'a' + a->chunk % 26);
    return snprintf(buf, cap, "%c%d", op_letter[a->op], a->mb);
}

pl_status pl_pp_schedule_timeline(const pl_pp_schedule *s, char **out)
{
    pl_status st = PL_OK;
    check_work w;
    int64_t *start = NULL;
    char *text = NULL;
    int peak, P = s->spec.stages, total = s->first[P];
    *out = NULL;
    PL_TRY(check_work_init(&w, &s->spec));
    start = pl_malloc(sizeof(int64_t) * (size_t)total + 1);
    if (!start) {
        st = pl_errorf(PL_ERR_NOMEM, "pipeline timeline: out of memory for %d start times", total);
        goto fail;
    }
    PL_TRY(check_run(s, &w, start, &peak));

    int64_t makespan = 0, busy = (int64_t)w.busy[0];
    int width = 1;
    char label[32];
    for (int r = 0; r < P; r++)
        if ((int64_t)w.clock[r] > makespan)
            makespan = (int64_t)w.clock[r];
    for (int i = 0; i < total; i++) {
        int len = cell_label(&s->spec, &s->action[i], label, sizeof label);
        if (len > width)
            width = len;
    }
    width++; /* a space between cells */
    size_t row = 32 + (size_t)makespan * (size_t)width + 32, cap = (size_t)P * row + 128;
    text = pl_malloc(cap);
    if (!text) {
        st = pl_errorf(PL_ERR_NOMEM, "pipeline timeline: out of memory for %zu bytes", cap);
        goto fail;
    }
    size_t len = 0;
    for (int r = 0; r < P; r++) {
        len += (size_t)snprintf(text + len, cap - len, "rank %d |", r);
        char *cells = text + len;
        memset(cells, ' ', (size_t)makespan * (size_t)width);
        for (int64_t t = 0; t < makespan; t++)
            cells[t * width + 1] = '.';
        int n;
        const pl_pp_action *list = pl_pp_schedule_list(s, r, &n);
        for (int i = 0; i < n; i++) {
            int cost = op_cost[list[i].op];
            int k = cell_label(&s->spec, &list[i], label, sizeof label);
            for (int u = 0; u < cost; u++)
                memcpy(cells + (start[s->first[r] + i] + u) * width + 1, label, (size_t)k);
        }
        len += (size_t)makespan * (size_t)width;
        len += (size_t)snprintf(text + len, cap - len, " | idle %lld\n",
                                (long long)(w.clock[r] - w.busy[r]));
    }
    snprintf(text + len, cap - len, "makespan %lld, busy %lld per rank, bubble %lld/%lld = %.4f\n",
             (long long)makespan, (long long)busy, (long long)(makespan - busy), (long long)busy,
             busy ? (double)(makespan - busy) / (double)busy : 0.0);
    *out = text;
    text = NULL;

fail:
    pl_free(text);
    pl_free(start);
    check_work_free(&w);
    return st;
}

pl_status pl_pp_schedule_simulate(const pl_pp_schedule *s, const double *cost, double *makespan,
                                  double *idle)
{
    check_work w;
    int peak;
    pl_status st = check_work_init(&w, &s->spec);
    if (st != PL_OK)
        return st;
    w.cost = cost;
    st = check_run(s, &w, NULL, &peak);
    if (st == PL_OK) {
        *makespan = 0;
        for (int r = 0; r < s->spec.stages; r++) {
            if (w.clock[r] > *makespan)
                *makespan = w.clock[r];
            idle[r] = w.clock[r] - w.busy[r];
        }
    }
    check_work_free(&w);
    return st;
}
