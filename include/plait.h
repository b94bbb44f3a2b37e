/* plait — 3D-parallel training of transformer language models in C11 over MPI.
 *
 * The public C API. Library functions return pl_status; on failure a message
 * naming what was wrong (file, flag, field) is available from pl_error_msg().
 * Nothing in the library calls exit(). */
#ifndef PLAIT_H
#define PLAIT_H

#define PLAIT_VERSION_MAJOR 0
#define PLAIT_VERSION_MINOR 1
#define PLAIT_VERSION_PATCH 0
#define PLAIT_VERSION "0.1.0"

typedef enum pl_status {
    PL_OK = 0,
    PL_ERR_NOMEM,       /* an allocation failed */
    PL_ERR_IO,          /* open/read/write/rename/mmap failed */
    PL_ERR_FORMAT,      /* a file or input is malformed */
    PL_ERR_ARG,         /* a flag or argument is invalid */
    PL_ERR_UNSUPPORTED, /* valid but not implemented here */
    PL_ERR_INTERNAL,    /* an invariant broke */
    PL_ERR_STOPPED,     /* training stopped by a policy: skipped steps, a non-finite lr */
} pl_status;

/* Short name of a status ("format error"). Never NULL. */
const char *pl_status_str(pl_status st);

/* The message of the last error set on this thread ("" if none). */
const char *pl_error_msg(void);

const char *pl_version(void);

#endif
