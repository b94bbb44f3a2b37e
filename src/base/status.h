/* Status codes, error messages and assertions.
 *
 * A failing function records what went wrong with pl_errorf() and returns the
 * status, so the usual shape is
 *     if (n < 0) return pl_errorf(PL_ERR_FORMAT, "%s: negative count", path);
 * The message lives in a thread-local buffer until the next pl_errorf(). */
#ifndef PL_BASE_STATUS_H
#define PL_BASE_STATUS_H

#include "plait.h"

#include <stdio.h>
#include <stdlib.h>

#if defined(__GNUC__)
#define PL_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define PL_NORETURN __attribute__((noreturn))
#else
#define PL_PRINTF(a, b)
#define PL_NORETURN
#endif

/* Records a formatted message for this thread and returns st. */
pl_status pl_errorf(pl_status st, const char *fmt, ...) PL_PRINTF(2, 3);

/* Prepends "prefix: " to the current message (adds context on the way up). */
pl_status pl_error_wrap(pl_status st, const char *fmt, ...) PL_PRINTF(2, 3);

/* Clears the message. */
void pl_error_clear(void);

/* An echo: this rank failed because another rank (origin_rank) did, which reports
 * the cause itself; records the message like pl_errorf and marks it, so that a
 * launcher of many processes prints the cause once, not one line per rank.
 * pl_errorf and pl_error_clear unmark; pl_error_wrap keeps the mark. */
pl_status pl_error_echo(pl_status st, int origin_rank, const char *fmt, ...) PL_PRINTF(3, 4);
/* The origin rank of an echoed error, -1 for an error of this rank's own. */
int pl_error_echo_of(void);
void pl_error_set_echo_of(int origin_rank);

/* Runs expr; on failure stores the status in `st` and jumps to `fail`. */
#define PL_TRY(expr)                                                                               \
    do {                                                                                           \
        pl_status pl_try_st_ = (expr);                                                             \
        if (pl_try_st_ != PL_OK) {                                                                 \
            st = pl_try_st_;                                                                       \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

PL_NORETURN void pl_assert_fail(const char *cond, const char *file, int line);

/* Cheap invariant checks that stay on in release builds. */
#define PL_ASSERT(cond) ((cond) ? (void)0 : pl_assert_fail(#cond, __FILE__, __LINE__))

#endif
