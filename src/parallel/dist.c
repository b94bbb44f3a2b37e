/* MPI start-up, launcher detection and the singleton-pitfall check. */
#include "parallel/dist.h"

#include "base/log.h"

#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#if defined(OPEN_MPI)
#define STR_(x) #x
#define STR(x) STR_(x)
#define LIB_NAME "OpenMPI " STR(OMPI_MAJOR_VERSION) "." STR(OMPI_MINOR_VERSION) "." STR(OMPI_RELEASE_VERSION)
#define LIB_LAUNCHER "mpirun.openmpi (OpenMPI's mpirun) or srun --mpi=pmix"
#elif defined(MPICH_VERSION)
#define LIB_NAME "MPICH " MPICH_VERSION
#define LIB_LAUNCHER "mpirun.mpich (hydra) or srun --mpi=pmi2"
#else
#define LIB_NAME "an unknown MPI"
#define LIB_LAUNCHER "the mpirun of the MPI it was built with"
#endif

/* A non-negative decimal environment variable, or -1. */
static int env_int(const char *name)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return -1;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < 0 || v > 1 << 30)
        return -1;
    return (int)v;
}

/* Launchers in the order they are checked; the first whose size variable is set wins
 * (OpenMPI's mpirun inside a Slurm allocation sets both OMPI_* and SLURM_*). */
static const struct {
    const char *name, *size_var, *rank_var, *local_var;
    int authoritative;
} launchers[] = {
    {"mpirun (OpenMPI)", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
     "OMPI_COMM_WORLD_LOCAL_RANK", 1},
    {"mpiexec (PMI: hydra or srun --mpi=pmi2)", "PMI_SIZE", "PMI_RANK", "MPI_LOCALRANKID", 1},
    {"srun (Slurm)", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "SLURM_LOCALID", 0},
};

void pl_dist_launcher_detect(pl_dist_launcher *l)
{
    memset(l, 0, sizeof *l);
    snprintf(l->name, sizeof l->name, "none");
    l->size = l->rank = l->local_rank = -1;
    for (size_t i = 0; i < sizeof launchers / sizeof *launchers; i++) {
        int n = env_int(launchers[i].size_var);
        if (n < 0)
            continue;
        snprintf(l->name, sizeof l->name, "%s", launchers[i].name);
        snprintf(l->size_var, sizeof l->size_var, "%s", launchers[i].size_var);
        l->size = n;
        l->rank = env_int(launchers[i].rank_var);
        l->local_rank = env_int(launchers[i].local_var);
        l->authoritative = launchers[i].authoritative;
        return;
    }
}

/* MPI's collectives malloc and free a temporary buffer as large as the message on every
 * call (OpenMPI's tuned and libnbc all-reduce, reduce-scatter). Above glibc's mmap
 * threshold each call then maps fresh pages, and a first touch costs ~10 us per 4 KiB
 * page on these VMs: ~0.4 s for a 40 MB bucket, more than the transfer itself
 * (docs/performance.md). Keep freed memory in one heap instead -- no mmap for large
 * blocks, no trimming, one arena so that the communication thread (parallel/commq.h)
 * reuses the same warm pages -- so each buffer faults once, in the first steps. */
static void keep_freed_memory(void)
{
#if defined(__GLIBC__)
    if (getenv("PLAIT_KEEP_MALLOC")) /* measurements of the default behaviour */
        return;
    mallopt(M_ARENA_MAX, 1);
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
#endif
}

/* The communication thread shares its rank's cores with compute, and a blocking
 * collective in OpenMPI polls without pause while it waits for a peer: ask OpenMPI to
 * yield the core between polls (mpirun does so itself only when it sees more ranks than
 * cores). An explicit setting in the environment wins. */
static void yield_when_idle(void)
{
    setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
}

pl_status pl_dist_init(pl_dist *d, int *argc, char ***argv)
{
    memset(d, 0, sizeof *d);
    snprintf(d->library, sizeof d->library, "%s", LIB_NAME);
    pl_dist_launcher_detect(&d->launcher);
    d->local_rank = -1;

    int up = 0, down = 0;
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    if (down)
        return pl_errorf(PL_ERR_INTERNAL, "MPI was already finalised in this process");
    int provided = MPI_THREAD_SINGLE;
    if (!up) {
        keep_freed_memory();
        yield_when_idle();
        /* MULTIPLE lets a communication thread (parallel/commq.h) run collectives while
         * the main thread computes and makes tensor-parallel calls; FUNNELED is enough
         * without it (the queue then runs collectives on the main thread). */
        int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
        if (rc != MPI_SUCCESS)
            return pl_errorf(PL_ERR_IO, "MPI_Init_thread failed (%s, launcher: %s)", d->library,
                             d->launcher.name);
        d->owns_mpi = 1;
    } else {
        MPI_Query_thread(&provided);
    }
    d->thread_level = provided;
    pl_status st = PL_OK;
    MPI_Comm node = MPI_COMM_NULL;
    if (provided < MPI_THREAD_FUNNELED) {
        st = pl_errorf(PL_ERR_UNSUPPORTED,
                       "%s granted thread level %d; plait needs MPI_THREAD_FUNNELED (%d) so that "
                       "OpenMP threads may run beside MPI",
                       d->library, provided, MPI_THREAD_FUNNELED);
        goto fail;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->size);
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &node) !=
        MPI_SUCCESS) {
        st = pl_errorf(PL_ERR_IO, "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) failed on rank %d",
                       d->rank);
        goto fail;
    }
    MPI_Comm_rank(node, &d->local_rank);
    MPI_Comm_size(node, &d->local_size);
    MPI_Comm_free(&node);

    const pl_dist_launcher *l = &d->launcher;
    if (l->size > 0 && l->size != d->size) {
        if (l->authoritative) {
            st = pl_errorf(PL_ERR_ARG,
                           "MPI reports a world of %d process%s but the launcher, %s, started %d "
                           "(%s=%d): the singleton pitfall. This binary is built against %s; "
                           "start it with %s",
                           d->size, d->size == 1 ? "" : "es", l->name, l->size, l->size_var,
                           l->size, d->library, LIB_LAUNCHER);
            goto fail;
        }
        pl_log_warn("MPI reports a world of %d but %s says %s=%d; if this is an srun step, "
                    "the --mpi plugin does not match %s (use %s)",
                    d->size, l->name, l->size_var, l->size, d->library, LIB_LAUNCHER);
    }
    return PL_OK;

fail:
    if (d->owns_mpi) {
        MPI_Finalize();
        d->owns_mpi = 0;
    }
    return st;
}

pl_status pl_dist_finalize(pl_dist *d)
{
    if (!d->owns_mpi)
        return PL_OK;
    d->owns_mpi = 0;
    int down = 0;
    MPI_Finalized(&down);
    if (down)
        return PL_OK;
    if (MPI_Finalize() != MPI_SUCCESS)
        return pl_errorf(PL_ERR_IO, "MPI_Finalize failed on rank %d", d->rank);
    return PL_OK;
}
