/* plait ckpt SUBCOMMAND DIR: inspect, reshard, convert, export a checkpoint, or
 * import one, in one process without MPI (the libraries are ckpt/tools.h and
 * ckpt/hf.h). DIR is a save directory (its latest iteration, or --ckpt-step N)
 * or an iter_NNNNNNN / release directory itself; import reads a Hugging Face
 * directory. */
#include "commands.h"

#include "base/alloc.h"
#include "ckpt/hf.h"
#include "ckpt/megatron.h"
#include "ckpt/tools.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef struct ckpt_opts {
    int64_t ckpt_step;
    int json, no_verify;
    const char *out;
    int64_t tp, pp, pp_split;
    int weights_only, bf16, fp32, release, no_zero_fp32;
    const char *format, *max_shard_size;
    int64_t divisible_by, vocab_size;
} ckpt_opts;

#define F(field) offsetof(ckpt_opts, field)
static const pl_option inspect_table[] = {
    {"--ckpt-step", PL_OPT_INT, "-1", F(ckpt_step), "iteration to describe (default: the latest)",
     NULL, 0},
    {"--json", PL_OPT_BOOL, NULL, F(json), "print JSON instead of text", NULL, 0},
    {"--no-verify", PL_OPT_BOOL, NULL, F(no_verify), "do not read the files to check checksums",
     NULL, 0},
};
static const pl_option reshard_table[] = {
    {"--out", PL_OPT_STRING, NULL, F(out), "save directory to write", NULL, PL_OPT_REQUIRED},
    {"--tensor-model-parallel-size", PL_OPT_INT, NULL, F(tp), "TP size to write", NULL,
     PL_OPT_REQUIRED},
    {"--pipeline-model-parallel-size", PL_OPT_INT, "1", F(pp), "PP size to write", NULL, 0},
    {"--pipeline-model-parallel-split-rank", PL_OPT_INT, "0", F(pp_split),
     "t5, bart at PP > 1: the decoder's first stage (default: the saved one at the saved PP size)",
     NULL, 0},
    {"--ckpt-step", PL_OPT_INT, "-1", F(ckpt_step), "iteration to read (default: the latest)", NULL,
     0},
    {"--weights-only", PL_OPT_BOOL, NULL, F(weights_only), "leave out Adam's moments", NULL, 0},
};
static const pl_option convert_table[] = {
    {"--out", PL_OPT_STRING, NULL, F(out), "save directory to write (DIR/release)", NULL,
     PL_OPT_REQUIRED},
    {"--weights-only", PL_OPT_BOOL, NULL, F(weights_only),
     "the weights only (required: a release checkpoint has no optimizer state)", NULL, 0},
    {"--bf16", PL_OPT_BOOL, NULL, F(bf16), "write the weights as bfloat16", NULL, 0},
    {"--fp32", PL_OPT_BOOL, NULL, F(fp32), "write the weights as float32 (the default)", NULL, 0},
    {"--ckpt-step", PL_OPT_INT, "-1", F(ckpt_step), "iteration to read (default: the latest)", NULL,
     0},
};
static const pl_option export_table[] = {
    {"--out", PL_OPT_STRING, NULL, F(out), "hf: directory to write (must not exist, or be "
     "empty); megatron: save directory (its iter_N or release must not exist)", NULL,
     PL_OPT_REQUIRED},
    {"--format", PL_OPT_STRING, "hf", F(format), "hf: Hugging Face (config.json, model.safetensors); "
     "megatron: Megatron-LM's torch format (iter_N/mp_rank_TT[_PPP]/model_optim_rng.pt)", NULL, 0},
    {"--tensor-model-parallel-size", PL_OPT_INT, "0", F(tp),
     "megatron: TP size to write (default: the checkpoint's)", NULL, 0},
    {"--pipeline-model-parallel-size", PL_OPT_INT, "0", F(pp),
     "megatron: PP size to write (default: the checkpoint's)", NULL, 0},
    {"--release", PL_OPT_BOOL, NULL, F(release),
     "megatron: write OUT/release (iteration 0), which Megatron loads without optimizer and RNG "
     "state", NULL, 0},
    {"--bf16", PL_OPT_BOOL, NULL, F(bf16), "write the weights as bfloat16", NULL, 0},
    {"--fp32", PL_OPT_BOOL, NULL, F(fp32), "write the weights as float32 (the default)", NULL, 0},
    {"--max-shard-size", PL_OPT_STRING, "5GB", F(max_shard_size),
     "split model.safetensors into shards of at most this size (with an index)", NULL, 0},
    {"--ckpt-step", PL_OPT_INT, "-1", F(ckpt_step), "iteration to read (default: the latest)", NULL,
     0},
};
static const pl_option import_table[] = {
    {"--out", PL_OPT_STRING, NULL, F(out), "save directory to write (DIR/release)", NULL,
     PL_OPT_REQUIRED},
    {"--format", PL_OPT_STRING, "hf", F(format),
     "hf: a Hugging Face directory; megatron: a Megatron-LM (or Megatron-DeepSpeed) torch or "
     "torch_dist checkpoint; nemo: a NeMo .nemo archive", NULL, 0},
    {"--tensor-model-parallel-size", PL_OPT_INT, "0", F(tp),
     "TP size to write (default: hf 1, megatron and nemo the checkpoint's)", NULL, 0},
    {"--pipeline-model-parallel-size", PL_OPT_INT, "0", F(pp),
     "PP size to write (default: hf 1, megatron and nemo the checkpoint's)", NULL, 0},
    {"--make-vocab-size-divisible-by", PL_OPT_INT, "128", F(divisible_by),
     "hf: pad the vocabulary to a multiple of this times TP (Megatron's)", NULL, 0},
    {"--vocab-size", PL_OPT_INT, "0", F(vocab_size),
     "megatron, nemo: the tokenizer's vocabulary (default: every padded row)", NULL, 0},
    {"--no-zero-fp32", PL_OPT_BOOL, NULL, F(no_zero_fp32),
     "megatron: read DeepSpeed's model_states (or layer files') weights even beside ZeRO stage "
     "1-2 or BF16_Optimizer shards ([bf16_]zero_pp_rank_D_mp_rank_TT_optim_states.pt, whose fp32 "
     "weights are read by default; ZeRO 3 needs them)", NULL,
     0},
};
#undef F
#define SPEC(name, summary, table) {name, summary, table, (int)(sizeof table / sizeof *table), 0}
static const pl_command_spec inspect_cmd =
    SPEC("ckpt inspect DIR", "Describe a checkpoint: layout, model, state, tensors, files and checksums",
         inspect_table);
static const pl_command_spec reshard_cmd =
    SPEC("ckpt reshard DIR", "Write a checkpoint in another TP x PP layout (weights and Adam moments)",
         reshard_table);
static const pl_command_spec convert_cmd =
    SPEC("ckpt convert DIR", "Write a weights-only release checkpoint (Megatron's release/), fp32 or bf16",
         convert_table);

static const pl_command_spec export_cmd =
    SPEC("ckpt export DIR", "Write a checkpoint as a Hugging Face model directory (GPT2LMHeadModel, "
         "LlamaForCausalLM, T5ForConditionalGeneration; --format hf) or as a Megatron-LM torch checkpoint, weights only "
         "(--format megatron)", export_table);
static const pl_command_spec import_cmd =
    SPEC("ckpt import DIR", "Write a Hugging Face GPT-2 / Llama / T5 directory (--format hf), a "
         "Megatron-LM torch or torch_dist checkpoint (--format megatron) or a NeMo .nemo archive "
         "(--format nemo) "
         "as a plait release checkpoint in any TP x PP layout", import_table);

static void print_text(const cJSON *d)
{
    const cJSON *lay = cJSON_GetObjectItemCaseSensitive(d, "layout");
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(d, "iteration");
    if (cJSON_IsString(it))
        printf("iteration: release (weights only)\n");
    else
        printf("iteration: %.0f\n", it->valuedouble);
    char *model = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(d, "model"));
    char *state = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(d, "state"));
    printf("directory: %s\nfamily: %s\n", cJSON_GetObjectItemCaseSensitive(d, "directory")->valuestring,
           cJSON_GetObjectItemCaseSensitive(d, "family")->valuestring);
    const cJSON *split = cJSON_GetObjectItemCaseSensitive(lay, "pipeline_model_parallel_split_rank");
    printf("layout: TP %.0f x PP %.0f x DP %.0f, ZeRO stage %.0f",
           cJSON_GetObjectItemCaseSensitive(lay, "tensor_model_parallel_size")->valuedouble,
           cJSON_GetObjectItemCaseSensitive(lay, "pipeline_model_parallel_size")->valuedouble,
           cJSON_GetObjectItemCaseSensitive(lay, "data_parallel_size")->valuedouble,
           cJSON_GetObjectItemCaseSensitive(lay, "zero_stage")->valuedouble);
    if (split) /* a pipelined encoder-decoder */
        printf(", the decoder from stage %.0f", split->valuedouble);
    printf("\n");
    printf("model: %s\nstate: %s\n", model ? model : "?", state ? state : "?");
    cJSON_free(model);
    cJSON_free(state);
    printf("parameters: %.0f (padded vocabulary included)\n",
           cJSON_GetObjectItemCaseSensitive(d, "parameters")->valuedouble);
    printf("tensors:\n");
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(d, "tensors"))
    {
        char shape[64] = "";
        size_t len = 0;
        const cJSON *x;
        cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(t, "shape"))
            len += (size_t)snprintf(shape + len, sizeof shape - len, "%s%.0f", len ? " x " : "",
                                    x->valuedouble);
        printf("  %-58s %-14s %-5s %-13s stage %.0f\n",
               cJSON_GetObjectItemCaseSensitive(t, "name")->valuestring, shape,
               cJSON_GetObjectItemCaseSensitive(t, "dtype")->valuestring,
               cJSON_GetObjectItemCaseSensitive(t, "tp_split")->valuestring,
               cJSON_GetObjectItemCaseSensitive(t, "pipeline_stage")->valuedouble);
    }
    printf("files:\n");
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(d, "files"))
    {
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(t, "bytes");
        printf("  %-44s xxh64 %s", cJSON_GetObjectItemCaseSensitive(t, "path")->valuestring,
               cJSON_GetObjectItemCaseSensitive(t, "xxh64")->valuestring);
        if (b)
            printf("  %12.0f bytes  verified", b->valuedouble);
        printf("\n");
    }
    const cJSON *total = cJSON_GetObjectItemCaseSensitive(d, "total_bytes");
    if (total)
        printf("total: %.0f bytes in %d files, every checksum verified\n", total->valuedouble,
               cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(d, "files")));
}

/* Parses "DIR [flags]" with cmd into o. Returns -1 to continue, else the exit code. */
static int parse(const pl_command_spec *cmd, ckpt_opts *o, int argc, char **argv, const char **dir)
{
    memset(o, 0, sizeof *o);
    if (argc < 1 || argv[0][0] == '-') {
        if (argc >= 1 && pl_options_wants_help(argc, argv)) {
            pl_options_help(cmd, stdout);
            return 0;
        }
        fprintf(stderr, "plait: error: plait %s: the checkpoint directory comes first\n", cmd->name);
        return PLAIT_EXIT_USAGE;
    }
    *dir = argv[0];
    return plait_parse(cmd, o, argc - 1, argv + 1, NULL);
}

/* pl_ckpt_resolve, with a save directory that has no checkpoint an error. */
static pl_status resolve(const char *path, int64_t step, char *dir, size_t n, int64_t *it)
{
    pl_status st = pl_ckpt_resolve(path, step, dir, n, it);
    if (!st && *it == -1)
        st = pl_errorf(PL_ERR_ARG, "%s: no latest_checkpointed_iteration.txt (name an "
                       "iter_NNNNNNN directory, or give --ckpt-step)", path);
    return st;
}

static int run_inspect(int argc, char **argv)
{
    ckpt_opts o;
    const char *path;
    int rc = parse(&inspect_cmd, &o, argc, argv, &path);
    if (rc >= 0)
        return rc;
    char dir[4096];
    int64_t it;
    cJSON *d = NULL;
    pl_status st = resolve(path, o.ckpt_step, dir, sizeof dir, &it);
    if (!st)
        st = pl_ckpt_describe(dir, it, !o.no_verify, &d);
    if (st)
        return plait_report(st);
    if (o.json) {
        char *text = cJSON_Print(d);
        if (text)
            printf("%s\n", text);
        cJSON_free(text);
    } else {
        print_text(d);
    }
    cJSON_Delete(d);
    return 0;
}

static int rewrite(const pl_command_spec *cmd, int argc, char **argv, int convert)
{
    ckpt_opts o;
    const char *path;
    int rc = parse(cmd, &o, argc, argv, &path);
    if (rc >= 0)
        return rc;
    if (convert && !o.weights_only)
        return plait_report(pl_errorf(PL_ERR_ARG, "plait ckpt convert writes Megatron's release "
                                      "checkpoint, weights only: add --weights-only (plait ckpt "
                                      "reshard keeps the optimizer state)"));
    if (o.bf16 && o.fp32)
        return plait_report(pl_errorf(PL_ERR_ARG, "--bf16 and --fp32 are exclusive"));
    if (!convert && (o.tp < 1 || o.pp < 1))
        return plait_report(pl_errorf(PL_ERR_ARG, "--tensor-model-parallel-size %lld and "
                                      "--pipeline-model-parallel-size %lld: expected sizes >= 1",
                                      (long long)o.tp, (long long)o.pp));
    char dir[4096];
    int64_t it;
    pl_status st = resolve(path, o.ckpt_step, dir, sizeof dir, &it);
    pl_ckpt_rewrite w = {convert ? 0 : (int)o.tp, convert ? 0 : (int)o.pp, o.weights_only, o.bf16,
                         convert, convert ? 0 : (int)o.pp_split};
    if (!st)
        st = pl_ckpt_rewrite_to(dir, it, o.out, &w);
    if (st)
        return plait_report(st);
    if (convert)
        printf("wrote %s/release\n", o.out);
    else
        printf("wrote %s/iter_%07lld\n", o.out, (long long)it);
    return 0;
}

static int run_reshard(int argc, char **argv) { return rewrite(&reshard_cmd, argc, argv, 0); }
static int run_convert(int argc, char **argv) { return rewrite(&convert_cmd, argc, argv, 1); }

static pl_status check_format(const ckpt_opts *o, int megatron_ok)
{
    if (strcmp(o->format, "hf") != 0 &&
        !(megatron_ok && (strcmp(o->format, "megatron") == 0 || strcmp(o->format, "nemo") == 0)))
        return pl_errorf(PL_ERR_ARG, "--format %s: expected hf (Hugging Face)%s", o->format,
                         megatron_ok ? ", megatron (Megatron-LM's or Megatron-DeepSpeed's torch "
                                       "checkpoints) or nemo (a .nemo archive)" : "");
    return PL_OK;
}

static int run_export(int argc, char **argv)
{
    ckpt_opts o;
    const char *path;
    int rc = parse(&export_cmd, &o, argc, argv, &path);
    if (rc >= 0)
        return rc;
    if (o.bf16 && o.fp32)
        return plait_report(pl_errorf(PL_ERR_ARG, "--bf16 and --fp32 are exclusive"));
    char dir[4096];
    int64_t it;
    pl_hf_export_opts e = {o.bf16, 0};
    const int megatron = strcmp(o.format, "megatron") == 0;
    pl_status st = PL_OK;
    if (!megatron && strcmp(o.format, "hf") != 0)
        st = pl_errorf(PL_ERR_ARG, "--format %s: expected hf (a Hugging Face directory) or megatron "
                       "(Megatron-LM's torch checkpoint)", o.format);
    if (!st && (o.tp < 0 || o.pp < 0))
        st = pl_errorf(PL_ERR_ARG, "--tensor-model-parallel-size %lld, "
                       "--pipeline-model-parallel-size %lld: expected sizes >= 1",
                       (long long)o.tp, (long long)o.pp);
    if (!st && !megatron && (o.tp || o.pp || o.release))
        st = pl_errorf(PL_ERR_ARG, "--tensor-model-parallel-size, --pipeline-model-parallel-size "
                       "and --release are --format megatron's");
    if (!st && !megatron)
        st = pl_hf_parse_size(o.max_shard_size, &e.max_shard_bytes);
    if (!st)
        st = resolve(path, o.ckpt_step, dir, sizeof dir, &it);
    if (!st && megatron) {
        pl_megatron_export_opts mo = {(int)o.tp, (int)o.pp, o.bf16, o.release};
        st = pl_megatron_export(dir, it, o.out, &mo);
    } else if (!st) {
        st = pl_hf_export(dir, it, o.out, &e);
    }
    if (st)
        return plait_report(st);
    printf("wrote %s\n", o.out);
    return 0;
}

static int run_import(int argc, char **argv)
{
    ckpt_opts o;
    const char *path;
    int rc = parse(&import_cmd, &o, argc, argv, &path);
    if (rc >= 0)
        return rc;
    if (o.tp < 0 || o.pp < 0 || o.divisible_by < 1 || o.vocab_size < 0)
        return plait_report(pl_errorf(PL_ERR_ARG, "--tensor-model-parallel-size %lld, "
                                      "--pipeline-model-parallel-size %lld, "
                                      "--make-vocab-size-divisible-by %lld, --vocab-size %lld: "
                                      "expected sizes >= 1", (long long)o.tp, (long long)o.pp,
                                      (long long)o.divisible_by, (long long)o.vocab_size));
    pl_status st = check_format(&o, 1);
    pl_megatron_import_opts mo = {(int)o.tp, (int)o.pp, o.vocab_size, o.no_zero_fp32};
    if (!st && strcmp(o.format, "megatron") == 0) {
        st = pl_megatron_import(path, o.out, &mo);
    } else if (!st && strcmp(o.format, "nemo") == 0) {
        st = pl_nemo_import(path, o.out, &mo);
    } else if (!st) {
        pl_hf_import_opts im = {o.tp ? (int)o.tp : 1, o.pp ? (int)o.pp : 1, o.divisible_by};
        st = pl_hf_import(path, o.out, &im);
    }
    if (st)
        return plait_report(st);
    printf("wrote %s/release\n", o.out);
    return 0;
}

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} ckpt_commands[] = {
    {"inspect", run_inspect, "describe a checkpoint (text or --json), verifying its checksums"},
    {"reshard", run_reshard, "write it in another TP x PP layout, offline"},
    {"convert", run_convert, "write a weights-only release checkpoint (fp32 or bf16)"},
    {"export", run_export, "write it as a Hugging Face directory or a Megatron-LM checkpoint "
                           "(--format hf|megatron)"},
    {"import", run_import, "write a Hugging Face directory, a Megatron-LM checkpoint or a .nemo "
                           "as a release checkpoint (--format hf|megatron|nemo)"},
};

static void usage(FILE *fp)
{
    fprintf(fp, "usage: plait ckpt COMMAND DIR [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof ckpt_commands / sizeof *ckpt_commands; i++)
        fprintf(fp, "  %-12s %s\n", ckpt_commands[i].name, ckpt_commands[i].summary);
}

int plait_cmd_ckpt(int argc, char **argv)
{
    if (argc < 1 || strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
        usage(argc < 1 ? stderr : stdout);
        return argc < 1 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof ckpt_commands / sizeof *ckpt_commands; i++)
        if (strcmp(argv[0], ckpt_commands[i].name) == 0)
            return ckpt_commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "plait: error: unknown command 'ckpt %s'\n", argv[0]);
    usage(stderr);
    return 2;
}
