/* Status strings and the thread-local error message. */
#include "base/status.h"

#include <stdarg.h>
#include <string.h>

static _Thread_local char err_msg[1024];
static _Thread_local int err_echo_of = -1; /* the rank whose failure this one echoes */

const char *pl_status_str(pl_status st)
{
    switch (st) {
    case PL_OK: return "ok";
    case PL_ERR_NOMEM: return "out of memory";
    case PL_ERR_IO: return "I/O error";
    case PL_ERR_FORMAT: return "format error";
    case PL_ERR_ARG: return "invalid argument";
    case PL_ERR_UNSUPPORTED: return "unsupported";
    case PL_ERR_INTERNAL: return "internal error";
    case PL_ERR_STOPPED: return "training stopped";
    }
    return "unknown status";
}

const char *pl_error_msg(void) { return err_msg; }

void pl_error_clear(void)
{
    err_msg[0] = '\0';
    err_echo_of = -1;
}

int pl_error_echo_of(void) { return err_echo_of; }

void pl_error_set_echo_of(int origin_rank) { err_echo_of = origin_rank; }

pl_status pl_error_echo(pl_status st, int origin_rank, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_msg, sizeof err_msg, fmt, ap);
    va_end(ap);
    err_echo_of = origin_rank;
    return st;
}

pl_status pl_errorf(pl_status st, const char *fmt, ...)
{
    err_echo_of = -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_msg, sizeof err_msg, fmt, ap);
    va_end(ap);
    return st;
}

pl_status pl_error_wrap(pl_status st, const char *fmt, ...)
{
    char prefix[512], old[sizeof err_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err_msg, sizeof old);
    if (old[0])
        snprintf(err_msg, sizeof err_msg, "%.500s: %.510s", prefix, old);
    else
        snprintf(err_msg, sizeof err_msg, "%.500s: %s", prefix, pl_status_str(st));
    return st;
}

void pl_assert_fail(const char *cond, const char *file, int line)
{
    fprintf(stderr, "plait: assertion failed: %s (%s:%d)\n", cond, file, line);
    abort();
}

const char *pl_version(void) { return PLAIT_VERSION; }
