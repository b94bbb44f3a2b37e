/* MD5 through libmd (base/md5.h). */
#include "base/md5.h"

#include <stdio.h>

void pl_md5_init(pl_md5 *m) { MD5Init(&m->ctx); }

void pl_md5_update(pl_md5 *m, const void *data, size_t n) { MD5Update(&m->ctx, data, n); }

void pl_md5_final(pl_md5 *m, uint8_t digest[16]) { MD5Final(digest, &m->ctx); }

void pl_md5_hex(const void *data, size_t n, char hex[33])
{
    pl_md5 m;
    uint8_t d[16];
    pl_md5_init(&m);
    pl_md5_update(&m, data, n);
    pl_md5_final(&m, d);
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
}
