/* Checkpoint save: safetensors shards plus a JSON manifest (ckpt/manifest.h),
 * published in two phases (ckpt/publish.h). Loading is ckpt/load.c. */
#include "ckpt/checkpoint.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/xxh64.h"
#include "ckpt/files.h"
#include "ckpt/manifest.h"
#include "ckpt/publish.h"
#include "ckpt/safetensors.h"
#include "kernels/kernels.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { PATH_MAX_ = 4096 };
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
    uint16_t *half = NULL; /* the BF16 parameters, alive until the file is written */
    if (b->bf16) {
        half = pl_malloc((size_t)(reg->numel > 0 ? reg->numel : 1) * sizeof *half);
        if (!half) {
            pl_st_writer_free(w);
            return pl_errorf(PL_ERR_NOMEM, "out of memory writing %s", path);
        }
        for (int64_t e = 0; e < reg->numel; e++)
            half[e] = pl_ref_bf16_from_f32(b->params[e]);
    }
    for (int k = 0; k < 3 && !st; k++) {
        if (!bufs[k])
            continue;
        for (int i = 0; i < reg->n && !st; i++) {
            const pl_param *p = &reg->params[i];
            if (p->offset < 0)
                continue;
            char name[PL_ST_NAME_MAX];
            snprintf(name, sizeof name, "%s%s", prefix[k], p->name);
            if (k == 0 && half)
                st = pl_st_writer_add(w, name, "BF16", p->ndim, p->local_shape, half + p->offset);
            else
                st = pl_st_writer_add(w, name, "F32", p->ndim, p->local_shape,
                                      bufs[k] + p->offset);
        }
    }
    if (st) {
        pl_st_writer_free(w);
        pl_free(half);
        return st;
    }
    pl_st_writer_meta(w, "format", FORMAT);
    st = pl_st_writer_finish(w, path);
    pl_free(half);
    return st;
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

/* What every rank wrote, as every rank learns it: ROW_FIELDS int64 per world rank.
 * Pipeline stages hold flat buffers of different lengths, so rank 0 cannot infer the
 * others' ZeRO ranges; the checksums are the writers' (rank 0 reads no other rank's
 * file). A checksum travels as its bits in an int64. */
enum { ROW_TP, ROW_PP, ROW_DP, ROW_MODEL, ROW_MHASH, ROW_ZLO, ROW_ZCOUNT, ROW_ZPADDED, ROW_ZHASH,
       ROW_FIELDS };

static int64_t hash_bits(uint64_t h)
{
    int64_t v;
    memcpy(&v, &h, sizeof v);
    return v;
}

static void hash_hex(int64_t bits, char out[17])
{
    uint64_t h;
    memcpy(&h, &bits, sizeof h);
    snprintf(out, 17, "%016" PRIx64, h);
}

static pl_status gather_rows(pl_comm *world, int dp_rank, const pl_ckpt_buffers *b,
                             const pl_ckpt_pending *p, int64_t **out)
{
    int64_t *all = pl_calloc((size_t)world->size * ROW_FIELDS, sizeof *all);
    if (!all)
        return pl_errorf(PL_ERR_NOMEM, "out of memory listing the checkpoint's files");
    int64_t *mine = all + (size_t)world->rank * ROW_FIELDS;
    mine[ROW_TP] = b->reg->tp_rank;
    mine[ROW_PP] = b->reg->pp_rank;
    mine[ROW_DP] = dp_rank;
    mine[ROW_MODEL] = dp_rank == 0;
    mine[ROW_MHASH] = hash_bits(p->model_hash);
    if (b->zero) {
        mine[ROW_ZLO] = b->zero->lo;
        mine[ROW_ZCOUNT] = b->zero->count;
        mine[ROW_ZPADDED] = b->zero->padded;
        mine[ROW_ZHASH] = hash_bits(p->zero_hash);
    }
    pl_status st = pl_comm_allreduce_i64(world, all, world->size * ROW_FIELDS, PL_COMM_SUM);
    if (st)
        pl_free(all);
    *out = st ? NULL : all;
    return st;
}

/* The manifest's "zero" object and the checksums of the optimizer shard files:
 * one entry per rank (rows: gather_rows's table, nranks of them). */
static pl_status manifest_zero(cJSON *root, cJSON *files, int pp, const pl_ckpt_zero *z,
                               const int64_t *rows, int nranks, pl_ckpt_jbuild *jb)
{
    char rel[128], hash[17], sub[64];
    cJSON *zo = pl_ckpt_jobj(root, "zero", jb);
    pl_ckpt_jnum(zo, "stage", z->stage, jb);
    pl_ckpt_jnum(zo, "data_parallel_size", z->dp, jb);
    pl_ckpt_jnum(zo, "padded_numel", (double)z->padded, jb); /* rank 0's; each entry has its own */
    cJSON *shards = zo ? cJSON_AddArrayToObject(zo, "shards") : NULL;
    jb->ok &= shards != NULL;
    for (int i = 0; i < nranks && jb->ok; i++) {
        const int64_t *row = rows + (size_t)i * ROW_FIELDS;
        const int t = (int)row[ROW_TP], p = (int)row[ROW_PP], r = (int)row[ROW_DP];
        rank_dir(sub, t, p, pp);
        optim_rel(rel, sizeof rel, sub, r);
        hash_hex(row[ROW_ZHASH], hash);
        pl_ckpt_jstr(pl_ckpt_jobj(files, rel, jb), "xxh64", hash, jb);
        cJSON *e = cJSON_CreateObject();
        jb->ok &= e != NULL && cJSON_AddItemToArray(shards, e);
        pl_ckpt_jstr(e, "file", rel, jb);
        pl_ckpt_jnum(e, "tp_rank", t, jb);
        pl_ckpt_jnum(e, "pp_rank", p, jb);
        pl_ckpt_jnum(e, "dp_rank", r, jb);
        pl_ckpt_jnum(e, "offset", (double)row[ROW_ZLO], jb);
        pl_ckpt_jnum(e, "count", (double)row[ROW_ZCOUNT], jb);
        pl_ckpt_jnum(e, "padded_numel", (double)row[ROW_ZPADDED], jb);
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

/* The checksum of (tp, pp)'s model file: from rows (the writers'), or, without rows
 * (one process wrote every file: plait ckpt reshard, convert), read from the file. */
static pl_status model_hash(const char *tmp, const char *rel, int tp, int pp,
                            const int64_t *rows, int nranks, char out[17])
{
    if (!rows) {
        char path[PATH_MAX_ + 128];
        snprintf(path, sizeof path, "%s/%s", tmp, rel);
        return file_xxh64(path, out);
    }
    for (int i = 0; i < nranks; i++) {
        const int64_t *row = rows + (size_t)i * ROW_FIELDS;
        if (row[ROW_MODEL] && row[ROW_TP] == tp && row[ROW_PP] == pp) {
            hash_hex(row[ROW_MHASH], out);
            return PL_OK;
        }
    }
    return pl_errorf(PL_ERR_INTERNAL, "%s: no rank wrote it", rel);
}

/* Rank 0: the manifest (with every shard's checksum) into tmp, then publish. */
static pl_status write_manifest(const char *dir, const char *tmp, const pl_model_config *cfg,
                                const pl_ckpt_meta *meta0, const pl_ckpt_buffers *buf,
                                const int64_t *rows, int nranks, int64_t publish_it)
{
    char names[3][PATH_MAX_];
    char sub[64];
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
            if (!(st = model_hash(tmp, rel, t, p, rows, nranks, hash))) {
                pl_ckpt_jstr(pl_ckpt_jobj(files, rel, &jb), "xxh64", hash, &jb);
                if (!jb.ok)
                    st = pl_errorf(PL_ERR_NOMEM, "out of memory writing the manifest");
            }
        }
    if (!st && buf->zero)
        st = manifest_zero(root, files, meta.pp, buf->zero, rows, nranks, &jb);
    if (st)
        goto done;
    text = cJSON_Print(root);
    if (!text) {
        st = pl_errorf(PL_ERR_NOMEM, "out of memory writing the manifest");
        goto done;
    }
    st = pl_ckpt_manifest_write(tmp, text);
    if (!st)
        st = pl_ckpt_publish(dir, tmp, publish_it);
done:
    cJSON_free(text);
    cJSON_Delete(root);
    return st;
}

pl_status pl_ckpt_save_begin(const char *dir, pl_comm *world, int64_t iteration,
                             pl_ckpt_pending *p)
{
    memset(p, 0, sizeof *p);
    snprintf(p->tmp, sizeof p->tmp, "%s/iter_%07lld.tmp", dir, (long long)iteration);
    /* every rank is past any load (whose aside copy the clean-up may rename back) */
    pl_status st = consensus(world, PL_OK, "starting a save");
    if (st)
        return st;
    if (world->rank == 0) {
        st = pl_ckpt_prepare_dir(dir);
        if (!st)
            st = pl_mkdirs(p->tmp);
    }
    return consensus(world, st, "creating the checkpoint directory");
}

/* The files of save_write: the model file on DP rank 0 of each model-parallel slice,
 * the ZeRO shard on every rank, each file's checksum. */
static pl_status write_files(pl_ckpt_pending *p, int dp_rank, int pp, const pl_ckpt_buffers *buf)
{
    char path[PATH_MAX_ + 128], sub[64], hash[17];
    rank_dir(sub, buf->reg->tp_rank, buf->reg->pp_rank, pp);
    snprintf(path, sizeof path, "%s/%s", p->tmp, sub);
    pl_status st = pl_mkdirs(path); /* DP ranks > 0 too: a ZeRO shard's directory */
    if (!st && dp_rank == 0) {
        snprintf(path, sizeof path, "%s/%s/model_optim.safetensors", p->tmp, sub);
        if (!(st = write_shard(path, buf)) && !(st = file_xxh64(path, hash)))
            p->model_hash = strtoull(hash, NULL, 16);
    }
    if (!st && buf->zero) {
        char rel[128];
        optim_rel(rel, sizeof rel, sub, buf->zero->dp_rank);
        snprintf(path, sizeof path, "%s/%s", p->tmp, rel);
        if (!(st = write_zero_shard(path, buf->zero)) && !(st = file_xxh64(path, hash)))
            p->zero_hash = strtoull(hash, NULL, 16);
    }
    if (!st && (dp_rank == 0 || buf->zero)) { /* the shards' names in their directory */
        snprintf(path, sizeof path, "%s/%s", p->tmp, sub);
        st = pl_fsync_dir(path);
    }
    return st;
}

pl_status pl_ckpt_save_write(pl_ckpt_pending *p, int dp_rank, int pp, const pl_ckpt_buffers *buf)
{
    p->st = write_files(p, dp_rank, pp, buf);
    snprintf(p->err, sizeof p->err, "%s", p->st ? pl_error_msg() : "");
    return p->st;
}

pl_status pl_ckpt_save_agree(pl_comm *world, int dp_rank, const pl_ckpt_buffers *buf,
                             pl_ckpt_pending *p)
{
    pl_status local = p->st ? pl_errorf(p->st, "%s", p->err) : PL_OK;
    pl_status st = consensus(world, local, "writing checkpoint shards");
    if (!st && !(st = gather_rows(world, dp_rank, buf, p, &p->rows)))
        p->nranks = world->size;
    return st;
}

pl_status pl_ckpt_save_publish(const char *dir, const pl_model_config *cfg,
                               const pl_ckpt_meta *meta, const pl_ckpt_buffers *buf,
                               pl_ckpt_pending *p)
{
    p->st = write_manifest(dir, p->tmp, cfg, meta, buf, p->rows, p->nranks, meta->iteration);
    snprintf(p->err, sizeof p->err, "%s", p->st ? pl_error_msg() : "");
    return p->st;
}

void pl_ckpt_pending_free(pl_ckpt_pending *p)
{
    pl_free(p->rows);
    p->rows = NULL;
}

pl_status pl_ckpt_save_end(const char *dir, pl_comm *world, int dp_rank, const pl_model_config *cfg,
                           const pl_ckpt_meta *meta, const pl_ckpt_buffers *buf,
                           pl_ckpt_pending *p)
{
    pl_status st = pl_ckpt_save_agree(world, dp_rank, buf, p);
    if (st) {
        pl_ckpt_pending_free(p);
        return st;
    }
    if (world->rank == 0)
        st = pl_ckpt_save_publish(dir, cfg, meta, buf, p);
    pl_ckpt_pending_free(p);
    return consensus(world, st, "publishing the checkpoint");
}

pl_status pl_ckpt_publish_agree(pl_comm *world, const pl_ckpt_pending *p)
{
    pl_status local = world->rank == 0 && p->st ? pl_errorf(p->st, "%s", p->err) : PL_OK;
    return consensus(world, local, "publishing the checkpoint");
}

pl_status pl_ckpt_save(const char *dir, pl_comm *world, int dp_rank, const pl_model_config *cfg,
                       const pl_ckpt_meta *meta, const pl_ckpt_buffers *buf)
{
    pl_ckpt_pending p;
    pl_status st = pl_ckpt_save_begin(dir, world, meta->iteration, &p);
    if (st)
        return st;
    pl_ckpt_save_write(&p, dp_rank, meta->pp, buf);
    return pl_ckpt_save_end(dir, world, dp_rank, cfg, meta, buf, &p);
}

pl_status pl_ckpt_write_begin(const char *dir, int64_t iteration, char *tmp, size_t n)
{
    /* the temporary name of an iteration even for `release`: the clean-up knows it */
    snprintf(tmp, n, "%s/iter_%07lld.tmp", dir, (long long)(iteration < 0 ? 0 : iteration));
    pl_status st = pl_ckpt_prepare_dir(dir);
    return st ? st : pl_mkdirs(tmp);
}

pl_status pl_ckpt_write_rank(const char *tmp, int pp, const pl_ckpt_buffers *buf)
{
    char sub[64], path[PATH_MAX_ + 128];
    rank_dir(sub, buf->reg->tp_rank, buf->reg->pp_rank, pp);
    snprintf(path, sizeof path, "%s/%s", tmp, sub);
    pl_status st = pl_mkdirs(path);
    if (!st) {
        snprintf(path, sizeof path, "%s/%s/model_optim.safetensors", tmp, sub);
        st = write_shard(path, buf);
    }
    if (!st) {
        snprintf(path, sizeof path, "%s/%s", tmp, sub);
        st = pl_fsync_dir(path);
    }
    return st;
}

pl_status pl_ckpt_write_finish(const char *dir, const char *tmp, const pl_model_config *cfg,
                               const pl_ckpt_meta *meta, const pl_registry *reg, int64_t publish_it)
{
    pl_ckpt_buffers b = {reg, NULL, NULL, NULL, NULL, 0};
    return write_manifest(dir, tmp, cfg, meta, &b, NULL, 0, publish_it);
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
    if (strcmp(text, "release") == 0 || strcmp(text, "release\n") == 0) {
        *iteration = PL_CKPT_RELEASE; /* Megatron's weights-only release directory */
        return PL_OK;
    }
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

