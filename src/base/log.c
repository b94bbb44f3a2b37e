/* stderr logging and the monotonic clock. */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

static pl_log_level min_level = PL_LOG_INFO;

void pl_log_set_level(pl_log_level level) { min_level = level; }

void pl_log(pl_log_level level, const char *fmt, ...)
{
    static const char *names[] = {"debug", "info", "warning", "error"};
    if (level < min_level)
        return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (level == PL_LOG_INFO)
        fprintf(stderr, "%s\n", line);
    else
        fprintf(stderr, "%s: %s\n", names[level], line);
}

double pl_time_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
