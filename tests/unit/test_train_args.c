/* train/args: Megatron's defaults, --config presets (the command line wins),
 * and errors that name the flag. */
#include "base/fileio.h"
#include "optim/schedule.h"
#include "test.h"
#include "train/args.h"

static pl_status parse(pl_train_args *a, const char *line)
{
    static char buf[2048]; /* the parsed strings point into argv: keep it alive */
    char *argv[128];
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
        {"--model gpt3", "--model must be one of"},
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
    /* an encoder-decoder: the layer count is checked against the larger stack (each
     * stack recomputes up to its own layers, pl_model_encdec_parts) */
#define T5 "--model t5 --data-path d --vocab-file v --encoder-num-layers 2 " \
           "--decoder-num-layers 3 --hidden-size 64 --num-attention-heads 4 --seq-length 32 " \
           "--decoder-seq-length 16 --lr 1e-3 --train-iters 10 --recompute-granularity full " \
           "--recompute-method block --recompute-num-layers "
    CHECK_OK(parse(&a, T5 "3"));
    CHECK(a.recompute_num_layers == 3 && a.decoder_num_layers == 3, "t5: block 3 of 2 + 3 layers");
    pl_train_args_free(&a);
    pl_status st = parse(&a, T5 "4");
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "--recompute-num-layers (got 4): when using "
                                     "recompute_granularity: full recompute_num_layers must be "
                                     "between 1 and num_layers_per_pipeline_rank: 3"),
          "t5: 4 of 2 + 3 layers refused: '%s'", pl_error_msg());
    if (st == PL_OK)
        pl_train_args_free(&a);
#undef T5
}

/* Counts the notes (lines) that contain needle. */
static int notes_with(const pl_train_args *a, const char *needle)
{
    int n = 0;
    for (const char *p = a->notes; p && (p = strstr(p, needle)); p++)
        n++;
    return n;
}

TEST(parsing_is_argparses_repeat_last_wins_no_abbreviations_did_you_mean)
{
    pl_train_args a;
    CHECK_OK(parse(&a, BASE " --lr 5e-4 --seed 7 --lr 2e-4 --checkpoint-activations "
                            "--checkpoint-activations"));
    CHECK(a.lr == 2e-4 && a.seed == 7, "last --lr wins: %g", a.lr);
    pl_train_args_free(&a);
    pl_status st = parse(&a, BASE " --num-layer 3");
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "unknown flag '--num-layer' (did you mean "
                                                     "--num-layers?)"),
          "pretrain_gpt.py takes no abbreviations: %s", pl_error_msg());
    st = parse(&a, BASE " --hiden-size 64");
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "did you mean --hidden-size?"), "%s",
          pl_error_msg());
    st = parse(&a, BASE " --qqqqqqqqqqqq 1");
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "see plait train --help"), "%s",
          pl_error_msg());
}

TEST(legacy_flags_map_onto_megatrons_current_ones)
{
    pl_train_args a;
    CHECK_OK(parse(&a, BASE " --batch-size 3 --warmup 0.01 --checkpoint-activations "
                            "--checkpoint-num-layers 2 --min-scale 4 --fp16 --pipe-parallel-size 0 "
                            "--data-impl mmap --deepspeed --zero-stage 1"));
    CHECK(a.micro_batch_size == 3 && pl_train_args_given(&a, "--micro-batch-size"),
          "--batch-size is the micro-batch");
    CHECK(a.lr_warmup_fraction == 0.01 && pl_train_args_given(&a, "--lr-warmup-fraction"),
          "--warmup is the fraction of the decay");
    CHECK(a.recompute_granularity && strcmp(a.recompute_granularity, "full") == 0 &&
              a.recompute_method && strcmp(a.recompute_method, "uniform") == 0 &&
              a.recompute_num_layers == 2,
          "--checkpoint-activations is full uniform recompute");
    CHECK(a.min_loss_scale == 4 && a.pipeline_model_parallel_size == 1 && a.zero_stage == 1,
          "--min-scale, --pipe-parallel-size 0, --zero-stage");
    CHECK(a.notes == NULL, "flags with a meaning add no note: %s", a.notes ? a.notes : "");
    pl_train_args_free(&a);
    CHECK_OK(parse(&a, BASE " --checkpoint-activations"));
    CHECK(a.recompute_num_layers == 1, "--checkpoint-num-layers defaults to 1 (Megatron v1)");
    pl_train_args_free(&a);
    CHECK_OK(parse(&a, BASE " --num-key-value-heads 2"));
    CHECK(a.group_query_attention && a.num_query_groups == 2,
          "Megatron-DeepSpeed's --num-key-value-heads is GQA with that many groups");
    pl_train_args_free(&a);
    /* a GPU or launcher matter: accepted with exactly one note each */
    CHECK_OK(parse(&a, BASE " --distributed-backend nccl --DDP-impl local --use-flash-attn "
                            "--partition-activations --checkpoint-in-cpu --contigious-checkpointing "
                            "--synchronize-each-layer --profile-backward --zero-reduce-scatter "
                            "--zero-contigious-gradients --zero-reduce-bucket-size 50000000 "
                            "--zero-allgather-bucket-size 5000000000 --tensorboard-dir tb "
                            "--local_rank 0 --deepspeed-activation-checkpointing "
                            "--no-pipeline-parallel --log-batch-size-to-tensorboard "
                            "--wandb-project p --wandb-exp-name e"));
    static const char *const flags[] = {
        "--distributed-backend nccl", "--DDP-impl local", "--use-flash-attn:",
        "--partition-activations", "--checkpoint-in-cpu", "--contigious-checkpointing",
        "--synchronize-each-layer", "--profile-backward", "--zero-reduce-scatter",
        "--zero-contigious-gradients", "--zero-reduce-bucket-size 50000000",
        "--zero-allgather-bucket-size 5000000000", "--local_rank 0",
        "--deepspeed-activation-checkpointing", "--no-pipeline-parallel",
        "--log-batch-size-to-tensorboard", "--wandb-*"};
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++)
        CHECK(notes_with(&a, flags[i]) == 1, "one note for %s in:\n%s", flags[i],
              a.notes ? a.notes : "");
    CHECK(notes_with(&a, "--tensorboard-dir") == 0, "--tensorboard-dir writes files: no note in:\n%s",
          a.notes ? a.notes : "");
    CHECK(!a.recompute_granularity, "--deepspeed-activation-checkpointing alone recomputes nothing");
    pl_train_args_free(&a);
    struct {
        const char *extra, *needle;
    } cases[] = {
        {"--batch-size 2 --micro-batch-size 3",
         "--batch-size means --micro-batch-size 2, which conflicts with the --micro-batch-size given"},
        {"--warmup 0.1 --lr-warmup-fraction 0.2", "--warmup means --lr-warmup-fraction 0.1"},
        {"--data-impl lazy", "--data-impl lazy: plait reads only the mmap format"},
        {"--data-impl sparse", "--data-impl must be one of {lazy|cached|mmap|infer}"},
        {"--checkpoint-num-layers 2", "--checkpoint-num-layers 2 needs --checkpoint-activations"},
        {"--checkpoint-activations --recompute-activations", "conflicts with --recompute-activations"},
        {"--checkpoint-activations --checkpoint-num-layers 3",
         "recompute_num_layers must be between 1 and num_layers_per_pipeline_rank: 2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char line[1024];
        snprintf(line, sizeof line, BASE " %s", cases[i].extra);
        pl_status st = parse(&a, line);
        CHECK(st != PL_OK && strstr(pl_error_msg(), cases[i].needle), "case %zu: '%s'", i,
              pl_error_msg());
        if (st == PL_OK)
            pl_train_args_free(&a);
    }
}

TEST(a4s_strategy_threed_is_zero1_with_its_tp_and_pp_flags)
{
    pl_train_args a;
    CHECK_OK(parse(&a, "--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 32 "
                       "--lr 1e-3 --train-iters 10 --mock-data --vocab-size 100 --strategy ThreeD "
                       "--pipeline_model_parallel_size 2 --tensor_model_parallel_size 2"));
    CHECK(a.zero_stage == 1 && a.tensor_model_parallel_size == 2 &&
              a.pipeline_model_parallel_size == 2,
          "ThreeD: stage %lld tp %lld pp %lld", (long long)a.zero_stage,
          (long long)a.tensor_model_parallel_size, (long long)a.pipeline_model_parallel_size);
    pl_train_args_free(&a);
    CHECK_OK(parse(&a, BASE " --strategy Zero0"));
    CHECK(a.zero_stage == 0, "Zero0");
    pl_train_args_free(&a);
}

TEST(tokenizer_type_defaults_to_gpt2bpe_as_pretrain_gpt)
{
    pl_train_args a;
    CHECK_OK(parse(&a, "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 "
                       "--lr 1e-3 --train-iters 10 --data-path x"));
    CHECK(a.tokenizer_type && strcmp(a.tokenizer_type, "GPT2BPETokenizer") == 0, "default %s",
          a.tokenizer_type ? a.tokenizer_type : "(none)");
    pl_train_args_free(&a);
}

/* Writes text to TMP/name and parses BASE plus extra with --deepspeed_config it. */
static pl_status parse_ds(pl_train_args *a, const char *text, const char *extra)
{
    char path[512];
    static char line[2048]; /* --deepspeed_config's path must outlive the parse */
    snprintf(path, sizeof path, "%s/ds.json", test_tmpdir());
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    snprintf(line, sizeof line, BASE " --deepspeed_config %s %s", path, extra);
    return parse(a, line);
}

TEST(deepspeed_config_values_read_as_deepspeed_reads_them)
{
    pl_train_args a;
    /* Python truth: 1 and "true" are on, and so is the string "false" */
    static const char *const on[] = {"1", "\"true\"", "\"false\"", "[0]"};
    for (size_t i = 0; i < sizeof on / sizeof *on; i++) {
        char json[128];
        snprintf(json, sizeof json, "{\"bf16\": {\"enabled\": %s}}", on[i]);
        CHECK_OK(parse_ds(&a, json, ""));
        CHECK(a.bf16 == 1, "bf16.enabled %s is on in DeepSpeed", on[i]);
        CHECK(notes_with(&a, "bf16.enabled is") == 1, "one note for %s", on[i]);
        pl_train_args_free(&a);
    }
    static const char *const off[] = {"0", "\"\"", "null", "false"};
    for (size_t i = 0; i < sizeof off / sizeof *off; i++) {
        char json[128];
        snprintf(json, sizeof json, "{\"fp16\": {\"enabled\": %s}}", off[i]);
        CHECK_OK(parse_ds(&a, json, ""));
        CHECK(a.fp16 == 0, "fp16.enabled %s is off in DeepSpeed", off[i]);
        pl_train_args_free(&a);
    }
    CHECK_OK(parse_ds(&a, "{\"zero_optimization\": {\"stage\": \"2\", \"reduce_bucket_size\": "
                          "\"auto\", \"overlap_comm\": true, \"offload_optimizer\": {\"device\": "
                          "\"cpu\"}}, \"activation_checkpointing\": {\"partition_activations\": "
                          "true}, \"steps_per_print\": 7, \"wall_clock_breakdown\": true}",
                      ""));
    CHECK(a.zero_stage == 2, "stage \"2\" (pydantic reads integer strings): %lld",
          (long long)a.zero_stage);
    CHECK(a.log_interval == 7, "steps_per_print is the log interval");
    CHECK(notes_with(&a, "zero_optimization.offload_optimizer: not done") == 1 &&
              notes_with(&a, "zero_optimization.overlap_comm:") == 1 &&
              notes_with(&a, "activation_checkpointing:") == 1 &&
              notes_with(&a, "wall_clock_breakdown:") == 1,
          "every key not applied is named once:\n%s", a.notes ? a.notes : "");
    pl_train_args_free(&a);
    CHECK_OK(parse_ds(&a, "{\"zero_optimization\": {\"stage\": 0, \"reduce_bucket_size\": 5e7}, "
                          "\"steps_per_print\": 7}",
                      "--log-interval 3"));
    CHECK(a.ddp_bucket_size == 50000000, "reduce_bucket_size is the DP bucket at stage 0");
    CHECK(a.log_interval == 3 && notes_with(&a, "steps_per_print 7: --log-interval 3 applies") == 1,
          "--log-interval wins over steps_per_print with a note");
    pl_train_args_free(&a);
    /* duplicate keys: the last wins, as Megatron-DeepSpeed's json.load, with a note */
    CHECK_OK(parse_ds(&a, "{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"weight_decay\": 0.1, "
                          "\"eps\": 1e-6, \"weight_decay\": 0.5}}, \"bf16\": {\"enabled\": true}, "
                          "\"bf16\": {\"enabled\": false}}",
                      ""));
    CHECK(a.weight_decay == 0.5 && a.adam_eps == 1e-6 && a.bf16 == 0,
          "last duplicate wins: weight decay %g bf16 %d", a.weight_decay, a.bf16);
    CHECK(notes_with(&a, "optimizer.params.weight_decay: given more than once; the last value wins") == 1 &&
              notes_with(&a, "bf16: given more than once") == 1,
          "a note per duplicate:\n%s", a.notes ? a.notes : "");
    pl_train_args_free(&a);
    /* with --deepspeed, the engine reads the JSON: its stage wins over --zero-stage */
    CHECK_OK(parse_ds(&a, "{\"zero_optimization\": {\"stage\": 2}}", "--deepspeed --zero-stage 0"));
    CHECK(a.zero_stage == 2 && notes_with(&a, "zero_optimization.stage 2 overrides --zero-stage 0"),
          "JSON wins under --deepspeed");
    pl_train_args_free(&a);
    CHECK_OK(parse_ds(&a, "{\"train_batch_size\": 8}", "--deepspeed --zero-stage 1"));
    CHECK(a.zero_stage == 0 && notes_with(&a, "(absent: DeepSpeed's default) 0 overrides "
                                              "--zero-stage 1"),
          "no zero_optimization block: the engine runs stage 0, said in a note");
    pl_train_args_free(&a);
    CHECK_OK(parse_ds(&a, "{\"train_batch_size\": 8}", "--zero-stage 1"));
    CHECK(a.zero_stage == 1, "without --deepspeed the flag stands");
    pl_train_args_free(&a);
    struct {
        const char *json, *needle;
    } cases[] = {
        {"{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": \"0.5\"}}}",
         "optimizer.params.lr must be a JSON number, got a string"},
        {"{\"train_batch_size\": 1e300}", "train_batch_size must be a positive integer"},
        {"{\"train_batch_size\": 0}", "train_batch_size must be a positive integer"},
        {"{\"train_batch_size\": 2.5}", "train_batch_size must be a positive integer"},
        {"{\"train_micro_batch_size_per_gpu\": \"4\"}", "must be a JSON number, got a string"},
        {"{\"zero_optimization\": {\"stage\": 1, \"bucket\": 5}}",
         "zero_optimization.bucket is not a DeepSpeed key"},
        {"{\"zero_optimization\": {\"stage\": \"two\"}}", "zero_optimization.stage \"two\" is not an integer"},
        {"{\"gradient_clipping\": -1}", "gradient_clipping must be >= 0"},
        {"{\"fp16\": {\"enabled\": true, \"loss_scale_window\": \"1000\"}}",
         "fp16.loss_scale_window must be a JSON number"},
        {"{\"elasticity\": {\"enabled\": true}}", "elasticity.enabled is not supported"},
        {"{\"optimizer\": {\"type\": \"OneBitLamb\"}}", "optimizer type \"OneBitLamb\" is not supported"},
        {"{\"optimizer\": {\"type\": \"Lamb\", \"params\": {\"max_coeff\": -1}}}",
         "optimizer.params.max_coeff must be a positive number"},
        {"{\"optimizer\": {\"type\": \"Lamb\", \"params\": {\"amsgrad\": true}}}",
         "optimizer.params.amsgrad true is refused"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        pl_status st = parse_ds(&a, cases[i].json, "");
        CHECK(st != PL_OK && strstr(pl_error_msg(), cases[i].needle), "case %zu: '%s'", i,
              pl_error_msg());
        if (st == PL_OK)
            pl_train_args_free(&a);
    }
    /* Lamb: FusedLamb's defaults, and its params read (any case, as engine.py) */
    CHECK_OK(parse_ds(&a, "{\"optimizer\": {\"type\": \"lamb\"}}", ""));
    CHECK(a.lamb.on && a.lamb.bias_correction && !a.lamb.eps_inside_sqrt &&
              a.lamb.max_coeff == 10.0 && a.lamb.min_coeff == 0.01,
          "Lamb's defaults: bias correction, eps outside sqrt, coefficient in [0.01, 10]");
    pl_train_args_free(&a);
    CHECK_OK(parse_ds(&a, "{\"optimizer\": {\"type\": \"Lamb\", \"params\": {\"lr\": 1e-3, "
                          "\"betas\": [0.8, 0.99], \"max_coeff\": 0.3, \"min_coeff\": 0.02, "
                          "\"eps_inside_sqrt\": true, \"bias_correction\": false}}}", ""));
    CHECK(a.lamb.on && !a.lamb.bias_correction && a.lamb.eps_inside_sqrt &&
              a.lamb.max_coeff == 0.3 && a.lamb.min_coeff == 0.02 && a.lr == 1e-3 &&
              a.adam_beta1 == 0.8 && a.adam_beta2 == 0.99,
          "Lamb's params: lr, betas, coefficient bounds, eps placement, bias correction");
    pl_train_args_free(&a);
    /* schedulers as DeepSpeed defines them: defaults, max(2, warmup), the peak */
    CHECK_OK(parse_ds(&a, "{\"scheduler\": {\"type\": \"WarmupLR\"}}", ""));
    CHECK(a.ds_sched.style == PL_LR_DS_WARMUP_LOG && a.ds_sched.warmup == 1000 &&
              a.ds_sched.init_lr == 0 && a.ds_sched.max_lr == 0.001,
          "WarmupLR's defaults: log warmup over 1000 steps from 0 to 0.001");
    pl_train_args_free(&a);
    CHECK_OK(parse_ds(&a, "{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 1e-3}}, "
                          "\"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {"
                          "\"warmup_num_steps\": 1, \"warmup_type\": \"linear\", "
                          "\"warmup_max_lr\": 1e-3, \"total_num_steps\": 50, \"foo\": 1}}}",
                      ""));
    CHECK(a.ds_sched.style == PL_LR_DS_WARMUP_DECAY_LINEAR && a.ds_sched.warmup == 2 &&
              a.ds_sched.total == 50,
          "WarmupDecayLR linear, warmup max(2, 1)");
    CHECK(notes_with(&a, "scheduler.params.foo: not a parameter of DeepSpeed's WarmupDecayLR") == 1,
          "unknown scheduler params are named");
    pl_train_args_free(&a);
    CHECK_OK(parse_ds(&a, "{\"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": "
                          "1e-4, \"cycle_max_lr\": 1e-3, \"cycle_first_step_size\": 4}}}",
                      "--adam-beta1 0.95"));
    CHECK(a.ds_sched.style == PL_LR_DS_ONECYCLE && a.ds_sched.warmup == 4 && a.ds_sched.total == 8 &&
              a.ds_sched.cycle_momentum == 1 && a.ds_sched.min_mom == 0.8 &&
              a.ds_sched.max_mom == 0.9,
          "OneCycle's defaults: second half = first, momentum cycling 0.8..0.9");
    CHECK(notes_with(&a, "--adam-beta1: OneCycle's cycle_momentum sets Adam's betas") == 1,
          "a beta flag overridden by the cycle is named");
    pl_train_args_free(&a);
    /* LRRangeTest: the constructor's defaults; min_lr is the optimizer's lr (--lr 1e-3 agrees) */
    CHECK_OK(parse_ds(&a, "{\"scheduler\": {\"type\": \"LRRangeTest\"}}", ""));
    CHECK(a.ds_sched.style == PL_LR_DS_LR_RANGE_TEST && a.ds_sched.min_lr == 1e-3 &&
              a.ds_sched.warmup == 2000 && a.ds_sched.step_rate == 1.0 && a.ds_sched.staircase == 0,
          "LRRangeTest's defaults: min_lr 1e-3, step_size 2000, step_rate 1, continuous");
    pl_train_args_free(&a);
    CHECK_OK(parse_ds(&a, "{\"scheduler\": {\"type\": \"LRRangeTest\", \"params\": {"
                          "\"lr_range_test_min_lr\": 1e-3, \"lr_range_test_step_size\": 5, "
                          "\"lr_range_test_step_rate\": 0.25, \"lr_range_test_staircase\": "
                          "\"false\", \"cycle_min_lr\": 1}}}", ""));
    CHECK(a.ds_sched.warmup == 5 && a.ds_sched.step_rate == 0.25 && a.ds_sched.staircase == 1 &&
              a.lr == 1e-3,
          "step size, rate, Python's truth of \"false\", lr = min_lr");
    CHECK(notes_with(&a, "scheduler.params.cycle_min_lr: not a parameter of DeepSpeed's "
                         "LRRangeTest") == 1, "a OneCycle param under LRRangeTest is named");
    pl_train_args_free(&a);
    struct {
        const char *json, *extra, *needle;
    } sch[] = {
        {"{\"scheduler\": {\"type\": \"StepLR\"}}", "", "scheduler type \"StepLR\" is not implemented"},
        {"{\"scheduler\": {\"type\": \"LRRangeTest\", \"params\": {\"lr_range_test_min_lr\": "
         "[1e-3, 1e-3]}}}", "", "lr_range_test_min_lr as a list (one rate per param group) is not supported"},
        {"{\"scheduler\": {\"type\": \"LRRangeTest\", \"params\": {\"lr_range_test_step_size\": "
         "0}}}", "", "scheduler.params.lr_range_test_step_size must be a whole number >= 1, got 0"},
        {"{\"scheduler\": {\"type\": \"LRRangeTest\", \"params\": {\"lr_range_test_min_lr\": 0}}}",
         "", "LRRangeTest needs lr_range_test_min_lr > 0 (got 0)"},
        {"{\"scheduler\": {\"type\": \"LRRangeTest\", \"params\": {\"lr_range_test_min_lr\": "
         "0.5}}}", "", "--lr 0.001 (command line or --config) conflicts with "
         "scheduler.params.lr_range_test_min_lr 0.5"},
        {"{\"scheduler\": {\"type\": \"LRRangeTest\", \"params\": {\"lr_range_test_step_rate\": "
         "\"0.25\"}}}", "", "scheduler.params.lr_range_test_step_rate must be a JSON number, got a string"},
        {"{\"scheduler\": {\"type\": \"LRRangeTest\"}}", "--lr-decay-style cosine",
         "--lr-decay-style (command line, --config or a legacy flag such as --warmup) conflicts "
         "with the scheduler LRRangeTest"},
        {"{\"scheduler\": {\"type\": \"OneCycle\"}}", "", "OneCycle needs scheduler.params.cycle_min_lr and cycle_max_lr"},
        {"{\"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": 1e-4, "
         "\"cycle_max_lr\": 1e-3, \"cycle_max_mom\": 1.5}}}", "", "must be in [0, 1)"},
        {"{\"scheduler\": {\"type\": \"WarmupCosineLR\"}}", "", "WarmupCosineLR needs scheduler.params.total_num_steps"},
        {"{\"scheduler\": {\"type\": \"WarmupCosineLR\", \"params\": {\"total_num_steps\": 5, "
         "\"warmup_num_steps\": 5}}}", "", "needs total_num_steps (5) > warmup_num_steps (5)"},
        {"{\"scheduler\": {\"type\": \"WarmupLR\"}}", "--warmup 0.1",
         "--lr-warmup-fraction (command line, --config or a legacy flag such as --warmup) conflicts "
         "with the scheduler WarmupLR"},
        {"{\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_max_lr\": 0.5}}}", "",
         "--lr 0.001 (command line or --config) conflicts with scheduler.params.warmup_max_lr 0.5"},
    };
    for (size_t i = 0; i < sizeof sch / sizeof *sch; i++) {
        pl_status st = parse_ds(&a, sch[i].json, sch[i].extra);
        CHECK(st != PL_OK && strstr(pl_error_msg(), sch[i].needle), "scheduler case %zu: '%s'", i,
              pl_error_msg());
        if (st == PL_OK)
            pl_train_args_free(&a);
    }
    /* DeepSpeed's batch assertion at the DP size, and 1e300-sized products refused */
    CHECK_OK(parse_ds(&a, "{\"train_batch_size\": 12, \"gradient_accumulation_steps\": 3}", ""));
    int64_t mbs = 0, gbs = 0;
    CHECK_OK(pl_train_args_batch(&a, 2, &mbs, &gbs));
    CHECK(mbs == 2 && gbs == 12, "micro derived as DeepSpeed: %lld %lld", (long long)mbs,
          (long long)gbs);
    pl_status st = pl_train_args_batch(&a, 5, &mbs, &gbs);
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "train_batch_size 12 is not divisible by "
                                                     "gradient_accumulation_steps 3 * data-parallel size 5"),
          "%s", pl_error_msg());
    pl_train_args_free(&a);
    CHECK_OK(parse(&a, BASE " --batch-size 2 --gas 4"));
    CHECK_OK(pl_train_args_batch(&a, 3, &mbs, &gbs));
    CHECK(mbs == 2 && gbs == 24, "--gas: global = batch x dp x gas: %lld", (long long)gbs);
    pl_train_args_free(&a);
}

int main(void)
{
    RUN(defaults_are_megatrons);
    RUN(config_preset_fills_flags_and_the_command_line_wins);
    RUN(inconsistent_flags_are_errors_naming_them);
    RUN(recompute_flags_resolve_as_megatrons);
    RUN(parsing_is_argparses_repeat_last_wins_no_abbreviations_did_you_mean);
    RUN(legacy_flags_map_onto_megatrons_current_ones);
    RUN(a4s_strategy_threed_is_zero1_with_its_tp_and_pp_flags);
    RUN(tokenizer_type_defaults_to_gpt2bpe_as_pretrain_gpt);
    RUN(deepspeed_config_values_read_as_deepspeed_reads_them);
    return test_summary("train_args");
}
