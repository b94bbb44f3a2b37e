/* Checkpoint save and load: safetensors shards plus a JSON manifest. */
#include "ckpt/checkpoint.h"

#include "model/spec.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/json.h"
#include "base/vec.h"
#include "base/xxh64.h"
#include "ckpt/safetensors.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

enum { PATH_MAX_ = 4096 };
static const char FORMAT[] = "plait-checkpoint";

static void iter_dir(char *out, const char *dir, int64_t it, const char *suffix)
{
    snprintf(out, PATH_MAX_, "%s/iter_%07lld%s", dir, (long long)it, suffix);
}

static void rank_dir(char *out, int tp_rank, int pp_rank, int pp)
{
    if (pp == 1)
        snprintf(out, 64, "mp_rank_%02d", tp_rank);
    else
        snprintf(out, 64, "mp_rank_%02d_%03d", tp_rank, pp_rank);
}

/* xxh64 of a whole file, as 16 hex digits. */
static pl_status file_xxh64(const char *path, char out[17])
{
    pl_mmap m;
    pl_status st = pl_mmap_open(&m, path);
    if (st)
        return st;
    snprintf(out, 17, "%016" PRIx64, pl_xxh64(m.data ? m.data : (const uint8_t *)"", m.size, 0));
    pl_mmap_close(&m);
    return PL_OK;
}

/* All ranks agree that everyone succeeded; returns the first local error or a
 * message naming a failed rank. */
static pl_status consensus(pl_comm *world, pl_status local, const char *what)
{
    int32_t bad = local != PL_OK ? world->rank + 1 : 0;
    char keep[1024];
    snprintf(keep, sizeof keep, "%s", pl_error_msg());
    pl_status st = pl_comm_allreduce_i32(world, &bad, 1, PL_COMM_MAX);
    if (st)
        return st;
    if (local != PL_OK)
        return pl_errorf(local, "%s", keep);
    if (bad)
        return pl_errorf(PL_ERR_IO, "%s failed on rank %d", what, bad - 1);
    return PL_OK;
}

static const struct {
    const char *key, *flag;
    size_t off;
} config_fields[] = {
    {"num_layers", "--num-layers", offsetof(pl_model_config, num_layers)},
    {"hidden_size", "--hidden-size", offsetof(pl_model_config, hidden)},
    {"num_attention_heads", "--num-attention-heads", offsetof(pl_model_config, heads)},
    {"ffn_hidden_size", "--ffn-hidden-size", offsetof(pl_model_config, ffn_hidden)},
    {"max_position_embeddings", "--max-position-embeddings", offsetof(pl_model_config, max_positions)},
    {"vocab_size", "--vocab-size (the tokenizer's)", offsetof(pl_model_config, vocab_size)},
    {"padded_vocab_size", "--make-vocab-size-divisible-by (padded vocabulary)",
     offsetof(pl_model_config, padded_vocab)},
    {"seq_length", "--seq-length", offsetof(pl_model_config, seq_length)},
};

/* cJSON insertions that remember whether any failed (memory), so a manifest
 * is either complete or not written at all. */
typedef struct jbuild {
    int ok;
} jbuild;

static cJSON *jobj(cJSON *parent, const char *key, jbuild *b)
{
    cJSON *o = parent ? cJSON_AddObjectToObject(parent, key) : NULL;
    b->ok &= o != NULL;
    return o;
}

static void jnum(cJSON *o, const char *key, double v, jbuild *b)
{
    b->ok &= o && cJSON_AddNumberToObject(o, key, v) != NULL;
}

static void jstr(cJSON *o, const char *key, const char *v, jbuild *b)
{
    if (v)
        b->ok &= o && cJSON_AddStringToObject(o, key, v) != NULL;
}

/* The architecture beyond the sizes, Megatron's argument names as keys. A
 * manifest without them (written before plait had other families) is a GPT. */
static const char *const norm_names[] = {"LayerNorm", "RMSNorm"};
static const char *const pos_names[] = {"learned_absolute", "rope", "none"};

static void arch_write(cJSON *model, const pl_model_config *c, jbuild *b)
{
    jstr(model, "normalization", norm_names[c->block.norm], b);
    jstr(model, "position_embedding_type", pos_names[c->block.pos], b);
    jnum(model, "swiglu", c->block.act == PL_ACT_SWIGLU, b);
    jnum(model, "num_query_groups", (double)c->query_groups, b);
    jnum(model, "add_bias_linear", c->block.bias, b);
    jnum(model, "untie_embeddings_and_output_weights", c->untie, b);
    jnum(model, "rotary_base", c->rope.base, b);
    jnum(model, "rotary_percent", c->rope.percent, b);
    jnum(model, "use_rope_scaling", c->rope.scaling, b);
    jnum(model, "rope_scaling_factor", c->rope.factor, b);
    jnum(model, "hidden_dropout", c->hidden_dropout, b);
    jnum(model, "attention_dropout", c->attention_dropout, b);
}

/* Index of the string item key in names[0..n), def when absent, -1 when
 * malformed. */
static int str_choice(const cJSON *o, const char *key, const char *const *names, int n, int def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v)
        return def;
    for (int i = 0; cJSON_IsString(v) && i < n; i++)
        if (strcmp(v->valuestring, names[i]) == 0)
            return i;
    return -1;
}

/* A number item, def when absent. */
static double opt_num(const cJSON *o, const char *key, double def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : v ? NAN : def;
}

/* Reads what arch_write wrote into c (sizes already read); 0 if malformed. */
static int arch_read(const cJSON *model, pl_model_config *c)
{
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(model, "architecture");
    const pl_family_spec *fam = cJSON_IsString(arch) ? pl_family_find(arch->valuestring) : NULL;
    if (!fam)
        return 0;
    pl_family_apply(c, fam->family);
    int norm = str_choice(model, "normalization", norm_names, 2, PL_NORM_LAYERNORM);
    int pos = str_choice(model, "position_embedding_type", pos_names, 3, PL_POS_LEARNED);
    double v[10] = {opt_num(model, "swiglu", 0), opt_num(model, "num_query_groups", (double)c->heads),
                    opt_num(model, "add_bias_linear", 1), opt_num(model, "untie_embeddings_and_output_weights", 0),
                    opt_num(model, "rotary_base", 10000), opt_num(model, "rotary_percent", 1),
                    opt_num(model, "use_rope_scaling", 0), opt_num(model, "rope_scaling_factor", 8),
                    opt_num(model, "hidden_dropout", 0), opt_num(model, "attention_dropout", 0)};
    for (int i = 0; i < 10; i++)
        if (!isfinite(v[i]))
            return 0;
    if (norm < 0 || pos < 0 || v[1] < 1 || v[1] > c->heads || v[4] <= 0 || v[5] <= 0 || v[5] > 1)
        return 0;
    c->block.norm = (pl_norm_kind)norm;
    c->block.norm_bias = norm == PL_NORM_LAYERNORM;
    c->block.pos = (pl_pos_kind)pos;
    c->block.act = v[0] != 0 ? PL_ACT_SWIGLU : PL_ACT_GELU;
    c->query_groups = (int64_t)v[1];
    c->block.bias = v[2] != 0;
    c->untie = v[3] != 0;
    c->rope = (pl_rope_config){v[4], v[5], v[6] != 0, v[7], 1.0, 4.0, 8192};
    c->hidden_dropout = (float)v[8];
    c->attention_dropout = (float)v[9];
    return 1;
}

/* The first architecture field in which a and b differ (for a load error), or NULL. */
static const char *arch_differs(const pl_model_config *a, const pl_model_config *b)
{
    if (a->family != b->family)
        return "--model";
    if (a->block.norm != b->block.norm)
        return "--normalization";
    if (a->block.pos != b->block.pos)
        return "--position-embedding-type";
    if (a->block.act != b->block.act)
        return "--swiglu";
    if (a->query_groups != b->query_groups)
        return "--num-query-groups";
    if (a->block.bias != b->block.bias)
        return "--disable-bias-linear";
    if (a->untie != b->untie)
        return "--untie-embeddings-and-output-weights";
    if (a->block.pos == PL_POS_ROPE &&
        ((float)a->rope.base != (float)b->rope.base || (float)a->rope.percent != (float)b->rope.percent ||
         a->rope.scaling != b->rope.scaling || (a->rope.scaling && a->rope.factor != b->rope.factor)))
        return "--rotary-base, --rotary-percent or --use-rope-scaling";
    return NULL;
}

static cJSON *manifest_json(const pl_model_config *cfg, const pl_ckpt_meta *m, const pl_registry *reg)
{
    jbuild b = {1};
    pl_json_init();
    cJSON *root = cJSON_CreateObject();
    b.ok = root != NULL;
    jstr(root, "format", FORMAT, &b);
    jnum(root, "version", 1, &b);
    jnum(root, "iteration", (double)m->iteration, &b);
    jnum(root, "consumed_train_samples", (double)m->consumed_train_samples, &b);
    jnum(root, "consumed_valid_samples", (double)m->consumed_valid_samples, &b);
    jnum(root, "seed", (double)m->seed, &b);
    jstr(root, "data_hash", m->data_hash, &b);
    cJSON *model = jobj(root, "model", &b);
    jstr(model, "architecture", pl_family_get(cfg->family)->name, &b);
    for (size_t i = 0; i < sizeof config_fields / sizeof *config_fields; i++)
        jnum(model, config_fields[i].key,
             (double)*(const int64_t *)((const char *)cfg + config_fields[i].off), &b);
    jnum(model, "make_vocab_size_divisible_by", (double)cfg->divisible_by, &b);
    jnum(model, "init_method_std", cfg->init_std, &b);
    jnum(model, "layernorm_epsilon", cfg->ln_eps, &b);
    arch_write(model, cfg, &b);
    cJSON *par = jobj(root, "parallel", &b);
    jnum(par, "tensor_model_parallel_size", m->tp, &b);
    jnum(par, "pipeline_model_parallel_size", m->pp, &b);
    jnum(par, "data_parallel_size", m->dp, &b);
    cJSON *sch = jobj(root, "scheduler", &b);
    jnum(sch, "max_lr", m->schedule.max_lr, &b);
    jnum(sch, "min_lr", m->schedule.min_lr, &b);
    jnum(sch, "init_lr", m->schedule.init_lr, &b);
    jnum(sch, "lr_warmup_steps", (double)m->schedule.warmup_steps, &b);
    jnum(sch, "lr_decay_steps", (double)m->schedule.decay_steps, &b);
    jstr(sch, "lr_decay_style", pl_lr_style_name(m->schedule.style), &b);
    jnum(sch, "num_steps", (double)m->schedule.num_steps, &b);
    cJSON *opt = jobj(root, "optimizer", &b);
    jstr(opt, "type", "adamw", &b);
    jnum(opt, "step", (double)m->optimizer_steps, &b);
    jnum(opt, "beta1", m->beta1, &b);
    jnum(opt, "beta2", m->beta2, &b);
    jnum(opt, "eps", m->eps, &b);
    jnum(opt, "weight_decay", m->weight_decay, &b);
    if (m->has_loss_scaler) {
        cJSON *gs = jobj(opt, "grad_scaler", &b);
        jnum(gs, "scale", m->loss_scale, &b);
        jnum(gs, "growth_tracker", (double)m->growth_tracker, &b);
        jnum(gs, "hysteresis_tracker", (double)m->hysteresis_tracker, &b);
    }
    cJSON *tok = jobj(root, "tokenizer", &b);
    jstr(tok, "type", m->tokenizer_type, &b);
    jstr(tok, "vocab_file", m->vocab_file, &b);
    jstr(tok, "merge_file", m->merge_file, &b);
    jstr(tok, "tokenizer_model", m->tokenizer_model, &b);
    if (m->vocab_extra_ids)
        jnum(tok, "vocab_extra_ids", (double)m->vocab_extra_ids, &b);
    if (m->legacy_tokenizer)
        b.ok &= tok && cJSON_AddBoolToObject(tok, "legacy", 1) != NULL;
    static const char *splits[] = {"replicated", "rows", "cols", "vocab", "rows_halves",
                                   "qkv_shared_kv"};
    cJSON *tensors = jobj(root, "tensors", &b);
    for (int i = 0; i < reg->n && b.ok; i++) {
        const pl_param *p = &reg->params[i];
        cJSON *t = jobj(tensors, p->name, &b);
        cJSON *shape = t ? cJSON_AddArrayToObject(t, "shape") : NULL;
        b.ok &= shape != NULL;
        for (int d = 0; d < p->ndim && b.ok; d++)
            b.ok &= cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)p->shape[d]));
        jstr(t, "tp_split", splits[p->split], &b);
        jnum(t, "pipeline_stage", p->stage, &b);
    }
    if (!b.ok) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

/* Writes this rank's shard file (called on DP rank 0 of each model-parallel slice). */
static pl_status write_shard(const char *path, const pl_ckpt_buffers *b)
{
    pl_st_writer *w;
    pl_status st = pl_st_writer_new(&w);
    if (st)
        return st;
    const pl_registry *reg = b->reg;
    static const char *prefix[3] = {"", "optimizer.exp_avg.", "optimizer.exp_avg_sq."};
    const float *bufs[3] = {b->params, b->exp_avg, b->exp_avg_sq};
    for (int k = 0; k < 3; k++) {
        if (!bufs[k])
            continue;
        for (int i = 0; i < reg->n; i++) {
            const pl_param *p = &reg->params[i];
            if (p->offset < 0)
                continue;
            char name[PL_ST_NAME_MAX];
            snprintf(name, sizeof name, "%s%s", prefix[k], p->name);
            if ((st = pl_st_writer_add(w, name, "F32", p->ndim, p->local_shape,
                                       bufs[k] + p->offset))) {
                pl_st_writer_free(w);
                return st;
            }
        }
    }
    pl_st_writer_meta(w, "format", FORMAT);
    return pl_st_writer_finish(w, path);
}

static void optim_rel(char *out, size_t n, const char *sub, int dp_rank)
{
    snprintf(out, n, "%s/optim_dp_%03d.safetensors", sub, dp_rank);
}

/* Writes a ZeRO optimizer shard file. */
static pl_status write_zero_shard(const char *path, const pl_ckpt_zero *z)
{
    pl_st_writer *w;
    pl_status st = pl_st_writer_new(&w);
    if (st)
        return st;
    int64_t shape[2] = {z->count, 1};
    if ((st = pl_st_writer_add(w, "exp_avg", "F32", 1, shape, z->exp_avg)) ||
        (st = pl_st_writer_add(w, "exp_avg_sq", "F32", 1, shape, z->exp_avg_sq))) {
        pl_st_writer_free(w);
        return st;
    }
    pl_st_writer_meta(w, "format", FORMAT);
    return pl_st_writer_finish(w, path);
}

/* Each rank's ZeRO shard, as every rank learns it (ZERO_FIELDS int64 per world rank:
 * tp rank, pp rank, dp rank, offset, count, padded length): pipeline stages hold
 * flat buffers of different lengths, so rank 0 cannot infer the others'. */
enum { ZERO_FIELDS = 6 };
static pl_status gather_zero(pl_comm *world, const pl_registry *reg, const pl_ckpt_zero *z,
                             int64_t **out)
{
    int64_t *all = pl_calloc((size_t)world->size * ZERO_FIELDS, sizeof *all);
    if (!all)
        return pl_errorf(PL_ERR_NOMEM, "out of memory listing the ZeRO shards");
    const int64_t mine[ZERO_FIELDS] = {reg->tp_rank, reg->pp_rank, z->dp_rank,
                                       z->lo,        z->count,     z->padded};
    memcpy(all + (size_t)world->rank * ZERO_FIELDS, mine, sizeof mine);
    pl_status st = pl_comm_allreduce_i64(world, all, world->size * ZERO_FIELDS, PL_COMM_SUM);
    if (st)
        pl_free(all);
    *out = st ? NULL : all;
    return st;
}

/* The manifest's "zero" object and the checksums of the optimizer shard files:
 * one entry per rank (shards: gather_zero's table, nranks rows). */
static pl_status manifest_zero(cJSON *root, cJSON *files, const char *tmp, int pp,
                               const pl_ckpt_zero *z, const int64_t *shards_of, int nranks,
                               jbuild *jb)
{
    char rel[128], path[PATH_MAX_ + 160], hash[17], sub[64];
    cJSON *zo = jobj(root, "zero", jb);
    jnum(zo, "stage", z->stage, jb);
    jnum(zo, "data_parallel_size", z->dp, jb);
    jnum(zo, "padded_numel", (double)z->padded, jb); /* rank 0's; each entry has its own */
    cJSON *shards = zo ? cJSON_AddArrayToObject(zo, "shards") : NULL;
    jb->ok &= shards != NULL;
    for (int i = 0; i < nranks && jb->ok; i++) {
        const int64_t *row = shards_of + (size_t)i * ZERO_FIELDS;
        const int t = (int)row[0], p = (int)row[1], r = (int)row[2];
        rank_dir(sub, t, p, pp);
        optim_rel(rel, sizeof rel, sub, r);
        snprintf(path, sizeof path, "%s/%s", tmp, rel);
        pl_status st = file_xxh64(path, hash);
        if (st)
            return st;
        jstr(jobj(files, rel, jb), "xxh64", hash, jb);
        cJSON *e = cJSON_CreateObject();
        jb->ok &= e != NULL && cJSON_AddItemToArray(shards, e);
        jstr(e, "file", rel, jb);
        jnum(e, "tp_rank", t, jb);
        jnum(e, "pp_rank", p, jb);
        jnum(e, "dp_rank", r, jb);
        jnum(e, "offset", (double)row[3], jb);
        jnum(e, "count", (double)row[4], jb);
        jnum(e, "padded_numel", (double)row[5], jb);
    }
    return jb->ok ? PL_OK : pl_errorf(PL_ERR_NOMEM, "out of memory writing the manifest");
}

pl_status pl_ckpt_save(const char *dir, pl_comm *world, int dp_rank, const pl_model_config *cfg,
                       const pl_ckpt_meta *meta, const pl_ckpt_buffers *buf)
{
    char tmp[PATH_MAX_], final[PATH_MAX_], path[PATH_MAX_ + 128], sub[64];
    iter_dir(tmp, dir, meta->iteration, ".tmp");
    iter_dir(final, dir, meta->iteration, "");
    pl_status st = PL_OK;
    if (world->rank == 0) {
        st = pl_mkdirs(dir);
        if (!st)
            st = pl_rmtree(tmp); /* a stale, half-written attempt */
        if (!st)
            st = pl_mkdirs(tmp);
    }
    if ((st = consensus(world, st, "creating the checkpoint directory")))
        return st;
    rank_dir(sub, buf->reg->tp_rank, buf->reg->pp_rank, meta->pp);
    if (dp_rank == 0) {
        snprintf(path, sizeof path, "%s/%s", tmp, sub);
        st = pl_mkdirs(path);
        if (!st) {
            snprintf(path, sizeof path, "%s/%s/model_optim.safetensors", tmp, sub);
            st = write_shard(path, buf);
        }
    }
    if ((st = consensus(world, st, "writing checkpoint shards")))
        return st;
    if (buf->zero) {
        char rel[128];
        optim_rel(rel, sizeof rel, sub, buf->zero->dp_rank);
        snprintf(path, sizeof path, "%s/%s", tmp, rel);
        st = write_zero_shard(path, buf->zero);
    }
    if ((st = consensus(world, st, "writing ZeRO optimizer shards")))
        return st;
    int64_t *zero_rows = NULL;
    if (buf->zero && (st = gather_zero(world, buf->reg, buf->zero, &zero_rows)))
        return st;
    if (world->rank == 0) {
        cJSON *root = manifest_json(cfg, meta, buf->reg);
        char *text = NULL;
        jbuild jb = {root != NULL};
        cJSON *files = jobj(root, "files", &jb);
        if (!jb.ok) {
            st = pl_errorf(PL_ERR_NOMEM, "out of memory writing the manifest");
            goto manifest_done;
        }
        for (int t = 0; t < meta->tp && !st; t++)
            for (int p = 0; p < meta->pp && !st; p++) {
                char hash[17], rel[128];
                rank_dir(sub, t, p, meta->pp);
                snprintf(rel, sizeof rel, "%s/model_optim.safetensors", sub);
                snprintf(path, sizeof path, "%s/%s", tmp, rel);
                if (!(st = file_xxh64(path, hash))) {
                    jstr(jobj(files, rel, &jb), "xxh64", hash, &jb);
                    if (!jb.ok)
                        st = pl_errorf(PL_ERR_NOMEM, "out of memory writing the manifest");
                }
            }
        if (!st && buf->zero)
            st = manifest_zero(root, files, tmp, meta->pp, buf->zero, zero_rows, world->size, &jb);
        if (st)
            goto manifest_done;
        text = cJSON_Print(root);
        if (!text) {
            st = pl_errorf(PL_ERR_NOMEM, "out of memory writing the manifest");
            goto manifest_done;
        }
        snprintf(path, sizeof path, "%s/manifest.json", tmp);
        st = pl_file_write_atomic(path, text, strlen(text));
        /* Replace an older copy of the same iteration, then publish. */
        if (!st)
            st = pl_rmtree(final);
        if (!st && rename(tmp, final) != 0)
            st = pl_errorf(PL_ERR_IO, "%s: cannot rename to %s", tmp, final);
        if (!st)
            st = pl_fsync_dir(dir);
        if (!st) {
            char num[32];
            snprintf(num, sizeof num, "%lld", (long long)meta->iteration);
            snprintf(path, sizeof path, "%s/latest_checkpointed_iteration.txt", dir);
            st = pl_file_write_atomic(path, num, strlen(num));
        }
    manifest_done:
        cJSON_free(text);
        cJSON_Delete(root);
    }
    pl_free(zero_rows);
    return consensus(world, st, "publishing the checkpoint");
}

pl_status pl_ckpt_latest(const char *dir, int64_t *iteration)
{
    char path[PATH_MAX_ + 64];
    snprintf(path, sizeof path, "%s/latest_checkpointed_iteration.txt", dir);
    *iteration = -1;
    if (!pl_file_exists(path))
        return PL_OK;
    char *text = NULL;
    pl_status st = pl_file_read_all(path, &text, NULL);
    if (st)
        return st;
    char *end;
    long long v = strtoll(text, &end, 10);
    while (*end == '\n' || *end == ' ' || *end == '\r')
        end++;
    if (end == text || *end || v < 0) {
        st = pl_errorf(PL_ERR_FORMAT, "%s: expected an iteration number, got '%.40s'", path, text);
        pl_free(text);
        return st;
    }
    pl_free(text);
    *iteration = v;
    return PL_OK;
}

static double num(const cJSON *o, const char *key, int *ok)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v)) {
        *ok = 0;
        return 0;
    }
    return v->valuedouble;
}

/* Appends the string field key of o, NUL-terminated, to arena; *off is its
 * offset there, or SIZE_MAX when the field is absent. */
static pl_status keep_str(const cJSON *o, const char *key, pl_bytes *arena, size_t *off)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *off = SIZE_MAX;
    if (!cJSON_IsString(v))
        return PL_OK;
    *off = arena->n;
    return pl_bytes_append(arena, v->valuestring, strlen(v->valuestring) + 1);
}

/* Parses the manifest into cfg_out (when not NULL) and meta. */
static pl_status read_manifest(const char *mpath, cJSON **root_out, pl_model_config *cfg_out,
                               pl_ckpt_meta *meta, char **strings)
{
    char *text = NULL;
    pl_status st = pl_file_read_all(mpath, &text, NULL);
    if (st)
        return st;
    pl_json_init();
    cJSON *root = cJSON_Parse(text);
    pl_free(text);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsObject(root) || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, FORMAT) != 0) {
        cJSON_Delete(root);
        return pl_errorf(PL_ERR_FORMAT, "%s: not a plait checkpoint manifest", mpath);
    }
    int ok = 1;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *sch = cJSON_GetObjectItemCaseSensitive(root, "scheduler");
    const cJSON *opt = cJSON_GetObjectItemCaseSensitive(root, "optimizer");
    const cJSON *par = cJSON_GetObjectItemCaseSensitive(root, "parallel");
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(root, "tokenizer");
    memset(meta, 0, sizeof *meta);
    meta->iteration = (int64_t)num(root, "iteration", &ok);
    meta->consumed_train_samples = (int64_t)num(root, "consumed_train_samples", &ok);
    meta->consumed_valid_samples = (int64_t)num(root, "consumed_valid_samples", &ok);
    meta->seed = (uint64_t)num(root, "seed", &ok);
    meta->optimizer_steps = (int64_t)num(opt, "step", &ok);
    meta->beta1 = num(opt, "beta1", &ok);
    meta->beta2 = num(opt, "beta2", &ok);
    meta->eps = num(opt, "eps", &ok);
    meta->weight_decay = num(opt, "weight_decay", &ok);
    const cJSON *gs = cJSON_GetObjectItemCaseSensitive(opt, "grad_scaler");
    if (gs) { /* optional: only fp16 runs save it */
        meta->has_loss_scaler = 1;
        meta->loss_scale = num(gs, "scale", &ok);
        meta->growth_tracker = (int64_t)num(gs, "growth_tracker", &ok);
        meta->hysteresis_tracker = (int64_t)num(gs, "hysteresis_tracker", &ok);
    }
    meta->schedule.max_lr = num(sch, "max_lr", &ok);
    meta->schedule.min_lr = num(sch, "min_lr", &ok);
    meta->schedule.init_lr = num(sch, "init_lr", &ok);
    meta->schedule.warmup_steps = (int64_t)num(sch, "lr_warmup_steps", &ok);
    meta->schedule.decay_steps = (int64_t)num(sch, "lr_decay_steps", &ok);
    meta->schedule.num_steps = (int64_t)num(sch, "num_steps", &ok);
    const cJSON *style = cJSON_GetObjectItemCaseSensitive(sch, "lr_decay_style");
    int sv = cJSON_IsString(style) ? pl_lr_style_parse(style->valuestring) : -1;
    ok &= sv >= 0;
    meta->schedule.style = sv < 0 ? PL_LR_CONSTANT : (pl_lr_style)sv;
    meta->tp = (int)num(par, "tensor_model_parallel_size", &ok);
    meta->pp = (int)num(par, "pipeline_model_parallel_size", &ok);
    meta->dp = (int)num(par, "data_parallel_size", &ok);
    pl_model_config c;
    memset(&c, 0, sizeof c);
    for (size_t i = 0; i < sizeof config_fields / sizeof *config_fields; i++)
        *(int64_t *)((char *)&c + config_fields[i].off) = (int64_t)num(model, config_fields[i].key, &ok);
    c.divisible_by = (int64_t)num(model, "make_vocab_size_divisible_by", &ok);
    c.init_std = num(model, "init_method_std", &ok);
    c.ln_eps = (float)num(model, "layernorm_epsilon", &ok);
    if (!arch_read(model, &c))
        ok = 0;
    if (!ok) {
        cJSON_Delete(root);
        return pl_errorf(PL_ERR_FORMAT, "%s: a required field is missing or malformed", mpath);
    }
    if (cfg_out)
        *cfg_out = c;
    pl_bytes arena = {0};
    size_t offs[5];
    st = keep_str(tok, "type", &arena, &offs[0]);
    if (!st)
        st = keep_str(tok, "vocab_file", &arena, &offs[1]);
    if (!st)
        st = keep_str(tok, "merge_file", &arena, &offs[2]);
    if (!st)
        st = keep_str(root, "data_hash", &arena, &offs[3]);
    if (!st)
        st = keep_str(tok, "tokenizer_model", &arena, &offs[4]);
    if (st) {
        pl_bytes_free(&arena);
        cJSON_Delete(root);
        return st;
    }
    const char **dst[5] = {&meta->tokenizer_type, &meta->vocab_file, &meta->merge_file,
                           &meta->data_hash, &meta->tokenizer_model};
    const cJSON *extra = cJSON_GetObjectItemCaseSensitive(tok, "vocab_extra_ids");
    meta->vocab_extra_ids = cJSON_IsNumber(extra) ? (int64_t)extra->valuedouble : 0;
    meta->legacy_tokenizer = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(tok, "legacy"));
    for (int k = 0; k < 5; k++)
        *dst[k] = offs[k] == SIZE_MAX ? NULL : arena.data + offs[k];
    *strings = arena.data;
    *root_out = root;
    return PL_OK;
}

pl_status pl_ckpt_read_config(const char *dir, int64_t iteration, pl_model_config *cfg,
                              pl_ckpt_meta *meta, char **strings)
{
    char idir[PATH_MAX_], mpath[PATH_MAX_ + 32];
    iter_dir(idir, dir, iteration, "");
    snprintf(mpath, sizeof mpath, "%s/manifest.json", idir);
    cJSON *root = NULL;
    pl_status st = read_manifest(mpath, &root, cfg, meta, strings);
    cJSON_Delete(root);
    return st;
}

/* The "zero" shard entry of rank (tp, pp, dp), or NULL. Entries without rank
 * fields (written before tensor parallelism) are TP and PP rank 0, in DP order. */
static const cJSON *zero_entry(const cJSON *zo, int tp_rank, int pp_rank, int dp_rank)
{
    const cJSON *e;
    int i = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(zo, "shards"))
    {
        int ok = 1, has = cJSON_HasObjectItem(e, "dp_rank");
        int t = has ? (int)num(e, "tp_rank", &ok) : 0, p = has ? (int)num(e, "pp_rank", &ok) : 0;
        int r = has ? (int)num(e, "dp_rank", &ok) : i;
        if (ok && t == tp_rank && p == pp_rank && r == dp_rank)
            return e;
        i++;
    }
    return NULL;
}

/* Reads this rank's ZeRO optimizer shard, checking the DP size and its range. */
static pl_status load_zero_shard(const char *idir, const char *mpath, const cJSON *root,
                                 const cJSON *zo, int tp_rank, int pp_rank, pl_ckpt_zero *z)
{
    int ok = 1;
    int dp = (int)num(zo, "data_parallel_size", &ok);
    int64_t padded = (int64_t)num(zo, "padded_numel", &ok);
    if (!ok)
        return pl_errorf(PL_ERR_FORMAT, "%s: the \"zero\" object is malformed", mpath);
    if (dp != z->dp)
        return pl_errorf(PL_ERR_UNSUPPORTED, "%s: The checkpoint being loaded used a DP world size "
                         "of %d but the current world size is %d (ZeRO optimizer shards cannot be "
                         "resharded yet)", mpath, dp, z->dp);
    const cJSON *e = zero_entry(zo, tp_rank, pp_rank, z->dp_rank);
    if (cJSON_HasObjectItem(e, "padded_numel")) /* each stage pads its own buffer */
        padded = (int64_t)num(e, "padded_numel", &ok);
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(e, "file");
    int64_t off = (int64_t)num(e, "offset", &ok), count = (int64_t)num(e, "count", &ok);
    if (!ok || !cJSON_IsString(file) || padded != z->padded || off != z->lo || count != z->count)
        return pl_errorf(PL_ERR_FORMAT, "%s: ZeRO shard %d's range differs from this run's "
                         "[%lld, %lld) of %lld", mpath, z->dp_rank, (long long)z->lo,
                         (long long)(z->lo + z->count), (long long)z->padded);
    char spath[PATH_MAX_ + 160], got[17];
    snprintf(spath, sizeof spath, "%s/%s", idir, file->valuestring);
    const cJSON *want = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "files"),
                                         file->valuestring), "xxh64");
    pl_status st = file_xxh64(spath, got);
    if (st)
        return st;
    if (!cJSON_IsString(want) || strcmp(got, want->valuestring) != 0)
        return pl_errorf(PL_ERR_FORMAT, "%s: xxh64 %s does not match the manifest (corrupt file)",
                         spath, got);
    pl_safetensors sf = {0};
    if ((st = pl_safetensors_open(&sf, spath)))
        return st;
    static const char *names[2] = {"exp_avg", "exp_avg_sq"};
    float *dst[2] = {z->exp_avg, z->exp_avg_sq};
    for (int k = 0; k < 2 && !st; k++) {
        const pl_st_tensor *t = pl_safetensors_find(&sf, names[k]);
        if (!t || strcmp(t->dtype, "F32") != 0 || t->ndim != 1 || t->shape[0] != z->count)
            st = pl_errorf(PL_ERR_FORMAT, "%s: tensor %s missing or not F32 [%lld]", spath,
                           names[k], (long long)z->count);
        else
            memcpy(dst[k], sf.data + t->begin, (size_t)z->count * sizeof(float));
    }
    pl_safetensors_close(&sf);
    return st;
}

pl_status pl_ckpt_load(const char *dir, int64_t iteration, const pl_model_config *cfg,
                       const pl_ckpt_buffers *buf, pl_ckpt_meta *meta, char **strings)
{
    char idir[PATH_MAX_], mpath[PATH_MAX_ + 32], sub[64], rel[128], spath[PATH_MAX_ + 160];
    iter_dir(idir, dir, iteration, "");
    snprintf(mpath, sizeof mpath, "%s/manifest.json", idir);
    cJSON *root = NULL;
    pl_model_config saved;
    *strings = NULL;
    pl_status st = read_manifest(mpath, &root, &saved, meta, strings);
    if (st)
        return st;
    pl_safetensors sf = {0};
    int sf_open = 0;
    const pl_registry *reg = buf->reg;
    /* first: the padded vocabulary below follows from the TP size */
    if (meta->tp != reg->tp_size || meta->pp < 1) {
        st = pl_errorf(PL_ERR_UNSUPPORTED,
                       "%s: saved with --tensor-model-parallel-size %d, this run uses %d "
                       "(resharding on load is not implemented yet)",
                       mpath, meta->tp, reg->tp_size);
        goto fail;
    }
    for (size_t i = 0; i < sizeof config_fields / sizeof *config_fields; i++) {
        int64_t a = *(const int64_t *)((const char *)&saved + config_fields[i].off);
        int64_t b = *(const int64_t *)((const char *)cfg + config_fields[i].off);
        if (a != b && strcmp(config_fields[i].key, "seq_length") != 0) {
            st = pl_errorf(PL_ERR_ARG, "%s: %s is %lld in the checkpoint but %lld in this run",
                           mpath, config_fields[i].flag, (long long)a, (long long)b);
            goto fail;
        }
    }
    const char *arch = arch_differs(&saved, cfg);
    if (arch) {
        st = pl_errorf(PL_ERR_ARG, "%s: the checkpoint's architecture differs from this run's in "
                       "%s (checkpoint: %s)", mpath, arch, pl_family_get(saved.family)->name);
        goto fail;
    }
    const cJSON *zo = cJSON_GetObjectItemCaseSensitive(root, "zero");
    if (buf->zero && !zo) {
        st = pl_errorf(PL_ERR_UNSUPPORTED, "%s: saved without ZeRO (stage 0); loading it under "
                       "ZeRO stage %d is not implemented (resume with --zero-stage 0, or "
                       "--no-load-optim)", mpath, buf->zero->stage);
        if (buf->zero->exp_avg)
            goto fail;
    }
    if (!buf->zero && zo && buf->exp_avg) {
        st = pl_errorf(PL_ERR_UNSUPPORTED, "%s: saved under ZeRO stage %d; loading its sharded "
                       "optimizer state without ZeRO is not implemented (resume with "
                       "--zero-stage %d, or --no-load-optim)", mpath,
                       (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(zo, "stage")),
                       (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(zo, "stage")));
        goto fail;
    }
    st = PL_OK;
    if (buf->zero && zo && buf->zero->exp_avg)
        PL_TRY(load_zero_shard(idir, mpath, root, zo, reg->tp_rank, reg->pp_rank, buf->zero));
    rank_dir(sub, reg->tp_rank, reg->pp_rank, meta->pp);
    snprintf(rel, sizeof rel, "%s/model_optim.safetensors", sub);
    snprintf(spath, sizeof spath, "%s/%s", idir, rel);
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(root, "files");
    const cJSON *want = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(files, rel),
                                                         "xxh64");
    char got[17];
    if (!cJSON_IsString(want)) {
        st = pl_errorf(PL_ERR_FORMAT, "%s: no checksum recorded for %s", mpath, rel);
        goto fail;
    }
    PL_TRY(file_xxh64(spath, got));
    if (strcmp(got, want->valuestring) != 0) {
        st = pl_errorf(PL_ERR_FORMAT, "%s: xxh64 %s, the manifest says %s (corrupt file)", spath,
                       got, want->valuestring);
        goto fail;
    }
    PL_TRY(pl_safetensors_open(&sf, spath));
    sf_open = 1;
    static const char *prefix[3] = {"", "optimizer.exp_avg.", "optimizer.exp_avg_sq."};
    float *bufs[3] = {buf->params, buf->exp_avg, buf->exp_avg_sq};
    for (int k = 0; k < 3; k++) {
        if (!bufs[k])
            continue;
        for (int i = 0; i < reg->n; i++) {
            const pl_param *p = &reg->params[i];
            if (p->offset < 0)
                continue;
            char name[PL_ST_NAME_MAX];
            snprintf(name, sizeof name, "%s%s", prefix[k], p->name);
            const pl_st_tensor *t = pl_safetensors_find(&sf, name);
            if (!t) {
                st = pl_errorf(PL_ERR_FORMAT, "%s: tensor %s is missing", spath, name);
                goto fail;
            }
            if (strcmp(t->dtype, "F32") != 0 || t->ndim != p->ndim || t->shape[0] != p->local_shape[0] ||
                (p->ndim == 2 && t->shape[1] != p->local_shape[1])) {
                st = pl_errorf(PL_ERR_FORMAT, "%s: tensor %s has dtype %s and a shape other than "
                               "this run's [%lld, %lld]",
                               spath, name, t->dtype, (long long)p->local_shape[0],
                               (long long)p->local_shape[1]);
                goto fail;
            }
            memcpy(bufs[k] + p->offset, sf.data + t->begin, (size_t)p->numel * sizeof(float));
        }
    }
    pl_safetensors_close(&sf);
    cJSON_Delete(root);
    return PL_OK;
fail:
    if (sf_open)
        pl_safetensors_close(&sf);
    cJSON_Delete(root);
    pl_free(*strings);
    *strings = NULL;
    return st;
}
