/* The communication queue: one thread runs posted collectives in order. */
#include "parallel/commq.h"

#include "base/alloc.h"
#include "base/log.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Operations queued at once; post waits for room beyond this. Buckets and ZeRO regions
 * have at most a few in flight per communicator. */
#define QCAP 256

struct pl_commq {
    pl_commq_mode mode;
    pthread_t thread;
    int thread_up;
    pthread_mutex_t mu;
    pthread_cond_t work, done; /* work: the thread waits for ops; done: waiters for completions */
    pl_commq_op *ring[QCAP];
    unsigned head, tail;       /* ops [head, tail) are queued, ring[i % QCAP] */
    int stop;
};

pl_commq_mode pl_commq_default_mode(void)
{
    int up = 0, down = 0, level = MPI_THREAD_SINGLE;
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    if (!up || down)
        return PL_COMMQ_INLINE;
    MPI_Query_thread(&level);
    const char *env = getenv("PLAIT_COMM_THREAD");
    if (env && strcmp(env, "0") == 0)
        return PL_COMMQ_INLINE;
    return level >= MPI_THREAD_MULTIPLE ? PL_COMMQ_THREAD : PL_COMMQ_INLINE;
}

static void run_op(pl_commq_op *op)
{
    op->t_start = pl_time_now();
    pl_status st = PL_OK;
    switch (op->kind) {
    case PL_COMMQ_ALLREDUCE:
        st = pl_comm_allreduce_f32(op->comm, op->buf, op->n, PL_COMM_SUM);
        if (st == PL_OK && op->scale != 1.0f) {
            float *b = op->buf;
            const float s = op->scale;
            for (int64_t i = 0; i < op->n; i++)
                b[i] *= s;
        }
        break;
    case PL_COMMQ_REDUCE_SCATTER:
        if (op->counts)
            st = pl_comm_reduce_scatter_v_f32(op->comm, op->buf, op->recv, op->counts, op->displs);
        else
            st = pl_comm_reduce_scatter_f32(op->comm, op->buf, op->recv, op->n / op->comm->size);
        if (st == PL_OK && op->acc) {
            const int64_t m = op->counts ? op->counts[op->comm->rank] : op->n / op->comm->size;
            for (int64_t i = 0; i < m; i++)
                op->acc[i] += op->recv[i];
        }
        break;
    case PL_COMMQ_ALLGATHER:
        st = pl_comm_allgather_v_f32(op->comm, op->send, op->buf, op->counts, op->displs);
        break;
    default:
        st = pl_errorf(PL_ERR_INTERNAL, "communication queue: unknown operation %d", (int)op->kind);
    }
    op->st = st;
    if (st != PL_OK)
        snprintf(op->msg, sizeof op->msg, "%s", pl_error_msg());
    op->t_end = pl_time_now();
}

static void *thread_main(void *arg)
{
    pl_commq *q = arg;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (q->head == q->tail && !q->stop)
            pthread_cond_wait(&q->work, &q->mu);
        if (q->head == q->tail)
            break; /* stop, and nothing left */
        pl_commq_op *op = q->ring[q->head % QCAP];
        pthread_mutex_unlock(&q->mu);
        run_op(op);
        pthread_mutex_lock(&q->mu);
        op->done = 1;
        q->head++;
        pthread_cond_broadcast(&q->done);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

pl_status pl_commq_init(pl_commq **out, pl_commq_mode mode)
{
    *out = NULL;
    pl_commq *q = pl_calloc(1, sizeof *q);
    if (!q)
        return pl_errorf(PL_ERR_NOMEM, "out of memory for the communication queue");
    q->mode = mode;
    if (mode == PL_COMMQ_THREAD) {
        pthread_mutex_init(&q->mu, NULL);
        pthread_cond_init(&q->work, NULL);
        pthread_cond_init(&q->done, NULL);
        int rc = pthread_create(&q->thread, NULL, thread_main, q);
        if (rc != 0) {
            pthread_cond_destroy(&q->done);
            pthread_cond_destroy(&q->work);
            pthread_mutex_destroy(&q->mu);
            pl_free(q);
            return pl_errorf(PL_ERR_IO, "cannot start the communication thread: %s", strerror(rc));
        }
        q->thread_up = 1;
    }
    *out = q;
    return PL_OK;
}

void pl_commq_free(pl_commq *q)
{
    if (!q)
        return;
    if (q->thread_up) {
        pthread_mutex_lock(&q->mu);
        q->stop = 1;
        pthread_cond_signal(&q->work);
        pthread_mutex_unlock(&q->mu);
        pthread_join(q->thread, NULL);
        pthread_cond_destroy(&q->done);
        pthread_cond_destroy(&q->work);
        pthread_mutex_destroy(&q->mu);
    }
    pl_free(q);
}

pl_commq_mode pl_commq_mode_of(const pl_commq *q) { return q->mode; }

pl_status pl_commq_post(pl_commq *q, pl_commq_op *op)
{
    op->done = 0;
    op->st = PL_OK;
    op->msg[0] = '\0';
    op->t_start = op->t_end = 0;
    if (!q->thread_up) {
        run_op(op);
        op->done = 1;
        return PL_OK;
    }
    pthread_mutex_lock(&q->mu);
    while (q->tail - q->head >= QCAP)
        pthread_cond_wait(&q->done, &q->mu);
    q->ring[q->tail % QCAP] = op;
    q->tail++;
    pthread_cond_signal(&q->work);
    pthread_mutex_unlock(&q->mu);
    return PL_OK;
}

int pl_commq_done(pl_commq *q, pl_commq_op *op)
{
    if (!q->thread_up)
        return 1;
    pthread_mutex_lock(&q->mu);
    int d = op->done;
    pthread_mutex_unlock(&q->mu);
    return d;
}

pl_status pl_commq_wait(pl_commq *q, pl_commq_op *op)
{
    if (q->thread_up) {
        pthread_mutex_lock(&q->mu);
        while (!op->done)
            pthread_cond_wait(&q->done, &q->mu);
        pthread_mutex_unlock(&q->mu);
    }
    if (op->st != PL_OK)
        return pl_errorf(op->st, "%s", op->msg);
    return PL_OK;
}

void pl_commq_drain(pl_commq *q)
{
    if (!q->thread_up)
        return;
    pthread_mutex_lock(&q->mu);
    while (q->head != q->tail)
        pthread_cond_wait(&q->done, &q->mu);
    pthread_mutex_unlock(&q->mu);
}

void pl_commq_overlap_add(pl_commq_overlap *o, const pl_commq_op *op, double t_compute_end)
{
    double busy = op->t_end - op->t_start;
    double before = t_compute_end - op->t_start;
    before = before < 0 ? 0 : before > busy ? busy : before;
    o->ops++;
    o->early += op->t_end <= t_compute_end;
    o->busy += busy;
    o->before += before;
    o->after += busy - before;
}
