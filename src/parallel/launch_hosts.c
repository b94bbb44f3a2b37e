/* parallel/launch_hosts: DeepSpeed hostfiles and --include/--exclude filters
 * (the rules are in launch.h). Pure text handling: no MPI, no processes. */
#include "parallel/launch.h"

#include "base/alloc.h"
#include "base/fileio.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

void pl_launch_hosts_free(pl_launch_hosts *hosts)
{
    for (int i = 0; i < hosts->n; i++) {
        pl_free(hosts->h[i].name);
        pl_free(hosts->h[i].used);
    }
    pl_free(hosts->h);
    hosts->h = NULL;
    hosts->n = 0;
}

static int find_host(const pl_launch_hosts *hosts, const char *name, size_t len)
{
    for (int i = 0; i < hosts->n; i++)
        if (strlen(hosts->h[i].name) == len && memcmp(hosts->h[i].name, name, len) == 0)
            return i;
    return -1;
}

static pl_status add_host(pl_launch_hosts *hosts, const char *name, size_t len, int nslots)
{
    pl_launch_host *h = pl_realloc(hosts->h, (size_t)(hosts->n + 1) * sizeof *h);
    if (!h)
        return pl_errorf(PL_ERR_NOMEM, "hostfile: out of memory");
    hosts->h = h;
    pl_launch_host *x = &h[hosts->n];
    x->name = pl_malloc(len + 1);
    x->used = pl_malloc((size_t)nslots);
    if (!x->name || !x->used) {
        pl_free(x->name);
        pl_free(x->used);
        return pl_errorf(PL_ERR_NOMEM, "hostfile: out of memory");
    }
    memcpy(x->name, name, len);
    x->name[len] = '\0';
    memset(x->used, 1, (size_t)nslots);
    x->nslots = nslots;
    x->nranks = nslots;
    hosts->n++;
    return PL_OK;
}

/* One line, without its newline: blank, a comment, or `HOST slots=N ...`. */
static pl_status parse_line(pl_launch_hosts *hosts, const char *s, size_t len, const char *path,
                            int lineno)
{
    while (len && isspace((unsigned char)*s))
        s++, len--;
    while (len && isspace((unsigned char)s[len - 1]))
        len--;
    if (len == 0 || *s == '#')
        return PL_OK;
    size_t hl = 0;
    while (hl < len && !isspace((unsigned char)s[hl]))
        hl++;
    size_t p = hl;
    while (p < len && isspace((unsigned char)s[p]))
        p++;
    int ok = p > hl && len - p > 6 && memcmp(s + p, "slots=", 6) == 0;
    long slots = 0;
    if (ok) {
        p += 6;
        size_t d = p;
        while (p < len && isdigit((unsigned char)s[p]) && slots <= INT_MAX)
            slots = slots * 10 + (s[p++] - '0');
        ok = p > d && (p == len || isspace((unsigned char)s[p]));
    }
    if (!ok)
        return pl_errorf(PL_ERR_FORMAT, "%s:%d: expected 'HOST slots=N', got '%.*s'", path, lineno,
                         (int)len, s);
    if (slots < 1 || slots > 1 << 20)
        return pl_errorf(PL_ERR_FORMAT, "%s:%d: slots=%ld: expected 1 to %d ranks on host %.*s",
                         path, lineno, slots, 1 << 20, (int)hl, s);
    if (find_host(hosts, s, hl) >= 0)
        return pl_errorf(PL_ERR_FORMAT, "%s:%d: host %.*s is listed twice (one line per host)",
                         path, lineno, (int)hl, s);
    return add_host(hosts, s, hl, (int)slots);
}

pl_status pl_launch_hosts_parse(const char *text, const char *path, pl_launch_hosts *out)
{
    pl_status st = PL_OK;
    pl_launch_hosts hosts = {0};
    int lineno = 0;
    for (const char *s = text; *s;) {
        const char *e = strchr(s, '\n');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        PL_TRY(parse_line(&hosts, s, len, path, ++lineno));
        s += len + (e != NULL);
    }
    if (hosts.n == 0)
        PL_TRY(pl_errorf(PL_ERR_FORMAT, "%s: no hosts (expected lines 'HOST slots=N')", path));
    *out = hosts;
    return PL_OK;
fail:
    pl_launch_hosts_free(&hosts);
    return st;
}

pl_status pl_launch_hosts_read(const char *path, pl_launch_hosts *out)
{
    char *text = NULL;
    size_t size = 0;
    pl_status st = pl_file_read_all(path, &text, &size);
    if (st != PL_OK)
        return pl_error_wrap(st, "--hostfile");
    if (memchr(text, '\0', size))
        st = pl_errorf(PL_ERR_FORMAT, "%s: a NUL byte: not a text hostfile", path);
    else
        st = pl_launch_hosts_parse(text, path, out);
    pl_free(text);
    return st;
}

/* The slot list after "HOST:" (s, len): sets used[slot] to `on`. */
static pl_status apply_slots(pl_launch_host *h, const char *s, size_t len, unsigned char on,
                             const char *flag, const char *spec)
{
    size_t i = 0;
    while (i <= len) {
        size_t b = i;
        long slot = 0;
        while (i < len && isdigit((unsigned char)s[i]) && slot <= INT_MAX)
            slot = slot * 10 + (s[i++] - '0');
        if (i == b || (i < len && s[i] != ','))
            return pl_errorf(PL_ERR_ARG,
                             "%s %s: slot list '%.*s' of host %s: expected SLOT[,SLOT...] "
                             "(numbers from 0)", flag, spec, (int)len, s, h->name);
        if (slot >= h->nslots)
            return pl_errorf(PL_ERR_ARG, "%s %s: host %s has no slot %ld (it has slots 0-%d)",
                             flag, spec, h->name, slot, h->nslots - 1);
        h->used[slot] = on;
        i++;
    }
    return PL_OK;
}

static void list_hosts(const pl_launch_hosts *hosts, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < hosts->n && n + 1 < cap; i++) {
        int w = snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", hosts->h[i].name);
        if (w < 0)
            break;
        n += (size_t)w;
    }
}

pl_status pl_launch_hosts_filter(pl_launch_hosts *hosts, const char *include,
                                 const char *exclude, const char *hostfile)
{
    int inc = include && *include, exc = exclude && *exclude;
    if (inc && exc)
        return pl_errorf(PL_ERR_ARG, "--include and --exclude: give one of them, not both");
    if (!inc && !exc)
        return PL_OK;
    const char *spec = inc ? include : exclude;
    const char *flag = inc ? "--include" : "--exclude";
    for (int i = 0; i < hosts->n; i++)
        memset(hosts->h[i].used, exc, (size_t)hosts->h[i].nslots);
    for (const char *s = spec;;) {
        const char *at = strchr(s, '@');
        size_t len = at ? (size_t)(at - s) : strlen(s);
        const char *colon = memchr(s, ':', len);
        size_t hl = colon ? (size_t)(colon - s) : len;
        if (hl == 0)
            return pl_errorf(PL_ERR_ARG, "%s %s: an empty host name (expected "
                             "HOST[:SLOT,...][@HOST...])", flag, spec);
        int k = find_host(hosts, s, hl);
        if (k < 0) {
            char names[512];
            list_hosts(hosts, names, sizeof names);
            return pl_errorf(PL_ERR_ARG, "%s %s: host '%.*s' is not in hostfile %s (hosts: %s)",
                             flag, spec, (int)hl, s, hostfile, names);
        }
        pl_launch_host *h = &hosts->h[k];
        if (colon) {
            pl_status st = apply_slots(h, colon + 1, len - hl - 1, (unsigned char)inc, flag, spec);
            if (st != PL_OK)
                return st;
        } else {
            memset(h->used, inc, (size_t)h->nslots);
        }
        if (!at)
            break;
        s = at + 1;
    }
    int kept = 0;
    for (int i = 0; i < hosts->n; i++) {
        pl_launch_host h = hosts->h[i];
        h.nranks = 0;
        for (int j = 0; j < h.nslots; j++)
            h.nranks += h.used[j];
        if (h.nranks == 0) {
            pl_free(h.name);
            pl_free(h.used);
            continue;
        }
        hosts->h[kept++] = h;
    }
    hosts->n = kept;
    if (kept == 0)
        return pl_errorf(PL_ERR_ARG, "%s %s leaves no slots of hostfile %s to run on", flag, spec,
                         hostfile);
    return PL_OK;
}
