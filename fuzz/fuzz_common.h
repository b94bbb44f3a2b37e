/* Shared by the fuzz targets that read files: a scratch directory of this process
 * (made once, under $TMPDIR or /tmp) and writing bytes to a file in it without fsync. */
#ifndef PL_FUZZ_COMMON_H
#define PL_FUZZ_COMMON_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *mkdtemp(char *tmpl);

/* The scratch directory (created on first use; aborts if it cannot be). */
static const char *fuzz_dir(void)
{
    static char dir[256];
    if (!dir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/plait-fuzz-XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(dir))
            abort();
    }
    return dir;
}

/* Writes n bytes to path (truncating); aborts on failure. */
static void fuzz_write(const char *path, const void *data, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        abort();
    const uint8_t *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0)
            abort();
        p += w;
        n -= (size_t)w;
    }
    close(fd);
}

#endif
