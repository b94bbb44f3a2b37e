/* base/zread: plain, gzip, xz and zstd input through zlib, liblzma and libzstd
 * (the rules are in zread.h). */
#include "base/zread.h"

#include "base/alloc.h"
#include "base/vec.h"

#include <errno.h>
#include <lzma.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>
#include <zstd.h>

enum { IBUF = 1 << 17 };

typedef enum { Z_PLAIN, Z_GZIP, Z_XZ, Z_ZSTD } codec;

static const struct {
    const char *name, *ext;
    const unsigned char *magic;
    size_t n_magic;
} codecs[] = {
    [Z_PLAIN] = {NULL, NULL, NULL, 0},
    [Z_GZIP] = {"gzip", ".gz", (const unsigned char *)"\x1f\x8b", 2},
    [Z_XZ] = {"xz", ".xz", (const unsigned char *)"\xfd" "7zXZ\0", 6},
    [Z_ZSTD] = {"zstd", ".zst", (const unsigned char *)"\x28\xb5\x2f\xfd", 4},
};

struct pl_zread {
    FILE *fp;
    char *name;
    codec c;
    unsigned char *in;
    size_t ipos, ilen;
    int file_eof;
    int ended;      /* the decoder reached the end of its data */
    int64_t offset; /* compressed bytes consumed before in[0] */
    z_stream gz;
    int gz_init;
    lzma_stream xz;
    ZSTD_DCtx *zs;
    size_t zs_hint; /* 0 after a complete zstd frame and all its output */
};

int pl_zread_compressed_name(const char *path)
{
    size_t n = strlen(path);
    for (int c = Z_GZIP; c <= Z_ZSTD; c++) {
        size_t e = strlen(codecs[c].ext);
        if (n > e && strcasecmp(path + n - e, codecs[c].ext) == 0)
            return 1;
    }
    return 0;
}

/* More compressed input when what is buffered is used up. */
static pl_status fill(pl_zread *z)
{
    if (z->ipos < z->ilen || z->file_eof)
        return PL_OK;
    z->offset += (int64_t)z->ilen;
    z->ipos = 0;
    z->ilen = fread(z->in, 1, IBUF, z->fp);
    if (z->ilen < IBUF) {
        if (ferror(z->fp))
            return pl_errorf(PL_ERR_IO, "%s: read error: %s", z->name, strerror(errno));
        z->file_eof = 1;
    }
    return PL_OK;
}

static int at_end_of_input(pl_zread *z)
{
    return z->ipos == z->ilen && z->file_eof;
}

static pl_status truncated(const pl_zread *z)
{
    return pl_errorf(PL_ERR_FORMAT, "%s: truncated %s data: the file ends inside the compressed "
                     "stream (at byte %lld)", z->name, codecs[z->c].name,
                     (long long)(z->offset + (int64_t)z->ilen));
}

static pl_status corrupt(const pl_zread *z, const char *why)
{
    return pl_errorf(PL_ERR_FORMAT, "%s: corrupt %s data near compressed byte %lld: %s", z->name,
                     codecs[z->c].name, (long long)(z->offset + (int64_t)z->ipos), why);
}

static pl_status read_gzip(pl_zread *z, unsigned char *buf, size_t cap, size_t *got)
{
    z->gz.next_out = buf;
    z->gz.avail_out = (uInt)cap;
    while (z->gz.avail_out == cap && !z->ended) {
        pl_status st = fill(z);
        if (st)
            return st;
        int eof = at_end_of_input(z);
        z->gz.next_in = z->in + z->ipos;
        z->gz.avail_in = (uInt)(z->ilen - z->ipos);
        int rc = inflate(&z->gz, Z_NO_FLUSH);
        z->ipos = z->ilen - z->gz.avail_in;
        if (rc == Z_STREAM_END) {
            /* another member may follow (gzip -c a >x; gzip -c b >>x) */
            if ((st = fill(z)))
                return st;
            if (at_end_of_input(z)) {
                z->ended = 1;
                break;
            }
            if (z->in[z->ipos] != 0x1f)
                return corrupt(z, "data after the end of the gzip stream is not another gzip member");
            inflateReset(&z->gz);
        } else if (rc == Z_OK || rc == Z_BUF_ERROR) {
            if (eof && z->gz.avail_out == cap)
                return truncated(z); /* no input left, no output, the member not finished */
        } else if (rc == Z_MEM_ERROR) {
            return pl_errorf(PL_ERR_NOMEM, "%s: out of memory decompressing gzip", z->name);
        } else {
            return corrupt(z, z->gz.msg ? z->gz.msg : "inflate failed");
        }
    }
    *got = cap - z->gz.avail_out;
    return PL_OK;
}

static pl_status read_xz(pl_zread *z, unsigned char *buf, size_t cap, size_t *got)
{
    z->xz.next_out = buf;
    z->xz.avail_out = cap;
    while (z->xz.avail_out == cap && !z->ended) {
        pl_status st = fill(z);
        if (st)
            return st;
        z->xz.next_in = z->in + z->ipos;
        z->xz.avail_in = z->ilen - z->ipos;
        lzma_ret rc = lzma_code(&z->xz, at_end_of_input(z) ? LZMA_FINISH : LZMA_RUN);
        z->ipos = z->ilen - z->xz.avail_in;
        if (rc == LZMA_STREAM_END)
            z->ended = 1;
        else if (rc == LZMA_BUF_ERROR && at_end_of_input(z))
            return truncated(z);
        else if (rc == LZMA_DATA_ERROR || rc == LZMA_FORMAT_ERROR)
            return corrupt(z, rc == LZMA_DATA_ERROR ? "the data fail the xz checks"
                                                    : "not in the .xz format");
        else if (rc == LZMA_MEM_ERROR)
            return pl_errorf(PL_ERR_NOMEM, "%s: out of memory decompressing xz", z->name);
        else if (rc != LZMA_OK && rc != LZMA_BUF_ERROR)
            return corrupt(z, "liblzma failed");
    }
    *got = cap - z->xz.avail_out;
    return PL_OK;
}

static pl_status read_zstd(pl_zread *z, unsigned char *buf, size_t cap, size_t *got)
{
    ZSTD_outBuffer out = {buf, cap, 0};
    while (out.pos == 0 && !z->ended) {
        pl_status st = fill(z);
        if (st)
            return st;
        int eof = at_end_of_input(z);
        if (eof && z->zs_hint == 0) {
            z->ended = 1; /* every frame complete and flushed */
            break;
        }
        ZSTD_inBuffer in = {z->in, z->ilen, z->ipos};
        size_t rc = ZSTD_decompressStream(z->zs, &out, &in);
        z->ipos = in.pos;
        if (ZSTD_isError(rc))
            return corrupt(z, ZSTD_getErrorName(rc));
        z->zs_hint = rc;
        if (eof && out.pos == 0 && rc != 0)
            return truncated(z);
    }
    *got = out.pos;
    return PL_OK;
}

pl_status pl_zread_read(pl_zread *z, void *buf, size_t cap, size_t *got)
{
    *got = 0;
    if (cap == 0)
        return PL_OK;
    if (z->c == Z_PLAIN) {
        size_t n = z->ilen - z->ipos < cap ? z->ilen - z->ipos : cap;
        memcpy(buf, z->in + z->ipos, n);
        z->ipos += n;
        if (n == 0 && !z->file_eof) {
            n = fread(buf, 1, cap, z->fp);
            if (n < cap && ferror(z->fp))
                return pl_errorf(PL_ERR_IO, "%s: read error: %s", z->name, strerror(errno));
            if (n == 0)
                z->file_eof = 1;
        }
        *got = n;
        return PL_OK;
    }
    if (cap > UINT32_MAX)
        cap = UINT32_MAX;
    if (z->c == Z_GZIP)
        return read_gzip(z, buf, cap, got);
    if (z->c == Z_XZ)
        return read_xz(z, buf, cap, got);
    return read_zstd(z, buf, cap, got);
}

static pl_status start_codec(pl_zread *z)
{
    if (z->c == Z_GZIP) {
        if (inflateInit2(&z->gz, 15 + 16) != Z_OK)
            return pl_errorf(PL_ERR_NOMEM, "%s: cannot start zlib", z->name);
        z->gz_init = 1;
    } else if (z->c == Z_XZ) {
        lzma_stream init = LZMA_STREAM_INIT;
        z->xz = init;
        if (lzma_stream_decoder(&z->xz, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK)
            return pl_errorf(PL_ERR_NOMEM, "%s: cannot start liblzma", z->name);
    } else if (z->c == Z_ZSTD) {
        z->zs = ZSTD_createDCtx();
        z->zs_hint = 1;
        if (!z->zs)
            return pl_errorf(PL_ERR_NOMEM, "%s: cannot start libzstd", z->name);
    }
    return PL_OK;
}

pl_status pl_zread_open(pl_zread **out, FILE *fp, const char *name)
{
    pl_status st = PL_OK;
    pl_zread *z = pl_calloc(1, sizeof *z);
    if (!z)
        return pl_errorf(PL_ERR_NOMEM, "%s: out of memory", name);
    z->fp = fp;
    z->name = pl_strdup(name);
    z->in = pl_malloc(IBUF);
    if (!z->name || !z->in)
        PL_TRY(pl_errorf(PL_ERR_NOMEM, "%s: out of memory", name));
    PL_TRY(fill(z));
    for (int c = Z_GZIP; c <= Z_ZSTD; c++)
        if (z->ilen >= codecs[c].n_magic && memcmp(z->in, codecs[c].magic, codecs[c].n_magic) == 0)
            z->c = (codec)c;
    codec named = Z_PLAIN;
    for (int c = Z_GZIP; c <= Z_ZSTD; c++) {
        size_t n = strlen(name), e = strlen(codecs[c].ext);
        if (n > e && strcasecmp(name + n - e, codecs[c].ext) == 0)
            named = (codec)c;
    }
    if (named != Z_PLAIN && z->c != named) {
        if (z->ilen == 0)
            PL_TRY(pl_errorf(PL_ERR_FORMAT, "%s: named %s but empty (no %s data)", name,
                             codecs[named].ext, codecs[named].name));
        PL_TRY(pl_errorf(PL_ERR_FORMAT, "%s: named %s but not %s data (it starts with bytes "
                         "%02x %02x)", name, codecs[named].ext, codecs[named].name, z->in[0],
                         z->ilen > 1 ? z->in[1] : 0));
    }
    PL_TRY(start_codec(z));
    *out = z;
    return PL_OK;
fail:
    pl_zread_close(z);
    return st;
}

const char *pl_zread_codec(const pl_zread *z)
{
    return codecs[z->c].name;
}

void pl_zread_close(pl_zread *z)
{
    if (!z)
        return;
    if (z->gz_init)
        inflateEnd(&z->gz);
    if (z->c == Z_XZ)
        lzma_end(&z->xz);
    ZSTD_freeDCtx(z->zs);
    pl_free(z->in);
    pl_free(z->name);
    pl_free(z);
}

pl_status pl_zread_file(const char *path, char **out, size_t *size)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return pl_errorf(PL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    pl_zread *z = NULL;
    pl_bytes b = {0};
    pl_status st = pl_zread_open(&z, fp, path);
    while (st == PL_OK) {
        if ((st = pl_bytes_reserve(&b, b.n + IBUF + 1)))
            break;
        size_t got;
        if ((st = pl_zread_read(z, b.data + b.n, IBUF, &got)) || got == 0)
            break;
        b.n += got;
    }
    pl_zread_close(z);
    fclose(fp);
    if (st == PL_OK && !b.data)
        st = pl_bytes_reserve(&b, 1);
    if (st != PL_OK) {
        pl_bytes_free(&b);
        return st;
    }
    b.data[b.n] = '\0';
    *out = b.data;
    *size = b.n;
    return PL_OK;
}
