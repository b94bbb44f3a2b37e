/* Confined opening of a checkpoint's files (ckpt/files.h). */
#define _GNU_SOURCE
#include "ckpt/files.h"

#include "base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum { PATH_MAX_ = 4096, COMPONENT_MAX = 255 };

pl_status pl_ckpt_rel_check(const char *rel, const char *what, const char *where)
{
    if (!rel || !*rel)
        return pl_errorf(PL_ERR_FORMAT, "%s: %s is empty; expected a path inside the checkpoint "
                         "directory", where, what);
    if (rel[0] == '/')
        return pl_errorf(PL_ERR_FORMAT, "%s: %s \"%s\" is an absolute path; expected a path "
                         "relative to the checkpoint directory", where, what, rel);
    if (strlen(rel) >= PATH_MAX_)
        return pl_errorf(PL_ERR_FORMAT, "%s: %s is %zu bytes long; expected a path of fewer "
                         "than %d", where, what, strlen(rel), PATH_MAX_);
    for (const char *p = rel;;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (len == 0 || (len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
            return pl_errorf(PL_ERR_FORMAT, "%s: %s \"%s\" has an empty, \".\" or \"..\" "
                             "component; expected a path inside the checkpoint directory",
                             where, what, rel);
        if (len > COMPONENT_MAX)
            return pl_errorf(PL_ERR_FORMAT, "%s: %s \"%.64s...\" has a component longer than "
                             "%d bytes", where, what, rel, COMPONENT_MAX);
        if (!slash)
            break;
        p = slash + 1;
    }
    return PL_OK;
}

static const char *kind_name(mode_t m)
{
    return S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
         : S_ISSOCK(m) ? "a socket" : S_ISDIR(m) ? "a directory" : S_ISLNK(m) ? "a symbolic link"
         : "not a regular file";
}

/* The error of a failed openat of name below dfd (path: for the message):
 * names a symbolic link as such (O_NOFOLLOW gives ELOOP or ENOTDIR). */
static pl_status open_error(int dfd, const char *name, const char *path, int err)
{
    struct stat sb;
    if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(sb.st_mode))
        return pl_errorf(PL_ERR_FORMAT, "%s: a symbolic link; a checkpoint's files and "
                         "directories must be real ones inside it (links are not followed)", path);
    if (err == ENOTDIR)
        return pl_errorf(PL_ERR_FORMAT, "%s: not a directory", path);
    return pl_errorf(PL_ERR_IO, "%s: cannot open: %s", path, strerror(err));
}

void pl_ckpt_iter_name(int64_t it, char *out, size_t n)
{
    if (it == -2) /* PL_CKPT_RELEASE */
        snprintf(out, n, "release");
    else
        snprintf(out, n, "iter_%07lld", (long long)it);
}

pl_status pl_ckpt_iter_open(const char *dir, int64_t it, int *fd, char *idir, size_t n, int *aside)
{
    *fd = -1;
    *aside = 0;
    int top = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (top < 0)
        return pl_errorf(PL_ERR_IO, "%s: cannot open the checkpoint directory: %s", dir,
                         strerror(errno));
    char name[64];
    pl_ckpt_iter_name(it, name, sizeof name);
    snprintf(idir, n, "%s/%s", dir, name);
    pl_status st = PL_OK;
    int d = openat(top, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d < 0 && errno == ENOENT) {
        char old[80];
        snprintf(old, sizeof old, "%s.old", name);
        d = openat(top, old, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (d >= 0) {
            *aside = 1;
            pl_log_warn("%s is missing but %s.old exists (a re-save of iteration %lld was "
                        "interrupted): loading that copy; the next save into %s puts it back",
                        idir, idir, (long long)it, dir);
            snprintf(idir, n, "%s/%s", dir, old);
        } else {
            errno = ENOENT;
        }
    }
    if (d < 0)
        st = open_error(top, name, idir, errno);
    close(top);
    *fd = d;
    return st;
}

pl_status pl_ckpt_open_in(int dfd, const char *dname, const char *rel, int want_dir, int *fd)
{
    *fd = -1;
    char path[2 * PATH_MAX_ + 2];
    snprintf(path, sizeof path, "%s/%s", dname, rel ? rel : "");
    pl_status st = pl_ckpt_rel_check(rel, "the path", path);
    if (st)
        return st;
    char comp[COMPONENT_MAX + 1];
    int cur = dfd;
    const char *p = rel;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        memcpy(comp, p, len);
        comp[len] = '\0';
        int last = slash == NULL;
        int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC;
        flags |= last && !want_dir ? O_NONBLOCK : O_DIRECTORY;
        int next = openat(cur, comp, flags);
        int err = errno;
        if (next < 0)
            st = open_error(cur, comp, path, err);
        if (cur != dfd)
            close(cur);
        if (st)
            return st;
        cur = next;
        if (last)
            break;
        p = slash + 1;
    }
    struct stat sb;
    if (fstat(cur, &sb) != 0) {
        st = pl_errorf(PL_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    } else if (want_dir ? !S_ISDIR(sb.st_mode) : !S_ISREG(sb.st_mode)) {
        st = pl_errorf(PL_ERR_FORMAT, "%s: %s; expected a %s", path, kind_name(sb.st_mode),
                       want_dir ? "directory" : "regular file");
    } else if (!want_dir) {
        int fl = fcntl(cur, F_GETFL);
        if (fl < 0 || fcntl(cur, F_SETFL, fl & ~O_NONBLOCK) != 0)
            st = pl_errorf(PL_ERR_IO, "%s: cannot clear O_NONBLOCK: %s", path, strerror(errno));
    }
    if (st) {
        close(cur);
        return st;
    }
    *fd = cur;
    return PL_OK;
}

pl_status pl_ckpt_map_in(int dfd, const char *dname, const char *rel, pl_mmap *m)
{
    m->data = NULL;
    m->size = 0;
    int fd;
    pl_status st = pl_ckpt_open_in(dfd, dname, rel, 0, &fd);
    if (st)
        return st;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        st = pl_errorf(PL_ERR_IO, "%s/%s: cannot stat: %s", dname, rel, strerror(errno));
    } else if (sb.st_size > 0) {
        void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            st = pl_errorf(PL_ERR_IO, "%s/%s: cannot mmap: %s", dname, rel, strerror(errno));
        } else {
            m->data = p;
            m->size = (size_t)sb.st_size;
        }
    }
    close(fd);
    return st;
}

pl_status pl_ckpt_check_in(int dfd, const char *dname, const char *rel, int allow_dir)
{
    int fd;
    pl_status st = pl_ckpt_open_in(dfd, dname, rel, 0, &fd);
    if (st && allow_dir) {
        /* a directory fails the regular-file test without blocking; try it as one */
        char keep[1024];
        snprintf(keep, sizeof keep, "%s", pl_error_msg());
        if (pl_ckpt_open_in(dfd, dname, rel, 1, &fd) == PL_OK)
            st = PL_OK;
        else
            st = pl_errorf(st, "%s", keep);
    }
    if (!st)
        close(fd);
    return st;
}
