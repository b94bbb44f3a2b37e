/* train/args: Megatron's defaults, --config presets (the command line wins),
 * and errors that name the flag. */
#include "base/fileio.h"
#include "test.h"
#include "train/args.h"

static pl_status parse(pl_train_args *a, const char *line)
{
    char buf[2048], *argv[128];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", line);
    for (char *tok = strtok(buf, " "); tok && argc < 128; tok = strtok(NULL, " "))
        argv[argc++] = tok;
    return pl_train_args_parse(a, argc, argv);
}

#define BASE "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 --lr 1e-3 " \
             "--train-iters 10 --mock-data --vocab-size 100"

TEST(defaults_are_megatrons)
{
    pl_train_args a;
    CHECK_OK(parse(&a, BASE));
    CHECK(a.ffn_hidden_size == 256 && a.max_position_embeddings == 32, "derived sizes");
    CHECK(a.make_vocab_size_divisible_by == 128 && a.seed == 1234 && a.weight_decay == 0.01 &&
              a.adam_beta2 == 0.999 && a.clip_grad == 1.0 && a.init_method_std == 0.02 &&
              strcmp(a.lr_decay_style, "linear") == 0 && a.eval_iters == 100 &&
              a.log_interval == 100 && strcmp(a.split, "969, 30, 1") == 0,
          "a Megatron default differs");
    pl_train_args_free(&a);
}

TEST(config_preset_fills_flags_and_the_command_line_wins)
{
    char path[512];
    snprintf(path, sizeof path, "%s/preset.json", test_tmpdir());
    FILE *f = fopen(path, "w");
    fputs("{\"num-layers\": 6, \"hidden_size\": 128, \"lr-decay-style\": \"cosine\", "
          "\"eod-mask-loss\": true, \"data-path\": [\"0.3\", \"a\", \"0.7\", \"b\"], "
          "\"tokenizer-type\": \"GPT2BPETokenizer\", \"lr\": 6e-4}",
          f);
    fclose(f);
    char line[1024];
    snprintf(line, sizeof line,
             "--config %s --num-layers 3 --num-attention-heads 4 --seq-length 32 --train-iters 5", path);
    pl_train_args a;
    CHECK_OK(parse(&a, line));
    CHECK(a.num_layers == 3, "command line must win: %lld", (long long)a.num_layers);
    CHECK(a.hidden_size == 128 && a.lr == 6e-4 && a.eod_mask_loss == 1, "preset values");
    CHECK(strcmp(a.lr_decay_style, "cosine") == 0, "preset choice");
    CHECK(a.data_path.n == 4 && strcmp(a.data_path.items[3], "b") == 0, "preset list");
    CHECK(pl_train_args_given(&a, "--hidden-size") && !pl_train_args_given(&a, "--min-lr"),
          "given marks");
    pl_train_args_free(&a);
    f = fopen(path, "w");
    fputs("{\"num-layerz\": 6}", f);
    fclose(f);
    snprintf(line, sizeof line, "--config %s " BASE, path);
    pl_status st = parse(&a, line);
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "unknown key \"num-layerz\""), "%s",
          pl_error_msg());
}

TEST(inconsistent_flags_are_errors_naming_them)
{
    struct {
        const char *extra, *needle;
    } cases[] = {
        {"--hidden-dropout 1.5", "--hidden-dropout 1.5 and --attention-dropout 0.1 must be in [0, 1)"},
        {"--num-query-groups 2", "--num-query-groups needs --group-query-attention"},
        {"--group-query-attention --num-query-groups 3", "--num-query-groups 3 must divide"},
        {"--use-rotary-position-embeddings --position-embedding-type learned_absolute",
         "--use-rotary-position-embeddings contradicts --position-embedding-type learned_absolute"},
        {"--rotary-percent 0", "0 < --rotary-percent <= 1"},
        {"--norm-epsilon 0", "--norm-epsilon must be positive"},
        {"--model bert", "--model must be one of"},
        {"--train-samples 100", "exactly one of --train-iters and --train-samples"},
        {"--min-lr 1", "--min-lr (1) <= --lr"},
        {"--lr-warmup-iters 2 --lr-warmup-fraction 0.1", "only one of --lr-warmup-fraction"},
        {"--lr-decay-samples 100", "with --train-iters, use --lr-decay-iters"},
        {"--pipeline-model-parallel-size 3",
         "--num-layers 2 is not divisible by --pipeline-model-parallel-size 3"},
        {"--pipeline-model-parallel-size 2 --pipeline_model_parallel_size 1",
         "--pipeline-model-parallel-size 2 conflicts with --pipeline_model_parallel_size 1"},
        {"--pipeline-model-parallel-size 0", "--pipeline-model-parallel-size must be at least 1"},
        {"--tensor-model-parallel-size 2 --model-parallel-size 4",
         "--tensor-model-parallel-size 2 conflicts with --model-parallel-size 4"},
        {"--tensor_model_parallel_size 0", "--tensor_model_parallel_size must be at least 1"},
        {"--save-interval 5", "--save-interval needs --save"},
        {"--max-position-embeddings 16", "--max-position-embeddings 16 is smaller than --seq-length 32"},
        {"--lr-decay-style cubic", "--lr-decay-style must be one of"},
        {"--adam-beta2 1.5", "--adam-beta2 < 1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char line[1024];
        snprintf(line, sizeof line, BASE " %s", cases[i].extra);
        pl_train_args a;
        pl_status st = parse(&a, line);
        CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), cases[i].needle), "case %zu: '%s'", i,
              pl_error_msg());
        if (st == PL_OK)
            pl_train_args_free(&a);
    }
    pl_train_args a;
    pl_status st = parse(&a, "--hidden-size 64 --num-attention-heads 5 --num-layers 1 --seq-length 8");
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "--hidden-size 64 is not divisible by "
                                                     "--num-attention-heads 5"),
          "%s", pl_error_msg());
}

TEST(recompute_flags_resolve_as_megatrons)
{
    pl_train_args a;
    CHECK_OK(parse(&a, BASE " --recompute-activations"));
    CHECK(a.recompute_granularity && strcmp(a.recompute_granularity, "selective") == 0 &&
              !a.recompute_method,
          "--recompute-activations is selective");
    pl_train_args_free(&a);
    CHECK_OK(parse(&a, BASE " --recompute-granularity full --recompute-method block "
                            "--recompute-num-layers 2"));
    CHECK(strcmp(a.recompute_granularity, "full") == 0 && strcmp(a.recompute_method, "block") == 0 &&
              a.recompute_num_layers == 2,
          "full block 2");
    pl_train_args_free(&a);
    CHECK_OK(parse(&a, BASE));
    CHECK(!a.recompute_granularity && !a.recompute_method, "no recompute by default");
    pl_train_args_free(&a);
    struct {
        const char *extra, *needle;
    } cases[] = {
        {"--recompute-granularity full --recompute-num-layers 1",
         "recompute_method must be \"block\" or \"uniform\""},
        {"--recompute-granularity full --recompute-method uniform --recompute-num-layers 3",
         "--recompute-num-layers (got 3): when using recompute_granularity: full "
         "recompute_num_layers must be between 1 and num_layers_per_pipeline_rank: 2"},
        {"--recompute-granularity selective --recompute-method block",
         "--recompute-method block: recompute method is not yet supported"},
        {"--recompute-activations --recompute-num-layers 1", "recompute_num_layers must be None"},
        {"--recompute-num-layers 1", "--recompute-num-layers 1 needs --recompute-granularity full"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char line[1024];
        snprintf(line, sizeof line, BASE " %s", cases[i].extra);
        pl_status st = parse(&a, line);
        CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), cases[i].needle), "case %zu: '%s'", i,
              pl_error_msg());
        if (st == PL_OK)
            pl_train_args_free(&a);
    }
}

int main(void)
{
    RUN(defaults_are_megatrons);
    RUN(config_preset_fills_flags_and_the_command_line_wins);
    RUN(inconsistent_flags_are_errors_naming_them);
    RUN(recompute_flags_resolve_as_megatrons);
    return test_summary("train_args");
}
