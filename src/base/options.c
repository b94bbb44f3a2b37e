/* The option-table parser: defaults, parsing, validation, help. */
#include "base/options.h"

#include "base/alloc.h"

#include <errno.h>
#include <math.h>
#include <string.h>

static void *field(void *out, const pl_option *o) { return (char *)out + o->offset; }

static int choice_ok(const char *choices, const char *v)
{
    size_t n = strlen(v);
    for (const char *p = choices; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, v, n) == 0)
            return 1;
        if (!bar)
            break;
        p = bar + 1;
    }
    return 0;
}

static pl_status set_scalar(const pl_command_spec *cmd, const pl_option *o, void *out,
                            const char *v)
{
    char *end;
    switch (o->type) {
    case PL_OPT_INT: {
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end)
            return pl_errorf(PL_ERR_ARG, "plait %s: %s expects an integer, got '%s'", cmd->name,
                             o->name, v);
        *(int64_t *)field(out, o) = x;
        return PL_OK;
    }
    case PL_OPT_FLOAT: {
        errno = 0;
        double x = strtod(v, &end);
        /* strtod reads C's hexadecimal floats ("0x10" = 16); Python's float() refuses them */
        if (errno || end == v || *end || !isfinite(x) || strpbrk(v, "xX"))
            return pl_errorf(PL_ERR_ARG, "plait %s: %s expects a decimal number, got '%s'",
                             cmd->name, o->name, v);
        *(double *)field(out, o) = x;
        return PL_OK;
    }
    case PL_OPT_CHOICE:
        if (!choice_ok(o->choices, v))
            return pl_errorf(PL_ERR_ARG, "plait %s: %s must be one of {%s}, got '%s'", cmd->name,
                             o->name, o->choices, v);
        /* fall through */
    case PL_OPT_STRING:
        *(const char **)field(out, o) = v;
        return PL_OK;
    case PL_OPT_BOOL:
        *(int *)field(out, o) = 1;
        return PL_OK;
    case PL_OPT_LIST:
        break;
    }
    return pl_errorf(PL_ERR_INTERNAL, "option %s: bad type", o->name);
}

/* Appends v to the list field of o. */
static pl_status list_push(const pl_option *o, void *out, const char *v)
{
    pl_strlist *l = field(out, o);
    const char **items = pl_realloc((void *)l->items, (size_t)(l->n + 1) * sizeof *items);
    if (!items)
        return pl_errorf(PL_ERR_NOMEM, "out of memory parsing %s", o->name);
    items[l->n++] = v;
    l->items = items;
    return PL_OK;
}

/* Splits a default like "a b" into the list (the table's strings are static, so
 * the pieces are kept in one allocation hung off the list's item array). */
static pl_status list_default(const pl_option *o, void *out)
{
    pl_strlist *l = field(out, o);
    l->items = NULL;
    l->n = 0;
    if (!o->def || !*o->def)
        return PL_OK;
    /* Only single-word defaults are used by the tables; anything else is a bug. */
    if (strchr(o->def, ' '))
        return pl_errorf(PL_ERR_INTERNAL, "option %s: multi-word list default", o->name);
    return list_push(o, out, o->def);
}

static const pl_option *find(const pl_command_spec *cmd, const char *name, size_t len)
{
    for (int i = 0; i < cmd->n_options; i++) {
        const char *n = cmd->options[i].name;
        if (strlen(n) == len && strncmp(n, name, len) == 0)
            return &cmd->options[i];
    }
    return NULL;
}

/* Levenshtein distance of a[0..na) and b, capped at 64 characters of a. */
static size_t edit_distance(const char *a, size_t na, const char *b)
{
    size_t nb = strlen(b), row[65];
    if (na > 64 || nb > 64)
        return (size_t)-1;
    for (size_t j = 0; j <= nb; j++)
        row[j] = j;
    for (size_t i = 1; i <= na; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[nb];
}

/* The error for a flag that names no option: the flags it is a prefix of (for a
 * command that takes no abbreviations), else the nearest name by edit distance
 * when it is close (at most a third of the name's letters, and at least 2). */
static pl_status unknown_flag(const pl_command_spec *cmd, const char *arg, size_t len)
{
    char hint[160] = "";
    int n_prefix = 0;
    for (int i = 0; i < cmd->n_options && !cmd->allow_abbrev; i++)
        if (strncmp(cmd->options[i].name, arg, len) == 0 && n_prefix++ == 0)
            snprintf(hint, sizeof hint, "%s", cmd->options[i].name);
    if (n_prefix != 1) {
        size_t best = (size_t)-1;
        const char *name = NULL;
        for (int i = 0; i < cmd->n_options; i++) {
            size_t d = edit_distance(arg, len, cmd->options[i].name);
            if (d < best) {
                best = d;
                name = cmd->options[i].name;
            }
        }
        size_t limit = len > 2 ? (len - 2) / 3 : 0;
        hint[0] = 0;
        if (name && best <= (limit < 2 ? 2 : limit))
            snprintf(hint, sizeof hint, "%s", name);
    }
    if (hint[0])
        return pl_errorf(PL_ERR_ARG, "plait %s: unknown flag '%.*s' (did you mean %s?)", cmd->name,
                         (int)len, arg, hint);
    return pl_errorf(PL_ERR_ARG, "plait %s: unknown flag '%.*s' (see plait %s --help)", cmd->name,
                     (int)len, arg, cmd->name);
}

/* The option arg[0..len) names: its exact name, or, with allow_abbrev, the one
 * option it is a prefix of (argparse's rule). Sets *o or returns the error. */
static pl_status lookup(const pl_command_spec *cmd, const char *arg, size_t len,
                        const pl_option **o)
{
    *o = find(cmd, arg, len);
    if (*o)
        return PL_OK;
    if (cmd->allow_abbrev) {
        char list[512] = "";
        size_t used = 0;
        int n = 0;
        for (int i = 0; i < cmd->n_options; i++) {
            const char *name = cmd->options[i].name;
            if (strncmp(name, arg, len) != 0)
                continue;
            if (n++ == 0)
                *o = &cmd->options[i];
            if (used < sizeof list)
                used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", n > 1 ? ", " : "",
                                         name);
        }
        if (n == 1)
            return PL_OK;
        if (n > 1) {
            *o = NULL;
            return pl_errorf(PL_ERR_ARG, "plait %s: ambiguous option: %.*s could match %s",
                             cmd->name, (int)len, arg, list);
        }
    }
    return unknown_flag(cmd, arg, len);
}

static int is_flag(const char *a)
{
    /* "-1e-3" and "-5" are values, "--x" is a flag. */
    return a[0] == '-' && a[1] == '-' && a[2] != '\0';
}

pl_status pl_options_parse(const pl_command_spec *cmd, void *out, int argc, char **argv,
                           unsigned char *given)
{
    pl_status st = PL_OK;
    if (given)
        memset(given, 0, (size_t)cmd->n_options);
    for (int i = 0; i < cmd->n_options; i++) {
        const pl_option *o = &cmd->options[i];
        if (o->type == PL_OPT_LIST)
            PL_TRY(list_default(o, out));
        else if (o->type == PL_OPT_BOOL)
            *(int *)field(out, o) = o->def && strcmp(o->def, "true") == 0;
        else if (o->def)
            PL_TRY(set_scalar(cmd, o, out, o->def));
        else if (o->type == PL_OPT_INT)
            *(int64_t *)field(out, o) = 0;
        else if (o->type == PL_OPT_FLOAT)
            *(double *)field(out, o) = 0.0;
        else
            *(const char **)field(out, o) = NULL;
    }
    for (int a = 0; a < argc; a++) {
        const char *arg = argv[a];
        if (!is_flag(arg)) {
            st = pl_errorf(PL_ERR_ARG, "plait %s: unexpected argument '%s' (flags start with --)",
                           cmd->name, arg);
            goto fail;
        }
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        const pl_option *o = NULL;
        st = lookup(cmd, arg, len, &o);
        if (st)
            goto fail;
        int idx = (int)(o - cmd->options);
        /* given again: the last value wins, as argparse's store actions */
        if (given)
            given[idx] = 1;
        if (o->type == PL_OPT_BOOL) {
            if (eq) {
                st = pl_errorf(PL_ERR_ARG, "plait %s: %s is a switch and takes no value",
                               cmd->name, o->name);
                goto fail;
            }
            *(int *)field(out, o) = 1;
            continue;
        }
        if (o->type == PL_OPT_LIST) {
            pl_strlist *l = field(out, o);
            pl_free((void *)l->items); /* drop the default */
            l->items = NULL;
            l->n = 0;
            if (eq)
                PL_TRY(list_push(o, out, eq + 1));
            while (a + 1 < argc && !is_flag(argv[a + 1]))
                PL_TRY(list_push(o, out, argv[++a]));
            if (l->n == 0) {
                st = pl_errorf(PL_ERR_ARG, "plait %s: %s expects one or more values", cmd->name,
                               o->name);
                goto fail;
            }
            continue;
        }
        const char *v = eq ? eq + 1 : NULL;
        if (!v) {
            if (a + 1 >= argc) {
                st = pl_errorf(PL_ERR_ARG, "plait %s: %s expects a value", cmd->name, o->name);
                goto fail;
            }
            v = argv[++a];
        }
        PL_TRY(set_scalar(cmd, o, out, v));
    }
    for (int i = 0; i < cmd->n_options; i++) {
        const pl_option *o = &cmd->options[i];
        if (!(o->flags & PL_OPT_REQUIRED))
            continue;
        int missing = o->type == PL_OPT_LIST ? ((pl_strlist *)field(out, o))->n == 0
                                             : (o->type == PL_OPT_STRING || o->type == PL_OPT_CHOICE)
                                                   ? *(const char **)field(out, o) == NULL
                                                   : (given && !given[i]);
        if (missing) {
            st = pl_errorf(PL_ERR_ARG, "plait %s: missing required flag %s (%s)", cmd->name,
                           o->name, o->help);
            goto fail;
        }
    }
    return PL_OK;
fail:
    pl_options_free(cmd, out);
    return st;
}

pl_status pl_options_set(const pl_command_spec *cmd, void *out, const char *name,
                         const char **values, int n_values, unsigned char *given)
{
    const pl_option *o = find(cmd, name, strlen(name));
    if (!o)
        return pl_errorf(PL_ERR_ARG, "plait %s: unknown flag '%s'", cmd->name, name);
    if (given)
        given[o - cmd->options] = 1;
    if (o->type == PL_OPT_BOOL) {
        *(int *)field(out, o) = 1;
        return PL_OK;
    }
    if (o->type == PL_OPT_LIST) {
        pl_strlist *l = field(out, o);
        pl_free((void *)l->items);
        l->items = NULL;
        l->n = 0;
        for (int i = 0; i < n_values; i++) {
            pl_status st = list_push(o, out, values[i]);
            if (st)
                return st;
        }
        return PL_OK;
    }
    if (n_values != 1)
        return pl_errorf(PL_ERR_ARG, "plait %s: %s expects one value", cmd->name, o->name);
    return set_scalar(cmd, o, out, values[0]);
}

void pl_options_free(const pl_command_spec *cmd, void *out)
{
    for (int i = 0; i < cmd->n_options; i++) {
        const pl_option *o = &cmd->options[i];
        if (o->type != PL_OPT_LIST)
            continue;
        pl_strlist *l = field(out, o);
        pl_free((void *)l->items);
        l->items = NULL;
        l->n = 0;
    }
}

void pl_options_help(const pl_command_spec *cmd, FILE *fp)
{
    static const char *metavar[] = {"INT", "FLOAT", "", "STR", "", "STR [STR ...]"};
    fprintf(fp, "usage: plait %s [options]\n\n%s\n\noptions:\n", cmd->name, cmd->summary);
    for (int i = 0; i < cmd->n_options; i++) {
        const pl_option *o = &cmd->options[i];
        char mv[256];
        if (o->type == PL_OPT_CHOICE)
            snprintf(mv, sizeof mv, "{%s}", o->choices);
        else
            snprintf(mv, sizeof mv, "%s", metavar[o->type]);
        fprintf(fp, "  %s%s%s\n      %s", o->name, *mv ? " " : "", mv, o->help);
        if (o->flags & PL_OPT_REQUIRED)
            fprintf(fp, " (required)");
        else if (o->def && o->type != PL_OPT_BOOL)
            fprintf(fp, " (default: %s)", o->def);
        fprintf(fp, "\n");
    }
}

int pl_options_index(const pl_command_spec *cmd, const char *name)
{
    const pl_option *o = find(cmd, name, strlen(name));
    return o ? (int)(o - cmd->options) : -1;
}

int pl_options_wants_help(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return 1;
    return 0;
}
