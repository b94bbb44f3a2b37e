/* Checkpoint save and load: safetensors shards plus a JSON manifest
 * (ckpt/manifest.h), published in two phases (ckpt/publish.h) and read back
 * through confined opens (ckpt/files.h). */
#include "ckpt/checkpoint.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/xxh64.h"
#include "ckpt/files.h"
#include "ckpt/manifest.h"
#include "ckpt/publish.h"
#include "ckpt/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { PATH_MAX_ = 4096, RANK_MAX = 1 << 24 };
static const double COUNT_MAX = 9007199254740992.0; /* 2^53 */
static const char FORMAT[] = "plait-checkpoint";

static void rank_dir(char *out, int tp_rank, int pp_rank, int pp)
{
    if (pp == 1)
        snprintf(out, 64, "mp_rank_%02d", tp_rank);
    else
        snprintf(out, 64, "mp_rank_%02d_%03d", tp_rank, pp_rank);
}

/* xxh64 of a whole file this process wrote, as 16 hex digits. */
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
        return pl_error_echo(PL_ERR_IO, bad - 1, "%s failed on rank %d", what, bad - 1);
    return PL_OK;
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
                               pl_ckpt_jbuild *jb)
{
    char rel[128], path[PATH_MAX_ + 160], hash[17], sub[64];
    cJSON *zo = pl_ckpt_jobj(root, "zero", jb);
    pl_ckpt_jnum(zo, "stage", z->stage, jb);
    pl_ckpt_jnum(zo, "data_parallel_size", z->dp, jb);
    pl_ckpt_jnum(zo, "padded_numel", (double)z->padded, jb); /* rank 0's; each entry has its own */
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
        pl_ckpt_jstr(pl_ckpt_jobj(files, rel, jb), "xxh64", hash, jb);
        cJSON *e = cJSON_CreateObject();
        jb->ok &= e != NULL && cJSON_AddItemToArray(shards, e);
        pl_ckpt_jstr(e, "file", rel, jb);
        pl_ckpt_jnum(e, "tp_rank", t, jb);
        pl_ckpt_jnum(e, "pp_rank", p, jb);
        pl_ckpt_jnum(e, "dp_rank", r, jb);
        pl_ckpt_jnum(e, "offset", (double)row[3], jb);
        pl_ckpt_jnum(e, "count", (double)row[4], jb);
        pl_ckpt_jnum(e, "padded_numel", (double)row[5], jb);
    }
    return jb->ok ? PL_OK : pl_errorf(PL_ERR_NOMEM, "out of memory writing the manifest");
}
/* Copies the file src to dst (written atomically). */
static pl_status copy_file(const char *src, const char *dst)
{
    char *data = NULL;
    size_t n;
    pl_status st = pl_file_read_all(src, &data, &n);
    if (!st)
        st = pl_file_write_atomic(dst, data, n);
    pl_free(data);
    return st;
}

/* The tokenizer's files go into tmp/tokenizer/<role>/ so that the checkpoint
 * names only files inside itself: role "vocab", "merges" or "model" (a
 * Hugging Face tokenizer's directory, or a model file with the JSON files
 * beside it that the Hugging Face loader reads). *rel receives the path to
 * record, relative to the iteration directory. */
static pl_status copy_tokenizer_file(const char *tmp, const char *role, const char *src,
                                     char *rel, size_t n)
{
    static const char *const beside[3] = {"tokenizer.json", "tokenizer_config.json",
                                          "special_tokens_map.json"};
    char dir[PATH_MAX_ + 64], from[PATH_MAX_ + 64], to[2 * PATH_MAX_];
    snprintf(dir, sizeof dir, "%s/tokenizer/%s", tmp, role);
    pl_status st = pl_mkdirs(dir);
    if (st)
        return st;
    struct stat sb;
    if (stat(src, &sb) != 0)
        return pl_errorf(PL_ERR_IO, "%s: cannot stat the tokenizer file to copy into the "
                         "checkpoint: %s", src, strerror(errno));
    int is_dir = S_ISDIR(sb.st_mode);
    const char *base = strrchr(src, '/');
    base = base ? base + 1 : src;
    if (!is_dir) {
        if (!*base)
            return pl_errorf(PL_ERR_ARG, "%s: not a file name", src);
        snprintf(rel, n, "tokenizer/%s/%s", role, base);
        snprintf(to, sizeof to, "%s/%s", dir, base);
        if ((st = copy_file(src, to)))
            return st;
    } else {
        snprintf(rel, n, "tokenizer/%s", role);
    }
    if (strcmp(role, "model") == 0) {
        int len = is_dir ? (int)strlen(src) : (int)(base - src) - (base > src);
        for (int k = 0; k < 3 && !st; k++) {
            snprintf(from, sizeof from, "%.*s%s%s", len, src, len > 0 ? "/" : "", beside[k]);
            snprintf(to, sizeof to, "%s/%s", dir, beside[k]);
            if ((is_dir || strcmp(beside[k], base) != 0) && pl_file_exists(from))
                st = copy_file(from, to);
        }
    }
    if (!st)
        st = pl_fsync_dir(dir);
    if (!st) {
        snprintf(dir, sizeof dir, "%s/tokenizer", tmp);
        st = pl_fsync_dir(dir);
    }
    return st;
}

/* m with its tokenizer paths replaced by the copies' (in names). */
static pl_status copy_tokenizer(const char *tmp, const pl_ckpt_meta *m, pl_ckpt_meta *out,
                                char names[3][PATH_MAX_])
{
    *out = *m;
    const char *src[3] = {m->vocab_file, m->merge_file, m->tokenizer_model};
    const char **dst[3] = {&out->vocab_file, &out->merge_file, &out->tokenizer_model};
    static const char *const role[3] = {"vocab", "merges", "model"};
    for (int k = 0; k < 3; k++) {
        if (!src[k])
            continue;
        pl_status st = copy_tokenizer_file(tmp, role[k], src[k], names[k], PATH_MAX_);
        if (st)
            return st;
        *dst[k] = names[k];
    }
    return PL_OK;
}

/* Rank 0: the manifest (with every shard's checksum) into tmp, then publish. */
static pl_status write_manifest(const char *dir, const char *tmp, const pl_model_config *cfg,
                                const pl_ckpt_meta *meta0, const pl_ckpt_buffers *buf,
                                const int64_t *zero_rows, int nranks)
{
    char names[3][PATH_MAX_];
    char path[PATH_MAX_ + 128], sub[64];
    pl_ckpt_meta meta;
    pl_status st = copy_tokenizer(tmp, meta0, &meta, names);
    if (st)
        return st;
    cJSON *root = pl_ckpt_manifest_build(cfg, &meta, buf->reg);
    char *text = NULL;
    pl_ckpt_jbuild jb = {root != NULL};
    cJSON *files = pl_ckpt_jobj(root, "files", &jb);
    if (!jb.ok) {
        st = pl_errorf(PL_ERR_NOMEM, "out of memory writing the manifest");
        goto done;
    }
    for (int t = 0; t < meta.tp && !st; t++)
        for (int p = 0; p < meta.pp && !st; p++) {
            char hash[17], rel[128];
            rank_dir(sub, t, p, meta.pp);
            snprintf(rel, sizeof rel, "%s/model_optim.safetensors", sub);
            snprintf(path, sizeof path, "%s/%s", tmp, rel);
            if (!(st = file_xxh64(path, hash))) {
                pl_ckpt_jstr(pl_ckpt_jobj(files, rel, &jb), "xxh64", hash, &jb);
                if (!jb.ok)
                    st = pl_errorf(PL_ERR_NOMEM, "out of memory writing the manifest");
            }
        }
    if (!st && buf->zero)
        st = manifest_zero(root, files, tmp, meta.pp, buf->zero, zero_rows, nranks, &jb);
    if (st)
        goto done;
    text = cJSON_Print(root);
    if (!text) {
        st = pl_errorf(PL_ERR_NOMEM, "out of memory writing the manifest");
        goto done;
    }
    st = pl_ckpt_manifest_write(tmp, text);
    if (!st)
        st = pl_ckpt_publish(dir, tmp, meta.iteration);
done:
    cJSON_free(text);
    cJSON_Delete(root);
    return st;
}

pl_status pl_ckpt_save(const char *dir, pl_comm *world, int dp_rank, const pl_model_config *cfg,
                       const pl_ckpt_meta *meta, const pl_ckpt_buffers *buf)
{
    char tmp[PATH_MAX_], path[PATH_MAX_ + 128], sub[64];
    snprintf(tmp, sizeof tmp, "%s/iter_%07lld.tmp", dir, (long long)meta->iteration);
    /* every rank is past any load (whose aside copy the clean-up may rename back) */
    pl_status st = consensus(world, PL_OK, "starting a save");
    if (st)
        return st;
    if (world->rank == 0) {
        st = pl_ckpt_prepare_dir(dir);
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
    if (!st && (dp_rank == 0 || buf->zero)) { /* the shards' names in their directory */
        snprintf(path, sizeof path, "%s/%s", tmp, sub);
        st = pl_fsync_dir(path);
    }
    if ((st = consensus(world, st, "writing ZeRO optimizer shards")))
        return st;
    int64_t *zero_rows = NULL;
    if (buf->zero && (st = gather_zero(world, buf->reg, buf->zero, &zero_rows)))
        return st;
    if (world->rank == 0)
        st = write_manifest(dir, tmp, cfg, meta, buf, zero_rows, world->size);
    pl_free(zero_rows);
    return consensus(world, st, "publishing the checkpoint");
}

pl_status pl_ckpt_latest(const char *dir, int64_t *iteration)
{
    static const char LATEST[] = "latest_checkpointed_iteration.txt";
    char path[PATH_MAX_ + 64];
    snprintf(path, sizeof path, "%s/%s", dir, LATEST);
    *iteration = -1;
    int top = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (top < 0)
        return errno == ENOENT ? PL_OK
                               : pl_errorf(PL_ERR_IO, "%s: cannot open the checkpoint directory: %s",
                                           dir, strerror(errno));
    struct stat sb;
    if (fstatat(top, LATEST, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
        close(top);
        return PL_OK;
    }
    pl_mmap m;
    pl_status st = pl_ckpt_map_in(top, dir, LATEST, &m);
    close(top);
    if (st)
        return st;
    char text[64] = "";
    if (m.size < sizeof text)
        memcpy(text, m.data ? (const char *)m.data : "", m.size);
    size_t size = m.size;
    pl_mmap_close(&m);
    char *end;
    long long v = strtoll(text, &end, 10);
    while (*end == '\n' || *end == ' ' || *end == '\r')
        end++;
    if (size >= sizeof text || end == text || *end || v < 0 || text[0] == '-' || text[0] == ' ')
        return pl_errorf(PL_ERR_FORMAT, "%s: expected an iteration number, got '%.40s'", path,
                         size >= sizeof text ? "(a file too long)" : text);
    *iteration = v;
    return PL_OK;
}

/* Maps rel of the iteration directory, checks its xxh64 against the
 * manifest's "files" and parses it as safetensors. */
static pl_status open_verified(int idfd, const char *idir, const cJSON *root, const char *rel,
                               const char *mpath, pl_safetensors *sf)
{
    char path[2 * PATH_MAX_];
    snprintf(path, sizeof path, "%s/%s", idir, rel);
    memset(sf, 0, sizeof *sf);
    const cJSON *want = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "files"), rel),
        "xxh64");
    if (!cJSON_IsString(want))
        return pl_errorf(PL_ERR_FORMAT, "%s: no checksum recorded for %s", mpath, rel);
    pl_mmap m;
    pl_status st = pl_ckpt_map_in(idfd, idir, rel, &m);
    if (st)
        return st;
    char got[17];
    snprintf(got, sizeof got, "%016" PRIx64, pl_xxh64(m.data ? m.data : (const uint8_t *)"", m.size, 0));
    if (strcmp(got, want->valuestring) != 0) {
        pl_mmap_close(&m);
        return pl_errorf(PL_ERR_FORMAT, "%s: xxh64 %s, the manifest says %.20s (corrupt file)",
                         path, got, want->valuestring);
    }
    sf->map = m;
    st = pl_safetensors_parse(sf, m.data, m.size, path);
    if (st)
        pl_mmap_close(&sf->map);
    return st;
}

/* An integer field of o in [0, hi]; *ok = 0 (and 0 returned) when it is
 * missing, fractional or out of range, so no cast below overflows. */
static int64_t num(const cJSON *o, const char *key, double hi, int *ok)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= hi) ||
        v->valuedouble != (double)(int64_t)v->valuedouble) {
        *ok = 0;
        return 0;
    }
    return (int64_t)v->valuedouble;
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
        int t = has ? (int)num(e, "tp_rank", RANK_MAX, &ok) : 0;
        int p = has ? (int)num(e, "pp_rank", RANK_MAX, &ok) : 0;
        int r = has ? (int)num(e, "dp_rank", RANK_MAX, &ok) : i;
        if (ok && t == tp_rank && p == pp_rank && r == dp_rank)
            return e;
        i++;
    }
    return NULL;
}
/* Opens iteration it of dir and reads its manifest (validated). */
static pl_status open_iteration(const char *dir, int64_t it, int *idfd, char *idir, size_t n,
                                cJSON **root, pl_model_config *cfg, pl_ckpt_meta *meta,
                                char **strings)
{
    int aside;
    pl_status st = pl_ckpt_iter_open(dir, it, idfd, idir, n, &aside);
    if (st)
        return st;
    st = pl_ckpt_manifest_read(*idfd, idir, it, root, cfg, meta, strings);
    if (st) {
        close(*idfd);
        *idfd = -1;
    }
    return st;
}

pl_status pl_ckpt_read_config(const char *dir, int64_t iteration, pl_model_config *cfg,
                              pl_ckpt_meta *meta, char **strings)
{
    char idir[PATH_MAX_];
    int idfd;
    cJSON *root = NULL;
    pl_status st = open_iteration(dir, iteration, &idfd, idir, sizeof idir, &root, cfg, meta,
                                  strings);
    if (st)
        return st;
    cJSON_Delete(root);
    close(idfd);
    return PL_OK;
}


/* Reads this rank's ZeRO optimizer shard, checking the DP size and its range. */
static pl_status load_zero_shard(int idfd, const char *idir, const char *mpath, const cJSON *root,
                                 const cJSON *zo, int tp_rank, int pp_rank, pl_ckpt_zero *z)
{
    int ok = 1;
    int dp = (int)num(zo, "data_parallel_size", RANK_MAX, &ok);
    int64_t padded = num(zo, "padded_numel", COUNT_MAX, &ok);
    if (!ok)
        return pl_errorf(PL_ERR_FORMAT, "%s: the \"zero\" object is malformed", mpath);
    if (dp != z->dp)
        return pl_errorf(PL_ERR_UNSUPPORTED, "%s: The checkpoint being loaded used a DP world size "
                         "of %d but the current world size is %d (ZeRO optimizer shards cannot be "
                         "resharded yet)", mpath, dp, z->dp);
    const cJSON *e = zero_entry(zo, tp_rank, pp_rank, z->dp_rank);
    if (cJSON_HasObjectItem(e, "padded_numel")) /* each stage pads its own buffer */
        padded = num(e, "padded_numel", COUNT_MAX, &ok);
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(e, "file");
    int64_t off = num(e, "offset", COUNT_MAX, &ok), count = num(e, "count", COUNT_MAX, &ok);
    if (!ok || !cJSON_IsString(file) || padded != z->padded || off != z->lo || count != z->count)
        return pl_errorf(PL_ERR_FORMAT, "%s: ZeRO shard %d's range differs from this run's "
                         "[%lld, %lld) of %lld", mpath, z->dp_rank, (long long)z->lo,
                         (long long)(z->lo + z->count), (long long)z->padded);
    pl_status st = pl_ckpt_rel_check(file->valuestring, "a ZeRO shard's \"file\"", mpath);
    if (st)
        return st;
    pl_safetensors sf;
    if ((st = open_verified(idfd, idir, root, file->valuestring, mpath, &sf)))
        return st;
    static const char *names[2] = {"exp_avg", "exp_avg_sq"};
    float *dst[2] = {z->exp_avg, z->exp_avg_sq};
    for (int k = 0; k < 2 && !st; k++) {
        const pl_st_tensor *t = pl_safetensors_find(&sf, names[k]);
        if (!t || strcmp(t->dtype, "F32") != 0 || t->ndim != 1 || t->shape[0] != z->count)
            st = pl_errorf(PL_ERR_FORMAT, "%s/%s: tensor %s missing or not F32 [%lld]", idir,
                           file->valuestring, names[k], (long long)z->count);
        else
            memcpy(dst[k], sf.data + t->begin, (size_t)z->count * sizeof(float));
    }
    pl_safetensors_close(&sf);
    return st;
}

static pl_status load_tensors(const pl_safetensors *sf, const pl_ckpt_buffers *buf,
                              const int *from, int s, const char *idir, const char *rel);

/* from[i]: the pipeline stage that saved reg's parameter i (the manifest's
 * tensors.NAME.pipeline_stage, in [0, pp)); -1 for a parameter this rank does not
 * hold. A tensor the manifest lacks is an error naming it. */
static pl_status saved_stages(const cJSON *root, const pl_registry *reg, int pp,
                              const char *mpath, int *from)
{
    const cJSON *tensors = cJSON_GetObjectItemCaseSensitive(root, "tensors");
    for (int i = 0; i < reg->n; i++) {
        const pl_param *p = &reg->params[i];
        from[i] = -1;
        if (p->offset < 0)
            continue;
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(tensors, p->name);
        if (!e)
            return pl_errorf(PL_ERR_FORMAT, "%s: \"tensors\" lacks %s", mpath, p->name);
        char what[PL_PARAM_NAME_MAX + 16];
        snprintf(what, sizeof what, "tensors.%s", p->name);
        double x;
        pl_status st = pl_ckpt_jfield(e, what, "pipeline_stage", 0, pp - 1, 1, mpath, &x);
        if (st)
            return st;
        from[i] = (int)x;
    }
    return PL_OK;
}

pl_status pl_ckpt_load(const char *dir, int64_t iteration, const pl_model_config *cfg,
                       const pl_ckpt_buffers *buf, pl_ckpt_meta *meta, char **strings)
{
    char idir[PATH_MAX_], mpath[PATH_MAX_ + 32], sub[64], rel[128];
    cJSON *root = NULL;
    pl_model_config saved;
    int idfd = -1;
    *strings = NULL;
    pl_status st = open_iteration(dir, iteration, &idfd, idir, sizeof idir, &root, &saved, meta,
                                  strings);
    if (st)
        return st;
    snprintf(mpath, sizeof mpath, "%s/manifest.json", idir);
    pl_safetensors sf = {0};
    int sf_open = 0;
    const pl_registry *reg = buf->reg;
    /* first: the padded vocabulary below follows from the TP size */
    if (meta->tp != reg->tp_size) {
        st = pl_errorf(PL_ERR_UNSUPPORTED,
                       "%s: saved with --tensor-model-parallel-size %d, this run uses %d "
                       "(resharding on load is not implemented yet)",
                       mpath, meta->tp, reg->tp_size);
        goto fail;
    }
    PL_TRY(pl_ckpt_config_match(&saved, cfg, mpath));
    const cJSON *zo = cJSON_GetObjectItemCaseSensitive(root, "zero");
    if (buf->zero && !zo) {
        st = pl_errorf(PL_ERR_UNSUPPORTED, "%s: saved without ZeRO (stage 0); loading it under "
                       "ZeRO stage %d is not implemented (resume with --zero-stage 0, or "
                       "--no-load-optim)", mpath, buf->zero->stage);
        if (buf->zero->exp_avg)
            goto fail;
    }
    if (!buf->zero && zo && buf->exp_avg) {
        int ok = 1;
        int stage = (int)num(zo, "stage", 3, &ok);
        st = pl_errorf(PL_ERR_UNSUPPORTED, "%s: saved under ZeRO stage %d; loading its sharded "
                       "optimizer state without ZeRO is not implemented (resume with "
                       "--zero-stage %d, or --no-load-optim)", mpath, stage, stage);
        goto fail;
    }
    st = PL_OK;
    if (buf->zero && zo && buf->zero->exp_avg)
        PL_TRY(load_zero_shard(idfd, idir, mpath, root, zo, reg->tp_rank, reg->pp_rank, buf->zero));
    /* the stage that saved each tensor this rank holds */
    int *from = pl_malloc((size_t)(reg->n > 0 ? reg->n : 1) * sizeof *from);
    if (!from) {
        st = pl_errorf(PL_ERR_NOMEM, "out of memory reading %s", mpath);
        goto fail;
    }
    st = saved_stages(root, reg, meta->pp, mpath, from);
    const int moments = buf->exp_avg || (buf->zero && buf->zero->exp_avg);
    for (int i = 0; !st && moments && i < reg->n; i++)
        if (reg->params[i].offset >= 0 && from[i] != reg->pp_rank)
            st = pl_errorf(PL_ERR_UNSUPPORTED, "%s: %s was saved by pipeline stage %d of %d, this "
                           "rank is stage %d: the optimizer state loads only in the pipeline "
                           "layout that saved it (same --pipeline-model-parallel-size and model "
                           "chunks); weights alone move (--finetune or --no-load-optim)", mpath,
                           reg->params[i].name, from[i], meta->pp, reg->pp_rank);
    for (int s = 0; !st && s < meta->pp; s++) {
        int need = 0;
        for (int i = 0; i < reg->n && !need; i++)
            need = reg->params[i].offset >= 0 && from[i] == s;
        if (!need)
            continue;
        rank_dir(sub, reg->tp_rank, s, meta->pp);
        snprintf(rel, sizeof rel, "%s/model_optim.safetensors", sub);
        st = open_verified(idfd, idir, root, rel, mpath, &sf);
        if (!st) {
            sf_open = 1;
            st = load_tensors(&sf, buf, from, s, idir, rel);
            pl_safetensors_close(&sf);
            sf_open = 0;
        }
    }
    pl_free(from);
    if (st)
        goto fail;
    cJSON_Delete(root);
    close(idfd);
    return PL_OK;
fail:
    if (sf_open)
        pl_safetensors_close(&sf);
    cJSON_Delete(root);
    close(idfd);
    pl_free(*strings);
    *strings = NULL;
    return st;
}

/* Copies into buf the tensors this rank holds that stage s saved (from[i] == s),
 * out of that stage's file sf: the parameters, and the Adam moments when buf
 * wants them. */
static pl_status load_tensors(const pl_safetensors *sf, const pl_ckpt_buffers *buf,
                              const int *from, int s, const char *idir, const char *rel)
{
    const pl_registry *reg = buf->reg;
    static const char *prefix[3] = {"", "optimizer.exp_avg.", "optimizer.exp_avg_sq."};
    float *bufs[3] = {buf->params, buf->exp_avg, buf->exp_avg_sq};
    for (int k = 0; k < 3; k++) {
        if (!bufs[k])
            continue;
        for (int i = 0; i < reg->n; i++) {
            const pl_param *p = &reg->params[i];
            if (p->offset < 0 || from[i] != s)
                continue;
            char name[PL_ST_NAME_MAX];
            snprintf(name, sizeof name, "%s%s", prefix[k], p->name);
            const pl_st_tensor *t = pl_safetensors_find(sf, name);
            if (!t)
                return pl_errorf(PL_ERR_FORMAT, "%s/%s: tensor %s is missing", idir, rel, name);
            if (strcmp(t->dtype, "F32") != 0 || t->ndim != p->ndim || t->shape[0] != p->local_shape[0] ||
                (p->ndim == 2 && t->shape[1] != p->local_shape[1]))
                return pl_errorf(PL_ERR_FORMAT, "%s/%s: tensor %s has dtype %s and a shape other "
                                 "than this run's [%lld, %lld]",
                                 idir, rel, name, t->dtype, (long long)p->local_shape[0],
                                 (long long)p->local_shape[1]);
            memcpy(bufs[k] + p->offset, sf->data + t->begin, (size_t)p->numel * sizeof(float));
        }
    }
    return PL_OK;
}
