/* train/args_yaml: a NeMo-style YAML config mapped onto plait train's flags:
 * nested keys, lists, OmegaConf interpolation (absolute, relative, multiply),
 * Hydra's --config-path/--config-name and key=value overrides, the command line
 * winning, notes for known-but-unused and unknown keys, errors naming the key. */
#include "base/alloc.h"
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

static const char *write_yaml(const char *name, const char *text)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir(), name);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

static const char nemo[] =
    "name: &name Tiny\n"
    "seed: 7\n"
    "trainer:\n"
    "  devices: 2\n"
    "  precision: bf16\n"
    "  max_steps: 50 # iterations\n"
    "  log_every_n_steps: 5\n"
    "  val_check_interval: 25\n"
    "  limit_val_batches: 3\n"
    "  gradient_clip_val: 0.5\n"
    "model:\n"
    "  name: *name\n"
    "  global_batch_size: 8\n"
    "  micro_batch_size: 2\n"
    "  tensor_model_parallel_size: 1\n"
    "  encoder_seq_length: 48\n"
    "  max_position_embeddings: ${.encoder_seq_length}\n"
    "  num_layers: 3\n"
    "  hidden_size: 64\n"
    "  ffn_hidden_size: ${multiply:${model.hidden_size}, 3}\n"
    "  num_attention_heads: 4\n"
    "  hidden_dropout: 0.0\n"
    "  kv_channels: null\n"
    "  bias: False\n"
    "  apply_residual_connection_post_layernorm: true\n"
    "  normalization: rmsnorm\n"
    "  activation: swiglu\n"
    "  made_up_key: 1\n"
    "  tokenizer:\n"
    "    library: megatron\n"
    "    type: GPT2BPETokenizer\n"
    "    vocab_file: v.json\n"
    "    merge_file: m.bpe\n"
    "  data:\n"
    "    data_prefix: [0.3, a_text_document, 0.7, b_text_document]\n"
    "    splits_string: '90,5,5'\n"
    "  optim:\n"
    "    name: fused_adam\n"
    "    lr: 2e-4\n"
    "    betas:\n"
    "      - 0.9\n"
    "      - 0.95\n"
    "    eps: 1e-6\n"
    "    weight_decay: 0.1\n"
    "    sched:\n"
    "      name: CosineAnnealing\n"
    "      warmup_steps: 5\n"
    "      min_lr: 2e-5\n"
    "      max_steps: ${trainer.max_steps}\n"
    "exp_manager:\n"
    "  exp_dir: /results/${name}\n";

TEST(nemo_keys_set_their_flags)
{
    const char *path = write_yaml("nemo.yaml", nemo);
    char line[1024];
    snprintf(line, sizeof line, "--config-file %s", path);
    pl_train_args a;
    pl_status st = parse(&a, line);
    CHECK(st == PL_OK, "%s", pl_error_msg());
    if (st)
        return;
    CHECK(a.seed == 7 && a.train_iters == 50 && a.log_interval == 5 && a.eval_interval == 25 &&
              a.eval_iters == 3 && a.clip_grad == 0.5 && a.bf16, "trainer block");
    CHECK(a.global_batch_size == 8 && a.micro_batch_size == 2 && a.seq_length == 48 &&
              a.max_position_embeddings == 48 && a.num_layers == 3 && a.hidden_size == 64 &&
              a.num_attention_heads == 4 && a.hidden_dropout == 0.0, "model sizes");
    CHECK(a.ffn_hidden_size == 192, "${multiply:${model.hidden_size}, 3} = %lld",
          (long long)a.ffn_hidden_size);
    CHECK(a.disable_bias_linear && a.swiglu && strcmp(a.normalization, "RMSNorm") == 0,
          "bias false, swiglu, rmsnorm");
    CHECK(a.res_post_norm, "apply_residual_connection_post_layernorm: true");
    CHECK(strcmp(a.tokenizer_type, "GPT2BPETokenizer") == 0 && strcmp(a.vocab_file, "v.json") == 0 &&
              strcmp(a.merge_file, "m.bpe") == 0, "tokenizer");
    CHECK(a.data_path.n == 4 && strcmp(a.data_path.items[1], "a_text_document") == 0 &&
              strcmp(a.data_path.items[2], "0.7") == 0 && strcmp(a.split, "90,5,5") == 0, "data");
    CHECK(a.lr == 2e-4 && a.adam_beta1 == 0.9 && a.adam_beta2 == 0.95 && a.adam_eps == 1e-6 &&
              a.weight_decay == 0.1 && strcmp(a.lr_decay_style, "cosine") == 0 &&
              a.lr_warmup_iters == 5 && a.min_lr == 2e-5 && a.lr_decay_iters == 50, "optimizer");
    const char *notes = a.notes ? a.notes : "";
    CHECK(strstr(notes, "trainer.devices: the world size comes from the launcher") &&
              strstr(notes, "model.kv_channels: plait uses") && strstr(notes, "exp_manager: not applied"),
          "notes for known keys: %s", notes);
    CHECK(strstr(notes, "model.made_up_key: unknown key, ignored") &&
              strstr(notes, "model.name: unknown key, ignored"), "unknown keys named: %s", notes);
    CHECK(!strstr(notes, "exp_manager.exp_dir"), "a noted block's children are not listed again");
    pl_train_args_free(&a);
}

TEST(command_line_and_overrides)
{
    const char *path = write_yaml("nemo.yaml", nemo);
    char line[1024];
    snprintf(line, sizeof line, "--num-layers 5 --config-file %s model.hidden_size=32 "
             "+trainer.max_steps=20 seed=3 --lr 1e-3", path);
    pl_train_args a;
    pl_status st = parse(&a, line);
    CHECK(st == PL_OK, "%s", pl_error_msg());
    if (st)
        return;
    CHECK(a.num_layers == 5 && a.lr == 1e-3, "the command line wins");
    CHECK(a.hidden_size == 32 && a.ffn_hidden_size == 96, "override, and interpolation sees it");
    CHECK(a.train_iters == 20 && a.lr_decay_iters == 20 && a.seed == 3, "overrides");
    CHECK(a.notes && strstr(a.notes, "model.num_layers: --num-layers given on the command line wins"),
          "said so: %s", a.notes ? a.notes : "");
    pl_train_args_free(&a);
    /* Hydra's --config-path/--config-name */
    snprintf(line, sizeof line, "--config-path %s --config-name nemo", test_tmpdir());
    st = parse(&a, line);
    CHECK(st == PL_OK && a.num_layers == 3, "config-name: %s", pl_error_msg());
    if (st == PL_OK)
        pl_train_args_free(&a);
    CHECK(parse(&a, "model.num_layers=3 --num-layers 2") == PL_ERR_ARG, "an override without YAML");
}

static void mkdirs(const char *sub)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/%s", test_tmpdir(), sub);
    CHECK(system(cmd) == 0, "%s", cmd);
}

TEST(hydra_defaults_lists_are_composed)
{
    /* MegaMolBART's conf/ layout: groups under the primary config's directory */
    mkdirs("conf/trainer");
    mkdirs("conf/model/optim/sched");
    write_yaml("conf/trainer/trainer_defaults.yaml",
               "max_steps: 100\nlog_every_n_steps: 10\ngradient_clip_val: 0.25\n");
    write_yaml("conf/model/small.yaml",
               "defaults:\n  - optim: adam\nnum_layers: 4\nhidden_size: 64\nseq_length: 40\n"
               "max_position_embeddings: ${.seq_length}\nnum_attention_heads: 4\n");
    write_yaml("conf/model/optim/adam.yaml", "name: fused_adam\nlr: 5e-4\nbetas: [0.9, 0.99]\n");
    write_yaml("conf/model/optim/sched/cosine.yaml", "name: CosineAnnealing\nwarmup_steps: 7\nmin_lr: 1e-5\n");
    const char *path = write_yaml("conf/pretrain.yaml",
        "defaults:\n"
        "  - trainer: trainer_defaults\n"
        "  - model: small\n"
        "  - model/optim/sched@model.optim.sched: cosine\n"
        "  - optional exp_manager: log_all\n"
        "  - _self_\n"
        "trainer:\n  max_steps: 30\n"
        "model:\n  hidden_size: 32\n  global_batch_size: 4\n  micro_batch_size: 2\n");
    char line[1024];
    snprintf(line, sizeof line, "--config-file %s --mock-data --vocab-size 100", path);
    pl_train_args a;
    pl_status st = parse(&a, line);
    CHECK(st == PL_OK, "%s", pl_error_msg());
    if (st)
        return;
    CHECK(a.train_iters == 30 && a.hidden_size == 32, "the primary's keys win (%lld, %lld)",
          (long long)a.train_iters, (long long)a.hidden_size);
    CHECK(a.log_interval == 10 && a.clip_grad == 0.25, "trainer/trainer_defaults.yaml under trainer");
    CHECK(a.num_layers == 4 && a.seq_length == 40 && a.max_position_embeddings == 40,
          "model/small.yaml under model, its relative interpolation");
    CHECK(a.lr == 5e-4 && a.adam_beta2 == 0.99, "a nested defaults list: model/optim/adam.yaml under model.optim");
    CHECK(strcmp(a.lr_decay_style, "cosine") == 0 && a.lr_warmup_iters == 7 && a.min_lr == 1e-5,
          "group@package: model/optim/sched/cosine.yaml under model.optim.sched");
    pl_train_args_free(&a);
    path = write_yaml("conf/missing.yaml", "defaults:\n  - model: huge\nmodel:\n  num_layers: 2\n");
    snprintf(line, sizeof line, "--config-file %s --mock-data", path);
    st = parse(&a, line);
    CHECK(st == PL_ERR_FORMAT && strstr(pl_error_msg(), "missing.yaml:2: defaults entry model: huge: no file"),
          "%s", pl_error_msg());
    if (st == PL_OK)
        pl_train_args_free(&a);
}

TEST(errors_name_the_file_and_key)
{
    static const struct {
        const char *yaml, *extra, *msg;
    } bad[] = {
        {"model:\n  num_layers: 2\n   bad: [\n", "", "bad.yaml:3:"},
        {"- a\n- b\n", "", "expected a mapping"},
        {"model:\n  optim:\n    sched:\n      name: NoamAnnealing\n", "",
         "model.optim.sched.name NoamAnnealing: plait has Megatron's schedules"},
        {"model:\n  activation: geglu\n", "", "model.activation geglu"},
        {"model:\n  hidden_size: ${now:%y}\n", "", "the resolver ${now} is not supported"},
        {"model:\n  hidden_size: ${model.nope}\n", "", "model.hidden_size: ${model.nope} names no value"},
        {"a: ${b}\nb: ${a}\nmodel:\n  hidden_size: ${a}\n", "", "deeper than 16"},
        {"model:\n  micro_batch_size: two\n", "", "model.micro_batch_size"},
        {"model:\n  sequence_parallel: maybe\n", "", "expected true or false"},
        {"trainer:\n  precision: 8\n", "", "trainer.precision 8"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *path = write_yaml("bad.yaml", bad[i].yaml);
        char line[1024];
        snprintf(line, sizeof line, "--num-layers 2 --hidden-size 64 --num-attention-heads 4 "
                 "--seq-length 32 --lr 1e-3 --train-iters 10 --mock-data --vocab-size 100 "
                 "--config-file %s %s", path, bad[i].extra);
        pl_train_args a;
        pl_status st = parse(&a, line);
        CHECK(st != PL_OK && strstr(pl_error_msg(), bad[i].msg) && strstr(pl_error_msg(), "bad.yaml"),
              "case %zu: %s '%s'", i, pl_status_str(st), pl_error_msg());
        if (st == PL_OK)
            pl_train_args_free(&a);
    }
    /* an unsupported scheduler is fine when the flag is given */
    const char *path = write_yaml("noam.yaml", "model:\n  optim:\n    sched:\n      name: NoamAnnealing\n");
    char line[1024];
    snprintf(line, sizeof line, "--num-layers 2 --hidden-size 64 --num-attention-heads 4 "
             "--seq-length 32 --lr 1e-3 --train-iters 10 --mock-data --vocab-size 100 "
             "--lr-decay-style constant --config-file %s", path);
    pl_train_args a;
    CHECK_OK(parse(&a, line));
    pl_train_args_free(&a);
}

TEST(allocation_faults_come_back_cleanly)
{
    const char *path = write_yaml("nemo.yaml", nemo);
    char line[1024];
    snprintf(line, sizeof line, "--config-file %s model.hidden_size=32", path);
    int64_t live = pl_alloc_live();
    int failed = 0;
    for (int64_t k = 0; k < 2000; k++) {
        pl_alloc_fail_after(k);
        pl_train_args a;
        pl_status st = parse(&a, line);
        pl_alloc_fail_after(-1);
        if (st == PL_OK) {
            pl_train_args_free(&a);
            break;
        }
        failed++;
        CHECK(st == PL_ERR_NOMEM, "fault %lld: %s %s", (long long)k, pl_status_str(st), pl_error_msg());
        if (st != PL_ERR_NOMEM)
            break;
    }
    CHECK(failed > 20, "only %d allocation points", failed);
    CHECK(pl_alloc_live() == live, "leaked %lld", (long long)(pl_alloc_live() - live));
}

int main(void)
{
    RUN(nemo_keys_set_their_flags);
    RUN(command_line_and_overrides);
    RUN(hydra_defaults_lists_are_composed);
    RUN(errors_name_the_file_and_key);
    RUN(allocation_faults_come_back_cleanly);
    return test_summary("train_yaml");
}
