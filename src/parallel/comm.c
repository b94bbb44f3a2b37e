/* The comm layer: MPI calls with counters and messages that name the communicator. */
#include "parallel/comm.h"

#include "base/log.h"
#include "parallel/watchdog.h"

#include <limits.h>
#include <string.h>

/* Requests handed to MPI_Testall/MPI_Waitall at a time (keeps the copy on the stack). */
#define REQ_CHUNK 64

static const char *const kind_names[PL_COMM_NKINDS] = {
    "all-reduce", "reduce-scatter", "all-gather", "broadcast", "send/recv", "barrier",
};

const char *pl_comm_kind_name(pl_comm_kind kind)
{
    return (unsigned)kind < PL_COMM_NKINDS ? kind_names[kind] : "unknown";
}

int64_t pl_comm_wire_bytes(pl_comm_kind kind, int nranks, int64_t bytes)
{
    if (nranks <= 1)
        return 0;
    int64_t n = nranks;
    switch (kind) {
    case PL_COMM_ALLREDUCE: return 2 * (n - 1) * bytes / n;
    case PL_COMM_REDUCE_SCATTER:
    case PL_COMM_ALLGATHER: return (n - 1) * bytes / n;
    case PL_COMM_BROADCAST:
    case PL_COMM_SENDRECV: return bytes;
    case PL_COMM_BARRIER:
    case PL_COMM_NKINDS: break;
    }
    return 0;
}

/* ---- errors and accounting -------------------------------------------------------- */

/* MPI's message for rc on one line (MPICH's error stacks span several). */
static void mpi_error_string(int rc, char *out, size_t cap)
{
    char s[MPI_MAX_ERROR_STRING + 1];
    int len = 0;
    if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS || len <= 0) {
        snprintf(out, cap, "MPI error code %d", rc);
        return;
    }
    s[len < MPI_MAX_ERROR_STRING ? len : MPI_MAX_ERROR_STRING] = '\0';
    while (len > 0 && (s[len - 1] == '\n' || s[len - 1] == ' '))
        s[--len] = '\0';
    for (char *p = s; *p; p++)
        if (*p == '\n')
            *p = ';';
    snprintf(out, cap, "%s", s);
}

static pl_status mpi_fail(const pl_comm *c, const char *what, int rc)
{
    char s[768];
    mpi_error_string(rc, s, sizeof s);
    return pl_errorf(PL_ERR_IO, "%s on communicator %s (rank %d of %d, world rank %d) failed: %s",
                     what, c->name, c->rank, c->size, c->world_rank, s);
}

/* Checks that c is usable and n fits MPI's int counts. */
static pl_status check_call(const pl_comm *c, const char *what, int64_t n)
{
    if (c->size <= 0)
        return pl_errorf(PL_ERR_ARG, "%s: world rank %d is not a member of communicator %s", what,
                         c->world_rank, c->name[0] ? c->name : "(unnamed)");
    if (n < 0)
        return pl_errorf(PL_ERR_ARG, "%s on communicator %s: negative count %lld", what, c->name,
                         (long long)n);
    if (n > INT_MAX)
        return pl_errorf(PL_ERR_UNSUPPORTED,
                         "%s on communicator %s: count %lld exceeds MPI's limit of %d elements "
                         "per call",
                         what, c->name, (long long)n, INT_MAX);
    return PL_OK;
}

static void account(pl_comm *c, pl_comm_kind k, int64_t bytes, int64_t wire, double seconds)
{
    pl_comm_counter *ct = &c->stats.kind[k];
    ct->calls++;
    ct->bytes += bytes;
    ct->wire_bytes += wire;
    ct->seconds += seconds;
}

static MPI_Op mpi_op(pl_comm_op op)
{
    switch (op) {
    case PL_COMM_SUM: return MPI_SUM;
    case PL_COMM_MAX: return MPI_MAX;
    case PL_COMM_MIN: return MPI_MIN;
    }
    return MPI_OP_NULL;
}

/* ---- life cycle ------------------------------------------------------------------- */

static void set_non_member(pl_comm *c, const char *name)
{
    memset(c, 0, sizeof *c);
    c->mpi = MPI_COMM_NULL;
    c->rank = -1;
    c->size = 0;
    int wr = -1, up = 0, down = 0;
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    if (up && !down)
        MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    c->world_rank = wr;
    snprintf(c->name, sizeof c->name, "%s", name ? name : "");
}

pl_status pl_comm_init(pl_comm *c, MPI_Comm mpi, const char *name, int owned)
{
    set_non_member(c, name);
    if (mpi == MPI_COMM_NULL)
        return PL_OK;
    c->mpi = mpi;
    c->owned = owned;
    int rc = MPI_Comm_set_errhandler(mpi, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_rank(mpi, &c->rank);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_size(mpi, &c->size);
    if (rc != MPI_SUCCESS) {
        pl_status st = mpi_fail(c, "MPI_Comm_set_errhandler/rank/size", rc);
        pl_comm_free(c);
        set_non_member(c, name);
        return st;
    }
    return PL_OK;
}

pl_status pl_comm_dup(pl_comm *c, MPI_Comm parent, const char *name)
{
    set_non_member(c, name);
    MPI_Comm dup = MPI_COMM_NULL;
    pl_watch_enter("MPI_Comm_dup", name, 0, -1);
    int rc = MPI_Comm_dup(parent, &dup);
    pl_watch_leave();
    if (rc != MPI_SUCCESS) {
        c->size = 1; /* only so the message below reads sensibly */
        pl_status st = mpi_fail(c, "MPI_Comm_dup", rc);
        set_non_member(c, name);
        return st;
    }
    return pl_comm_init(c, dup, name, 1);
}

void pl_comm_free(pl_comm *c)
{
    if (c->owned && c->mpi != MPI_COMM_NULL) {
        int down = 0;
        MPI_Finalized(&down);
        if (!down)
            MPI_Comm_free(&c->mpi);
    }
    c->mpi = MPI_COMM_NULL;
    c->owned = 0;
    c->rank = -1;
    c->size = 0;
}

/* ---- counters --------------------------------------------------------------------- */

void pl_comm_stats_reset(pl_comm *c) { memset(&c->stats, 0, sizeof c->stats); }

void pl_comm_stats_add(pl_comm_stats *acc, const pl_comm_stats *s)
{
    for (int k = 0; k < PL_COMM_NKINDS; k++) {
        acc->kind[k].calls += s->kind[k].calls;
        acc->kind[k].bytes += s->kind[k].bytes;
        acc->kind[k].wire_bytes += s->kind[k].wire_bytes;
        acc->kind[k].seconds += s->kind[k].seconds;
    }
}

void pl_comm_stats_sub(pl_comm_stats *out, const pl_comm_stats *a, const pl_comm_stats *b)
{
    for (int k = 0; k < PL_COMM_NKINDS; k++) {
        out->kind[k].calls = a->kind[k].calls - b->kind[k].calls;
        out->kind[k].bytes = a->kind[k].bytes - b->kind[k].bytes;
        out->kind[k].wire_bytes = a->kind[k].wire_bytes - b->kind[k].wire_bytes;
        out->kind[k].seconds = a->kind[k].seconds - b->kind[k].seconds;
    }
}

/* ---- all-reduce ------------------------------------------------------------------- */

static pl_status allreduce(pl_comm *c, void *buf, int64_t n, MPI_Datatype type, size_t elem,
                           pl_comm_op op)
{
    pl_status st = check_call(c, "MPI_Allreduce", n);
    if (st != PL_OK)
        return st;
    MPI_Op mop = mpi_op(op);
    if (mop == MPI_OP_NULL)
        return pl_errorf(PL_ERR_ARG, "MPI_Allreduce on %s: unknown reduction %d", c->name, (int)op);
    double t0 = pl_time_now();
    pl_watch_enter("MPI_Allreduce", c->name, c->size, -1);
    int rc = MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, type, mop, c->mpi);
    pl_watch_leave();
    double t1 = pl_time_now();
    if (rc != MPI_SUCCESS)
        return mpi_fail(c, "MPI_Allreduce", rc);
    int64_t bytes = n * (int64_t)elem;
    account(c, PL_COMM_ALLREDUCE, bytes, pl_comm_wire_bytes(PL_COMM_ALLREDUCE, c->size, bytes),
            t1 - t0);
    return PL_OK;
}

pl_status pl_comm_allreduce_f32(pl_comm *c, float *buf, int64_t n, pl_comm_op op)
{
    return allreduce(c, buf, n, MPI_FLOAT, sizeof(float), op);
}

pl_status pl_comm_allreduce_f64(pl_comm *c, double *buf, int64_t n, pl_comm_op op)
{
    return allreduce(c, buf, n, MPI_DOUBLE, sizeof(double), op);
}

pl_status pl_comm_allreduce_i32(pl_comm *c, int32_t *buf, int64_t n, pl_comm_op op)
{
    return allreduce(c, buf, n, MPI_INT32_T, sizeof(int32_t), op);
}

pl_status pl_comm_allreduce_i64(pl_comm *c, int64_t *buf, int64_t n, pl_comm_op op)
{
    return allreduce(c, buf, n, MPI_INT64_T, sizeof(int64_t), op);
}

pl_status pl_comm_iallreduce_f32(pl_comm *c, float *buf, int64_t n, pl_comm_op op,
                                 pl_comm_req *req)
{
    *req = PL_COMM_REQ_NULL;
    pl_status st = check_call(c, "MPI_Iallreduce", n);
    if (st != PL_OK)
        return st;
    MPI_Op mop = mpi_op(op);
    if (mop == MPI_OP_NULL)
        return pl_errorf(PL_ERR_ARG, "MPI_Iallreduce on %s: unknown reduction %d", c->name, (int)op);
    double t0 = pl_time_now();
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, mop, c->mpi, &req->mpi);
    double t1 = pl_time_now();
    if (rc != MPI_SUCCESS) {
        req->mpi = MPI_REQUEST_NULL;
        return mpi_fail(c, "MPI_Iallreduce", rc);
    }
    req->comm = c;
    req->kind = PL_COMM_ALLREDUCE;
    req->what = "MPI_Iallreduce";
    int64_t bytes = n * (int64_t)sizeof(float);
    account(c, PL_COMM_ALLREDUCE, bytes, pl_comm_wire_bytes(PL_COMM_ALLREDUCE, c->size, bytes),
            t1 - t0);
    return PL_OK;
}

/* ---- completion ------------------------------------------------------------------- */

static void charge_wait(pl_comm_req *r, double seconds)
{
    if (r && r->comm)
        r->comm->stats.kind[r->kind].seconds += seconds;
}

pl_status pl_comm_test(pl_comm_req *req, int *done)
{
    *done = 1;
    if (req->mpi == MPI_REQUEST_NULL)
        return PL_OK;
    double t0 = pl_time_now();
    int flag = 0;
    int rc = MPI_Test(&req->mpi, &flag, MPI_STATUS_IGNORE);
    charge_wait(req, pl_time_now() - t0);
    if (rc != MPI_SUCCESS)
        return mpi_fail(req->comm, "MPI_Test", rc);
    *done = flag;
    return PL_OK;
}

pl_status pl_comm_wait(pl_comm_req *req)
{
    if (req->mpi == MPI_REQUEST_NULL)
        return PL_OK;
    double t0 = pl_time_now();
    pl_watch_enter(req->what, req->comm ? req->comm->name : "?", req->comm ? req->comm->size : 0,
                   -1);
    int rc = MPI_Wait(&req->mpi, MPI_STATUS_IGNORE);
    pl_watch_leave();
    charge_wait(req, pl_time_now() - t0);
    if (rc != MPI_SUCCESS)
        return mpi_fail(req->comm, req->what, rc);
    return PL_OK;
}

static pl_comm_req *first_pending(pl_comm_req *reqs, int n)
{
    for (int i = 0; i < n; i++)
        if (reqs[i].mpi != MPI_REQUEST_NULL)
            return &reqs[i];
    return NULL;
}

/* MPI_Testall (wait = 0) or MPI_Waitall (wait = 1) in chunks of REQ_CHUNK. A chunk that
 * is not complete is left unmodified (MPI_Testall's contract). */
static pl_status complete_all(pl_comm_req *reqs, int n, int wait, int *all_done)
{
    *all_done = 1;
    pl_comm_req *first = first_pending(reqs, n);
    if (!first)
        return PL_OK;
    double t0 = pl_time_now();
    MPI_Request tmp[REQ_CHUNK];
    MPI_Status status[REQ_CHUNK]; /* not MPI_STATUSES_IGNORE: MPICH's (MPI_Status *)1 trips
                                     GCC's -Wstringop-overflow through MPICH's attributes */
    pl_status st = PL_OK;
    for (int i = 0; i < n && st == PL_OK; i += REQ_CHUNK) {
        int m = n - i < REQ_CHUNK ? n - i : REQ_CHUNK, any = 0;
        for (int j = 0; j < m; j++) {
            tmp[j] = reqs[i + j].mpi;
            any |= tmp[j] != MPI_REQUEST_NULL;
        }
        if (!any)
            continue;
        int flag = 1, rc;
        if (wait) {
            pl_watch_enter(first->what, first->comm ? first->comm->name : "?",
                           first->comm ? first->comm->size : 0, -1);
            rc = MPI_Waitall(m, tmp, status);
            pl_watch_leave();
        } else {
            rc = MPI_Testall(m, tmp, &flag, status);
        }
        if (rc != MPI_SUCCESS) {
            pl_comm_req *r = first_pending(reqs + i, m);
            st = mpi_fail(r->comm, wait ? "MPI_Waitall" : "MPI_Testall", rc);
        }
        if (flag || rc != MPI_SUCCESS)
            for (int j = 0; j < m; j++)
                reqs[i + j].mpi = tmp[j];
        if (!flag)
            *all_done = 0;
    }
    charge_wait(first, pl_time_now() - t0);
    return st;
}

pl_status pl_comm_testall(pl_comm_req *reqs, int n, int *all_done)
{
    return complete_all(reqs, n, 0, all_done);
}

pl_status pl_comm_waitall(pl_comm_req *reqs, int n)
{
    int done;
    return complete_all(reqs, n, 1, &done);
}

/* ---- reduce-scatter, all-gather, broadcast, barrier ------------------------------- */

pl_status pl_comm_reduce_scatter_f32(pl_comm *c, const float *send, float *recv, int64_t block)
{
    pl_status st = check_call(c, "MPI_Reduce_scatter_block", block);
    if (st != PL_OK)
        return st;
    double t0 = pl_time_now();
    pl_watch_enter("MPI_Reduce_scatter_block", c->name, c->size, -1);
    int rc = MPI_Reduce_scatter_block(send == recv ? MPI_IN_PLACE : send, recv, (int)block,
                                      MPI_FLOAT, MPI_SUM, c->mpi);
    pl_watch_leave();
    double t1 = pl_time_now();
    if (rc != MPI_SUCCESS)
        return mpi_fail(c, "MPI_Reduce_scatter_block", rc);
    int64_t bytes = block * c->size * (int64_t)sizeof(float);
    account(c, PL_COMM_REDUCE_SCATTER, bytes,
            pl_comm_wire_bytes(PL_COMM_REDUCE_SCATTER, c->size, bytes), t1 - t0);
    return PL_OK;
}

pl_status pl_comm_allgather_f32(pl_comm *c, const float *send, float *recv, int64_t block)
{
    pl_status st = check_call(c, "MPI_Allgather", block);
    if (st != PL_OK)
        return st;
    int in_place = send == recv + (int64_t)c->rank * block;
    double t0 = pl_time_now();
    pl_watch_enter("MPI_Allgather", c->name, c->size, -1);
    int rc = MPI_Allgather(in_place ? MPI_IN_PLACE : send, (int)block, MPI_FLOAT, recv, (int)block,
                           MPI_FLOAT, c->mpi);
    pl_watch_leave();
    double t1 = pl_time_now();
    if (rc != MPI_SUCCESS)
        return mpi_fail(c, "MPI_Allgather", rc);
    int64_t bytes = block * c->size * (int64_t)sizeof(float);
    account(c, PL_COMM_ALLGATHER, bytes, pl_comm_wire_bytes(PL_COMM_ALLGATHER, c->size, bytes),
            t1 - t0);
    return PL_OK;
}

pl_status pl_comm_reduce_scatter_v_f32(pl_comm *c, const float *send, float *recv,
                                       const int *counts, const int *displs)
{
    int64_t total = 0;
    for (int r = 0; c->size > 0 && r < c->size; r++)
        total += counts[r];
    pl_status st = check_call(c, "MPI_Reduce_scatter", total);
    if (st != PL_OK)
        return st;
    (void)displs;
    double t0 = pl_time_now();
    pl_watch_enter("MPI_Reduce_scatter", c->name, c->size, -1);
    int rc = MPI_Reduce_scatter(send, recv, counts, MPI_FLOAT, MPI_SUM, c->mpi);
    pl_watch_leave();
    double t1 = pl_time_now();
    if (rc != MPI_SUCCESS)
        return mpi_fail(c, "MPI_Reduce_scatter", rc);
    int64_t bytes = total * (int64_t)sizeof(float);
    int64_t wire = c->size > 1 ? (total - counts[c->rank]) * (int64_t)sizeof(float) : 0;
    account(c, PL_COMM_REDUCE_SCATTER, bytes, wire, t1 - t0);
    return PL_OK;
}

pl_status pl_comm_allgather_v_f32(pl_comm *c, const float *send, float *recv, const int *counts,
                                  const int *displs)
{
    int64_t total = 0;
    for (int r = 0; c->size > 0 && r < c->size; r++)
        total += counts[r];
    pl_status st = check_call(c, "MPI_Allgatherv", total);
    if (st != PL_OK)
        return st;
    int in_place = send == recv + displs[c->rank];
    double t0 = pl_time_now();
    pl_watch_enter("MPI_Allgatherv", c->name, c->size, -1);
    int rc = MPI_Allgatherv(in_place ? MPI_IN_PLACE : send, counts[c->rank], MPI_FLOAT, recv,
                            counts, displs, MPI_FLOAT, c->mpi);
    pl_watch_leave();
    double t1 = pl_time_now();
    if (rc != MPI_SUCCESS)
        return mpi_fail(c, "MPI_Allgatherv", rc);
    int64_t bytes = total * (int64_t)sizeof(float);
    int64_t wire =
        c->size > 1 ? (total - counts[(c->rank + 1) % c->size]) * (int64_t)sizeof(float) : 0;
    account(c, PL_COMM_ALLGATHER, bytes, wire, t1 - t0);
    return PL_OK;
}

pl_status pl_comm_bcast(pl_comm *c, void *buf, size_t bytes, int root)
{
    pl_status st = check_call(c, "MPI_Bcast", bytes > (size_t)INT64_MAX ? -1 : (int64_t)bytes);
    if (st != PL_OK)
        return st;
    double t0 = pl_time_now();
    pl_watch_enter("MPI_Bcast", c->name, c->size, -1);
    int rc = MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, c->mpi);
    pl_watch_leave();
    double t1 = pl_time_now();
    if (rc != MPI_SUCCESS)
        return mpi_fail(c, "MPI_Bcast", rc);
    /* Pipelined chain root, root+1, ..., root-1: all but the last forward the buffer. */
    int pos = ((c->rank - root) % c->size + c->size) % c->size;
    int64_t wire = pos == c->size - 1 ? 0 : pl_comm_wire_bytes(PL_COMM_BROADCAST, c->size, (int64_t)bytes);
    account(c, PL_COMM_BROADCAST, (int64_t)bytes, wire, t1 - t0);
    return PL_OK;
}

pl_status pl_comm_agree(pl_comm *c, pl_status local)
{
    if (!c || c->size <= 1)
        return local;
    /* one MAX: -(the lowest failing rank), and whether any rank succeeded */
    int32_t v[2] = {local != PL_OK ? -c->rank : INT32_MIN, local == PL_OK};
    pl_status st = pl_comm_allreduce_i32(c, v, 2, PL_COMM_MAX);
    if (st != PL_OK)
        return st;
    if (v[0] == INT32_MIN)
        return PL_OK;
    const int first = -v[0];
    /* the failing rank's status, world rank and message, from it to everyone */
    struct {
        int32_t status, world_rank;
        char msg[1024];
    } what;
    memset(&what, 0, sizeof what);
    if (c->rank == first) {
        what.status = (int32_t)local;
        what.world_rank = c->world_rank;
        snprintf(what.msg, sizeof what.msg, "%s", pl_error_msg());
    }
    if ((st = pl_comm_bcast(c, &what, sizeof what, first)) != PL_OK)
        return st;
    what.msg[sizeof what.msg - 1] = '\0';
    const char *msg = what.msg[0] ? what.msg : pl_status_str((pl_status)what.status);
    if (!v[1]) /* every rank failed: the lowest one's message, as is */
        return pl_errorf((pl_status)what.status, "%s", msg);
    return pl_errorf((pl_status)what.status, "rank %d: %s", (int)what.world_rank, msg);
}

pl_status pl_comm_barrier(pl_comm *c)
{
    pl_status st = check_call(c, "MPI_Barrier", 0);
    if (st != PL_OK)
        return st;
    double t0 = pl_time_now();
    pl_watch_enter("MPI_Barrier", c->name, c->size, -1);
    int rc = MPI_Barrier(c->mpi);
    pl_watch_leave();
    double t1 = pl_time_now();
    if (rc != MPI_SUCCESS)
        return mpi_fail(c, "MPI_Barrier", rc);
    account(c, PL_COMM_BARRIER, 0, 0, t1 - t0);
    return PL_OK;
}

/* ---- point to point --------------------------------------------------------------- */

static pl_status check_received(pl_comm *c, const char *what, MPI_Status *status, int64_t n,
                                int src)
{
    int got = -1;
    int rc = MPI_Get_count(status, MPI_FLOAT, &got);
    if (rc != MPI_SUCCESS)
        return mpi_fail(c, "MPI_Get_count", rc);
    if (got != n)
        return pl_errorf(PL_ERR_IO,
                         "%s on communicator %s (rank %d, world rank %d): received %d floats "
                         "from rank %d, expected %lld",
                         what, c->name, c->rank, c->world_rank, got, src, (long long)n);
    return PL_OK;
}

pl_status pl_comm_send_f32(pl_comm *c, const float *buf, int64_t n, int dst, int tag)
{
    pl_status st = check_call(c, "MPI_Send", n);
    if (st != PL_OK)
        return st;
    double t0 = pl_time_now();
    pl_watch_enter("MPI_Send", c->name, c->size, dst);
    int rc = MPI_Send(buf, (int)n, MPI_FLOAT, dst, tag, c->mpi);
    pl_watch_leave();
    double t1 = pl_time_now();
    if (rc != MPI_SUCCESS)
        return mpi_fail(c, "MPI_Send", rc);
    int64_t bytes = n * (int64_t)sizeof(float);
    account(c, PL_COMM_SENDRECV, bytes, bytes, t1 - t0);
    return PL_OK;
}

pl_status pl_comm_recv_f32(pl_comm *c, float *buf, int64_t n, int src, int tag)
{
    pl_status st = check_call(c, "MPI_Recv", n);
    if (st != PL_OK)
        return st;
    MPI_Status status;
    double t0 = pl_time_now();
    pl_watch_enter("MPI_Recv", c->name, c->size, src);
    int rc = MPI_Recv(buf, (int)n, MPI_FLOAT, src, tag, c->mpi, &status);
    pl_watch_leave();
    double t1 = pl_time_now();
    if (rc != MPI_SUCCESS)
        return mpi_fail(c, "MPI_Recv", rc);
    st = check_received(c, "MPI_Recv", &status, n, src);
    if (st != PL_OK)
        return st;
    account(c, PL_COMM_SENDRECV, n * (int64_t)sizeof(float), 0, t1 - t0);
    return PL_OK;
}

pl_status pl_comm_sendrecv_f32(pl_comm *c, const float *sbuf, int64_t sn, int dst, float *rbuf,
                               int64_t rn, int src, int tag)
{
    pl_status st = check_call(c, "MPI_Sendrecv", sn);
    if (st == PL_OK)
        st = check_call(c, "MPI_Sendrecv", rn);
    if (st != PL_OK)
        return st;
    MPI_Status status;
    double t0 = pl_time_now();
    pl_watch_enter("MPI_Sendrecv", c->name, c->size, src);
    int rc = MPI_Sendrecv(sbuf, (int)sn, MPI_FLOAT, dst, tag, rbuf, (int)rn, MPI_FLOAT, src, tag,
                          c->mpi, &status);
    pl_watch_leave();
    double t1 = pl_time_now();
    if (rc != MPI_SUCCESS)
        return mpi_fail(c, "MPI_Sendrecv", rc);
    if (src != MPI_PROC_NULL) {
        st = check_received(c, "MPI_Sendrecv", &status, rn, src);
        if (st != PL_OK)
            return st;
    }
    int64_t sbytes = dst == MPI_PROC_NULL ? 0 : sn * (int64_t)sizeof(float);
    int64_t rbytes = src == MPI_PROC_NULL ? 0 : rn * (int64_t)sizeof(float);
    account(c, PL_COMM_SENDRECV, sbytes + rbytes, sbytes, t1 - t0);
    return PL_OK;
}

pl_status pl_comm_isend_f32(pl_comm *c, const float *buf, int64_t n, int dst, int tag,
                            pl_comm_req *req)
{
    *req = PL_COMM_REQ_NULL;
    pl_status st = check_call(c, "MPI_Isend", n);
    if (st != PL_OK)
        return st;
    double t0 = pl_time_now();
    int rc = MPI_Isend(buf, (int)n, MPI_FLOAT, dst, tag, c->mpi, &req->mpi);
    double t1 = pl_time_now();
    if (rc != MPI_SUCCESS) {
        req->mpi = MPI_REQUEST_NULL;
        return mpi_fail(c, "MPI_Isend", rc);
    }
    *req = (pl_comm_req){req->mpi, c, PL_COMM_SENDRECV, "MPI_Isend"};
    int64_t bytes = n * (int64_t)sizeof(float);
    account(c, PL_COMM_SENDRECV, bytes, bytes, t1 - t0);
    return PL_OK;
}

pl_status pl_comm_irecv_f32(pl_comm *c, float *buf, int64_t n, int src, int tag, pl_comm_req *req)
{
    *req = PL_COMM_REQ_NULL;
    pl_status st = check_call(c, "MPI_Irecv", n);
    if (st != PL_OK)
        return st;
    double t0 = pl_time_now();
    int rc = MPI_Irecv(buf, (int)n, MPI_FLOAT, src, tag, c->mpi, &req->mpi);
    double t1 = pl_time_now();
    if (rc != MPI_SUCCESS) {
        req->mpi = MPI_REQUEST_NULL;
        return mpi_fail(c, "MPI_Irecv", rc);
    }
    *req = (pl_comm_req){req->mpi, c, PL_COMM_SENDRECV, "MPI_Irecv"};
    account(c, PL_COMM_SENDRECV, n * (int64_t)sizeof(float), 0, t1 - t0);
    return PL_OK;
}
