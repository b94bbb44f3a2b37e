/* mmap, whole-file reads, atomic writes and mkdir -p. */
#define _GNU_SOURCE
#define _XOPEN_SOURCE 700
#include "base/fileio.h"

#include "base/alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

pl_status pl_mmap_open(pl_mmap *m, const char *path)
{
    m->data = NULL;
    m->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return pl_errorf(PL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return pl_errorf(PL_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (sb.st_size > 0) {
        void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return pl_errorf(PL_ERR_IO, "%s: cannot mmap: %s", path, strerror(e));
        }
        m->data = p;
        m->size = (size_t)sb.st_size;
    }
    close(fd);
    return PL_OK;
}

void pl_mmap_close(pl_mmap *m)
{
    if (m->data)
        munmap((void *)m->data, m->size);
    m->data = NULL;
    m->size = 0;
}

pl_status pl_file_read_all(const char *path, char **out, size_t *size)
{
    *out = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return pl_errorf(PL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = pl_malloc(cap + 1);
    if (!buf) {
        fclose(fp);
        return pl_errorf(PL_ERR_NOMEM, "%s: out of memory reading file", path);
    }
    for (;;) {
        if (n == cap) {
            char *nb = pl_realloc(buf, 2 * cap + 1);
            if (!nb) {
                pl_free(buf);
                fclose(fp);
                return pl_errorf(PL_ERR_NOMEM, "%s: out of memory reading file", path);
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, fp);
        n += got;
        if (got == 0)
            break;
    }
    int err = ferror(fp);
    fclose(fp);
    if (err) {
        pl_free(buf);
        return pl_errorf(PL_ERR_IO, "%s: read error", path);
    }
    buf[n] = '\0';
    *out = buf;
    if (size)
        *size = n;
    return PL_OK;
}

pl_status pl_wfile_open(pl_wfile *w, const char *path)
{
    memset(w, 0, sizeof *w);
    size_t n = strlen(path) + 32;
    w->path = pl_strdup(path);
    w->tmp_path = pl_malloc(n);
    if (!w->path || !w->tmp_path) {
        pl_free(w->path);
        pl_free(w->tmp_path);
        memset(w, 0, sizeof *w);
        return pl_errorf(PL_ERR_NOMEM, "%s: out of memory", path);
    }
    snprintf(w->tmp_path, n, "%s.tmp.%ld", path, (long)getpid());
    w->fp = fopen(w->tmp_path, "wb");
    if (!w->fp) {
        pl_status st = pl_errorf(PL_ERR_IO, "%s: cannot create: %s", w->tmp_path, strerror(errno));
        pl_free(w->path);
        pl_free(w->tmp_path);
        memset(w, 0, sizeof *w);
        return st;
    }
    return PL_OK;
}

pl_status pl_wfile_write(pl_wfile *w, const void *data, size_t n)
{
    if (n && fwrite(data, 1, n, w->fp) != n)
        return pl_errorf(PL_ERR_IO, "%s: write failed: %s", w->tmp_path, strerror(errno));
    return PL_OK;
}

static void wfile_release(pl_wfile *w)
{
    pl_free(w->path);
    pl_free(w->tmp_path);
    memset(w, 0, sizeof *w);
}

pl_status pl_wfile_commit(pl_wfile *w)
{
    pl_status st = PL_OK;
    if (fflush(w->fp) != 0 || fsync(fileno(w->fp)) != 0)
        st = pl_errorf(PL_ERR_IO, "%s: flush failed: %s", w->tmp_path, strerror(errno));
    if (fclose(w->fp) != 0 && st == PL_OK)
        st = pl_errorf(PL_ERR_IO, "%s: close failed: %s", w->tmp_path, strerror(errno));
    w->fp = NULL;
    if (st == PL_OK && rename(w->tmp_path, w->path) != 0)
        st = pl_errorf(PL_ERR_IO, "%s: cannot rename to %s: %s", w->tmp_path, w->path,
                       strerror(errno));
    if (st != PL_OK)
        unlink(w->tmp_path);
    wfile_release(w);
    return st;
}

void pl_wfile_abort(pl_wfile *w)
{
    if (w->fp) {
        fclose(w->fp);
        unlink(w->tmp_path);
    }
    wfile_release(w);
}

pl_status pl_mkdirs(const char *dir)
{
    char buf[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof buf)
        return pl_errorf(PL_ERR_ARG, "%s: bad directory name", dir);
    memcpy(buf, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char c = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return pl_errorf(PL_ERR_IO, "%s: cannot create directory: %s", buf,
                                 strerror(errno));
            buf[i] = c;
        }
    }
    return PL_OK;
}

int pl_file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

static int rm_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    return (type == FTW_DP ? rmdir(path) : unlink(path)) != 0 && errno != ENOENT;
}

pl_status pl_rmtree(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return errno == ENOENT ? PL_OK
                               : pl_errorf(PL_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    if (nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        return pl_errorf(PL_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
    return PL_OK;
}

pl_status pl_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return pl_errorf(PL_ERR_IO, "%s: cannot open directory: %s", dir, strerror(errno));
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    return rc == 0 ? PL_OK : pl_errorf(PL_ERR_IO, "%s: fsync failed: %s", dir, strerror(e));
}

pl_status pl_file_write_atomic(const char *path, const void *data, size_t n)
{
    pl_wfile w;
    pl_status st = pl_wfile_open(&w, path);
    if (st != PL_OK)
        return st;
    if ((st = pl_wfile_write(&w, data, n)) != PL_OK) {
        pl_wfile_abort(&w);
        return st;
    }
    return pl_wfile_commit(&w);
}
