/* The collective watchdog (watchdog.h): per-thread slots and one watching thread. */
#include "parallel/watchdog.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef struct watch_slot {
    atomic_llong start_ns; /* 0: not blocked */
    _Atomic(const char *) what;
    _Atomic(const char *) comm;
    atomic_int size, peer;
} watch_slot;

static watch_slot slots[PL_WATCH_SLOTS];
static atomic_int n_slots;
static atomic_llong last_leave_ns; /* when a watched call last returned; 0: never */
static _Thread_local int my_slot = -1; /* -1: not yet claimed, -2: none left */

static struct {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    int running, stop;
    double timeout_s;
    char flag[64];
    int world_rank;
    pl_watch_expired expired;
    void *ctx;
    pl_watch_hooks hooks;
} wd = {.mu = PTHREAD_MUTEX_INITIALIZER};

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void pl_watch_enter(const char *what, const char *comm, int size, int peer)
{
    if (my_slot == -1) {
        int k = atomic_fetch_add(&n_slots, 1);
        my_slot = k < PL_WATCH_SLOTS ? k : -2;
    }
    if (my_slot < 0)
        return;
    watch_slot *s = &slots[my_slot];
    atomic_store_explicit(&s->what, what, memory_order_relaxed);
    atomic_store_explicit(&s->comm, comm, memory_order_relaxed);
    atomic_store_explicit(&s->size, size, memory_order_relaxed);
    atomic_store_explicit(&s->peer, peer, memory_order_relaxed);
    long long t = now_ns();
    atomic_store_explicit(&s->start_ns, t ? t : 1, memory_order_release);
}

void pl_watch_leave(void)
{
    if (my_slot >= 0) {
        atomic_store_explicit(&slots[my_slot].start_ns, 0, memory_order_release);
        atomic_store_explicit(&last_leave_ns, now_ns(), memory_order_relaxed);
    }
}

int pl_watch_state(const char **what, const char **comm, double *seconds)
{
    const long long now = now_ns();
    long long oldest = 0;
    int n = atomic_load(&n_slots);
    for (int i = 0; i < n && i < PL_WATCH_SLOTS; i++) {
        watch_slot *s = &slots[i];
        long long t0 = atomic_load_explicit(&s->start_ns, memory_order_acquire);
        if (!t0 || (oldest && t0 >= oldest))
            continue;
        const char *w = atomic_load_explicit(&s->what, memory_order_relaxed);
        const char *c = atomic_load_explicit(&s->comm, memory_order_relaxed);
        if (atomic_load_explicit(&s->start_ns, memory_order_acquire) != t0)
            continue;
        oldest = t0, *what = w, *comm = c;
    }
    if (oldest) {
        *seconds = (double)(now - oldest) / 1e9;
        return 1;
    }
    long long left = atomic_load_explicit(&last_leave_ns, memory_order_relaxed);
    *what = *comm = "";
    *seconds = left ? (double)(now - left) / 1e9 : -1;
    return 0;
}

double pl_watchdog_poll_seconds(double timeout_s)
{
    return timeout_s / 4 < 1.0 ? timeout_s / 4 : 1.0;
}

/* The first slot blocked longer than the timeout, described in msg; 0 if none. */
static int expired_slot(char *msg, size_t cap)
{
    const long long now = now_ns(), limit = (long long)(wd.timeout_s * 1e9);
    int n = atomic_load(&n_slots);
    for (int i = 0; i < n && i < PL_WATCH_SLOTS; i++) {
        watch_slot *s = &slots[i];
        long long t0 = atomic_load_explicit(&s->start_ns, memory_order_acquire);
        if (!t0 || now - t0 <= limit)
            continue;
        const char *what = atomic_load_explicit(&s->what, memory_order_relaxed);
        const char *comm = atomic_load_explicit(&s->comm, memory_order_relaxed);
        int size = atomic_load_explicit(&s->size, memory_order_relaxed);
        int peer = atomic_load_explicit(&s->peer, memory_order_relaxed);
        if (atomic_load_explicit(&s->start_ns, memory_order_acquire) != t0)
            continue; /* it completed (and another began) while we read */
        char who[96] = "", beats[640] = "";
        if (wd.hooks.describe)
            wd.hooks.describe(beats, sizeof beats, wd.timeout_s, wd.hooks.ctx);
        if (peer >= 0)
            snprintf(who, sizeof who, "; rank %d of %s never answered", peer, comm);
        else if (!beats[0])
            snprintf(who, sizeof who, "; a rank of %s did not arrive (frozen, stuck or dead)",
                     comm);
        char ranks[32] = "";
        if (size > 0)
            snprintf(ranks, sizeof ranks, " (%d ranks)", size);
        snprintf(msg, cap,
                 "rank %d: %s on communicator %s%s has not completed after %.1f s "
                 "(%s)%s%s; ending the job",
                 wd.world_rank, what, comm, ranks, (double)(now - t0) / 1e9, wd.flag, who,
                 beats);
        return 1;
    }
    return 0;
}

static void *watch_main(void *arg)
{
    (void)arg;
    double poll = pl_watchdog_poll_seconds(wd.timeout_s);
    pthread_mutex_lock(&wd.mu);
    while (!wd.stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        long long ns = ts.tv_nsec + (long long)(poll * 1e9);
        ts.tv_sec += (time_t)(ns / 1000000000LL);
        ts.tv_nsec = (long)(ns % 1000000000LL);
        pthread_cond_timedwait(&wd.wake, &wd.mu, &ts);
        if (!wd.stop && wd.hooks.poll)
            wd.hooks.poll(wd.hooks.ctx);
        char msg[1024];
        if (!wd.stop && expired_slot(msg, sizeof msg)) {
            pthread_mutex_unlock(&wd.mu);
            wd.expired(msg, wd.ctx); /* does not return */
            return NULL;
        }
    }
    pthread_mutex_unlock(&wd.mu);
    return NULL;
}

pl_status pl_watchdog_start(double timeout_s, const char *flag, int world_rank,
                            pl_watch_expired expired, void *ctx, const pl_watch_hooks *hooks)
{
    if (!(timeout_s > 0) || !expired)
        return pl_errorf(PL_ERR_ARG, "%s: the timeout must be positive", flag);
    if (wd.running)
        return pl_errorf(PL_ERR_INTERNAL, "the collective watchdog is already running");
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&wd.wake, &ca);
    pthread_condattr_destroy(&ca);
    if (rc)
        return pl_errorf(PL_ERR_INTERNAL, "the collective watchdog: pthread_cond_init: %s",
                         strerror(rc));
    wd.timeout_s = timeout_s;
    snprintf(wd.flag, sizeof wd.flag, "%s", flag);
    wd.world_rank = world_rank;
    wd.expired = expired;
    wd.ctx = ctx;
    wd.hooks = hooks ? *hooks : (pl_watch_hooks){0};
    wd.stop = 0;
    if ((rc = pthread_create(&wd.thread, NULL, watch_main, NULL))) {
        pthread_cond_destroy(&wd.wake);
        return pl_errorf(PL_ERR_INTERNAL, "the collective watchdog: pthread_create: %s",
                         strerror(rc));
    }
    wd.running = 1;
    return PL_OK;
}

void pl_watchdog_stop(void)
{
    if (!wd.running)
        return;
    pthread_mutex_lock(&wd.mu);
    wd.stop = 1;
    pthread_cond_signal(&wd.wake);
    pthread_mutex_unlock(&wd.mu);
    pthread_join(wd.thread, NULL);
    pthread_cond_destroy(&wd.wake);
    wd.running = 0;
}
