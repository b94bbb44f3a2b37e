/* MPI start-up and shut-down, and what launched this process.
 *
 * pl_dist_init calls MPI_Init_thread(MPI_THREAD_MULTIPLE) and accepts FUNNELED or more:
 * OpenMP threads compute and never call MPI; the main thread calls MPI, and so does the
 * communication queue's thread when MULTIPLE was granted (parallel/commq.h). It works under mpirun (OpenMPI or MPICH's hydra), srun, and
 * as a singleton with no launcher at all (world size 1).
 *
 * The singleton pitfall: a binary built against one MPI and started by the other's
 * launcher runs as N independent processes of world size 1, and everything "works".
 * The launcher tells us how many processes it started (OMPI_COMM_WORLD_SIZE from
 * OpenMPI's mpirun, PMI_SIZE from hydra or srun --mpi=pmi2, SLURM_STEP_NUM_TASKS from
 * srun); when it says N > 1 and MPI says 1, pl_dist_init fails with a message naming
 * both. (For Slurm alone it only warns: a batch script outside srun also carries
 * SLURM_* variables.)
 *
 * What it is not: no global state; the pl_dist value is the record of the start-up. */
#ifndef PL_PARALLEL_DIST_H
#define PL_PARALLEL_DIST_H

#include "base/status.h"

typedef struct pl_dist_launcher {
    char name[48];    /* "mpirun (OpenMPI)", "mpiexec (PMI)", "srun (Slurm)", "none" */
    char size_var[32]; /* the variable the size came from, "" if none */
    int size;         /* processes the launcher started; -1 if unknown */
    int rank;         /* this process's rank as the launcher sees it; -1 if unknown */
    int local_rank;   /* per node, from the launcher; -1 if unknown */
    int authoritative; /* 1: a size mismatch with MPI is an error; 0: only a warning */
} pl_dist_launcher;

typedef struct pl_dist {
    int rank, size;             /* in MPI_COMM_WORLD */
    int local_rank, local_size; /* among the processes on this node (shared memory) */
    int thread_level;           /* what MPI granted, >= MPI_THREAD_FUNNELED */
    int owns_mpi;               /* this pl_dist initialised MPI and will finalise it */
    pl_dist_launcher launcher;
    char library[64];           /* "OpenMPI 4.1.4", "MPICH 4.0.2", ... (compile time) */
} pl_dist;

/* Reads the launcher's environment variables (no MPI calls). */
void pl_dist_launcher_detect(pl_dist_launcher *l);

/* Initialises MPI unless it already is (then owns_mpi = 0), fills *d. argc/argv may be
 * NULL. On failure MPI is finalised again if this call initialised it; d->size and
 * d->launcher still say what was seen, so a caller can report it. */
pl_status pl_dist_init(pl_dist *d, int *argc, char ***argv);

/* Finalises MPI if pl_dist_init initialised it. Free every communicator first. */
pl_status pl_dist_finalize(pl_dist *d);

#endif
