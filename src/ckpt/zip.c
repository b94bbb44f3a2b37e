/* ZIP reader for torch.save files (ckpt/zip.h). Formats: PKWARE's APPNOTE
 * (end of central directory, zip64 locator and record, central directory
 * headers, local headers, the zip64 extra field 0x0001). */
#include "ckpt/zip.h"

#include "base/alloc.h"

#include <string.h>
#include <zlib.h>

static uint16_t u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t u32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t u64(const uint8_t *p) { return (uint64_t)u32(p) | (uint64_t)u32(p + 4) << 32; }

/* [off, off + len) inside [0, size)? */
static int inside(uint64_t off, uint64_t len, size_t size)
{
    return off <= size && len <= size - off;
}

/* The end of central directory: entries, directory offset and size. */
static pl_status find_directory(const uint8_t *img, size_t size, const char *what, uint64_t *count,
                                uint64_t *cd_off, uint64_t *cd_size)
{
    if (size < 22)
        return pl_errorf(PL_ERR_FORMAT, "%s: %zu bytes, too short for a ZIP archive", what, size);
    size_t eocd = size - 22, stop = size > 22 + 65535 ? size - 22 - 65535 : 0;
    while (u32(img + eocd) != 0x06054b50 || eocd + 22 + u16(img + eocd + 20) != size) {
        if (eocd == stop)
            return pl_errorf(PL_ERR_FORMAT, "%s: not a ZIP archive (no end of central directory; "
                             "a torch.save file is one)", what);
        eocd--;
    }
    if (u16(img + eocd + 4) != 0 || u16(img + eocd + 6) != 0)
        return pl_errorf(PL_ERR_FORMAT, "%s: a multi-disk ZIP archive", what);
    *count = u16(img + eocd + 10);
    *cd_size = u32(img + eocd + 12);
    *cd_off = u32(img + eocd + 16);
    if (*count != 0xffff && *cd_size != 0xffffffffu && *cd_off != 0xffffffffu)
        return PL_OK;
    /* zip64: the locator just before, pointing at the zip64 record */
    if (eocd < 20 || u32(img + eocd - 20) != 0x07064b50)
        return pl_errorf(PL_ERR_FORMAT, "%s: zip64 sizes without a zip64 locator", what);
    const uint64_t rec = u64(img + eocd - 20 + 8);
    if (!inside(rec, 56, size) || u32(img + rec) != 0x06064b50)
        return pl_errorf(PL_ERR_FORMAT, "%s: the zip64 end of central directory is out of the "
                         "file or corrupt", what);
    *count = u64(img + rec + 32);
    *cd_size = u64(img + rec + 40);
    *cd_off = u64(img + rec + 48);
    return PL_OK;
}

/* The zip64 extra field's values for those of usize, csize, off that are 0xffffffff. */
static pl_status zip64_extra(const uint8_t *x, size_t n, uint64_t *usize, uint64_t *csize,
                             uint64_t *off, const char *what, const char *name)
{
    while (n >= 4) {
        const uint16_t id = u16(x), len = u16(x + 2);
        if (len > n - 4)
            break;
        if (id == 0x0001) {
            const uint8_t *p = x + 4;
            size_t left = len;
            uint64_t *f[3] = {usize, csize, off};
            for (int k = 0; k < 3; k++) {
                if (*f[k] != 0xffffffffu)
                    continue;
                if (left < 8)
                    return pl_errorf(PL_ERR_FORMAT, "%s: entry %s: short zip64 extra field",
                                     what, name);
                *f[k] = u64(p);
                p += 8;
                left -= 8;
            }
            return PL_OK;
        }
        x += 4 + len;
        n -= 4 + (size_t)len;
    }
    if (*usize == 0xffffffffu || *csize == 0xffffffffu || *off == 0xffffffffu)
        return pl_errorf(PL_ERR_FORMAT, "%s: entry %s: zip64 sizes without the zip64 extra field",
                         what, name);
    return PL_OK;
}

pl_status pl_zip_parse(pl_zip *z, const uint8_t *img, size_t size, const char *what)
{
    memset(z, 0, sizeof *z);
    uint64_t count = 0, cd_off = 0, cd_size = 0;
    pl_status st = find_directory(img, size, what, &count, &cd_off, &cd_size);
    if (st)
        return st;
    if (!inside(cd_off, cd_size, size) || count > cd_size / 46 || count > PL_ZIP_MAX_ENTRIES)
        return pl_errorf(PL_ERR_FORMAT, "%s: central directory (%llu entries, %llu bytes at %llu) "
                         "does not fit the file", what, (unsigned long long)count,
                         (unsigned long long)cd_size, (unsigned long long)cd_off);
    z->e = pl_calloc(count ? count : 1, sizeof *z->e);
    if (!z->e)
        return pl_errorf(PL_ERR_NOMEM, "%s: out of memory", what);
    const uint8_t *p = img + cd_off, *end = p + cd_size;
    for (uint64_t i = 0; i < count; i++) {
        if (end - p < 46 || u32(p) != 0x02014b50) {
            st = pl_errorf(PL_ERR_FORMAT, "%s: central directory entry %llu is corrupt", what,
                           (unsigned long long)i);
            goto fail;
        }
        const uint16_t flags = u16(p + 8), method = u16(p + 10);
        const uint32_t crc = u32(p + 16);
        uint64_t csize = u32(p + 20), usize = u32(p + 24), off = u32(p + 42);
        const size_t nlen = u16(p + 28), xlen = u16(p + 30), clen = u16(p + 32);
        if ((size_t)(end - p) - 46 < nlen + xlen + clen) {
            st = pl_errorf(PL_ERR_FORMAT, "%s: central directory entry %llu overruns it", what,
                           (unsigned long long)i);
            goto fail;
        }
        pl_zip_entry *e = &z->e[z->n];
        if (!(e->name = pl_malloc(nlen + 1))) {
            st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory", what);
            goto fail;
        }
        memcpy(e->name, p + 46, nlen);
        e->name[nlen] = 0;
        z->n++;
        if (strlen(e->name) != nlen) {
            st = pl_errorf(PL_ERR_FORMAT, "%s: entry %llu's name holds a NUL byte", what,
                           (unsigned long long)i);
            goto fail;
        }
        if ((st = zip64_extra(p + 46 + nlen, xlen, &usize, &csize, &off, what, e->name)))
            goto fail;
        if (flags & 1 || method != 0 || csize != usize) {
            st = pl_errorf(PL_ERR_FORMAT, "%s: entry %s is %s (torch.save stores entries "
                           "uncompressed)", what, e->name,
                           flags & 1 ? "encrypted" : "compressed");
            goto fail;
        }
        if (!inside(off, 30, size) || u32(img + off) != 0x04034b50) {
            st = pl_errorf(PL_ERR_FORMAT, "%s: entry %s: local header out of the file or corrupt",
                           what, e->name);
            goto fail;
        }
        const uint64_t data = off + 30 + u16(img + off + 26) + u16(img + off + 28);
        if (!inside(data, usize, size)) {
            st = pl_errorf(PL_ERR_FORMAT, "%s: entry %s: %llu bytes at %llu overrun the file "
                           "(truncated?)", what, e->name, (unsigned long long)usize,
                           (unsigned long long)data);
            goto fail;
        }
        e->data = img + data;
        e->size = usize;
        uLong c = crc32(0L, Z_NULL, 0);
        for (uint64_t done = 0; done < usize;) {
            const uInt chunk = usize - done > (1u << 30) ? (1u << 30) : (uInt)(usize - done);
            c = crc32(c, e->data + done, chunk);
            done += chunk;
        }
        if ((uint32_t)c != crc) {
            st = pl_errorf(PL_ERR_FORMAT, "%s: entry %s: CRC-32 %08x, the directory says %08x "
                           "(corrupt)", what, e->name, (unsigned)c, (unsigned)crc);
            goto fail;
        }
        p += 46 + nlen + xlen + clen;
    }
    return PL_OK;
fail:
    pl_zip_free(z);
    return st;
}

void pl_zip_free(pl_zip *z)
{
    for (int i = 0; z->e && i < z->n; i++)
        pl_free(z->e[i].name);
    pl_free(z->e);
    memset(z, 0, sizeof *z);
}

const pl_zip_entry *pl_zip_find(const pl_zip *z, const char *name)
{
    for (int i = 0; i < z->n; i++)
        if (strcmp(z->e[i].name, name) == 0)
            return &z->e[i];
    return NULL;
}
