/* Two-phase publication of a checkpoint, clean-up of interrupted saves, and the
 * lock on a save directory (ckpt/publish.h, ckpt/checkpoint.h). */
#define _GNU_SOURCE
#include "ckpt/publish.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/log.h"
#include "ckpt/checkpoint.h"
#include "ckpt/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

enum { PATH_MAX_ = 4096 };
static const char LATEST[] = "latest_checkpointed_iteration.txt";

void pl_ckpt_crash_point(const char *point)
{
    const char *at = getenv("PLAIT_TEST_CRASH_AT");
    if (!at || strcmp(at, point) != 0)
        return;
    char msg[160];
    int n = snprintf(msg, sizeof msg, "plait: PLAIT_TEST_CRASH_AT=%s: exiting here (test hook)\n",
                     point);
    ssize_t written = write(2, msg, (size_t)n); /* best effort: we are leaving anyway */
    (void)written;
    _exit(86);
}

static int all_digits(const char *s, size_t n)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return 1;
}

/* "iter_<digits><suffix>": the length of "iter_<digits>", or 0. */
static size_t iter_stem(const char *name, const char *suffix)
{
    size_t n = strlen(name), s = strlen(suffix);
    if (n <= 5 + s || strncmp(name, "iter_", 5) != 0 || strcmp(name + n - s, suffix) != 0)
        return 0;
    return all_digits(name + 5, n - 5 - s) ? n - s : 0;
}

/* One entry of the save directory: removed, restored or left alone. */
static pl_status clean_entry(const char *dir, const char *name, int *changed)
{
    char path[PATH_MAX_ + 256], stem[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t lt = strlen(LATEST), n = strlen(name), k;
    if (iter_stem(name, ".tmp")) {
        pl_log_info("%s: removing the temporary of an interrupted save", path);
        *changed = 1;
        return pl_rmtree(path);
    }
    if (iter_stem(name, ".del")) {
        pl_log_info("%s: finishing an interrupted removal (--keep-last-n)", path);
        *changed = 1;
        return pl_rmtree(path);
    }
    if (n > lt + 5 && strncmp(name, LATEST, lt) == 0 && strncmp(name + lt, ".tmp.", 5) == 0 &&
        all_digits(name + lt + 5, n - lt - 5)) {
        *changed = 1;
        return unlink(path) == 0 || errno == ENOENT
                   ? PL_OK
                   : pl_errorf(PL_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
    }
    if ((k = iter_stem(name, ".old")) == 0 || k >= sizeof stem)
        return PL_OK;
    memcpy(stem, name, k);
    stem[k] = '\0';
    char final[PATH_MAX_ + 256];
    snprintf(final, sizeof final, "%s/%s", dir, stem);
    struct stat sb;
    *changed = 1;
    if (lstat(final, &sb) == 0) /* the new copy was published: the old one is garbage */
        return pl_rmtree(path);
    if (rename(path, final) != 0)
        return pl_errorf(PL_ERR_IO, "%s: cannot rename back to %s: %s", path, final,
                         strerror(errno));
    pl_log_warn("%s: recovered from %s (a re-save of that iteration was interrupted)", final, name);
    return PL_OK;
}

/* The names in dir that `want` accepts, collected before anything is changed: renaming
 * and removing while reading a directory may skip entries. Free *names with pl_free. */
typedef char entry_name[256];
static pl_status list_names(const char *dir, int (*want)(const char *name), entry_name **names,
                            size_t *count)
{
    *names = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d)
        return pl_errorf(PL_ERR_IO, "%s: cannot list the checkpoint directory: %s", dir,
                         strerror(errno));
    pl_status st = PL_OK;
    size_t n = 0, cap = 0;
    entry_name *out = NULL;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!want(e->d_name))
            continue;
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 8;
            void *p = pl_realloc(out, nc * sizeof *out);
            if (!p) {
                st = pl_errorf(PL_ERR_NOMEM, "out of memory listing %s", dir);
                break;
            }
            out = p;
            cap = nc;
        }
        snprintf(out[n++], sizeof *out, "%s", e->d_name);
    }
    closedir(d);
    if (st) {
        pl_free(out);
        return st;
    }
    *names = out;
    *count = n;
    return PL_OK;
}

/* What a killed save or removal leaves (clean_entry's cases). */
static int leftover(const char *name)
{
    return iter_stem(name, ".tmp") || iter_stem(name, ".old") || iter_stem(name, ".del") ||
           strncmp(name, LATEST, sizeof LATEST - 1) == 0;
}

pl_status pl_ckpt_prepare_dir(const char *dir)
{
    pl_status st = pl_mkdirs(dir);
    if (st)
        return st;
    entry_name *names;
    size_t n;
    if ((st = list_names(dir, leftover, &names, &n)))
        return st;
    int changed = 0;
    for (size_t i = 0; i < n && !st; i++)
        st = clean_entry(dir, names[i], &changed);
    pl_free(names);
    if (!st && changed)
        st = pl_fsync_dir(dir);
    return st;
}

pl_status pl_ckpt_publish(const char *dir, const char *tmp, int64_t it)
{
    char final[PATH_MAX_], aside[PATH_MAX_ + 8], path[PATH_MAX_ + 64], num[32];
    char name[64];
    pl_ckpt_iter_name(it, name, sizeof name);
    snprintf(final, sizeof final, "%s/%s", dir, name);
    snprintf(aside, sizeof aside, "%s.old", final);
    pl_status st = pl_fsync_dir(tmp);
    if (st)
        return st;
    pl_ckpt_crash_point("ckpt-written");
    struct stat sb;
    int had_old = lstat(final, &sb) == 0;
    if (had_old) {
        if ((st = pl_rmtree(aside)))
            return st;
        if (rename(final, aside) != 0)
            return pl_errorf(PL_ERR_IO, "%s: cannot rename aside to %s: %s", final, aside,
                             strerror(errno));
        if ((st = pl_fsync_dir(dir)))
            return st;
        pl_ckpt_crash_point("ckpt-aside");
    }
    if (rename(tmp, final) != 0)
        return pl_errorf(PL_ERR_IO, "%s: cannot rename to %s: %s", tmp, final, strerror(errno));
    if ((st = pl_fsync_dir(dir)))
        return st;
    pl_ckpt_crash_point("ckpt-renamed");
    if (it == -2) /* Megatron's release checkpoint */
        snprintf(num, sizeof num, "release");
    else
        snprintf(num, sizeof num, "%lld", (long long)it);
    snprintf(path, sizeof path, "%s/%s", dir, LATEST);
    if ((st = pl_file_write_atomic(path, num, strlen(num))) || (st = pl_fsync_dir(dir)))
        return st;
    pl_ckpt_crash_point("ckpt-latest");
    if (had_old && (st = pl_rmtree(aside)))
        return st;
    return PL_OK;
}

static int by_iteration_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x < y) - (x > y);
}

/* A published iteration under the name plait writes (iter_ and 7 or more digits). */
static int published(const char *name)
{
    size_t k = iter_stem(name, "");
    if (!k || k > 5 + 18) /* a number that fits */
        return 0;
    char canon[64];
    pl_ckpt_iter_name(strtoll(name + 5, NULL, 10), canon, sizeof canon);
    return strcmp(canon, name) == 0;
}

pl_status pl_ckpt_keep_last(const char *dir, int64_t keep, int64_t *removed)
{
    *removed = 0;
    if (keep < 1)
        return pl_errorf(PL_ERR_ARG, "--keep-last-n %lld: expected at least 1", (long long)keep);
    int64_t latest;
    pl_status st = pl_ckpt_latest(dir, &latest);
    if (st)
        return st;
    entry_name *names;
    size_t n;
    if ((st = list_names(dir, published, &names, &n)))
        return st;
    int64_t *its = pl_malloc((n ? n : 1) * sizeof *its);
    if (!its) {
        pl_free(names);
        return pl_errorf(PL_ERR_NOMEM, "out of memory listing %s", dir);
    }
    for (size_t i = 0; i < n; i++)
        its[i] = strtoll(names[i] + 5, NULL, 10);
    pl_free(names);
    qsort(its, n, sizeof *its, by_iteration_desc);
    char name[64], path[PATH_MAX_ + 64], del[PATH_MAX_ + 72];
    for (size_t i = (size_t)keep; i < n && !st; i++) {
        if (its[i] == latest)
            continue;
        pl_ckpt_iter_name(its[i], name, sizeof name);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        snprintf(del, sizeof del, "%s.del", path);
        if (rename(path, del) != 0) {
            st = pl_errorf(PL_ERR_IO, "%s: cannot rename to %s to remove it: %s", path, del,
                           strerror(errno));
            break;
        }
        if (!(st = pl_fsync_dir(dir)) && !(st = pl_rmtree(del)))
            ++*removed;
    }
    pl_free(its);
    return st;
}

/* ---- the save directory's lock ---- */

pl_status pl_ckpt_lock_take(pl_ckpt_lock *l, const char *dir)
{
    l->fd = -1;
    char path[PATH_MAX_ + 16];
    snprintf(path, sizeof path, "%s/.plait.lock", dir);
    pl_status st = pl_mkdirs(dir);
    if (st)
        return st;
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0)
        return pl_errorf(PL_ERR_IO, "%s: cannot open the save directory's lock file: %s", path,
                         strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return pl_errorf(PL_ERR_IO, "%s: not a regular file (the save directory's lock file)",
                         path);
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        char who[256] = "";
        ssize_t got = err == EWOULDBLOCK ? pread(fd, who, sizeof who - 1, 0) : -1;
        who[got > 0 ? got : 0] = '\0';
        who[strcspn(who, "\n")] = '\0';
        close(fd);
        if (err != EWOULDBLOCK)
            return pl_errorf(PL_ERR_IO, "%s: cannot lock: %s", path, strerror(err));
        return pl_errorf(PL_ERR_ARG, "in use by another plait run (%s, recorded in %s); two "
                         "runs saving into one directory would overwrite each other's "
                         "checkpoints and metrics", who[0] ? who : "which has not written its "
                         "host and pid yet", path);
    }
    char host[256] = "unknown", text[320];
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = '\0';
    int n = snprintf(text, sizeof text, "host %s pid %ld\n", host, (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)n, 0) != n) {
        int err = errno;
        close(fd);
        return pl_errorf(PL_ERR_IO, "%s: cannot write: %s", path, strerror(err));
    }
    l->fd = fd;
    return PL_OK;
}

void pl_ckpt_lock_release(pl_ckpt_lock *l)
{
    if (l->fd >= 0)
        close(l->fd); /* the file stays: unlinking a lock file races with its next taker */
    l->fd = -1;
}
