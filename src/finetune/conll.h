/* Token classification data: CoNLL-style columns (and NeMo's text/labels files).
 *
 * File: one word a line, columns separated by spaces or tabs (CoNLL-2003:
 * "EU NNP B-NP B-ORG"), the word in word_col (default 0) and its tag in
 * tag_col (default -1: the last column); a blank line ends a sentence;
 * "-DOCSTART-" lines are skipped (with the blank line after them, which
 * ends an empty sentence). Tags are BIO / IOB2 strings ("B-PER", "I-PER",
 * "O"); they are not checked here: seqeval.h scores any tag the way
 * seqeval does. With tags = 0 (prediction input) a line is just a word.
 * Encoding for BERT: tokcls.h. */
#ifndef PL_FINETUNE_CONLL_H
#define PL_FINETUNE_CONLL_H

#include "base/vec.h"
#include "finetune/labels.h"

#include <stdint.h>

typedef struct pl_conll_sentence {
    int64_t first, n; /* words [first, first + n) */
    int64_t line;     /* line of its first word */
} pl_conll_sentence;

typedef struct pl_conll_set {
    const char **words, **tags; /* n_words each; tags NULL when read without tags */
    int64_t n_words;
    pl_conll_sentence *sent;
    int64_t n_sent;
    char *arena, *path;
} pl_conll_set;

typedef struct pl_conll_spec {
    int word_col; /* default 0 */
    int tag_col;  /* default -1: the last column */
    int tags;     /* 1: read tags (default); 0: words only */
} pl_conll_spec;

pl_conll_spec pl_conll_spec_default(void);

/* Reads path. A line with fewer columns than asked, or a tag column that is
 * also the only one when tags are asked for, is PL_ERR_FORMAT naming
 * path:line. */
pl_status pl_conll_read(pl_conll_set *out, const char *path, const pl_conll_spec *spec);
pl_status pl_conll_parse(pl_conll_set *out, const char *text, size_t n, const char *name,
                         const pl_conll_spec *spec);
/* NeMo's token classification files: text_path holds one sentence a line
 * (words split on spaces/tabs), labels_path the tags of those words, line by
 * line (labels_path NULL: words only). A line pair whose counts differ is
 * PL_ERR_FORMAT naming both files and the line; empty lines are skipped in
 * both. Sentences read this way have line = their line in text_path. */
pl_status pl_conll_read_nemo(pl_conll_set *out, const char *text_path, const char *labels_path);
void pl_conll_set_free(pl_conll_set *s);

/* The tag map of a set: NeMo's order, "O" first, the others sorted. */
pl_status pl_conll_labels(const pl_conll_set *s, pl_ft_labels *out);

#endif
