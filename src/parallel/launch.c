/* parallel/launch: torchrun's and DeepSpeed's launcher flags to one mpirun or
 * srun command (the rules are in launch.h). Builds argv; runs nothing. */
#include "parallel/launch.h"

#include "base/alloc.h"
#include "base/fileio.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum flag_id {
    F_NPROC, F_NNODES, F_NODE_RANK, F_MASTER, F_RDZV, F_STANDALONE, F_MAX_RESTARTS,
    F_HOSTFILE, F_INCLUDE, F_EXCLUDE, F_NUM_NODES, F_NUM_GPUS, F_LAUNCHER, F_LAUNCHER_ARGS,
    F_NOOP, F_DRY_RUN,
};

/* The launcher flags, by name with '_' (a '-' inside a name is read as '_', as
 * torchrun accepts both). note: the line printed when the flag is given. */
static const struct launch_flag {
    const char *name;
    const char *alias; /* short form or second name */
    enum flag_id id;
    int takes_value;
    const char *note;
} flags[] = {
    {"--nproc_per_node", NULL, F_NPROC, 1, NULL},
    {"--nnodes", NULL, F_NNODES, 1, NULL},
    {"--node_rank", NULL, F_NODE_RANK, 1, NULL},
    {"--master_addr", NULL, F_MASTER, 1,
     "--master_addr: not used: mpirun and MPI do the rendezvous"},
    {"--master_port", NULL, F_MASTER, 1,
     "--master_port: not used: mpirun and MPI do the rendezvous"},
    {"--rdzv_backend", NULL, F_RDZV, 1, "--rdzv_backend: not used: MPI does the rendezvous"},
    {"--rdzv_endpoint", NULL, F_RDZV, 1, "--rdzv_endpoint: not used: MPI does the rendezvous"},
    {"--rdzv_id", NULL, F_RDZV, 1, "--rdzv_id: not used: MPI does the rendezvous"},
    {"--standalone", NULL, F_STANDALONE, 0, NULL},
    {"--max_restarts", NULL, F_MAX_RESTARTS, 1,
     "--max_restarts: plait does not restart failed ranks; rerun with --load to resume"},
    {"--hostfile", "-H", F_HOSTFILE, 1, NULL},
    {"--include", "-i", F_INCLUDE, 1, NULL},
    {"--exclude", "-e", F_EXCLUDE, 1, NULL},
    {"--num_nodes", NULL, F_NUM_NODES, 1, NULL},
    {"--num_gpus", "--num_accelerators", F_NUM_GPUS, 1,
     "--num_gpus: plait runs on CPUs: the number is ranks per node"},
    {"--launcher", NULL, F_LAUNCHER, 1, NULL},
    {"--launcher_args", NULL, F_LAUNCHER_ARGS, 1, NULL},
    {"--no_python", NULL, F_NOOP, 0, NULL},
    {"--no_local_rank", NULL, F_NOOP, 0, NULL},
    {"--module", NULL, F_NOOP, 0, "--module: ignored: plait runs no Python"},
    {"--no_ssh_check", NULL, F_NOOP, 0, NULL},
    {"--force_multi", NULL, F_NOOP, 0, NULL},
    {"--dry_run", NULL, F_DRY_RUN, 0, NULL},
    /* torch.distributed.launch / torchrun options without a meaning here */
    {"--use_env", NULL, F_NOOP, 0, NULL},
    {"--log_dir", NULL, F_NOOP, 1, "--log_dir: not used: every rank writes to this terminal (mpirun's --output-filename splits it)"},
    {"--redirects", NULL, F_NOOP, 1, "--redirects: not used: mpirun forwards every rank's output"},
    {"--tee", NULL, F_NOOP, 1, "--tee: not used: mpirun forwards every rank's output"},
    {"--monitor_interval", NULL, F_NOOP, 1, NULL},
    {"--start_method", NULL, F_NOOP, 1, NULL},
};
enum { N_FLAGS = sizeof flags / sizeof *flags };

/* The plait subcommands a launch may start directly. */
static const char *const subcommands[] = {"train", "bench", "generate", "preprocess", "data"};

typedef struct launch_args {
    const char *value[N_FLAGS]; /* last value given; "" for a switch */
    int cmd;                    /* argv index of the command */
} launch_args;

static pl_status note(pl_launch_plan *p, const char *fmt, ...) PL_PRINTF(2, 3);
static pl_status note(pl_launch_plan *p, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    return pl_bytes_printf(&p->notes, "%s\n", line);
}

/* Looks a flag up: "--nproc-per-node" finds --nproc_per_node. */
static int find_flag(const char *arg, size_t len)
{
    char norm[64];
    if (len >= sizeof norm)
        return -1;
    for (size_t i = 0; i < len; i++)
        norm[i] = (i >= 2 && arg[i] == '-') ? '_' : arg[i];
    norm[len] = '\0';
    for (int i = 0; i < N_FLAGS; i++)
        if (strcmp(norm, flags[i].name) == 0 || (flags[i].alias && strcmp(norm, flags[i].alias) == 0))
            return i;
    return -1;
}

static pl_status parse_flags(int argc, char **argv, launch_args *a)
{
    memset(a, 0, sizeof *a);
    int i = 0;
    while (i < argc && argv[i][0] == '-') {
        const char *arg = argv[i];
        if (strcmp(arg, "--") == 0) {
            i++;
            break;
        }
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        int k = find_flag(arg, len);
        if (k < 0) {
            pl_bytes names = {0};
            for (int j = 0; j < N_FLAGS; j++)
                pl_bytes_printf(&names, "%s%s", j ? " " : "", flags[j].name);
            pl_status st = pl_errorf(PL_ERR_ARG,
                                     "unknown launcher flag %.*s (launcher flags: %s; the command "
                                     "and its flags come after them)",
                                     (int)len, arg, names.data ? names.data : "");
            pl_bytes_free(&names);
            return st;
        }
        if (!flags[k].takes_value) {
            if (eq)
                return pl_errorf(PL_ERR_ARG, "%s takes no value (got '%s')", flags[k].name, arg);
            a->value[k] = "";
            i++;
            continue;
        }
        if (eq) {
            a->value[k] = eq + 1;
            i++;
        } else {
            if (i + 1 >= argc)
                return pl_errorf(PL_ERR_ARG, "%s: expected a value", flags[k].name);
            a->value[k] = argv[i + 1];
            i += 2;
        }
    }
    if (i >= argc)
        return pl_errorf(PL_ERR_ARG, "no command after the launcher flags (expected a plait "
                         "command such as 'train ...', or pretrain_gpt.py ...)");
    a->cmd = i;
    return PL_OK;
}

/* A positive int flag, or -1 when not given. */
static pl_status int_flag(const launch_args *a, enum flag_id id, int min, int *out)
{
    *out = -1;
    for (int k = 0; k < N_FLAGS; k++) {
        if (flags[k].id != id || !a->value[k])
            continue;
        char *end;
        long v = strtol(a->value[k], &end, 10);
        if (end == a->value[k] || *end || v < min || v > 1 << 20)
            return pl_errorf(PL_ERR_ARG, "%s %s: expected an integer from %d", flags[k].name,
                             a->value[k], min);
        *out = (int)v;
    }
    return PL_OK;
}

static const char *str_flag(const launch_args *a, enum flag_id id)
{
    const char *v = NULL;
    for (int k = 0; k < N_FLAGS; k++)
        if (flags[k].id == id && a->value[k])
            v = a->value[k];
    return v;
}

/* torchrun's --nproc_per_node: N, or "cpu"/"auto" (one rank per core, as torchrun does without GPUs). */
static pl_status nproc_flag(const pl_launch_ctx *ctx, const launch_args *a, int *out)
{
    const char *v = str_flag(a, F_NPROC);
    *out = -1;
    if (!v)
        return PL_OK;
    if (strcmp(v, "cpu") == 0 || strcmp(v, "auto") == 0) {
        *out = ctx->ncpu > 0 ? ctx->ncpu : 1;
        return PL_OK;
    }
    if (strcmp(v, "gpu") == 0)
        return pl_errorf(PL_ERR_ARG, "--nproc_per_node gpu: plait runs on CPUs (give a number "
                         "of ranks, or cpu)");
    return int_flag(a, F_NPROC, 1, out);
}

/* torchrun's --nnodes: N or MIN:MAX (elastic; only MIN == MAX here). */
static pl_status nnodes_flag(const launch_args *a, int *out)
{
    const char *v = str_flag(a, F_NNODES);
    *out = -1;
    if (!v)
        return PL_OK;
    char *end;
    long lo = strtol(v, &end, 10), hi = lo;
    if (*end == ':')
        hi = strtol(end + 1, &end, 10);
    if (end == v || *end || lo < 1 || lo > 1 << 20)
        return pl_errorf(PL_ERR_ARG, "--nnodes %s: expected a number of nodes", v);
    if (hi != lo)
        return pl_errorf(PL_ERR_ARG, "--nnodes %s: elastic MIN:MAX node counts are not supported "
                         "(MPI jobs have a fixed size): give one number", v);
    *out = (int)lo;
    return PL_OK;
}

static pl_status push(pl_launch_plan *p, const char *fmt, ...) PL_PRINTF(2, 3);
static pl_status push(pl_launch_plan *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char **argv = pl_realloc(p->argv, (size_t)(p->argc + 2) * sizeof *argv);
    char *s = n >= 0 ? pl_malloc((size_t)n + 1) : NULL;
    if (argv)
        p->argv = argv;
    if (!argv || !s) {
        pl_free(s);
        return pl_errorf(PL_ERR_NOMEM, "launch: out of memory");
    }
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    p->argv[p->argc++] = s;
    p->argv[p->argc] = NULL;
    return PL_OK;
}

/* --launcher_args: words split on blanks (no shell quoting, as DeepSpeed splits them). */
static pl_status push_words(pl_launch_plan *p, const char *s)
{
    while (s && *s) {
        while (*s == ' ' || *s == '\t')
            s++;
        size_t n = strcspn(s, " \t");
        if (n && push(p, "%.*s", (int)n, s) != PL_OK)
            return PL_ERR_NOMEM;
        s += n;
    }
    return PL_OK;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* The command after the flags: its binary and subcommand go to the plan. */
static pl_status push_command(const pl_launch_ctx *ctx, int argc, char **argv, int cmd,
                              pl_launch_plan *p)
{
    const char *c = argv[cmd], *b = base_name(c);
    pl_status st = PL_OK;
    int is_sub = 0;
    for (size_t i = 0; i < sizeof subcommands / sizeof *subcommands; i++)
        is_sub |= strcmp(c, subcommands[i]) == 0;
    if (is_sub) {
        PL_TRY(push(p, "%s", ctx->self));
        PL_TRY(push(p, "%s", c));
    } else if (strcmp(b, "plait") == 0) {
        PL_TRY(push(p, "%s", c));
    } else if (strcmp(b, "pretrain_gpt.py") == 0 || strcmp(b, "pretrain_gpt2.py") == 0) {
        PL_TRY(note(p, "%s: runs plait train (same flags)", c));
        PL_TRY(push(p, "%s", ctx->self));
        PL_TRY(push(p, "train"));
    } else {
        return pl_errorf(PL_ERR_ARG, "'%s' after the launcher flags: expected a plait command "
                         "(train, bench, generate, preprocess, data), a path to a plait binary, or "
                         "pretrain_gpt.py", c);
    }
    for (int i = cmd + 1; i < argc; i++)
        PL_TRY(push(p, "%s", argv[i]));
    return PL_OK;
fail:
    return st;
}

static int uniform_ranks(const pl_launch_hosts *h)
{
    for (int i = 1; i < h->n; i++)
        if (h->h[i].nranks != h->h[0].nranks)
            return 0;
    return h->n ? h->h[0].nranks : 0;
}

/* --host h1:2,h2:2 (OpenMPI) / -hosts h1:2,h2:2 (hydra); srun: --nodelist h1,h2. */
static pl_status host_list(const pl_launch_hosts *h, int with_counts, pl_launch_plan *p)
{
    pl_bytes b = {0};
    pl_status st = PL_OK;
    for (int i = 0; i < h->n; i++) {
        if (with_counts)
            PL_TRY(pl_bytes_printf(&b, "%s%s:%d", i ? "," : "", h->h[i].name, h->h[i].nranks));
        else
            PL_TRY(pl_bytes_printf(&b, "%s%s", i ? "," : "", h->h[i].name));
    }
    PL_TRY(push(p, "%s", b.data));
fail:
    pl_bytes_free(&b);
    return st;
}

static pl_status notes_for_flags(const launch_args *a, pl_launch_plan *p)
{
    pl_status st = PL_OK;
    for (int k = 0; k < N_FLAGS; k++)
        if (a->value[k] && flags[k].note)
            PL_TRY(note(p, "%s", flags[k].note));
fail:
    return st;
}

/* Which launcher: DeepSpeed's --launcher names (openmpi, mpich, slurm, pdsh) or
 * plait's (mpirun, srun); default srun inside a Slurm allocation, else mpirun. */
static pl_status pick_launcher(const pl_launch_ctx *ctx, const launch_args *a, int *use_srun,
                               pl_launch_plan *p)
{
    const char *l = str_flag(a, F_LAUNCHER);
    *use_srun = ctx->in_slurm;
    if (!l)
        return PL_OK;
    const char *mine = ctx->mpi == PL_LAUNCH_OPENMPI ? "openmpi" : "mpich";
    if (strcmp(l, "slurm") == 0 || strcmp(l, "srun") == 0) {
        *use_srun = 1;
    } else if (strcmp(l, "mpirun") == 0 || strcmp(l, mine) == 0) {
        *use_srun = 0;
    } else if (strcmp(l, "pdsh") == 0) {
        *use_srun = 0;
        return note(p, "--launcher pdsh: plait starts every rank with mpirun instead");
    } else if (strcmp(l, "openmpi") == 0 || strcmp(l, "mpich") == 0) {
        return pl_errorf(PL_ERR_ARG, "--launcher %s: this plait is built against %s; use the "
                         "%s build (docs/launching.md)", l,
                         ctx->mpi == PL_LAUNCH_OPENMPI ? "OpenMPI" : "MPICH",
                         strcmp(l, "mpich") == 0 ? "MPICH (make mpich-build, build-mpich/plait)"
                                                 : "OpenMPI (make, build/plait)");
    } else {
        return pl_errorf(PL_ERR_ARG, "--launcher %s: expected mpirun, srun, or DeepSpeed's "
                         "openmpi, mpich, slurm, pdsh", l);
    }
    return PL_OK;
}

/* The hosts: a hostfile (given, or DeepSpeed's default) filtered by the flags, or
 * none (this node, or nodes Slurm picks). per_node/nodes: the counts, -1 unset. */
static pl_status pick_hosts(const pl_launch_ctx *ctx, const launch_args *a, int nodes,
                            int per_node, pl_launch_hosts *hosts, pl_launch_plan *p)
{
    const char *hostfile = str_flag(a, F_HOSTFILE);
    const char *inc = str_flag(a, F_INCLUDE), *exc = str_flag(a, F_EXCLUDE);
    pl_status st = PL_OK;
    if (!hostfile && ctx->default_hostfile) {
        hostfile = ctx->default_hostfile;
        PL_TRY(note(p, "using DeepSpeed's default hostfile %s (--hostfile to choose another)",
                    hostfile));
    }
    if (((inc && *inc) || (exc && *exc)) && (nodes > 0 || per_node > 0))
        return pl_errorf(PL_ERR_ARG, "--include/--exclude cannot be combined with "
                         "--num_nodes/--num_gpus (or --nnodes/--nproc_per_node), as in DeepSpeed");
    if (hostfile && !pl_file_exists(hostfile)) {
        /* DeepSpeed's runner: "Unable to find hostfile, will proceed with training with
         * local resources only" (its scripts pass --hostfile /job/hostfile everywhere) */
        PL_TRY(note(p, "--hostfile %s not found: this machine only, as DeepSpeed does", hostfile));
        hostfile = NULL;
    }
    if (!hostfile) {
        if ((inc && *inc) || (exc && *exc))
            return pl_errorf(PL_ERR_ARG, "%s selects hosts and slots of a --hostfile; none given",
                             inc ? "--include" : "--exclude");
        return PL_OK;
    }
    PL_TRY(pl_launch_hosts_read(hostfile, hosts));
    PL_TRY(pl_launch_hosts_filter(hosts, inc, exc, hostfile));
    if (nodes > hosts->n)
        return pl_errorf(PL_ERR_ARG, "%d nodes asked for (--num_nodes/--nnodes) but hostfile %s "
                         "lists %d", nodes, hostfile, hosts->n);
    if (nodes > 0) {
        for (int i = nodes; i < hosts->n; i++) {
            pl_free(hosts->h[i].name);
            pl_free(hosts->h[i].used);
        }
        hosts->n = nodes;
    }
    if (per_node > 0)
        for (int i = 0; i < hosts->n; i++)
            hosts->h[i].nranks = per_node;
fail:
    return st;
}

/* Two spellings of one count (torchrun's and DeepSpeed's) must agree. */
static pl_status same_count(int a, int b, const char *na, const char *nb, int *out)
{
    if (a > 0 && b > 0 && a != b)
        return pl_errorf(PL_ERR_ARG, "%s %d and %s %d disagree: give one", na, a, nb, b);
    *out = a > 0 ? a : b;
    return PL_OK;
}

pl_status pl_launch_plan_make(const pl_launch_ctx *ctx, int argc, char **argv,
                              pl_launch_plan *out)
{
    pl_launch_plan p = {0};
    pl_launch_hosts hosts = {0};
    launch_args a;
    pl_status st = PL_OK;
    int nproc = -1, ngpu = -1, nnodes = -1, num_nodes = -1, node_rank = -1, per_node = -1;
    int nodes = -1, use_srun = 0;
    PL_TRY(parse_flags(argc, argv, &a));
    PL_TRY(nproc_flag(ctx, &a, &nproc));
    PL_TRY(int_flag(&a, F_NUM_GPUS, 1, &ngpu));
    PL_TRY(nnodes_flag(&a, &nnodes));
    PL_TRY(int_flag(&a, F_NUM_NODES, 1, &num_nodes));
    PL_TRY(int_flag(&a, F_NODE_RANK, 0, &node_rank));
    PL_TRY(same_count(nproc, ngpu, "--nproc_per_node", "--num_gpus", &per_node));
    PL_TRY(same_count(nnodes, num_nodes, "--nnodes", "--num_nodes", &nodes));
    p.dry_run = str_flag(&a, F_DRY_RUN) != NULL;
    PL_TRY(notes_for_flags(&a, &p));
    if (node_rank >= 0 && nodes > 0 && node_rank >= nodes)
        PL_TRY(pl_errorf(PL_ERR_ARG, "--node_rank %d: expected 0 to %d (--nnodes %d)", node_rank,
                         nodes - 1, nodes));
    PL_TRY(pick_launcher(ctx, &a, &use_srun, &p));
    PL_TRY(pick_hosts(ctx, &a, nodes, per_node, &hosts, &p));
    if (node_rank > 0) {
        p.nothing_to_do = 1;
        PL_TRY(note(&p, "--node_rank %d: nothing to do on this node: run plait launch once, on "
                    "node 0; its %s starts the ranks of every node", node_rank,
                    use_srun ? "srun" : "mpirun"));
    }
    if (!hosts.n && !use_srun && nodes > 1 && !p.nothing_to_do)
        PL_TRY(pl_errorf(PL_ERR_ARG, "%d nodes (--nnodes/--num_nodes): mpirun starts every node's "
                         "ranks from here, so it needs their names: give --hostfile with "
                         "'HOST slots=N' lines, or run inside a Slurm allocation", nodes));

    int ranks_per_node = 0; /* the most ranks on one node; 0: unknown (the allocation's) */
    if (hosts.n) {
        for (int i = 0; i < hosts.n; i++) {
            p.world += hosts.h[i].nranks;
            ranks_per_node = hosts.h[i].nranks > ranks_per_node ? hosts.h[i].nranks : ranks_per_node;
        }
    } else if (!use_srun || per_node > 0 || nodes > 0) {
        ranks_per_node = per_node > 0 ? per_node : 1;
        p.world = ranks_per_node * (nodes > 0 ? nodes : 1);
    }

    if (use_srun) {
        PL_TRY(push(&p, "srun"));
        PL_TRY(push(&p, "-K"));
        PL_TRY(push(&p, "--mpi=%s", ctx->mpi == PL_LAUNCH_OPENMPI ? "pmix" : "pmi2"));
        if (hosts.n) {
            int r = uniform_ranks(&hosts);
            if (!r)
                PL_TRY(pl_errorf(PL_ERR_ARG, "the hosts get different numbers of ranks, which srun "
                                 "cannot start in one step: give every host the same slots (or "
                                 "--num_gpus N), or use --launcher mpirun"));
            PL_TRY(push(&p, "--nodes=%d", hosts.n));
            PL_TRY(push(&p, "--nodelist"));
            PL_TRY(host_list(&hosts, 0, &p));
            PL_TRY(push(&p, "--ntasks-per-node=%d", r));
        } else if (p.world) {
            PL_TRY(push(&p, "--nodes=%d", nodes > 0 ? nodes : 1));
            PL_TRY(push(&p, "--ntasks-per-node=%d", ranks_per_node));
        }
    } else {
        PL_TRY(push(&p, ctx->mpi == PL_LAUNCH_OPENMPI ? "mpirun.openmpi" : "mpirun.mpich"));
        PL_TRY(push(&p, "-n"));
        PL_TRY(push(&p, "%d", p.world));
        if (hosts.n) {
            PL_TRY(push(&p, ctx->mpi == PL_LAUNCH_OPENMPI ? "--host" : "-hosts"));
            PL_TRY(host_list(&hosts, 1, &p));
        } else if (ctx->mpi == PL_LAUNCH_OPENMPI && p.world > ctx->ncpu) {
            /* OpenMPI refuses more ranks than cores without it; oversubscribed,
             * it also makes waiting ranks yield their core. */
            PL_TRY(push(&p, "--oversubscribe"));
        }
    }
    if (use_srun && ctx->mpi == PL_LAUNCH_OPENMPI && ranks_per_node > ctx->ncpu) {
        p.yield_when_idle = 1;
        PL_TRY(note(&p, "OMPI_MCA_mpi_yield_when_idle=1 (%d ranks per node > %d cores: srun, "
                    "unlike mpirun, does not set it)", ranks_per_node, ctx->ncpu));
    }
    if (!ctx->omp_threads_set && ranks_per_node > 0 && !p.nothing_to_do) {
        p.omp_threads = ctx->ncpu / ranks_per_node > 1 ? ctx->ncpu / ranks_per_node : 1;
        PL_TRY(note(&p, "OMP_NUM_THREADS=%d (%d cores here, %d ranks per node; set "
                    "OMP_NUM_THREADS to choose)", p.omp_threads, ctx->ncpu, ranks_per_node));
    }
    if (!use_srun && ctx->mpi == PL_LAUNCH_OPENMPI && (p.omp_threads || ctx->omp_threads_set)) {
        PL_TRY(push(&p, "-x"));
        PL_TRY(push(&p, "OMP_NUM_THREADS"));
    }
    PL_TRY(push_words(&p, str_flag(&a, F_LAUNCHER_ARGS)));
    PL_TRY(push_command(ctx, argc, argv, a.cmd, &p));
    pl_launch_hosts_free(&hosts);
    *out = p;
    return PL_OK;
fail:
    pl_launch_hosts_free(&hosts);
    pl_launch_plan_free(&p);
    return st;
}

void pl_launch_plan_free(pl_launch_plan *plan)
{
    for (int i = 0; i < plan->argc; i++)
        pl_free(plan->argv[i]);
    pl_free(plan->argv);
    pl_bytes_free(&plan->notes);
    memset(plan, 0, sizeof *plan);
}

pl_status pl_launch_plan_cmdline(const pl_launch_plan *plan, pl_bytes *out)
{
    static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                               "_@%+=:,./-";
    pl_status st = PL_OK;
    for (int i = 0; i < plan->argc; i++) {
        const char *w = plan->argv[i];
        PL_TRY(pl_bytes_printf(out, "%s", i ? " " : ""));
        if (*w && strspn(w, safe) == strlen(w)) {
            PL_TRY(pl_bytes_printf(out, "%s", w));
            continue;
        }
        PL_TRY(pl_bytes_append(out, "'", 1));
        for (const char *c = w; *c; c++)
            PL_TRY(*c == '\'' ? pl_bytes_append(out, "'\\''", 4) : pl_bytes_append(out, c, 1));
        PL_TRY(pl_bytes_append(out, "'", 1));
    }
fail:
    return st;
}
