/* Label maps for fine-tuning: a label string <-> an id.
 *
 * Ids are positions in a sorted list (strcmp order, i.e. bytewise), so the
 * same set of labels always gives the same ids, whatever order the training
 * file lists them in. NeMo's token classification puts its pad label ('O')
 * at id 0 and the others sorted after it; `first` does that.
 *
 * The map is written next to a fine-tuned model (one label a line, id = line
 * number - 1) and read back by evaluation, so both use the same ids. */
#ifndef PL_FINETUNE_LABELS_H
#define PL_FINETUNE_LABELS_H

#include "base/status.h"

#include <stdint.h>

typedef struct pl_ft_labels {
    char **names; /* n names, owned */
    int64_t n;
} pl_ft_labels;

/* Builds the map from n strings (duplicates allowed): the distinct ones,
 * sorted; when first is non-NULL it is id 0 (added if absent) and the rest
 * follow sorted. Empty strings are PL_ERR_FORMAT. */
pl_status pl_ft_labels_build(pl_ft_labels *out, const char *const *s, int64_t n, const char *first);

/* Id of s, or -1. */
int64_t pl_ft_labels_find(const pl_ft_labels *m, const char *s);

/* One label a line. Errors name the path. */
pl_status pl_ft_labels_write(const pl_ft_labels *m, const char *path);
/* Reads a file pl_ft_labels_write wrote; keeps the file's order. Empty or
 * duplicate labels are PL_ERR_FORMAT naming path:line. */
pl_status pl_ft_labels_read(pl_ft_labels *out, const char *path);

void pl_ft_labels_free(pl_ft_labels *m);

#endif
