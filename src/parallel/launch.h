/* parallel/launch: `plait launch`, the torchrun and DeepSpeed launcher flags
 * turned into one mpirun (or srun) command.
 *
 * torchrun starts one launcher per node and meets at --master_addr; DeepSpeed's
 * runner reads a hostfile and ssh'es a launcher onto each host. plait is one MPI
 * program, so both become a single `mpirun` started on one node (or `srun` inside
 * a Slurm allocation) with the same ranks on the same hosts, in the same order:
 * ranks fill hosts in hostfile order, as DeepSpeed numbers them.
 *
 * Semantics kept from DeepSpeed's deepspeed/launcher/runner.py:
 *   - hostfile lines `HOST slots=N` (text after N ignored), `#` comments and
 *     blank lines skipped; a host listed twice, a line of another shape or a file
 *     without hosts is an error;
 *   - --include / --exclude: NODE_SPEC[@NODE_SPEC...], NODE_SPEC = HOST[:SLOT[,SLOT...]],
 *     mutually exclusive, and neither with --num_nodes/--num_gpus; a host not in
 *     the hostfile or a slot it does not have is an error;
 *   - --num_nodes N keeps the first N hosts, --num_gpus N gives each host N ranks.
 * Where plait differs it says so (pl_launch_plan.notes): a slot is a rank, not a
 * device; --num_nodes beyond the hostfile is an error (DeepSpeed takes fewer).
 * Not a process manager: it builds the command, the tool prints and execs it. */
#ifndef PL_PARALLEL_LAUNCH_H
#define PL_PARALLEL_LAUNCH_H

#include "base/status.h"
#include "base/vec.h"

typedef struct pl_launch_host {
    char *name;
    int nslots;          /* slots=N in the hostfile */
    unsigned char *used; /* nslots flags: the slots --include/--exclude keep */
    int nranks;          /* ranks started on this host */
} pl_launch_host;

typedef struct pl_launch_hosts {
    pl_launch_host *h;
    int n;
} pl_launch_hosts;

/* Parses hostfile text; `path` only names the file in errors ("hosts:3: ...").
 * On success every host has nranks = nslots and every slot used. */
pl_status pl_launch_hosts_parse(const char *text, const char *path, pl_launch_hosts *out);
pl_status pl_launch_hosts_read(const char *path, pl_launch_hosts *out);

/* Applies DeepSpeed's --include or --exclude string (at most one non-NULL,
 * non-empty) and drops hosts left without ranks. `hostfile` names the file in
 * errors. */
pl_status pl_launch_hosts_filter(pl_launch_hosts *hosts, const char *include,
                                 const char *exclude, const char *hostfile);
void pl_launch_hosts_free(pl_launch_hosts *hosts);

typedef enum { PL_LAUNCH_OPENMPI, PL_LAUNCH_MPICH } pl_launch_mpi;

/* What the translation needs to know about this machine (the tool fills it;
 * tests set it by hand). */
typedef struct pl_launch_ctx {
    pl_launch_mpi mpi;            /* the MPI this plait was built against */
    const char *self;             /* this plait binary, started on every rank */
    int ncpu;                     /* cores here */
    int in_slurm;                 /* SLURM_JOB_ID is set */
    int omp_threads_set;          /* OMP_NUM_THREADS is set */
    const char *default_hostfile; /* DeepSpeed's /job/hostfile when it exists, else NULL */
} pl_launch_ctx;

typedef struct pl_launch_plan {
    char **argv;       /* NULL-terminated: mpirun.openmpi, mpirun.mpich or srun, ... */
    int argc;
    int world;         /* ranks started; 0 under srun without counts (the allocation's) */
    int omp_threads;   /* > 0: export OMP_NUM_THREADS=this before running */
    int yield_when_idle; /* export OMPI_MCA_mpi_yield_when_idle=1: srun does not set it when
                          * OpenMPI ranks outnumber the cores (a waiting rank then spins) */
    int nothing_to_do; /* torchrun --node_rank > 0: node 0's mpirun starts every rank */
    int dry_run;       /* --dry-run: print, do not run */
    pl_bytes notes;    /* one line per flag plait treats differently, each ending "\n" */
} pl_launch_plan;

/* Translates `plait launch` arguments (launcher flags, then the command: a plait
 * subcommand, a path to a plait binary, or Megatron's pretrain_gpt.py) into a
 * plan. Errors name the flag or file and say what was expected. */
pl_status pl_launch_plan_make(const pl_launch_ctx *ctx, int argc, char **argv,
                              pl_launch_plan *out);
void pl_launch_plan_free(pl_launch_plan *plan);

/* Appends the plan's command as one shell line, each word quoted where needed. */
pl_status pl_launch_plan_cmdline(const pl_launch_plan *plan, pl_bytes *out);

#endif
