/* torch.save's ZIP archive, written (ckpt/torch_write.h). */
#include "ckpt/torch_write.h"

#include "base/alloc.h"
#include "base/fileio.h"

#include <stdio.h>
#include <string.h>
#include <zlib.h>

enum { PT_ALIGN = 64, PT_NAME = 512 };

typedef struct pt_entry {
    char name[PT_NAME];
    const uint8_t *data;
    uint64_t size, offset; /* offset: of its local header */
    uint32_t crc;
} pt_entry;

static void le16(uint8_t *p, uint64_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void le32(uint8_t *p, uint64_t v)
{
    le16(p, v);
    le16(p + 2, v >> 16);
}

static uint32_t crc_of(const uint8_t *p, uint64_t n)
{
    uLong c = crc32(0L, Z_NULL, 0);
    while (n > 0) {
        const uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, p, chunk);
        p += chunk;
        n -= chunk;
    }
    return (uint32_t)c;
}

/* The local header of e at offset `at` (30 bytes + name + the "FB" padding that
 * puts the data on a multiple of PT_ALIGN): its bytes in hdr, their count returned. */
static size_t local_header(const pt_entry *e, uint64_t at, uint8_t *hdr)
{
    const size_t nlen = strlen(e->name);
    size_t pad = (PT_ALIGN - (at + 30 + nlen + 4) % PT_ALIGN) % PT_ALIGN;
    memset(hdr, 0, 30);
    le32(hdr, 0x04034b50);
    le16(hdr + 4, 20);
    le32(hdr + 14, e->crc);
    le32(hdr + 18, e->size);
    le32(hdr + 22, e->size);
    le16(hdr + 26, nlen);
    le16(hdr + 28, pad + 4);
    memcpy(hdr + 30, e->name, nlen);
    uint8_t *x = hdr + 30 + nlen;
    le16(x, 0x4246); /* "FB" */
    le16(x + 2, pad);
    memset(x + 4, 'Z', pad);
    return 30 + nlen + 4 + pad;
}

static pl_status write_all(pl_wfile *w, pt_entry *e, int n, const char *path)
{
    uint8_t hdr[30 + PT_NAME + 4 + PT_ALIGN];
    uint64_t at = 0;
    pl_status st = PL_OK;
    for (int k = 0; k < n && !st; k++) {
        e[k].offset = at;
        const size_t h = local_header(&e[k], at, hdr);
        at += h + e[k].size;
        if (at > 0xffffffffu)
            return pl_errorf(PL_ERR_ARG, "%s: the archive passes 4 GiB at entry %s: this writer "
                             "has no zip64", path, e[k].name);
        if (!(st = pl_wfile_write(w, hdr, h)) && e[k].size)
            st = pl_wfile_write(w, e[k].data, e[k].size);
    }
    const uint64_t cd = at;
    for (int k = 0; k < n && !st; k++) {
        const size_t nlen = strlen(e[k].name);
        uint8_t c[46];
        memset(c, 0, sizeof c);
        le32(c, 0x02014b50);
        le16(c + 6, 20);
        le32(c + 16, e[k].crc);
        le32(c + 20, e[k].size);
        le32(c + 24, e[k].size);
        le16(c + 28, nlen);
        le32(c + 42, e[k].offset);
        if (!(st = pl_wfile_write(w, c, sizeof c)))
            st = pl_wfile_write(w, e[k].name, nlen);
        at += 46 + nlen;
    }
    if (st)
        return st;
    if (at > 0xffffffffu || n > 0xffff)
        return pl_errorf(PL_ERR_ARG, "%s: %d entries, %llu bytes: this writer has no zip64", path,
                         n, (unsigned long long)at);
    uint8_t end[22];
    memset(end, 0, sizeof end);
    le32(end, 0x06054b50);
    le16(end + 8, n);
    le16(end + 10, n);
    le32(end + 12, at - cd);
    le32(end + 16, cd);
    return pl_wfile_write(w, end, sizeof end);
}

pl_status pl_pt_write(const char *path, const char *name, const uint8_t *pkl, size_t pkl_size,
                      const pl_pt_blob *blobs, int n)
{
    static const char byteorder[] = "little", version[] = "3\n";
    if (n < 0 || n > 60000)
        return pl_errorf(PL_ERR_ARG, "%s: %d storages: expected at most 60000", path, n);
    pt_entry *e = pl_calloc((size_t)n + 3, sizeof *e);
    if (!e)
        return pl_errorf(PL_ERR_NOMEM, "%s: out of memory", path);
    pl_status st = PL_OK;
    int m = 0;
    snprintf(e[m].name, PT_NAME, "%s/data.pkl", name);
    e[m].data = pkl;
    e[m++].size = pkl_size;
    snprintf(e[m].name, PT_NAME, "%s/byteorder", name);
    e[m].data = (const uint8_t *)byteorder;
    e[m++].size = strlen(byteorder);
    for (int k = 0; k < n; k++, m++) {
        if (snprintf(e[m].name, PT_NAME, "%s/data/%s", name, blobs[k].key) >= PT_NAME) {
            st = pl_errorf(PL_ERR_ARG, "%s: entry name %s/data/%s longer than %d", path, name,
                           blobs[k].key, PT_NAME - 1);
            break;
        }
        e[m].data = blobs[k].data;
        e[m].size = blobs[k].bytes;
    }
    snprintf(e[m].name, PT_NAME, "%s/version", name);
    e[m].data = (const uint8_t *)version;
    e[m++].size = strlen(version);
    for (int k = 0; k < m && !st; k++)
        e[k].crc = crc_of(e[k].data, e[k].size);
    pl_wfile w;
    memset(&w, 0, sizeof w);
    if (!st)
        st = pl_wfile_open(&w, path);
    if (!st)
        st = write_all(&w, e, m, path);
    if (!st)
        st = pl_wfile_commit(&w);
    else
        pl_wfile_abort(&w);
    pl_free(e);
    return st;
}
