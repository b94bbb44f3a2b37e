/* Logging to stderr with a level, and monotonic timers. */
#ifndef PL_BASE_LOG_H
#define PL_BASE_LOG_H

#include "base/status.h"

typedef enum { PL_LOG_DEBUG, PL_LOG_INFO, PL_LOG_WARN, PL_LOG_ERROR } pl_log_level;

void pl_log_set_level(pl_log_level level);
void pl_log(pl_log_level level, const char *fmt, ...) PL_PRINTF(2, 3);

#define pl_log_info(...) pl_log(PL_LOG_INFO, __VA_ARGS__)
#define pl_log_warn(...) pl_log(PL_LOG_WARN, __VA_ARGS__)
#define pl_log_debug(...) pl_log(PL_LOG_DEBUG, __VA_ARGS__)

/* Seconds from an arbitrary fixed point (CLOCK_MONOTONIC). */
double pl_time_now(void);

#endif
