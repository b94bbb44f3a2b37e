/* plait launch: torchrun / deepspeed launcher flags in, one mpirun (or srun)
 * command out, printed and then run in place of this process (exec), so its
 * exit code and signals are the job's. The translation is parallel/launch.c. */
#include "commands.h"

#include "base/vec.h"
#include "parallel/launch.h"

#include <mpi.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
    "usage: plait launch [launcher flags] COMMAND [its flags]\n"
    "\n"
    "Starts COMMAND (train, bench, generate, ...; a path to a plait binary; or Megatron's\n"
    "pretrain_gpt.py, read as train) on every rank with mpirun, or with srun inside a Slurm\n"
    "allocation (SLURM_JOB_ID set), from torchrun's or DeepSpeed's launcher flags. The\n"
    "command is printed before it runs. docs/launching.md has the details.\n"
    "\n"
    "torchrun:  --nproc_per_node N|cpu  --nnodes N  --node_rank K  --master_addr A\n"
    "           --master_port P  --standalone  --rdzv_backend/--rdzv_endpoint/--rdzv_id\n"
    "           --max_restarts (accepted; plait does not restart); --log_dir, --tee,\n"
    "           --redirects, --monitor_interval, --start_method, --use_env (accepted)\n"
    "deepspeed: --hostfile F (-H; lines 'HOST slots=N'; default /job/hostfile if it exists;\n"
    "           a missing file means this machine only, as in DeepSpeed)\n"
    "           --include/-i and --exclude/-e 'HOST[:SLOT,...][@HOST...]'  --num_nodes N\n"
    "           --num_gpus N (ranks per node)  --launcher mpirun|srun|openmpi|mpich|slurm|pdsh\n"
    "           --launcher_args 'ARGS' (added to mpirun/srun)\n"
    "plait:     --dry-run (print the command, run nothing)\n"
    "\n"
    "Names take '_' or '-' (--nproc-per-node), a value after '=' or as the next word.\n";

static int wants_help(int argc, char **argv)
{
    for (int i = 0; i < argc && argv[i][0] == '-'; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    return argc == 0;
}

int plait_cmd_launch(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(usage, argc == 0 ? stderr : stdout);
        return argc == 0 ? PLAIT_EXIT_USAGE : 0;
    }
    static char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "plait launch: error: cannot read /proc/self/exe: %s\n", strerror(errno));
        return PLAIT_EXIT_FAILURE;
    }
    self[n] = '\0';
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    pl_launch_ctx ctx = {
#if defined(OPEN_MPI)
        .mpi = PL_LAUNCH_OPENMPI,
#else
        .mpi = PL_LAUNCH_MPICH,
#endif
        .self = self,
        .ncpu = ncpu > 0 ? (int)ncpu : 1,
        .in_slurm = getenv("SLURM_JOB_ID") != NULL,
        .omp_threads_set = getenv("OMP_NUM_THREADS") != NULL,
        .default_hostfile = access("/job/hostfile", R_OK) == 0 ? "/job/hostfile" : NULL,
    };
    pl_launch_plan plan;
    pl_status st = pl_launch_plan_make(&ctx, argc, argv, &plan);
    if (st != PL_OK)
        return plait_report(st);
    for (const char *s = plan.notes.data; s && *s;) {
        const char *e = strchr(s, '\n');
        fprintf(stderr, "plait launch: %.*s\n", (int)(e - s), s);
        s = e + 1;
    }
    if (plan.nothing_to_do) {
        pl_launch_plan_free(&plan);
        return 0;
    }
    pl_bytes line = {0};
    st = pl_launch_plan_cmdline(&plan, &line);
    if (st != PL_OK) {
        pl_launch_plan_free(&plan);
        return plait_report(st);
    }
    if (plan.dry_run) {
        printf("%s\n", line.data);
        pl_bytes_free(&line);
        pl_launch_plan_free(&plan);
        return 0;
    }
    fprintf(stderr, "plait launch: %s\n", line.data);
    pl_bytes_free(&line);
    if (plan.omp_threads > 0) {
        char v[16];
        snprintf(v, sizeof v, "%d", plan.omp_threads);
        setenv("OMP_NUM_THREADS", v, 1);
    }
    if (plan.yield_when_idle)
        setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
    fflush(stdout);
    fflush(stderr);
    execvp(plan.argv[0], plan.argv);
    fprintf(stderr, "plait: error: cannot run %s: %s (is it installed and on the PATH?)\n",
            plan.argv[0], strerror(errno));
    pl_launch_plan_free(&plan);
    return PLAIT_EXIT_FAILURE;
}
