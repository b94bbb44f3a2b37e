/* Command-line options declared as tables.
 *
 * Each subcommand declares its flags once, as an array of pl_option (name,
 * type, default, help, field offset). From that one table come parsing,
 * validation of every value, and `--help`. Values are written into a caller
 * struct at the given offsets:
 *   PL_OPT_INT -> int64_t, PL_OPT_FLOAT -> double, PL_OPT_BOOL -> int (a
 *   switch, takes no value), PL_OPT_STRING and PL_OPT_CHOICE -> const char *
 *   (pointing into argv or the table), PL_OPT_LIST -> pl_strlist (one or more
 *   values up to the next flag, as argparse's nargs='+'). */
#ifndef PL_BASE_OPTIONS_H
#define PL_BASE_OPTIONS_H

#include "base/status.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum { PL_OPT_INT, PL_OPT_FLOAT, PL_OPT_BOOL, PL_OPT_STRING, PL_OPT_CHOICE, PL_OPT_LIST } pl_opt_type;

enum { PL_OPT_REQUIRED = 1 };

typedef struct pl_strlist {
    const char **items; /* pl_malloc'd array; the strings belong to argv or the table */
    int n;
} pl_strlist;

typedef struct pl_option {
    const char *name;    /* "--seq-length" */
    pl_opt_type type;
    const char *def;     /* default, as it would be typed; NULL: none */
    size_t offset;       /* offsetof(the options struct, field) */
    const char *help;
    const char *choices; /* PL_OPT_CHOICE: "a|b|c" */
    unsigned flags;      /* PL_OPT_REQUIRED */
} pl_option;

typedef struct pl_command_spec {
    const char *name;    /* "preprocess" */
    const char *summary; /* one line */
    const pl_option *options;
    int n_options;
    int allow_abbrev;    /* accept a unique prefix of a flag, as argparse's allow_abbrev=True */
} pl_command_spec;

/* Applies the defaults, then parses argv[0..argc) into out, as Python's argparse
 * does: a flag given twice takes its last value (a list flag its last list);
 * with allow_abbrev, a unique prefix names its flag and an ambiguous one is an
 * error listing the candidates; an unknown flag's error suggests the nearest
 * name ("did you mean --lr?"). given, when not NULL, receives 1 for each option
 * the user set (n_options entries). Errors name the flag and say what was
 * expected. pl_options_free() releases lists. */
pl_status pl_options_parse(const pl_command_spec *cmd, void *out, int argc, char **argv,
                           unsigned char *given);
void pl_options_free(const pl_command_spec *cmd, void *out);

/* Sets the flag `name` ("--seq-length") as if it had been given with these
 * values (a preset file's entries); the strings must outlive out. A switch
 * takes no values. Marks it in given when not NULL. */
pl_status pl_options_set(const pl_command_spec *cmd, void *out, const char *name,
                         const char **values, int n_values, unsigned char *given);

/* The index of the flag `name` in cmd's table (exact name), or -1. */
int pl_options_index(const pl_command_spec *cmd, const char *name);

/* Writes "usage: plait NAME [options]" and one block per flag. */
void pl_options_help(const pl_command_spec *cmd, FILE *fp);

/* True if argv holds -h or --help. */
int pl_options_wants_help(int argc, char **argv);

#endif
