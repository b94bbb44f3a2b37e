/* Heartbeats (heartbeat.h): beats over a duplicate of world, sent and taken in by the
 * watchdog thread, read when an operation expires. */
#include "parallel/heartbeat.h"

#include "base/alloc.h"
#include "parallel/watchdog.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HB_TAG 7031
#define HB_FANOUT 256 /* peers beaten per look; above it, every ceil(size / HB_FANOUT) looks */
#define HB_LIST 8     /* ranks named per kind in a message */

typedef struct hb_beat {
    int64_t seq;     /* beats from this sender to this receiver so far, from 1 */
    int64_t sent_ns; /* the sender's CLOCK_MONOTONIC when it sent the beat */
    int32_t in_mpi;  /* 1: blocked in `what` on `comm` for `ms`; 0: outside MPI for `ms` */
    int32_t ms;
    char what[28];
    char comm[8];
} hb_beat;

static struct {
    int up;
    MPI_Comm comm;
    int rank, size, every;
    long long looks, start_ns, last_look_ns, gap_ns; /* gap: before the latest look */
    hb_beat *out;           /* per peer: the beat in flight to it */
    MPI_Request *sends;     /* per peer; MPI_REQUEST_NULL when free */
    int64_t *sent, *got;    /* per peer: beats sent to it, received from it */
    long long *heard_ns;    /* per peer: when its last beat was sent, by this host's clock
                             * (same_clock), else when it arrived; at first the init time */
    unsigned char *same_clock; /* per peer: on this host, its monotonic clock agrees with ours */
    hb_beat *last;          /* per peer: its last beat */
    hb_beat in;
    MPI_Request recv;
} hb = {.comm = MPI_COMM_NULL, .recv = MPI_REQUEST_NULL};

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void release(void)
{
    pl_free(hb.out);
    pl_free(hb.sends);
    pl_free(hb.sent);
    pl_free(hb.got);
    pl_free(hb.heard_ns);
    pl_free(hb.last);
    pl_free(hb.same_clock);
    hb.out = hb.last = NULL;
    hb.same_clock = NULL;
    hb.sends = NULL;
    hb.sent = hb.got = NULL;
    hb.heard_ns = NULL;
    if (hb.comm != MPI_COMM_NULL)
        MPI_Comm_free(&hb.comm);
    hb.up = 0;
}

static int post_recv(void)
{
    return MPI_Irecv(&hb.in, (int)sizeof hb.in, MPI_BYTE, MPI_ANY_SOURCE, HB_TAG, hb.comm,
                     &hb.recv);
}

/* Marks the peers whose beats can be timed by their own send time: those on this
 * host (a shared-memory split) whose CLOCK_MONOTONIC, read right after a barrier,
 * is within 0.25 s of this rank's (not in another time namespace). A beat that
 * arrives late, because this rank's watchdog thread was starved or the transport
 * delivered it late, then still counts from when it was sent; a frozen rank's last
 * beat cannot look recent. Collective over hb.comm. */
static int find_same_clock(void)
{
    MPI_Comm node;
    int rc = MPI_Comm_split_type(hb.comm, MPI_COMM_TYPE_SHARED, hb.rank, MPI_INFO_NULL, &node);
    if (rc != MPI_SUCCESS)
        return rc;
    int n = 0;
    MPI_Comm_size(node, &n);
    long long *t = pl_calloc((size_t)n, sizeof *t);
    int *local = pl_calloc((size_t)n, sizeof *local), *world = pl_calloc((size_t)n, sizeof *world);
    MPI_Group gn = MPI_GROUP_NULL, gw = MPI_GROUP_NULL;
    rc = !t || !local || !world ? MPI_ERR_NO_MEM : MPI_Barrier(node);
    long long mine = now_ns();
    if (rc == MPI_SUCCESS)
        rc = MPI_Allgather(&mine, 1, MPI_LONG_LONG, t, 1, MPI_LONG_LONG, node);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_group(node, &gn);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_group(hb.comm, &gw);
    for (int i = 0; i < n && rc == MPI_SUCCESS; i++)
        local[i] = i;
    if (rc == MPI_SUCCESS)
        rc = MPI_Group_translate_ranks(gn, n, local, gw, world);
    for (int i = 0; i < n && rc == MPI_SUCCESS; i++)
        if (world[i] >= 0 && world[i] < hb.size)
            hb.same_clock[world[i]] = llabs(t[i] - mine) < 250000000LL;
    if (gn != MPI_GROUP_NULL)
        MPI_Group_free(&gn);
    if (gw != MPI_GROUP_NULL)
        MPI_Group_free(&gw);
    MPI_Comm_free(&node);
    pl_free(t);
    pl_free(local);
    pl_free(world);
    return rc;
}

pl_status pl_heartbeat_init(MPI_Comm world)
{
    if (hb.up)
        return pl_errorf(PL_ERR_INTERNAL, "the heartbeat already runs");
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_MULTIPLE)
        return pl_errorf(PL_ERR_UNSUPPORTED, "heartbeats need MPI_THREAD_MULTIPLE (granted "
                         "level %d): the watchdog thread calls MPI beside the main thread", level);
    MPI_Comm_rank(world, &hb.rank);
    MPI_Comm_size(world, &hb.size);
    const size_t n = (size_t)hb.size;
    hb.out = pl_calloc(n, sizeof *hb.out);
    hb.sends = pl_calloc(n, sizeof *hb.sends);
    hb.sent = pl_calloc(n, sizeof *hb.sent);
    hb.got = pl_calloc(n, sizeof *hb.got);
    hb.heard_ns = pl_calloc(n, sizeof *hb.heard_ns);
    hb.last = pl_calloc(n, sizeof *hb.last);
    hb.same_clock = pl_calloc(n, sizeof *hb.same_clock);
    if (!hb.out || !hb.sends || !hb.sent || !hb.got || !hb.heard_ns || !hb.last ||
        !hb.same_clock) {
        release();
        return pl_errorf(PL_ERR_NOMEM, "heartbeat state for %d ranks", hb.size);
    }
    if (MPI_Comm_dup(world, &hb.comm) != MPI_SUCCESS) {
        hb.comm = MPI_COMM_NULL;
        release();
        return pl_errorf(PL_ERR_IO, "rank %d: MPI_Comm_dup for the heartbeat failed", hb.rank);
    }
    MPI_Comm_set_errhandler(hb.comm, MPI_ERRORS_RETURN);
    if (find_same_clock() != MPI_SUCCESS) {
        release();
        return pl_errorf(PL_ERR_IO, "rank %d: finding the heartbeat's peers on this host failed",
                         hb.rank);
    }
    if (post_recv() != MPI_SUCCESS) {
        release();
        return pl_errorf(PL_ERR_IO, "rank %d: MPI_Irecv for the heartbeat failed", hb.rank);
    }
    const long long t = now_ns();
    for (int p = 0; p < hb.size; p++) {
        hb.sends[p] = MPI_REQUEST_NULL;
        hb.heard_ns[p] = t;
        hb.last[p].in_mpi = 1; /* until its first beat: not suspected of being stuck */
    }
    hb.every = (hb.size + HB_FANOUT - 1) / HB_FANOUT;
    hb.looks = 0;
    hb.start_ns = hb.last_look_ns = t;
    hb.gap_ns = 0;
    hb.up = 1;
    return PL_OK;
}

/* Takes in every beat that has arrived (at most a few rounds' worth per look). */
static void take_in(long long now)
{
    for (int k = 0; k < 4 * hb.size; k++) {
        int done = 0;
        MPI_Status s;
        if (MPI_Test(&hb.recv, &done, &s) != MPI_SUCCESS || !done)
            return;
        int p = s.MPI_SOURCE;
        if (p >= 0 && p < hb.size) {
            hb.last[p] = hb.in;
            hb.heard_ns[p] = hb.same_clock[p] && hb.in.sent_ns < now ? hb.in.sent_ns : now;
            hb.got[p]++;
        }
        if (post_recv() != MPI_SUCCESS)
            return;
    }
}

void pl_heartbeat_poll(void *ctx)
{
    (void)ctx;
    if (!hb.up)
        return;
    const long long now = now_ns();
    hb.gap_ns = now - hb.last_look_ns;
    hb.last_look_ns = now;
    take_in(now);
    if (hb.looks++ % hb.every)
        return;
    hb_beat b = {0};
    const char *what = "", *comm = "";
    double secs = 0;
    b.in_mpi = pl_watch_state(&what, &comm, &secs);
    if (!b.in_mpi && secs < 0) /* never in a watched call: outside MPI since the start */
        secs = (double)(now - hb.start_ns) / 1e9;
    b.ms = secs > 0 ? (secs * 1e3 < 2e9 ? (int32_t)(secs * 1e3) : 2000000000) : 0;
    snprintf(b.what, sizeof b.what, "%s", what);
    snprintf(b.comm, sizeof b.comm, "%s", comm);
    for (int p = 0; p < hb.size; p++) {
        if (p == hb.rank)
            continue;
        int done = 1;
        if (hb.sends[p] != MPI_REQUEST_NULL &&
            MPI_Test(&hb.sends[p], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            continue;
        if (!done)
            continue; /* the last one is still in flight: a stopped receiver */
        hb.out[p] = b;
        hb.out[p].seq = hb.sent[p] + 1;
        hb.out[p].sent_ns = now_ns();
        if (MPI_Isend(&hb.out[p], (int)sizeof b, MPI_BYTE, p, HB_TAG, hb.comm, &hb.sends[p]) ==
            MPI_SUCCESS)
            hb.sent[p]++;
    }
}

/* Appends head, "rank A" or "ranks A, B, C and N more", " for S s" (S the least of
 * their seconds; "or more" for several) and tail to out at *len. */
static void append_list(char *out, size_t cap, size_t *len, const char *head, const char *tail,
                        const unsigned char *mark, const double *secs, int ranks)
{
    int n = 0, shown = 0;
    double least = 0;
    for (int p = 0; p < ranks; p++)
        if (mark[p])
            least = n++ ? (secs[p] < least ? secs[p] : least) : secs[p];
    if (!n || *len >= cap)
        return;
    *len += (size_t)snprintf(out + *len, cap - *len, "%s%s", head, n == 1 ? "rank " : "ranks ");
    for (int p = 0; p < ranks && *len < cap; p++) {
        if (!mark[p] || shown == HB_LIST)
            continue;
        *len += (size_t)snprintf(out + *len, cap - *len, "%s%d", shown ? ", " : "", p);
        shown++;
    }
    if (*len < cap && n > shown)
        *len += (size_t)snprintf(out + *len, cap - *len, " and %d more", n - shown);
    if (*len < cap)
        *len += (size_t)snprintf(out + *len, cap - *len, " for %.1f s%s%s", least,
                                 n > 1 ? " or more" : "", tail);
}

void pl_heartbeat_describe(char *out, size_t cap, double timeout_s, void *ctx)
{
    (void)ctx;
    out[0] = '\0';
    if (!hb.up || cap == 0)
        return;
    const long long now = now_ns();
    const double half = timeout_s / 2;
    size_t len = 0;
    if (hb.gap_ns / 1e9 > half) { /* this process was stopped: its view is stale */
        snprintf(out, cap, "; this process (rank %d) itself did not run for %.1f s (stopped or "
                 "starved), so the other ranks' silence may be its own",
                 hb.rank, hb.gap_ns / 1e9);
        return;
    }
    /* silent: no beat for half the timeout; stuck: alive, outside MPI that long */
    unsigned char silent[HB_LIST * 64], stuck[HB_LIST * 64];
    double ssec[HB_LIST * 64], ksec[HB_LIST * 64];
    int n = hb.size < HB_LIST * 64 ? hb.size : HB_LIST * 64; /* ranks past 512 not listed */
    int any = 0;
    for (int p = 0; p < n; p++) {
        const double quiet = (double)(now - hb.heard_ns[p]) / 1e9;
        const hb_beat *b = &hb.last[p];
        const double out_of_mpi = b->in_mpi == 0 ? b->ms / 1e3 + quiet : 0;
        silent[p] = p != hb.rank && quiet > half;
        stuck[p] = p != hb.rank && !silent[p] && b->in_mpi == 0 && out_of_mpi > half;
        ssec[p] = quiet;
        ksec[p] = out_of_mpi;
        any |= silent[p] | stuck[p];
    }
    if (!any) {
        snprintf(out, cap, "; every rank's heartbeat is current and none is outside MPI (a "
                 "mismatched or deadlocked collective?)");
        return;
    }
    append_list(out, cap, &len, "; no heartbeat from ", " (frozen or dead)", silent, ssec, n);
    append_list(out, cap, &len, "; alive but outside MPI: ", " (stuck in compute or I/O)",
                stuck, ksec, n);
}

pl_status pl_heartbeat_free(void)
{
    if (!hb.up)
        return PL_OK;
    pl_status st = PL_OK;
    /* every beat sent is received: counts first, then the rest of each peer's beats */
    int64_t *expect = pl_calloc((size_t)hb.size, sizeof *expect);
    if (!expect) {
        st = pl_errorf(PL_ERR_NOMEM, "heartbeat shut-down");
        goto out;
    }
    if (hb.recv != MPI_REQUEST_NULL) { /* the wildcard receive: cancelled, or it matched */
        MPI_Status s;
        int cancelled = 0;
        MPI_Cancel(&hb.recv);
        MPI_Wait(&hb.recv, &s);
        MPI_Test_cancelled(&s, &cancelled);
        if (!cancelled && s.MPI_SOURCE >= 0 && s.MPI_SOURCE < hb.size)
            hb.got[s.MPI_SOURCE]++;
    }
    if (MPI_Alltoall(hb.sent, 1, MPI_INT64_T, expect, 1, MPI_INT64_T, hb.comm) != MPI_SUCCESS) {
        st = pl_errorf(PL_ERR_IO, "rank %d: MPI_Alltoall at the heartbeat's end failed", hb.rank);
        goto out;
    }
    for (int p = 0; p < hb.size && !st; p++)
        for (int64_t k = hb.got[p]; k < expect[p]; k++)
            if (MPI_Recv(&hb.in, (int)sizeof hb.in, MPI_BYTE, p, HB_TAG, hb.comm,
                         MPI_STATUS_IGNORE) != MPI_SUCCESS) {
                st = pl_errorf(PL_ERR_IO, "rank %d: the heartbeat's last beats from rank %d",
                               hb.rank, p);
                break;
            }
    for (int p = 0; p < hb.size && !st; p++)
        if (MPI_Wait(&hb.sends[p], MPI_STATUS_IGNORE) != MPI_SUCCESS)
            st = pl_errorf(PL_ERR_IO, "rank %d: the heartbeat's last beat to rank %d", hb.rank, p);
out:
    pl_free(expect);
    release();
    return st;
}
