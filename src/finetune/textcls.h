/* Text classification data: TSV or JSON lines -> labelled examples -> BERT inputs.
 *
 * TSV (GLUE's layout): one example a line, fields split on '\t' with no
 * quoting (as Megatron's tasks/glue readers and NeMo's text classification
 * split them), an optional header line that is skipped. Columns are chosen
 * by 0-based index: text_a (default 0), text_b (default none) and the label
 * (default: the last field of the line). Examples:
 *   SST-2  "sentence\tlabel"               col_a 0, label last
 *   MRPC   "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"  col_a 3, col_b 4, label 0
 * JSON lines: one object a line, {"text": ..., "text_b": ..., "label": ...}
 * (keys configurable; text_b optional and may be null; a numeric label is
 * read as its integer spelling, "1"). Blank lines are skipped in both.
 *
 * Encoding is BERT's sentence (pair) classification input, as Google's
 * run_classifier.py, Hugging Face and NeMo's GLUE dataset build it:
 *   [CLS] a [SEP]             token types 0...
 *   [CLS] a [SEP] b [SEP]     token types 0 for [CLS] a [SEP], 1 for b [SEP]
 * A pair longer than seq_len loses tokens from the end of its longer
 * segment, one at a time (b when equal: _truncate_seq_pair); a single text
 * loses its tail. Then [PAD] (type 0, mask 0) up to seq_len. Megatron's own
 * tasks/data_utils.py instead cuts the joined sequence at seq_len - 1 and
 * appends [SEP]: not what this does (docs/finetune.md). */
#ifndef PL_FINETUNE_TEXTCLS_H
#define PL_FINETUNE_TEXTCLS_H

#include "base/vec.h"
#include "data/tokenizer/bert_wordpiece.h"
#include "finetune/labels.h"

#include <stdint.h>

typedef struct pl_textcls_spec {
    int jsonl;       /* 0: TSV, 1: JSON lines */
    int header;      /* TSV: the first line is a header */
    int col_a;       /* TSV: column of text_a */
    int col_b;       /* TSV: column of text_b, -1 for none */
    int col_label;   /* TSV: column of the label, -1 for the last one */
    int unlabeled;   /* no label expected (inputs to predict) */
    const char *key_a, *key_b, *key_label; /* JSON keys; NULL: "text", "text_b", "label" */
} pl_textcls_spec;

/* Defaults: TSV, no header, text_a in column 0, no text_b, label last. */
pl_textcls_spec pl_textcls_spec_default(void);

typedef struct pl_textcls_example {
    const char *a, *b; /* b NULL for single texts */
    const char *label; /* NULL when unlabeled */
    int64_t line;      /* 1-based line in the file */
} pl_textcls_example;

typedef struct pl_textcls_set {
    pl_textcls_example *ex;
    int64_t n;
    char *path;   /* for messages */
    char *arena;  /* the strings */
} pl_textcls_set;

/* Reads path. Errors are PL_ERR_FORMAT naming path:line and what was
 * expected (a missing column, invalid UTF-8, a non-object line). */
pl_status pl_textcls_read(pl_textcls_set *out, const char *path, const pl_textcls_spec *spec);
/* The same on text[0..n); name stands for the file in messages. */
pl_status pl_textcls_parse(pl_textcls_set *out, const char *text, size_t n, const char *name,
                           const pl_textcls_spec *spec);
void pl_textcls_set_free(pl_textcls_set *s);

/* The sorted label set of a labelled set (labels.h). */
pl_status pl_textcls_labels(const pl_textcls_set *s, pl_ft_labels *out);

/* Encodes one example into ids/types/mask[0..seq_len) (see the header).
 * scratch_a/b are reused buffers. *truncated (may be NULL) tells whether
 * tokens were dropped. seq_len must leave room for the specials (3 with b,
 * 2 without): PL_ERR_ARG otherwise. */
pl_status pl_textcls_encode(pl_tokenizer *t, const pl_bert_specials *sp, const char *a,
                            const char *b, int64_t seq_len, pl_ids *scratch_a, pl_ids *scratch_b,
                            int32_t *ids, int32_t *types, int32_t *mask, int *truncated);

/* Encodes every example: ids/types/mask are n * seq_len, labels n (ids from
 * map; NULL for unlabeled sets). A label missing from map is PL_ERR_FORMAT
 * naming path:line. *n_truncated (may be NULL) counts truncated examples. */
pl_status pl_textcls_encode_set(pl_tokenizer *t, const pl_textcls_set *s, const pl_ft_labels *map,
                                int64_t seq_len, int32_t *ids, int32_t *types, int32_t *mask,
                                int32_t *labels, int64_t *n_truncated);

#endif
