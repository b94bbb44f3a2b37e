/* parallel/watchdog: the state a heartbeat reports, and the hooks' part of the verdict,
 * without MPI (the heartbeat itself is tested under mpirun: tests/scripts/heartbeat.sh). */
#include "base/status.h"
#include "parallel/watchdog.h"
#include "test.h"

#include <pthread.h>
#include <time.h>

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

TEST(state_reports_the_blocked_call_then_the_time_outside_mpi)
{
    const char *what = NULL, *comm = NULL;
    double secs = 0;
    pl_watch_enter("MPI_Allreduce", "dp", 2, -1);
    sleep_ms(30);
    CHECK(pl_watch_state(&what, &comm, &secs) == 1, "a blocked call is not reported");
    CHECK(what && strcmp(what, "MPI_Allreduce") == 0, "what = %s", what ? what : "(null)");
    CHECK(comm && strcmp(comm, "dp") == 0, "comm = %s", comm ? comm : "(null)");
    CHECK(secs >= 0.025 && secs < 5, "blocked for %g s, expected ~0.03", secs);
    pl_watch_leave();
    sleep_ms(20);
    CHECK(pl_watch_state(&what, &comm, &secs) == 0, "a returned call is still reported");
    CHECK(secs >= 0.015 && secs < 5, "outside MPI for %g s, expected ~0.02", secs);
}

static void *block_other_thread(void *arg)
{
    pl_watch_enter("MPI_Recv", "pp", 2, 1);
    sleep_ms(60);
    pl_watch_leave();
    return arg;
}

TEST(state_reports_the_longest_blocked_thread)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, block_other_thread, NULL) == 0, "pthread_create");
    sleep_ms(30);
    pl_watch_enter("MPI_Bcast", "tp", 2, -1); /* later than the other thread's receive */
    const char *what = NULL, *comm = NULL;
    double secs = 0;
    CHECK(pl_watch_state(&what, &comm, &secs) == 1, "two blocked threads not reported");
    CHECK(what && strcmp(what, "MPI_Recv") == 0, "longest blocked: %s, expected MPI_Recv",
          what ? what : "(null)");
    pl_watch_leave();
    pthread_join(t, NULL);
}

TEST(poll_period_is_a_quarter_of_the_timeout_at_most_a_second)
{
    CHECK(pl_watchdog_poll_seconds(3.0) == 0.75, "3 s: %g", pl_watchdog_poll_seconds(3.0));
    CHECK(pl_watchdog_poll_seconds(600.0) == 1.0, "600 s: %g", pl_watchdog_poll_seconds(600.0));
}

static int polls;
static char verdict[1024];
static void count_poll(void *ctx)
{
    (void)ctx;
    polls++;
}
static void name_rank(char *out, size_t cap, double timeout_s, void *ctx)
{
    (void)ctx;
    snprintf(out, cap, "; no heartbeat from rank 7 (timeout %.2f s)", timeout_s);
}
static void *wait_forever(void *arg)
{
    pl_watch_enter("MPI_Allreduce", "dp", 2, -1);
    sleep_ms(2000);
    pl_watch_leave();
    return arg;
}
static void expired(const char *msg, void *ctx)
{
    (void)ctx;
    snprintf(verdict, sizeof verdict, "%s", msg);
    pthread_exit(NULL); /* ends the watchdog thread; pl_watchdog_stop joins it */
}

TEST(hooks_poll_at_every_look_and_describe_who_is_missing)
{
    const pl_watch_hooks hooks = {count_poll, name_rank, NULL};
    CHECK_OK(pl_watchdog_start(0.2, "--distributed-timeout-minutes X", 3, expired, NULL, &hooks));
    pthread_t t;
    CHECK(pthread_create(&t, NULL, wait_forever, NULL) == 0, "pthread_create");
    for (int i = 0; i < 100 && !verdict[0]; i++)
        sleep_ms(20);
    pl_watchdog_stop();
    pthread_join(t, NULL);
    CHECK(polls >= 2, "%d polls before the 0.2 s timeout expired (a look every 0.05 s)", polls);
    CHECK(strstr(verdict, "rank 3: MPI_Allreduce on communicator dp (2 ranks) has not completed") &&
              strstr(verdict, "(--distributed-timeout-minutes X); no heartbeat from rank 7 "
                              "(timeout 0.20 s); ending the job"),
          "verdict: %s", verdict);
    CHECK(!strstr(verdict, "did not arrive"), "the hooks' names replace the generic text: %s",
          verdict);
}

int main(void)
{
    RUN(state_reports_the_blocked_call_then_the_time_outside_mpi);
    RUN(state_reports_the_longest_blocked_thread);
    RUN(poll_period_is_a_quarter_of_the_timeout_at_most_a_second);
    RUN(hooks_poll_at_every_look_and_describe_who_is_missing);
    return test_summary("watchdog");
}
