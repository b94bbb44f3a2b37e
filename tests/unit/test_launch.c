/* parallel/launch: DeepSpeed hostfiles and --include/--exclude as DeepSpeed's
 * runner.py reads them, and torchrun/deepspeed flags to mpirun/srun commands. */
#include "base/alloc.h"
#include "parallel/launch.h"
#include "test.h"

static const pl_launch_ctx ompi = {.mpi = PL_LAUNCH_OPENMPI, .self = "/bin/plait", .ncpu = 8};

/* The plan's command line for a space-separated argument string (no quoting). */
static pl_status plan_line(const pl_launch_ctx *ctx, const char *args, char *line, size_t cap,
                           pl_launch_plan *plan)
{
    char buf[1024], *argv[64];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", args);
    for (char *t = strtok(buf, " "); t && argc < 64; t = strtok(NULL, " "))
        argv[argc++] = t;
    pl_status st = pl_launch_plan_make(ctx, argc, argv, plan);
    line[0] = '\0';
    if (st != PL_OK)
        return st;
    pl_bytes b = {0};
    st = pl_launch_plan_cmdline(plan, &b);
    if (st == PL_OK)
        snprintf(line, cap, "%s", b.data);
    else
        pl_launch_plan_free(plan); /* the caller frees only a plan that came back PL_OK */
    pl_bytes_free(&b);
    return st;
}

/* Expects args to translate to want; returns the plan's world size. */
static int expect_cmd(const pl_launch_ctx *ctx, const char *args, const char *want)
{
    char line[1024];
    pl_launch_plan plan;
    pl_status st = plan_line(ctx, args, line, sizeof line, &plan);
    CHECK(st == PL_OK, "%s: %s", args, pl_error_msg());
    if (st != PL_OK)
        return -1;
    CHECK(strcmp(line, want) == 0, "%s\n    got:  %s\n    want: %s", args, line, want);
    int world = plan.world;
    pl_launch_plan_free(&plan);
    return world;
}

static void expect_error(const pl_launch_ctx *ctx, const char *args, pl_status want,
                         const char *msg)
{
    char line[1024];
    pl_launch_plan plan;
    pl_status st = plan_line(ctx, args, line, sizeof line, &plan);
    CHECK(st == want, "%s: status %s, want %s (%s)", args, pl_status_str(st), pl_status_str(want),
          pl_error_msg());
    CHECK(strstr(pl_error_msg(), msg) != NULL, "%s: message '%s' lacks '%s'", args,
          pl_error_msg(), msg);
    if (st == PL_OK)
        pl_launch_plan_free(&plan);
}

static const char *write_file(const char *name, const char *text)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir(), name);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

TEST(hostfile_reads_slots_skips_comments_and_blank_lines)
{
    pl_launch_hosts h;
    CHECK_OK(pl_launch_hosts_parse("# workers\n\nworker-0 slots=4\n  worker-1\tslots=2 max_slots=8"
                                   "\n   # end\n",
                                   "hf", &h));
    CHECK(h.n == 2, "n %d", h.n);
    if (h.n == 2) {
        CHECK(strcmp(h.h[0].name, "worker-0") == 0 && h.h[0].nslots == 4 && h.h[0].nranks == 4,
              "host 0 %s %d", h.h[0].name, h.h[0].nslots);
        CHECK(strcmp(h.h[1].name, "worker-1") == 0 && h.h[1].nslots == 2, "host 1 %s %d",
              h.h[1].name, h.h[1].nslots);
    }
    pl_launch_hosts_free(&h);
}

TEST(malformed_hostfile_names_file_and_line)
{
    pl_launch_hosts h;
    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"a slots=2\nb\n", "hf:2: expected 'HOST slots=N', got 'b'"},
        {"a slots=2\n\nb slot=2\n", "hf:3: expected 'HOST slots=N', got 'b slot=2'"},
        {"a slots=x\n", "hf:1: expected 'HOST slots=N'"},
        {"a slots=4x\n", "hf:1: expected 'HOST slots=N'"},
        {"slots=4\n", "hf:1: expected 'HOST slots=N'"},
        {"a slots=0\n", "hf:1: slots=0: expected 1 to"},
        {"a slots=2\nb slots=1\na slots=3\n", "hf:3: host a is listed twice"},
        {"# only a comment\n\n", "hf: no hosts"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pl_status st = pl_launch_hosts_parse(bad[i].text, "hf", &h);
        CHECK(st == PL_ERR_FORMAT, "case %zu: status %s", i, pl_status_str(st));
        CHECK(strstr(pl_error_msg(), bad[i].msg) != NULL, "case %zu: '%s' lacks '%s'", i,
              pl_error_msg(), bad[i].msg);
    }
}

/* The ranks per host after a filter, as "a:2,b:1". */
static void filtered(const char *incl, const char *excl, char *out, size_t cap, pl_status *st)
{
    pl_launch_hosts h;
    out[0] = '\0';
    *st = pl_launch_hosts_parse("w0 slots=4\nw1 slots=4\nw2 slots=2\n", "hf", &h);
    if (*st == PL_OK)
        *st = pl_launch_hosts_filter(&h, incl, excl, "hf");
    size_t n = 0;
    for (int i = 0; *st == PL_OK && i < h.n; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%s:%d", i ? "," : "", h.h[i].name, h.h[i].nranks);
    pl_launch_hosts_free(&h);
}

TEST(include_and_exclude_follow_deepspeed_examples)
{
    static const struct {
        const char *incl, *excl, *want;
    } cases[] = {
        /* runner.py's help: "worker-0@worker-1:0,2" = all of w0, slots 0 and 2 of w1 */
        {"w0@w1:0,2", NULL, "w0:4,w1:2"},
        {"w1:0,2@w0", NULL, "w0:4,w1:2"}, /* hostfile order, not the string's */
        {"w2:1,1,1", NULL, "w2:1"},        /* duplicates removed */
        {NULL, "w1:0", "w0:4,w1:3,w2:2"},
        {NULL, "w0@w2:0", "w1:4,w2:1"},
        {"", "", "w0:4,w1:4,w2:2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char got[256];
        pl_status st;
        filtered(cases[i].incl, cases[i].excl, got, sizeof got, &st);
        CHECK(st == PL_OK, "case %zu: %s", i, pl_error_msg());
        CHECK(strcmp(got, cases[i].want) == 0, "case %zu: got %s want %s", i, got, cases[i].want);
    }
}

TEST(bad_include_exclude_is_an_error_naming_the_host_or_slot)
{
    static const struct {
        const char *incl, *excl, *msg;
    } cases[] = {
        {"w9", NULL, "--include w9: host 'w9' is not in hostfile hf (hosts: w0, w1, w2)"},
        {"w0@nope:1", NULL, "host 'nope' is not in hostfile hf"},
        {"w2:2", NULL, "--include w2:2: host w2 has no slot 2 (it has slots 0-1)"},
        {NULL, "w1:a", "--exclude w1:a: slot list 'a' of host w1"},
        {"w1:", NULL, "slot list '' of host w1"},
        {"w0@", NULL, "an empty host name"},
        {"w0", "w1", "give one of them, not both"},
        {NULL, "w0@w1@w2", "leaves no slots of hostfile hf"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char got[256];
        pl_status st;
        filtered(cases[i].incl, cases[i].excl, got, sizeof got, &st);
        CHECK(st == PL_ERR_ARG, "case %zu: status %s", i, pl_status_str(st));
        CHECK(strstr(pl_error_msg(), cases[i].msg) != NULL, "case %zu: '%s' lacks '%s'", i,
              pl_error_msg(), cases[i].msg);
    }
}

TEST(torchrun_flags_become_one_mpirun)
{
    pl_launch_ctx c = ompi;
    c.omp_threads_set = 1;
    CHECK(expect_cmd(&c, "--nproc_per_node 4 train --lr 1e-3",
                     "mpirun.openmpi -n 4 -x OMP_NUM_THREADS /bin/plait train --lr 1e-3") == 4,
          "world 4");
    expect_cmd(&c, "--nproc-per-node=2 --nnodes=1 --node_rank=0 --master_addr=10.0.0.1 "
                   "--master_port 6000 --standalone pretrain_gpt.py --num-layers 2",
               "mpirun.openmpi -n 2 -x OMP_NUM_THREADS /bin/plait train --num-layers 2");
    /* more ranks than cores: OpenMPI needs --oversubscribe */
    c.ncpu = 2;
    expect_cmd(&c, "--nproc_per_node 4 train",
               "mpirun.openmpi -n 4 --oversubscribe -x OMP_NUM_THREADS /bin/plait train");
    expect_cmd(&c, "--nproc_per_node cpu bench", "mpirun.openmpi -n 2 -x OMP_NUM_THREADS /bin/plait bench");
    expect_cmd(&c, "-- /opt/x/plait train", "mpirun.openmpi -n 1 -x OMP_NUM_THREADS /opt/x/plait train");
    pl_launch_ctx m = c;
    m.mpi = PL_LAUNCH_MPICH;
    expect_cmd(&m, "--nproc_per_node 4 train", "mpirun.mpich -n 4 /bin/plait train");
}

TEST(threads_per_rank_divide_the_cores_unless_set)
{
    char line[1024];
    pl_launch_plan plan;
    CHECK_OK(plan_line(&ompi, "--nproc_per_node 3 train", line, sizeof line, &plan));
    CHECK(plan.omp_threads == 2, "8 cores / 3 ranks -> %d threads", plan.omp_threads);
    CHECK(plan.notes.data && strstr(plan.notes.data, "OMP_NUM_THREADS=2"), "note: %s",
          plan.notes.data ? plan.notes.data : "(none)");
    pl_launch_plan_free(&plan);
    pl_launch_ctx c = ompi;
    c.omp_threads_set = 1;
    CHECK_OK(plan_line(&c, "--nproc_per_node 3 train", line, sizeof line, &plan));
    CHECK(plan.omp_threads == 0, "set by the user: left alone (%d)", plan.omp_threads);
    pl_launch_plan_free(&plan);
}

TEST(deepspeed_hostfile_flags_become_mpirun_hosts)
{
    pl_launch_ctx c = ompi;
    c.omp_threads_set = 1;
    const char *hf = write_file("launch_hosts", "# cluster\nw0 slots=4\nw1 slots=4\nw2 slots=2\n");
    char args[1024];
    snprintf(args, sizeof args, "--hostfile %s train", hf);
    CHECK(expect_cmd(&c, args, "mpirun.openmpi -n 10 --host w0:4,w1:4,w2:2 -x OMP_NUM_THREADS "
                               "/bin/plait train") == 10, "world 10");
    snprintf(args, sizeof args, "-H %s -i w0@w1:0,2 train", hf);
    expect_cmd(&c, args, "mpirun.openmpi -n 6 --host w0:4,w1:2 -x OMP_NUM_THREADS /bin/plait train");
    snprintf(args, sizeof args, "--hostfile=%s --num_nodes 2 --num_gpus 1 train", hf);
    expect_cmd(&c, args, "mpirun.openmpi -n 2 --host w0:1,w1:1 -x OMP_NUM_THREADS /bin/plait train");
    /* torchrun's spellings of the same counts */
    snprintf(args, sizeof args, "--hostfile %s --nnodes 3 --nproc_per_node 2 train", hf);
    expect_cmd(&c, args, "mpirun.openmpi -n 6 --host w0:2,w1:2,w2:2 -x OMP_NUM_THREADS /bin/plait train");
    snprintf(args, sizeof args, "--hostfile %s --launcher_args --mca_btl_tcp_if_include=eth0 train", hf);
    expect_cmd(&c, args, "mpirun.openmpi -n 10 --host w0:4,w1:4,w2:2 -x OMP_NUM_THREADS "
                         "--mca_btl_tcp_if_include=eth0 /bin/plait train");
    pl_launch_ctx m = c;
    m.mpi = PL_LAUNCH_MPICH;
    snprintf(args, sizeof args, "--hostfile %s -e w0 train", hf);
    expect_cmd(&m, args, "mpirun.mpich -n 6 -hosts w1:4,w2:2 /bin/plait train");
    /* DeepSpeed's default /job/hostfile stands in when --hostfile is not given */
    m.default_hostfile = hf;
    expect_cmd(&m, "--num_nodes 1 train", "mpirun.mpich -n 4 -hosts w0:4 /bin/plait train");
}

TEST(inside_slurm_the_command_is_srun)
{
    pl_launch_ctx c = ompi;
    c.in_slurm = 1;
    c.omp_threads_set = 1;
    CHECK(expect_cmd(&c, "train", "srun -K --mpi=pmix /bin/plait train") == 0,
          "the allocation's world");
    expect_cmd(&c, "--nnodes 2 --nproc_per_node 4 train",
               "srun -K --mpi=pmix --nodes=2 --ntasks-per-node=4 /bin/plait train");
    const char *hf = write_file("launch_hosts_s", "n1 slots=2\nn2 slots=2\nn3 slots=1\n");
    char args[512];
    snprintf(args, sizeof args, "--hostfile %s --exclude n3 train", hf);
    expect_cmd(&c, args, "srun -K --mpi=pmix --nodes=2 --nodelist n1,n2 --ntasks-per-node=2 "
                         "/bin/plait train");
    snprintf(args, sizeof args, "--hostfile %s train", hf);
    expect_error(&c, args, PL_ERR_ARG, "different numbers of ranks");
    snprintf(args, sizeof args, "--hostfile %s --launcher mpirun train", hf);
    expect_cmd(&c, args, "mpirun.openmpi -n 5 --host n1:2,n2:2,n3:1 -x OMP_NUM_THREADS /bin/plait train");
    pl_launch_ctx m = c;
    m.mpi = PL_LAUNCH_MPICH;
    expect_cmd(&m, "--nproc_per_node 2 train",
               "srun -K --mpi=pmi2 --nodes=1 --ntasks-per-node=2 /bin/plait train");
    /* DeepSpeed's --launcher slurm outside an allocation */
    expect_cmd(&ompi, "--launcher slurm --num_gpus 2 train",
               "srun -K --mpi=pmix --nodes=1 --ntasks-per-node=2 /bin/plait train");
}

TEST(srun_with_more_ranks_than_cores_asks_openmpi_to_yield)
{
    char line[1024];
    pl_launch_plan plan;
    pl_launch_ctx c = ompi;
    c.in_slurm = 1;
    c.ncpu = 2;
    CHECK_OK(plan_line(&c, "--nproc_per_node 4 train", line, sizeof line, &plan));
    CHECK(plan.yield_when_idle, "4 ranks on 2 cores under srun");
    pl_launch_plan_free(&plan);
    CHECK_OK(plan_line(&c, "--nproc_per_node 2 train", line, sizeof line, &plan));
    CHECK(!plan.yield_when_idle, "2 ranks on 2 cores");
    pl_launch_plan_free(&plan);
    c.in_slurm = 0;
    CHECK_OK(plan_line(&c, "--nproc_per_node 4 train", line, sizeof line, &plan));
    CHECK(!plan.yield_when_idle, "mpirun sets it itself (--oversubscribe)");
    pl_launch_plan_free(&plan);
}

TEST(a_missing_hostfile_means_this_machine_as_in_deepspeed)
{
    char line[1024];
    pl_launch_plan plan;
    pl_launch_ctx c = ompi;
    c.omp_threads_set = 1;
    /* DeepSpeedExamples' ds_pretrain_gpt2.sh: --num_nodes 1 --num_gpus N --hostfile /job/hostfile */
    CHECK_OK(plan_line(&c, "--num_nodes 1 --num_gpus 2 --hostfile /nonexistent/hostfile pretrain_gpt2.py",
                       line, sizeof line, &plan));
    CHECK(strcmp(line, "mpirun.openmpi -n 2 -x OMP_NUM_THREADS /bin/plait train") == 0, "%s", line);
    CHECK(plan.notes.data && strstr(plan.notes.data, "--hostfile /nonexistent/hostfile not found: "
                                    "this machine only"), "note %s", plan.notes.data ? plan.notes.data : "");
    pl_launch_plan_free(&plan);
    expect_error(&ompi, "--hostfile /nonexistent/hostfile --num_nodes 2 train", PL_ERR_ARG, "give --hostfile");
    expect_error(&ompi, "--hostfile /nonexistent/hostfile -i w0 train", PL_ERR_ARG,
                 "--include selects hosts and slots of a --hostfile");
    /* torch.distributed.launch's --use_env is accepted */
    expect_cmd(&c, "--nproc_per_node 2 --use_env --log_dir /tmp/x train",
               "mpirun.openmpi -n 2 -x OMP_NUM_THREADS /bin/plait train");
}

TEST(node_rank_above_zero_has_nothing_to_do)
{
    char line[1024];
    pl_launch_plan plan;
    CHECK_OK(plan_line(&ompi, "--nnodes 2 --node_rank 1 --nproc_per_node 2 train", line,
                       sizeof line, &plan));
    CHECK(plan.nothing_to_do, "node 1 runs nothing");
    CHECK(plan.notes.data && strstr(plan.notes.data, "--node_rank 1: nothing to do"), "note %s",
          plan.notes.data ? plan.notes.data : "(none)");
    pl_launch_plan_free(&plan);
}

TEST(bad_launcher_input_is_an_error_naming_the_flag)
{
    expect_error(&ompi, "--nproc_per_node 0 train", PL_ERR_ARG, "--nproc_per_node 0: expected an integer from 1");
    expect_error(&ompi, "--nproc_per_node two train", PL_ERR_ARG, "--nproc_per_node two");
    expect_error(&ompi, "--nproc_per_node gpu train", PL_ERR_ARG, "plait runs on CPUs");
    expect_error(&ompi, "--nnodes 1:4 train", PL_ERR_ARG, "elastic MIN:MAX");
    expect_error(&ompi, "--nnodes 2 --node_rank 2 train", PL_ERR_ARG, "--node_rank 2: expected 0 to 1");
    expect_error(&ompi, "--nnodes 2 train", PL_ERR_ARG, "give --hostfile");
    expect_error(&ompi, "--nproc_per_node 2 --num_gpus 4 train", PL_ERR_ARG,
                 "--nproc_per_node 2 and --num_gpus 4 disagree");
    expect_error(&ompi, "--nprocs 2 train", PL_ERR_ARG, "unknown launcher flag --nprocs");
    expect_error(&ompi, "--standalone=1 train", PL_ERR_ARG, "--standalone takes no value");
    expect_error(&ompi, "--nproc_per_node", PL_ERR_ARG, "--nproc_per_node: expected a value");
    expect_error(&ompi, "--nproc_per_node 2", PL_ERR_ARG, "no command after the launcher flags");
    expect_error(&ompi, "--nproc_per_node 2 train.py --lr 1", PL_ERR_ARG,
                 "'train.py' after the launcher flags: expected a plait command");
    expect_error(&ompi, "--include w0 train", PL_ERR_ARG, "--include selects hosts and slots of a --hostfile");
    expect_error(&ompi, "--launcher mvapich train", PL_ERR_ARG, "--launcher mvapich: expected");
    expect_error(&ompi, "--launcher mpich train", PL_ERR_ARG, "built against OpenMPI");
    char args[512];
    const char *hf = write_file("launch_bad_hosts", "w0 slots=2\nw1 slots=two\n");
    snprintf(args, sizeof args, "--hostfile %s train", hf);
    char want[600];
    snprintf(want, sizeof want, "%s:2: expected 'HOST slots=N', got 'w1 slots=two'", hf);
    expect_error(&ompi, args, PL_ERR_FORMAT, want);
    hf = write_file("launch_hosts2", "w0 slots=2\nw1 slots=2\n");
    snprintf(args, sizeof args, "--hostfile %s --num_nodes 3 train", hf);
    expect_error(&ompi, args, PL_ERR_ARG, "3 nodes asked for (--num_nodes/--nnodes) but hostfile");
    snprintf(args, sizeof args, "--hostfile %s --include w0 --num_gpus 1 train", hf);
    expect_error(&ompi, args, PL_ERR_ARG, "cannot be combined with --num_nodes/--num_gpus");
}

TEST(cmdline_quotes_words_the_shell_would_split)
{
    pl_launch_plan plan;
    char *argv[] = {"train", "--data-path", "my corpus", "--x", "it's", "--y", ""};
    CHECK_OK(pl_launch_plan_make(&ompi, 7, argv, &plan));
    pl_bytes b = {0};
    CHECK_OK(pl_launch_plan_cmdline(&plan, &b));
    const char *want = "mpirun.openmpi -n 1 -x OMP_NUM_THREADS /bin/plait train --data-path "
                       "'my corpus' --x 'it'\\''s' --y ''";
    CHECK(b.data && strcmp(b.data, want) == 0, "got %s", b.data ? b.data : "(null)");
    pl_bytes_free(&b);
    pl_launch_plan_free(&plan);
}

TEST(failed_allocations_come_back_cleanly)
{
    const char *hf = write_file("launch_hosts_oom", "w0 slots=4\nw1 slots=4\n");
    char args[512];
    snprintf(args, sizeof args, "--hostfile %s -i w0:1@w1 --master_port 1 train --lr 1", hf);
    int64_t live = pl_alloc_live();
    int failed = 0;
    for (int64_t n = 0; n < 200; n++) {
        pl_alloc_fail_after(n);
        char line[1024];
        pl_launch_plan plan;
        pl_status st = plan_line(&ompi, args, line, sizeof line, &plan);
        pl_alloc_fail_after(-1);
        if (st == PL_OK) {
            pl_launch_plan_free(&plan);
            break;
        }
        failed++;
        CHECK(st == PL_ERR_NOMEM, "fail after %lld: %s", (long long)n, pl_error_msg());
    }
    CHECK(failed > 5, "only %d allocation points", failed);
    CHECK(pl_alloc_live() == live, "leaked %lld allocations", (long long)(pl_alloc_live() - live));
}

int main(void)
{
    RUN(hostfile_reads_slots_skips_comments_and_blank_lines);
    RUN(malformed_hostfile_names_file_and_line);
    RUN(include_and_exclude_follow_deepspeed_examples);
    RUN(bad_include_exclude_is_an_error_naming_the_host_or_slot);
    RUN(torchrun_flags_become_one_mpirun);
    RUN(threads_per_rank_divide_the_cores_unless_set);
    RUN(deepspeed_hostfile_flags_become_mpirun_hosts);
    RUN(inside_slurm_the_command_is_srun);
    RUN(srun_with_more_ranks_than_cores_asks_openmpi_to_yield);
    RUN(a_missing_hostfile_means_this_machine_as_in_deepspeed);
    RUN(node_rank_above_zero_has_nothing_to_do);
    RUN(bad_launcher_input_is_an_error_naming_the_flag);
    RUN(cmdline_quotes_words_the_shell_would_split);
    RUN(failed_allocations_come_back_cleanly);
    return test_summary("launch");
}
