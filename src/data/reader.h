/* Input formats of `plait preprocess`: how a byte stream splits into records
 * and which texts each record gives to each output dataset.
 *
 *   jsonl  one JSON object per line (Megatron's tools/preprocess_data.py): for
 *          each key, a string is one text, a list of strings is several texts
 *          (Megatron's "sentences"); a missing key or another type is an error.
 *   text   one document per line, the whole line is its one text.
 *   csv    one document per row, the text is field --csv-column (0-based).
 *          ',' (.csv) or '\t' (.tsv) with RFC 4180 quoting as Python's csv
 *          module reads it (quoted fields may hold delimiters, "" and newlines);
 *          ' ' (.smi) means runs of spaces and tabs, no quoting. Blank rows are
 *          skipped, as pandas does.
 *
 * Lines end at "\n", "\r\n" or "\r" (Python's universal newlines). Each record
 * must be valid UTF-8, as Python's strict decoder requires. Nothing here knows
 * file names or absolute line numbers: callers add them to messages.
 * Not here: decompression (base/zread), sentence splitting (NLTK). */
#ifndef PL_DATA_READER_H
#define PL_DATA_READER_H

#include "base/vec.h"

#include <stddef.h>
#include <stdint.h>

typedef enum { PL_READER_JSONL, PL_READER_TEXT, PL_READER_CSV } pl_reader_format;

typedef struct pl_reader_spec {
    pl_reader_format format;
    char delim;              /* CSV: ',' or '\t'; ' ' = runs of blanks, no quoting */
    int64_t column;          /* CSV: 0-based field index */
    const char *const *keys; /* JSON keys, one output dataset each */
    int n_keys;              /* >= 1 (text and CSV: exactly 1) */
} pl_reader_spec;

/* Sets format and delim from format ("auto", "jsonl", "text" or "csv") and, for
 * "auto" and the CSV delimiter, the extension of path: .txt -> text; .csv ->
 * csv ','; .tsv -> csv '\t'; .smi -> csv ' '; anything else -> jsonl.
 * A compression suffix (.gz, .xz, .zst: base/zread decompresses) is skipped:
 * corpus.txt.gz is text. .bz2 and .lz4 input is an error naming --input. */
pl_status pl_reader_spec_init(pl_reader_spec *s, const char *format, const char *path);

/* Length of the longest prefix of buf[0..n) that ends on a record boundary
 * (after a line terminator outside CSV quotes), or n when eof. 0: no complete
 * record yet. A trailing "\r" is a boundary only at eof (it may start "\r\n"). */
size_t pl_reader_boundary(const pl_reader_spec *s, const char *buf, size_t n, int eof);

typedef struct pl_reader_record {
    const char *text; /* without its line terminator */
    size_t len;
    int64_t line;     /* line terminators before the record in the buffer */
    size_t end;       /* offset just after the record and its terminator */
} pl_reader_record;

/* The record starting at *pos in buf[0..n) (a buffer cut by
 * pl_reader_boundary). Returns 0 when *pos == n. *lines counts the line
 * terminators passed so far, those inside quoted CSV fields included. */
int pl_reader_next(const pl_reader_spec *s, const char *buf, size_t n, size_t *pos,
                   int64_t *lines, pl_reader_record *r);

/* The texts one record gives each key. Reused from record to record. */
typedef struct pl_reader_doc {
    int64_t *first;     /* n_keys + 1: texts of key k are [first[k], first[k+1]) */
    const char **text;  /* not NUL-terminated in general; see len */
    size_t *len;
    int64_t n, cap;
    int blank;          /* a blank CSV row: no document at all */
    void *json;         /* cJSON tree owning the JSON texts */
    pl_bytes scratch;   /* copy of the record (JSON) or the unquoted field (CSV) */
} pl_reader_doc;

/* Fills doc from one record. PL_ERR_FORMAT: the record is malformed (bad JSON,
 * not an object, missing key, wrong type, invalid UTF-8, missing CSV column,
 * unterminated quote); the message says what and where in the line, but not
 * the file or line number. PL_ERR_NOMEM as usual. */
pl_status pl_reader_parse(const pl_reader_spec *s, const char *rec, size_t len,
                          pl_reader_doc *doc);
void pl_reader_doc_free(pl_reader_doc *doc);

/* The 0-based index of the field of header record rec equal to name. */
pl_status pl_reader_csv_column(const pl_reader_spec *s, const char *rec, size_t len,
                               const char *name, int64_t *column);


#endif
