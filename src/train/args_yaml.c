/* train/args_yaml: a NeMo-style YAML config (NeMo Megatron, MegaMolBART's conf/ YAML files)
 * read through libyaml and mapped onto plait train's flags.
 *
 * `--config-file X.yaml`, or Hydra's `--config-path DIR --config-name NAME`
 * (DIR/NAME.yaml), plus Hydra overrides `model.num_layers=4` on the command line.
 * The document is flattened to dotted keys (trainer.max_steps, model.optim.lr; a
 * list's items as key.0, key.1), aliases resolved by libyaml, and OmegaConf's
 * interpolations resolved where a mapped key uses them: ${model.hidden_size},
 * relative ${.seq_length} / ${..x}, and NeMo's ${multiply:a, b}. Each key of the
 * table below sets its flag unless the flag was given on the command line (the
 * command line wins, as with --config JSON); a key the table knows but plait has no
 * use for gets a note saying why; any other key is named in a note as ignored.
 * A value plait cannot honour (a scheduler it does not have, an activation other
 * than gelu/swiglu) is an error naming the key, unless its flag was given.
 * Hydra's `defaults:` list is composed: each `group[@package]: name` entry reads
 * DIR/group/name.yaml (DIR: the primary config's directory) under its package
 * before the file's own keys, which win (as Hydra's _self_ last).
 * Not done: resolvers other than multiply, YAML merge keys (<<), `_self_` placed
 * before the other defaults (its keys always win here). */
#include "train/args.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/vec.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

typedef struct yaml_entry {
    char *key;       /* dotted path */
    char *value;     /* scalar text; NULL for a mapping or list */
    int plain;       /* an unquoted scalar (null/bool are recognised only then) */
    int list;        /* a list: its scalar items follow as key.0, key.1, ... */
    int used;
} yaml_entry;

/* Owned by pl_train_args.yaml: the entries and every string handed to the flags. */
typedef struct pl_train_yaml {
    pl_train_args *a; /* for the notes */
    char *path;
    yaml_entry *e;
    int n, cap;
    char **strings;
    int n_strings;
} pl_train_yaml;

enum kind {
    K_VALUE,   /* the scalar is the flag's value */
    K_SWITCH,  /* true sets the switch */
    K_UNSET,   /* false sets the switch (model.bias: false -> --disable-bias-linear) */
    K_BOOL,    /* true or false as the flag's value "true" / "false" */
    K_LIST,    /* a list (or one scalar) as a list flag's values */
    K_SPECIAL, /* handled by a function below */
    K_NOTE,    /* known, not applied: the note says why */
};

static const struct yaml_map {
    const char *key, *flag;
    enum kind kind;
    const char *note; /* K_NOTE */
} map[] = {
    {"seed", "--seed", K_VALUE, NULL},
    {"random_seed", "--seed", K_VALUE, NULL},
    {"trainer.max_steps", "--train-iters", K_VALUE, NULL},
    {"trainer.log_every_n_steps", "--log-interval", K_VALUE, NULL},
    {"trainer.val_check_interval", "--eval-interval", K_VALUE, NULL},
    {"trainer.limit_val_batches", "--eval-iters", K_VALUE, NULL},
    {"trainer.gradient_clip_val", "--clip-grad", K_VALUE, NULL},
    {"trainer.precision", NULL, K_SPECIAL, NULL},
    {"model.global_batch_size", "--global-batch-size", K_VALUE, NULL},
    {"model.micro_batch_size", "--micro-batch-size", K_VALUE, NULL},
    {"model.tensor_model_parallel_size", "--tensor-model-parallel-size", K_VALUE, NULL},
    {"model.pipeline_model_parallel_size", "--pipeline-model-parallel-size", K_VALUE, NULL},
    {"model.virtual_pipeline_model_parallel_size", "--virtual-pipeline-model-parallel-size",
     K_VALUE, NULL},
    {"model.sequence_parallel", "--sequence-parallel", K_SWITCH, NULL},
    {"model.make_vocab_size_divisible_by", "--make-vocab-size-divisible-by", K_VALUE, NULL},
    {"model.seq_length", "--seq-length", K_VALUE, NULL},
    {"model.encoder_seq_length", "--seq-length", K_VALUE, NULL},
    {"model.max_position_embeddings", "--max-position-embeddings", K_VALUE, NULL},
    {"model.num_layers", "--num-layers", K_VALUE, NULL},
    {"model.hidden_size", "--hidden-size", K_VALUE, NULL},
    {"model.ffn_hidden_size", "--ffn-hidden-size", K_VALUE, NULL},
    {"model.num_attention_heads", "--num-attention-heads", K_VALUE, NULL},
    {"model.init_method_std", "--init-method-std", K_VALUE, NULL},
    {"model.hidden_dropout", "--hidden-dropout", K_VALUE, NULL},
    {"model.attention_dropout", "--attention-dropout", K_VALUE, NULL},
    {"model.layernorm_epsilon", "--layernorm-epsilon", K_VALUE, NULL},
    {"model.apply_query_key_layer_scaling", "--apply-query-key-layer-scaling", K_SWITCH, NULL},
    {"model.position_embedding_type", "--position-embedding-type", K_VALUE, NULL},
    {"model.bias", "--disable-bias-linear", K_UNSET, NULL},
    {"model.apply_residual_connection_post_layernorm",
     "--apply-residual-connection-post-layernorm", K_SWITCH, NULL},
    {"model.transformer_block_type", "--transformer-block-type", K_VALUE, NULL},
    {"model.share_embeddings_and_output_weights", "--untie-embeddings-and-output-weights",
     K_UNSET, NULL},
    {"model.normalization", NULL, K_SPECIAL, NULL},
    {"model.activation", NULL, K_SPECIAL, NULL},
    {"model.tokenizer.library", NULL, K_SPECIAL, NULL},
    {"model.tokenizer.type", NULL, K_SPECIAL, NULL},
    {"model.tokenizer.vocab_file", "--vocab-file", K_VALUE, NULL},
    {"model.tokenizer.merge_file", "--merge-file", K_VALUE, NULL},
    {"model.tokenizer.model", NULL, K_SPECIAL, NULL},
    {"model.data.data_prefix", "--data-path", K_LIST, NULL},
    {"model.data.splits_string", "--split", K_VALUE, NULL},
    /* MegaMolBART's objective (train/mmb_args.c) */
    {"model.data.encoder_augment", "--encoder-augment", K_BOOL, NULL},
    {"model.data.encoder_mask", "--encoder-mask", K_BOOL, NULL},
    {"model.data.decoder_augment", "--decoder-augment", K_BOOL, NULL},
    {"model.data.decoder_mask", "--decoder-mask", K_BOOL, NULL},
    {"model.data.canonicalize_input", "--canonicalize-input", K_BOOL, NULL},
    {"model.data.mask_prob", "--mask-prob", K_VALUE, NULL},
    {"model.data.span_lambda", "--span-lambda", K_VALUE, NULL},
    {"model.optim.name", NULL, K_SPECIAL, NULL},
    {"model.optim.lr", "--lr", K_VALUE, NULL},
    {"model.optim.weight_decay", "--weight-decay", K_VALUE, NULL},
    {"model.optim.betas.0", "--adam-beta1", K_VALUE, NULL},
    {"model.optim.betas.1", "--adam-beta2", K_VALUE, NULL},
    {"model.optim.eps", "--adam-eps", K_VALUE, NULL},
    {"model.optim.sched.name", NULL, K_SPECIAL, NULL},
    {"model.optim.sched.warmup_steps", "--lr-warmup-iters", K_VALUE, NULL},
    {"model.optim.sched.warmup_ratio", "--lr-warmup-fraction", K_VALUE, NULL},
    {"model.optim.sched.min_lr", "--min-lr", K_VALUE, NULL},
    {"model.optim.sched.max_steps", "--lr-decay-iters", K_VALUE, NULL},
    {"trainer.devices", NULL, K_NOTE, "the world size comes from the launcher (mpirun -n, plait launch --nproc_per_node)"},
    {"trainer.gpus", NULL, K_NOTE, "the world size comes from the launcher (mpirun -n, plait launch --nproc_per_node)"},
    {"trainer.num_nodes", NULL, K_NOTE, "the nodes come from the launcher (plait launch --nnodes, a hostfile, Slurm)"},
    {"trainer.accelerator", NULL, K_NOTE, "plait runs on CPUs"},
    {"trainer.accumulate_grad_batches", NULL, K_NOTE, "accumulation follows from --global-batch-size / (micro-batch x data-parallel size)"},
    {"trainer.max_epochs", NULL, K_NOTE, "plait counts iterations (trainer.max_steps)"},
    {"trainer.min_epochs", NULL, K_NOTE, "plait counts iterations (trainer.max_steps)"},
    {"model.kv_channels", NULL, K_NOTE, "plait uses hidden_size / num_attention_heads"},
    {"model.optim.sched.constant_steps", NULL, K_NOTE, "Megatron's schedules have no constant phase"},
    {"model.data.mask_scheme", NULL, K_NOTE,
     "plait masks spans (MegaMolBART v0.2.0's span scheme; replace is unused there)"},
    {"model.data.num_workers", NULL, K_NOTE, "plait reads the memory-mapped dataset without loader workers"},
    {"exp_manager", NULL, K_NOTE, "not applied: checkpoints with --save/--load, logs with --tensorboard-dir"},
    {"name", NULL, K_NOTE, "a run name; not used"},
    {"do_training", NULL, K_NOTE, "plait train trains"},
    {"do_testing", NULL, K_NOTE, "not applied"},
    {"restore_from_path", NULL, K_NOTE, "not applied: use --load"},
    {"model.encoder_arch", NULL, K_NOTE, "an encoder-decoder (BART) config: plait train builds --model's decoder-only model with these sizes"},
    {"model.decoder_arch", NULL, K_NOTE, "an encoder-decoder (BART) config: plait train builds --model's decoder-only model with these sizes"},
    {"model.data.dataset_path", NULL, K_NOTE, "MegaMolBART's CSV ranges are not read in training: preprocess them with plait preprocess and give --data-path"},
    {"model.data.dataset", NULL, K_NOTE, "MegaMolBART's CSV ranges are not read in training: preprocess them with plait preprocess and give --data-path"},
};
enum { N_MAP = sizeof map / sizeof *map };

/* ---- the document -------------------------------------------------------------------- */

static pl_status keep(pl_train_yaml *y, char *s, char **out)
{
    char **grown = pl_realloc(y->strings, (size_t)(y->n_strings + 1) * sizeof *grown);
    if (!s || !grown) {
        pl_free(s);
        if (grown)
            y->strings = grown;
        return pl_errorf(PL_ERR_NOMEM, "--config-file: out of memory");
    }
    y->strings = grown;
    y->strings[y->n_strings++] = s;
    *out = s;
    return PL_OK;
}

static yaml_entry *find(pl_train_yaml *y, const char *key)
{
    for (int i = y->n - 1; i >= 0; i--) /* the last wins: an override after the file */
        if (strcmp(y->e[i].key, key) == 0)
            return &y->e[i];
    return NULL;
}

static pl_status add(pl_train_yaml *y, const char *key, const char *value, int plain, int list)
{
    if (y->n == y->cap) {
        int cap = y->cap ? 2 * y->cap : 64;
        yaml_entry *e = pl_realloc(y->e, (size_t)cap * sizeof *e);
        if (!e)
            return pl_errorf(PL_ERR_NOMEM, "--config-file: out of memory");
        y->e = e;
        y->cap = cap;
    }
    yaml_entry *x = &y->e[y->n];
    memset(x, 0, sizeof *x);
    x->key = pl_strdup(key);
    x->value = value ? pl_strdup(value) : NULL;
    if (!x->key || (value && !x->value)) {
        pl_free(x->key);
        pl_free(x->value);
        return pl_errorf(PL_ERR_NOMEM, "--config-file: out of memory");
    }
    x->plain = plain;
    x->list = list;
    y->n++;
    return PL_OK;
}

static pl_status flatten(pl_train_yaml *y, yaml_document_t *doc, yaml_node_t *node, char *key,
                         size_t len, size_t cap, int depth)
{
    pl_status st = PL_OK;
    if (!node || depth > 32)
        return pl_errorf(PL_ERR_FORMAT, "--config-file %s: nested deeper than 32 levels at %s",
                         y->path, key);
    if (node->type == YAML_SCALAR_NODE)
        return add(y, key, (const char *)node->data.scalar.value,
                   node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE, 0);
    if (node->type == YAML_SEQUENCE_NODE) {
        if (len && (st = add(y, key, NULL, 0, 1)))
            return st;
        int i = 0;
        for (yaml_node_item_t *it = node->data.sequence.items.start;
             it < node->data.sequence.items.top; it++, i++) {
            int w = snprintf(key + len, cap - len, "%s%d", len ? "." : "", i);
            if (w < 0 || (size_t)w >= cap - len)
                return pl_errorf(PL_ERR_FORMAT, "--config-file %s: a key path is too long", y->path);
            if ((st = flatten(y, doc, yaml_document_get_node(doc, *it), key, len + (size_t)w, cap,
                              depth + 1)))
                return st;
            key[len] = '\0';
        }
        return PL_OK;
    }
    if (len && (st = add(y, key, NULL, 0, 0)))
        return st;
    for (yaml_node_pair_t *p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        if (!k || k->type != YAML_SCALAR_NODE)
            return pl_errorf(PL_ERR_FORMAT, "--config-file %s: a key under '%s' is not a plain "
                             "string (line %zu)", y->path, len ? key : "(top)",
                             k ? k->start_mark.line + 1 : 0);
        if (depth == 0 && strcmp((const char *)k->data.scalar.value, "defaults") == 0)
            continue; /* Hydra's composition list: compose() reads it */
        int w = snprintf(key + len, cap - len, "%s%s", len ? "." : "", (const char *)k->data.scalar.value);
        if (w < 0 || (size_t)w >= cap - len)
            return pl_errorf(PL_ERR_FORMAT, "--config-file %s: a key path is too long", y->path);
        if ((st = flatten(y, doc, yaml_document_get_node(doc, p->value), key, len + (size_t)w, cap,
                          depth + 1)))
            return st;
        key[len] = '\0';
    }
    return PL_OK;
}

static pl_status load_file(pl_train_yaml *y, const char *dir, const char *gdir, const char *path,
                           const char *prefix, int depth);

/* One defaults-list entry: "group[@package]: name", "optional group: name", a bare
 * name, or _self_. Composes DIR/group/name.yaml under the package (default: the group
 * path, '/' as '.'; _global_: the top), relative to the including file's package; the
 * group is relative to the including file's group gdir ("/group": from DIR). */
static pl_status compose_entry(pl_train_yaml *y, yaml_document_t *doc, yaml_node_t *item,
                               const char *dir, const char *gdir, const char *path,
                               const char *prefix, int depth)
{
    char group[256] = "", name[256] = "", package[512];
    int optional = 0;
    if (item->type == YAML_SCALAR_NODE) {
        snprintf(name, sizeof name, "%s", (const char *)item->data.scalar.value);
        if (strcmp(name, "_self_") == 0)
            return PL_OK; /* the file's own keys: composed after its defaults here */
    } else if (item->type == YAML_MAPPING_NODE &&
               item->data.mapping.pairs.top - item->data.mapping.pairs.start == 1) {
        yaml_node_t *k = yaml_document_get_node(doc, item->data.mapping.pairs.start->key);
        yaml_node_t *v = yaml_document_get_node(doc, item->data.mapping.pairs.start->value);
        if (!k || k->type != YAML_SCALAR_NODE || !v || v->type != YAML_SCALAR_NODE)
            return pl_errorf(PL_ERR_FORMAT, "--config-file %s:%zu: a defaults entry must be "
                             "'group: name'", path, item->start_mark.line + 1);
        const char *g = (const char *)k->data.scalar.value;
        if (strncmp(g, "optional ", 9) == 0)
            optional = 1, g += 9;
        if (strncmp(g, "override ", 9) == 0)
            g += 9;
        snprintf(group, sizeof group, "%s", g);
        snprintf(name, sizeof name, "%s", (const char *)v->data.scalar.value);
        if (!*name || strcmp(name, "null") == 0)
            return PL_OK; /* "group: null": nothing from that group */
    } else {
        return pl_errorf(PL_ERR_FORMAT, "--config-file %s:%zu: a defaults entry must be "
                         "'group: name' or a config name", path, item->start_mark.line + 1);
    }
    char *at = strchr(group, '@');
    const char *pkg = NULL;
    if (at) {
        *at = '\0';
        pkg = at + 1;
    }
    char dotted[256];
    snprintf(dotted, sizeof dotted, "%s", group);
    for (char *c = dotted; *c; c++)
        if (*c == '/')
            *c = '.';
    if (pkg && strcmp(pkg, "_global_") == 0)
        package[0] = '\0';
    else
        snprintf(package, sizeof package, "%s%s%s", prefix, *prefix && *(pkg ? pkg : dotted) ? "." : "",
                 pkg ? pkg : dotted);
    char full[512]; /* the group's path from DIR */
    if (group[0] == '/')
        snprintf(full, sizeof full, "%s", group + 1);
    else
        snprintf(full, sizeof full, "%s%s%s", gdir, *gdir && *group ? "/" : "", group);
    if (group[0] == '/')
        memmove(dotted, dotted + 1, strlen(dotted));
    char file[4096];
    snprintf(file, sizeof file, "%s/%s%s%s.yaml", dir, full, *full ? "/" : "", name);
    if (!pl_file_exists(file)) {
        if (optional)
            return PL_OK;
        return pl_errorf(PL_ERR_FORMAT, "--config-file %s:%zu: defaults entry %s%s%s: no file %s",
                         path, item->start_mark.line + 1, group, *group ? ": " : "", name, file);
    }
    return load_file(y, dir, full, file, package, depth + 1);
}

/* Reads path's keys under prefix, after the configs of its defaults list; gdir is
 * path's config group ("" for the primary config). */
static pl_status load_file(pl_train_yaml *y, const char *dir, const char *gdir, const char *path,
                           const char *prefix, int depth)
{
    if (depth > 8)
        return pl_errorf(PL_ERR_FORMAT, "--config-file %s: defaults nested deeper than 8 (a "
                         "cycle?)", path);
    char *text = NULL;
    size_t size = 0;
    pl_status st = pl_file_read_all(path, &text, &size);
    if (st != PL_OK)
        return pl_error_wrap(st, "--config-file");
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) {
        pl_free(text);
        return pl_errorf(PL_ERR_NOMEM, "--config-file %s: cannot start libyaml", path);
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, size);
    if (!yaml_parser_load(&parser, &doc)) {
        st = pl_errorf(PL_ERR_FORMAT, "--config-file %s:%zu: %s%s%s", path,
                       parser.problem_mark.line + 1, parser.problem ? parser.problem : "not YAML",
                       parser.context ? " " : "", parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        pl_free(text);
        return st;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root && depth > 0) {
        st = PL_OK; /* an empty group file */
    } else if (!root || root->type != YAML_MAPPING_NODE) {
        st = pl_errorf(PL_ERR_FORMAT, "--config-file %s: expected a mapping of keys (trainer:, "
                       "model:, ...) at the top", path);
    } else {
        for (yaml_node_pair_t *p = root->data.mapping.pairs.start;
             st == PL_OK && p < root->data.mapping.pairs.top; p++) {
            yaml_node_t *k = yaml_document_get_node(&doc, p->key);
            yaml_node_t *v = yaml_document_get_node(&doc, p->value);
            if (!k || k->type != YAML_SCALAR_NODE ||
                strcmp((const char *)k->data.scalar.value, "defaults") != 0)
                continue;
            if (!v || v->type != YAML_SEQUENCE_NODE) {
                st = pl_errorf(PL_ERR_FORMAT, "--config-file %s: defaults must be a list", path);
                break;
            }
            for (yaml_node_item_t *it = v->data.sequence.items.start;
                 st == PL_OK && it < v->data.sequence.items.top; it++)
                st = compose_entry(y, &doc, yaml_document_get_node(&doc, *it), dir, gdir, path,
                                   prefix, depth);
            if (st == PL_OK && depth == 0)
                st = pl_train_args_note(y->a, "--config-file %s: composed with its defaults list "
                                        "(Hydra): the group files under %s", path, dir);
        }
        char key[512];
        snprintf(key, sizeof key, "%s", prefix);
        if (st == PL_OK)
            st = flatten(y, &doc, root, key, strlen(key), sizeof key, 0);
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    pl_free(text);
    return st;
}

static pl_status load(pl_train_yaml *y, const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    return load_file(y, dir, "", path, "", 0);
}

/* ---- interpolation ------------------------------------------------------------------- */

static pl_status resolve(pl_train_yaml *y, const char *key, const char *text, int depth,
                         char **out);

/* The text of the node ${ref} names, seen from key's parent. */
static pl_status lookup(pl_train_yaml *y, const char *key, const char *ref, size_t n, int depth,
                        char **out)
{
    char path[512];
    if (n && ref[0] == '.') {
        size_t dots = 0;
        while (dots < n && ref[dots] == '.')
            dots++;
        snprintf(path, sizeof path, "%s", key);
        for (size_t d = 0; d < dots; d++) { /* one dot: a sibling of key */
            char *cut = strrchr(path, '.');
            if (!cut) {
                path[0] = '\0';
                break;
            }
            *cut = '\0';
        }
        size_t l = strlen(path);
        snprintf(path + l, sizeof path - l, "%s%.*s", l ? "." : "", (int)(n - dots), ref + dots);
    } else {
        snprintf(path, sizeof path, "%.*s", (int)n, ref);
    }
    yaml_entry *e = find(y, path);
    if (!e || !e->value)
        return pl_errorf(PL_ERR_FORMAT, "--config-file %s: %s: ${%.*s} names no value", y->path,
                         key, (int)n, ref);
    return resolve(y, path, e->value, depth + 1, out);
}

/* One ${...} body: a reference, or multiply:a, b. */
static pl_status interp(pl_train_yaml *y, const char *key, const char *body, size_t n, int depth,
                        char **out)
{
    if (n > 9 && memcmp(body, "multiply:", 9) == 0) {
        const char *comma = memchr(body + 9, ',', n - 9);
        if (!comma)
            return pl_errorf(PL_ERR_FORMAT, "--config-file %s: %s: ${multiply:a, b} needs two "
                             "arguments", y->path, key);
        double prod = 1;
        int all_int = 1;
        const char *parts[2] = {body + 9, comma + 1};
        size_t lens[2] = {(size_t)(comma - body - 9), (size_t)(body + n - comma - 1)};
        for (int k = 0; k < 2; k++) {
            char arg[256], *val = NULL;
            while (lens[k] && isspace((unsigned char)*parts[k]))
                parts[k]++, lens[k]--;
            while (lens[k] && isspace((unsigned char)parts[k][lens[k] - 1]))
                lens[k]--;
            snprintf(arg, sizeof arg, "%.*s", (int)lens[k], parts[k]);
            pl_status st = resolve(y, key, arg, depth + 1, &val);
            if (st)
                return st;
            char *end;
            double v = strtod(val, &end);
            if (end == val || *end)
                return pl_errorf(PL_ERR_FORMAT, "--config-file %s: %s: multiply of '%s', not a "
                                 "number", y->path, key, val);
            all_int &= strchr(val, '.') == NULL && strchr(val, 'e') == NULL;
            prod *= v;
        }
        char buf[64];
        if (all_int)
            snprintf(buf, sizeof buf, "%lld", (long long)prod);
        else
            snprintf(buf, sizeof buf, "%.17g", prod);
        return keep(y, pl_strdup(buf), out);
    }
    const char *colon = memchr(body, ':', n);
    if (colon)
        return pl_errorf(PL_ERR_FORMAT, "--config-file %s: %s: the resolver ${%.*s} is not "
                         "supported (only references and multiply)", y->path, key,
                         (int)(colon - body), body);
    return lookup(y, key, body, n, depth, out);
}

/* text with every ${...} replaced; *out is text itself when it has none. */
static pl_status resolve(pl_train_yaml *y, const char *key, const char *text, int depth,
                         char **out)
{
    if (depth > 16)
        return pl_errorf(PL_ERR_FORMAT, "--config-file %s: %s: interpolations nested deeper "
                         "than 16 (a cycle?)", y->path, key);
    if (!strstr(text, "${")) {
        *out = (char *)text;
        return PL_OK;
    }
    pl_bytes b = {0};
    pl_status st = PL_OK;
    for (const char *s = text; *s;) {
        const char *open = strstr(s, "${");
        if (!open) {
            PL_TRY(pl_bytes_append(&b, s, strlen(s)));
            break;
        }
        PL_TRY(pl_bytes_append(&b, s, (size_t)(open - s)));
        int level = 0;
        const char *e = open + 2;
        for (; *e && !(*e == '}' && level == 0); e++)
            level += (*e == '{') - (*e == '}');
        if (!*e)
            PL_TRY(pl_errorf(PL_ERR_FORMAT, "--config-file %s: %s: unclosed ${ in '%s'", y->path,
                             key, text));
        char *val = NULL;
        PL_TRY(interp(y, key, open + 2, (size_t)(e - open - 2), depth, &val));
        PL_TRY(pl_bytes_append(&b, val, strlen(val)));
        s = e + 1;
    }
    char *whole = b.data ? b.data : pl_strdup("");
    b.data = NULL; /* keep() owns it now, or frees it */
    return keep(y, whole, out);
fail:
    pl_bytes_free(&b);
    return st;
}

/* ---- applying ------------------------------------------------------------------------ */

static int is_null(const yaml_entry *e)
{
    return e->plain && (!*e->value || strcmp(e->value, "~") == 0 || strcasecmp(e->value, "null") == 0);
}

/* YAML 1.1's booleans, as PyYAML (OmegaConf's loader) reads them: 1 true, 0 false, -1 neither. */
static int truth(const yaml_entry *e, const char *v)
{
    static const char *const yes[] = {"true", "yes", "on", "y"}, *const no[] = {"false", "no", "off", "n"};
    if (!e->plain && v == e->value)
        return -1;
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0)
            return 1;
        if (strcasecmp(v, no[i]) == 0)
            return 0;
    }
    return -1;
}

typedef struct yaml_apply {
    pl_train_args *a;
    pl_train_yaml *y;
    const unsigned char *cli; /* flags given on the command line */
} yaml_apply;

static int on_cli(const yaml_apply *c, const char *flag)
{
    int i = pl_options_index(&pl_train_cmd, flag);
    return i >= 0 && c->cli[i];
}

static pl_status set(yaml_apply *c, const char *key, const char *flag, const char **vals, int n)
{
    if (on_cli(c, flag))
        return pl_train_args_note(c->a, "--config-file %s: %s: %s given on the command line wins",
                                  c->y->path, key, flag);
    pl_status st = pl_options_set(&pl_train_cmd, c->a, flag, vals, n, c->a->given);
    return st ? pl_error_wrap(st, "--config-file %s: %s", c->y->path, key) : PL_OK;
}

static pl_status set1(yaml_apply *c, const char *key, const char *flag, const char *v)
{
    return set(c, key, flag, &v, 1);
}

static pl_status special(yaml_apply *c, const yaml_entry *e, const char *v)
{
    const char *k = e->key;
    const char *path = c->y->path;
    if (strcmp(k, "trainer.precision") == 0) {
        if (strcmp(v, "32") == 0 || strcmp(v, "32-true") == 0)
            return PL_OK;
        if (strcmp(v, "16") == 0 || strcmp(v, "16-mixed") == 0)
            return set(c, k, "--fp16", NULL, 0);
        if (strcmp(v, "bf16") == 0 || strcmp(v, "bf16-mixed") == 0)
            return set(c, k, "--bf16", NULL, 0);
        return pl_errorf(PL_ERR_ARG, "--config-file %s: trainer.precision %s: expected 32, 16, bf16",
                         path, v);
    }
    if (strcmp(k, "model.normalization") == 0) {
        if (strcasecmp(v, "layernorm") == 0)
            return set1(c, k, "--normalization", "LayerNorm");
        if (strcasecmp(v, "rmsnorm") == 0)
            return set1(c, k, "--normalization", "RMSNorm");
        return on_cli(c, "--normalization") ? PL_OK
               : pl_errorf(PL_ERR_ARG, "--config-file %s: model.normalization %s: plait has "
                           "layernorm and rmsnorm", path, v);
    }
    if (strcmp(k, "model.activation") == 0) {
        if (strcmp(v, "gelu") == 0)
            return PL_OK;
        if (strcmp(v, "swiglu") == 0)
            return set(c, k, "--swiglu", NULL, 0);
        return on_cli(c, "--swiglu") ? PL_OK
               : pl_errorf(PL_ERR_ARG, "--config-file %s: model.activation %s: plait has gelu and "
                           "swiglu", path, v);
    }
    if (strcmp(k, "model.optim.name") == 0) {
        static const char *const adams[] = {"adam", "adamw", "fused_adam", "distributed_fused_adam",
                                            "megatron_fused_adam"};
        for (size_t i = 0; i < sizeof adams / sizeof *adams; i++)
            if (strcmp(v, adams[i]) == 0)
                return set1(c, k, "--optimizer", "adam");
        return on_cli(c, "--optimizer") ? PL_OK
               : pl_errorf(PL_ERR_ARG, "--config-file %s: model.optim.name %s: plait has Adam(W) "
                           "(adam, adamw, fused_adam, distributed_fused_adam)", path, v);
    }
    if (strcmp(k, "model.optim.sched.name") == 0) {
        if (strcmp(v, "CosineAnnealing") == 0)
            return set1(c, k, "--lr-decay-style", "cosine");
        return on_cli(c, "--lr-decay-style") ? PL_OK
               : pl_errorf(PL_ERR_ARG, "--config-file %s: model.optim.sched.name %s: plait has "
                           "Megatron's schedules (CosineAnnealing -> cosine); give "
                           "--lr-decay-style constant|linear|cosine|inverse-square-root", path, v);
    }
    /* the tokenizer: NeMo's library + type/model/vocab_file to Megatron's flags */
    yaml_entry *lib = find(c->y, "model.tokenizer.library");
    const char *library = lib && lib->value && !is_null(lib) ? lib->value : "megatron";
    if (strcmp(k, "model.tokenizer.library") == 0) {
        if (strcmp(v, "regex") == 0) /* MegaMolBART's SMILES regex tokenizer */
            return set1(c, k, "--tokenizer-type", "SmilesTokenizer");
        if (strcmp(v, "sentencepiece") == 0)
            return set1(c, k, "--tokenizer-type", "SentencePieceTokenizer");
        if (strcmp(v, "megatron") == 0)
            return PL_OK; /* model.tokenizer.type names Megatron's type */
        if (strcmp(v, "huggingface") == 0)
            return set1(c, k, "--tokenizer-type", "HuggingFaceTokenizer");
        return on_cli(c, "--tokenizer-type") ? PL_OK
               : pl_errorf(PL_ERR_ARG, "--config-file %s: model.tokenizer.library %s: expected "
                           "megatron, regex, sentencepiece or huggingface", path, v);
    }
    if (strcmp(k, "model.tokenizer.type") == 0) {
        if (strcmp(library, "megatron") == 0)
            return set1(c, k, "--tokenizer-type", v);
        if (strcmp(library, "huggingface") == 0)
            return set1(c, k, "--tokenizer-model", v); /* a local directory with tokenizer.json */
        return pl_train_args_note(c->a, "--config-file %s: model.tokenizer.type: not used with "
                                  "library %s", path, library);
    }
    if (strcmp(k, "model.tokenizer.model") == 0) {
        if (strcmp(library, "sentencepiece") == 0)
            return set1(c, k, "--tokenizer-model", v);
        return pl_train_args_note(c->a, "--config-file %s: model.tokenizer.model: not used with "
                                  "library %s (the vocabulary is model.tokenizer.vocab_file)", path,
                                  library);
    }
    return pl_errorf(PL_ERR_INTERNAL, "--config-file: no handler for %s", k);
}

static const struct yaml_map *map_of(const char *key, int *prefix)
{
    *prefix = 0;
    for (int i = 0; i < N_MAP; i++)
        if (strcmp(map[i].key, key) == 0)
            return &map[i];
    for (int i = 0; i < N_MAP; i++) { /* a note on a block covers what is under it */
        size_t l = strlen(map[i].key);
        if (map[i].kind == K_NOTE && strncmp(map[i].key, key, l) == 0 && key[l] == '.') {
            *prefix = 1;
            return &map[i];
        }
    }
    return NULL;
}

static pl_status apply_entry(yaml_apply *c, yaml_entry *e)
{
    int prefix;
    const struct yaml_map *m = map_of(e->key, &prefix);
    if (!m)
        return PL_OK;
    e->used = 1;
    if (m->kind == K_NOTE)
        return prefix ? PL_OK
                      : pl_train_args_note(c->a, "--config-file %s: %s: %s", c->y->path, e->key,
                                           m->note);
    if (m->kind == K_LIST) {
        const char *vals[64];
        int n = 0;
        if (e->list) {
            char item[600];
            for (int i = 0; n < 64; i++) {
                snprintf(item, sizeof item, "%s.%d", e->key, i);
                yaml_entry *x = find(c->y, item);
                if (!x || !x->value)
                    break;
                x->used = 1;
                char *v;
                pl_status st = resolve(c->y, x->key, x->value, 0, &v);
                if (st)
                    return st;
                vals[n++] = v;
            }
        } else if (e->value && !is_null(e)) {
            char *v;
            pl_status st = resolve(c->y, e->key, e->value, 0, &v);
            if (st)
                return st;
            vals[n++] = v;
        }
        return n ? set(c, e->key, m->flag, vals, n) : PL_OK;
    }
    if (!e->value)
        return pl_errorf(PL_ERR_FORMAT, "--config-file %s: %s: expected a value, got a %s",
                         c->y->path, e->key, e->list ? "list" : "mapping");
    if (is_null(e))
        return PL_OK;
    char *v;
    pl_status st = resolve(c->y, e->key, e->value, 0, &v);
    if (st)
        return st;
    if (m->kind == K_SPECIAL)
        return special(c, e, v);
    if (m->kind == K_SWITCH || m->kind == K_UNSET || m->kind == K_BOOL) {
        int t = truth(e, v);
        if (t < 0)
            return pl_errorf(PL_ERR_ARG, "--config-file %s: %s: expected true or false, got '%s'",
                             c->y->path, e->key, v);
        if (m->kind == K_BOOL)
            return set1(c, e->key, m->flag, t ? "true" : "false");
        return t == (m->kind == K_SWITCH) ? set(c, e->key, m->flag, NULL, 0) : PL_OK;
    }
    return set1(c, e->key, m->flag, v);
}

/* Hydra overrides KEY=VALUE (+KEY, ++KEY add a key): a dotted key, or a top-level
 * key of the table. */
static int is_override(const char *arg)
{
    const char *s = arg + (arg[0] == '+') + (arg[0] == '+' && arg[1] == '+');
    const char *eq = strchr(s, '=');
    if (!eq || eq == s || !(isalpha((unsigned char)*s) || *s == '_'))
        return 0;
    int dotted = 0;
    for (const char *c = s; c < eq; c++) {
        if (*c == '.')
            dotted = 1;
        else if (!isalnum((unsigned char)*c) && *c != '_')
            return 0;
    }
    if (dotted)
        return 1;
    for (int i = 0; i < N_MAP; i++)
        if (strlen(map[i].key) == (size_t)(eq - s) && memcmp(map[i].key, s, (size_t)(eq - s)) == 0)
            return 1;
    return 0;
}

void pl_train_yaml_free(void *p)
{
    pl_train_yaml *y = p;
    if (!y)
        return;
    for (int i = 0; i < y->n; i++) {
        pl_free(y->e[i].key);
        pl_free(y->e[i].value);
    }
    for (int i = 0; i < y->n_strings; i++)
        pl_free(y->strings[i]);
    pl_free(y->e);
    pl_free(y->strings);
    pl_free(y->path);
    pl_free(y);
}

/* The YAML file: --config-file, or Hydra's --config-path DIR --config-name NAME[.yaml]. */
static pl_status yaml_path(const pl_train_args *a, char *out, size_t cap)
{
    if (a->config_file && (a->config_name || a->config_path))
        return pl_errorf(PL_ERR_ARG, "--config-file and --config-path/--config-name: give one");
    if (a->config_file) {
        snprintf(out, cap, "%s", a->config_file);
        return PL_OK;
    }
    if (!a->config_name)
        return pl_errorf(PL_ERR_ARG, "--config-path %s: --config-name is required with it",
                         a->config_path);
    size_t n = strlen(a->config_name);
    int ext = n > 5 && (strcmp(a->config_name + n - 5, ".yaml") == 0 ||
                        strcmp(a->config_name + n - 4, ".yml") == 0);
    snprintf(out, cap, "%s%s%s%s", a->config_path ? a->config_path : ".",
             "/", a->config_name, ext ? "" : ".yaml");
    return PL_OK;
}

pl_status pl_train_yaml_split(int argc, char **argv, char ***args, int *n_args,
                              char ***overrides, int *n_overrides)
{
    *args = pl_malloc((size_t)(argc + 1) * sizeof **args);
    *overrides = pl_malloc((size_t)(argc + 1) * sizeof **overrides);
    if (!*args || !*overrides) {
        pl_free(*args);
        pl_free(*overrides);
        *args = *overrides = NULL;
        return pl_errorf(PL_ERR_NOMEM, "out of memory");
    }
    int yaml = 0;
    *n_args = *n_overrides = 0;
    for (int i = 0; i < argc; i++)
        yaml |= strncmp(argv[i], "--config-file", 13) == 0 || strncmp(argv[i], "--config-name", 13) == 0;
    for (int i = 0; i < argc; i++) {
        if (yaml && is_override(argv[i]))
            (*overrides)[(*n_overrides)++] = argv[i];
        else
            (*args)[(*n_args)++] = argv[i];
    }
    return PL_OK;
}

pl_status pl_train_args_yaml(pl_train_args *a, char **overrides, int n_overrides,
                             const unsigned char *cli)
{
    pl_status st = PL_OK;
    if (!a->config_file && !a->config_name && !a->config_path) {
        if (n_overrides)
            return pl_errorf(PL_ERR_ARG, "'%s': a key=value override needs a YAML config "
                             "(--config-file or --config-name)", overrides[0]);
        return PL_OK;
    }
    char path[4096];
    PL_TRY(yaml_path(a, path, sizeof path));
    pl_train_yaml *y = pl_calloc(1, sizeof *y);
    if (!y || !(y->path = pl_strdup(path))) {
        pl_free(y);
        return pl_errorf(PL_ERR_NOMEM, "--config-file: out of memory");
    }
    a->yaml = y;
    y->a = a;
    PL_TRY(load(y, path));
    for (int i = 0; i < n_overrides; i++) {
        const char *s = overrides[i];
        s += (s[0] == '+') + (s[0] == '+' && s[1] == '+');
        const char *eq = strchr(s, '=');
        char key[512];
        snprintf(key, sizeof key, "%.*s", (int)(eq - s), s);
        PL_TRY(add(y, key, eq + 1, 1, 0));
    }
    yaml_apply c = {a, y, cli};
    for (int i = 0; i < y->n; i++) {
        yaml_entry *e = &y->e[i];
        if (e->used || find(y, e->key) != e) /* an override replaced it */
            continue;
        PL_TRY(apply_entry(&c, e));
    }
    for (int i = 0; i < y->n; i++) {
        yaml_entry *e = &y->e[i];
        if (e->used || !e->value || find(y, e->key) != e)
            continue;
        PL_TRY(pl_train_args_note(a, "--config-file %s: %s: unknown key, ignored", path, e->key));
    }
fail:
    return st;
}
