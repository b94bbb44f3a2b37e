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

static char fuzz_dir_path[256];

/* Removes the scratch directory and the files the targets write into it (each target
 * calls it after every input: libFuzzer ends without running atexit handlers). */
static void fuzz_dir_remove(void)
{
    static const char *const names[] = {"ds.json", "cache.npy", "iter_0000002/manifest.json",
                                        "iter_0000002/manifest.json.xxh64", "iter_0000002"};
    char path[512];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(path, sizeof path, "%s/%s", fuzz_dir_path, names[i]);
        if (unlink(path) != 0)
            rmdir(path);
    }
    rmdir(fuzz_dir_path);
    fuzz_dir_path[0] = 0;
}

/* The scratch directory (created on first use after a removal; aborts if it cannot
 * be created). */
static const char *fuzz_dir(void)
{
    if (!fuzz_dir_path[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/plait-fuzz-XXXXXX",
                 t && *t ? t : "/tmp");
        if (!mkdtemp(fuzz_dir_path))
            abort();
    }
    return fuzz_dir_path;
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
