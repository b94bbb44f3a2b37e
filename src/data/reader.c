/* Input formats of plait preprocess: record boundaries, CSV fields, JSON
 * documents, strict UTF-8. Semantics: reader.h; Megatron's side is
 * tools/preprocess_data.py (json.loads per line, Encoder.encode). */
#include "data/reader.h"

#include "base/alloc.h"

#include "base/json.h"
#include "base/utf8.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* ---- format selection ------------------------------------------------------ */

/* The extension that says the format: "corpus.jsonl.gz" -> ".jsonl" (the
 * compression suffix, read by base/zread, is skipped). Written into buf. */
static const char *extension(const char *path, char *buf, size_t cap)
{
    static const char *const zext[] = {".gz", ".xz", ".zst"};
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t n = strlen(base);
    for (size_t i = 0; i < sizeof zext / sizeof *zext; i++) {
        size_t e = strlen(zext[i]);
        if (n > e && strcasecmp(base + n - e, zext[i]) == 0) {
            n -= e;
            break;
        }
    }
    snprintf(buf, cap, "%.*s", (int)n, base);
    const char *dot = strrchr(buf, '.');
    return dot && dot != buf ? dot : "";
}

pl_status pl_reader_spec_init(pl_reader_spec *s, const char *format, const char *path)
{
    static const char *const unsupported[] = {".bz2", ".lz4"};
    char buf[512];
    const char *ext = path ? extension(path, buf, sizeof buf) : "";
    for (size_t i = 0; i < sizeof unsupported / sizeof *unsupported; i++)
        if (strcasecmp(ext, unsupported[i]) == 0)
            return pl_errorf(PL_ERR_UNSUPPORTED,
                             "--input %s: %s input is not read directly (.gz, .xz and .zst are); "
                             "decompress it first", path, ext + 1);
    s->delim = strcasecmp(ext, ".tsv") == 0 ? '\t' : strcasecmp(ext, ".smi") == 0 ? ' ' : ',';
    if (!format || strcmp(format, "auto") == 0) {
        if (strcasecmp(ext, ".txt") == 0)
            s->format = PL_READER_TEXT;
        else if (strcasecmp(ext, ".csv") == 0 || strcasecmp(ext, ".tsv") == 0 ||
                 strcasecmp(ext, ".smi") == 0)
            s->format = PL_READER_CSV;
        else
            s->format = PL_READER_JSONL;
    } else if (strcmp(format, "jsonl") == 0) {
        s->format = PL_READER_JSONL;
    } else if (strcmp(format, "text") == 0) {
        s->format = PL_READER_TEXT;
    } else if (strcmp(format, "csv") == 0) {
        s->format = PL_READER_CSV;
    } else {
        return pl_errorf(PL_ERR_ARG, "--input-format: unknown format '%s' (auto, jsonl, text, csv)",
                         format);
    }
    return PL_OK;
}

/* ---- records ---------------------------------------------------------------- */

static int quoted_csv(const pl_reader_spec *s)
{
    return s->format == PL_READER_CSV && s->delim != ' ';
}

/* Index of the first '\n' or '\r' in p[0..n), or n. */
static size_t find_eol(const char *p, size_t n)
{
    const char *nl = memchr(p, '\n', n);
    size_t lim = nl ? (size_t)(nl - p) : n;
    const char *cr = memchr(p, '\r', lim);
    return cr ? (size_t)(cr - p) : lim;
}

/* One CSV record from buf[pos..n) as Python's csv reader splits it: a quote
 * opens a quoted field only at the start of a field; "" inside is a quote;
 * line terminators inside quotes belong to the field. Sets *content_end (the
 * record without its terminator), *next (after the terminator) and adds the
 * line terminators passed to *lines. Returns 0 if the record is incomplete
 * (no terminator before n, or a final "\r" whose next byte is unknown, and not eof). */
static int csv_scan(const char *buf, size_t n, size_t pos, char delim, int eof,
                    size_t *content_end, size_t *next, int64_t *lines)
{
    enum { START, UNQUOTED, QUOTED, QUOTE_IN_QUOTED } st = START;
    int64_t nl = 0;
    for (size_t i = pos; i < n; i++) {
        char c = buf[i];
        if (st == QUOTED) {
            if (c == '"') {
                st = QUOTE_IN_QUOTED;
            } else if (c == '\n' || c == '\r') {
                if (c == '\r' && i + 1 < n && buf[i + 1] == '\n')
                    i++;
                nl++;
            }
            continue;
        }
        if (st == QUOTE_IN_QUOTED) {
            if (c == '"') {
                st = QUOTED; /* "" */
                continue;
            }
            st = UNQUOTED; /* the field closed; Python keeps any text after it */
        }
        if (c == '\n' || c == '\r') {
            *content_end = i;
            if (c == '\r') {
                if (i + 1 == n) {
                    if (!eof)
                        return 0;
                } else if (buf[i + 1] == '\n') {
                    i++;
                }
            }
            *next = i + 1;
            *lines += nl + 1;
            return 1;
        }
        if (c == delim)
            st = START;
        else if (st == START)
            st = c == '"' ? QUOTED : UNQUOTED;
    }
    if (!eof)
        return 0;
    *content_end = n;
    *next = n;
    *lines += nl;
    return 1;
}

size_t pl_reader_boundary(const pl_reader_spec *s, const char *buf, size_t n, int eof)
{
    if (eof)
        return n;
    if (quoted_csv(s)) {
        size_t pos = 0, ce, next;
        int64_t lines = 0;
        while (pos < n && csv_scan(buf, n, pos, s->delim, 0, &ce, &next, &lines))
            pos = next;
        return pos;
    }
    for (size_t i = n; i-- > 0;) {
        if (buf[i] == '\n')
            return i + 1;
        if (buf[i] == '\r' && i + 1 < n) /* buf[i + 1] != '\n', or we had stopped there */
            return i + 1;
    }
    return 0;
}

int pl_reader_next(const pl_reader_spec *s, const char *buf, size_t n, size_t *pos,
                   int64_t *lines, pl_reader_record *r)
{
    size_t p = *pos;
    if (p >= n)
        return 0;
    r->text = buf + p;
    r->line = *lines;
    if (quoted_csv(s)) {
        size_t ce = n, next = n;
        csv_scan(buf, n, p, s->delim, 1, &ce, &next, lines);
        r->len = ce - p;
        r->end = next;
    } else {
        size_t e = p + find_eol(buf + p, n - p);
        r->len = e - p;
        if (e < n) {
            r->end = buf[e] == '\r' && e + 1 < n && buf[e + 1] == '\n' ? e + 2 : e + 1;
            (*lines)++;
        } else {
            r->end = n;
        }
    }
    *pos = r->end;
    return 1;
}

/* ---- documents ------------------------------------------------------------------ */

static pl_status push_text(pl_reader_doc *d, const char *p, size_t n)
{
    if (d->n == d->cap) {
        int64_t cap = d->cap ? 2 * d->cap : 8;
        const char **t = pl_realloc((void *)d->text, (size_t)cap * sizeof *t);
        if (!t)
            return pl_errorf(PL_ERR_NOMEM, "out of memory listing the texts of a record");
        d->text = t;
        size_t *l = pl_realloc(d->len, (size_t)cap * sizeof *l);
        if (!l)
            return pl_errorf(PL_ERR_NOMEM, "out of memory listing the texts of a record");
        d->len = l;
        d->cap = cap;
    }
    d->text[d->n] = p;
    d->len[d->n++] = n;
    return PL_OK;
}

static void doc_reset(pl_reader_doc *d)
{
    cJSON_Delete(d->json);
    d->json = NULL;
    d->n = 0;
    d->blank = 0;
    d->scratch.n = 0;
}

void pl_reader_doc_free(pl_reader_doc *d)
{
    doc_reset(d);
    pl_free(d->first);
    pl_free((void *)d->text);
    pl_free(d->len);
    pl_bytes_free(&d->scratch);
    memset(d, 0, sizeof *d);
}

static const char *json_type(const cJSON *v)
{
    if (cJSON_IsString(v))
        return "a string";
    if (cJSON_IsNumber(v))
        return "a number";
    if (cJSON_IsArray(v))
        return "a list";
    if (cJSON_IsObject(v))
        return "an object";
    if (cJSON_IsBool(v))
        return "a boolean";
    if (cJSON_IsNull(v))
        return "null";
    return "invalid";
}

static int json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Python's json.loads also reads NaN, Infinity and -Infinity (json.dumps writes
 * them for non-finite floats). Outside strings, overwrite each with "0" and
 * spaces, so cJSON can parse the line; such a value is still "a number".
 * Returns the number of replacements. */
static int blank_nonfinite(char *p, size_t n)
{
    static const char *const words[] = {"-Infinity", "Infinity", "NaN"};
    int in_string = 0, count = 0;
    for (size_t i = 0; i < n; i++) {
        if (in_string) {
            if (p[i] == '\\')
                i++;
            else if (p[i] == '"')
                in_string = 0;
            continue;
        }
        if (p[i] == '"') {
            in_string = 1;
            continue;
        }
        for (size_t w = 0; w < sizeof words / sizeof *words; w++) {
            size_t len = strlen(words[w]);
            if (n - i >= len && memcmp(p + i, words[w], len) == 0) {
                p[i] = '0';
                memset(p + i + 1, ' ', len - 1);
                i += len - 1;
                count++;
                break;
            }
        }
    }
    return count;
}

/* Offset of a "\u0000" escape inside a string, or -1. cJSON's strings are
 * NUL-terminated, so such a text would be cut short silently. */
static long nul_escape(const char *p, size_t n)
{
    for (size_t i = 0; i + 1 < n; i++) {
        if (p[i] != '\\')
            continue;
        if (p[i + 1] == 'u' && n - i >= 6 && memcmp(p + i + 2, "0000", 4) == 0)
            return (long)i;
        i++; /* skip the escaped character (it may be a backslash) */
    }
    return -1;
}

static pl_status parse_json(const pl_reader_spec *s, const char *rec, size_t len,
                            pl_reader_doc *d)
{
    size_t i = 0;
    while (i < len && json_space(rec[i]))
        i++;
    if (i == len)
        return pl_errorf(PL_ERR_FORMAT, "empty line, expected a JSON object");
    if (len >= 3 && memcmp(rec, "\xEF\xBB\xBF", 3) == 0)
        return pl_errorf(PL_ERR_FORMAT,
                         "starts with a UTF-8 byte-order mark, which json.loads rejects too "
                         "(save the file without BOM)");
    const char *nul = memchr(rec, '\0', len);
    if (nul)
        return pl_errorf(PL_ERR_FORMAT, "not valid JSON: NUL byte at byte offset %zu",
                         (size_t)(nul - rec));
    long esc = nul_escape(rec, len);
    if (esc >= 0)
        return pl_errorf(PL_ERR_FORMAT,
                         "\\u0000 at byte offset %ld: a NUL character cannot be passed to the "
                         "tokenizer",
                         esc);
    pl_status st = pl_bytes_reserve(&d->scratch, len);
    if (st)
        return st;
    memcpy(d->scratch.data, rec, len);
    d->scratch.data[len] = '\0';
    d->scratch.n = len;
    const char *end = NULL;
    pl_json_init();
    pl_json_oom_take();
    cJSON *root = cJSON_ParseWithOpts(d->scratch.data, &end, 0);
    if (!root && blank_nonfinite(d->scratch.data, len) > 0) {
        size_t first_err = end ? (size_t)(end - d->scratch.data) : 0;
        root = cJSON_ParseWithOpts(d->scratch.data, &end, 0);
        if (!root)
            end = d->scratch.data + first_err;
    }
    if (!root && pl_json_oom_take())
        return pl_errorf(PL_ERR_NOMEM, "out of memory parsing JSON");
    if (!root)
        return pl_errorf(PL_ERR_FORMAT, "not valid JSON (error at byte offset %zu)",
                         end ? (size_t)(end - d->scratch.data) : (size_t)0);
    d->json = root;
    size_t after = (size_t)(end - d->scratch.data);
    while (after < len && json_space(rec[after]))
        after++;
    if (after < len)
        return pl_errorf(PL_ERR_FORMAT, "not valid JSON: extra data after the value at byte offset %zu",
                         after);
    if (!cJSON_IsObject(root))
        return pl_errorf(PL_ERR_FORMAT, "the line is %s, expected a JSON object", json_type(root));
    for (int k = 0; k < s->n_keys; k++) {
        d->first[k] = d->n;
        const cJSON *v = NULL;
        for (const cJSON *c = root->child; c; c = c->next) /* the last duplicate wins, as in Python */
            if (c->string && strcmp(c->string, s->keys[k]) == 0)
                v = c;
        if (!v)
            return pl_errorf(PL_ERR_FORMAT, "missing key '%s'", s->keys[k]);
        if (cJSON_IsString(v)) {
            st = push_text(d, v->valuestring, strlen(v->valuestring));
            if (st)
                return st;
        } else if (cJSON_IsArray(v)) {
            int item = 0;
            for (const cJSON *e = v->child; e; e = e->next, item++) {
                if (!cJSON_IsString(e))
                    return pl_errorf(PL_ERR_FORMAT, "key '%s': list item %d is %s, expected a string",
                                     s->keys[k], item, json_type(e));
                st = push_text(d, e->valuestring, strlen(e->valuestring));
                if (st)
                    return st;
            }
        } else {
            return pl_errorf(PL_ERR_FORMAT, "key '%s' is %s, expected a string or a list of strings",
                             s->keys[k], json_type(v));
        }
    }
    d->first[s->n_keys] = d->n;
    return PL_OK;
}

static int blank_char(char c) { return c == ' ' || c == '\t'; }

/* Field `column` of a quoted-CSV record (delim ',' or '\t'), unquoted into out
 * (reserved to len + 1). Returns the field count when the row is too short via
 * *fields (and PL_ERR_FORMAT), -1 in *fields otherwise. */
static pl_status csv_field(const char *rec, size_t len, char delim, int64_t column, char *out,
                           size_t *out_len, int64_t *fields)
{
    size_t i = 0, o = 0;
    *fields = -1;
    for (int64_t f = 0;; f++) {
        int keep = f == column;
        if (i < len && rec[i] == '"') {
            size_t open = i++;
            for (;;) {
                if (i == len)
                    return pl_errorf(PL_ERR_FORMAT,
                                     "unterminated quoted field starting at byte offset %zu", open);
                if (rec[i] == '"') {
                    if (i + 1 < len && rec[i + 1] == '"') {
                        if (keep)
                            out[o++] = '"';
                        i += 2;
                        continue;
                    }
                    i++;
                    break;
                }
                if (keep)
                    out[o++] = rec[i];
                i++;
            }
        }
        while (i < len && rec[i] != delim) { /* unquoted field, or text after a closing quote */
            if (keep)
                out[o++] = rec[i];
            i++;
        }
        if (keep) {
            *out_len = o;
            return PL_OK;
        }
        if (i == len) {
            *fields = f + 1;
            return PL_ERR_FORMAT;
        }
        i++; /* the delimiter */
    }
}

static pl_status parse_csv(const pl_reader_spec *s, const char *rec, size_t len, pl_reader_doc *d)
{
    d->first[0] = 0;
    d->first[1] = 0;
    if (s->delim == ' ') {
        size_t i = 0;
        int64_t f = 0;
        while (i < len && blank_char(rec[i]))
            i++;
        if (i == len) {
            d->blank = 1;
            return PL_OK;
        }
        for (;; f++) {
            size_t start = i;
            while (i < len && !blank_char(rec[i]))
                i++;
            if (f == s->column) {
                d->first[1] = 1;
                return push_text(d, rec + start, i - start);
            }
            while (i < len && blank_char(rec[i]))
                i++;
            if (i == len)
                return pl_errorf(PL_ERR_FORMAT,
                                 "the row has %lld fields, --csv-column %lld needs at least %lld",
                                 (long long)(f + 1), (long long)s->column,
                                 (long long)s->column + 1);
        }
    }
    if (len == 0) {
        d->blank = 1;
        return PL_OK;
    }
    pl_status st = pl_bytes_reserve(&d->scratch, len);
    if (st)
        return st;
    size_t n = 0;
    int64_t fields;
    st = csv_field(rec, len, s->delim, s->column, d->scratch.data, &n, &fields);
    if (st && fields >= 0)
        return pl_errorf(PL_ERR_FORMAT, "the row has %lld fields, --csv-column %lld needs at least %lld",
                         (long long)fields, (long long)s->column, (long long)s->column + 1);
    if (st)
        return st;
    d->scratch.n = n;
    d->scratch.data[n] = '\0';
    d->first[1] = 1;
    return push_text(d, d->scratch.data, n);
}

pl_status pl_reader_parse(const pl_reader_spec *s, const char *rec, size_t len, pl_reader_doc *d)
{
    doc_reset(d);
    if (!d->first) {
        d->first = pl_calloc((size_t)s->n_keys + 1, sizeof *d->first);
        if (!d->first)
            return pl_errorf(PL_ERR_NOMEM, "out of memory reading a record");
    }
    size_t bad = pl_utf8_check(rec, len);
    if (bad < len)
        return pl_errorf(PL_ERR_FORMAT, "invalid UTF-8 at byte offset %zu (byte 0x%02x)", bad,
                         (unsigned char)rec[bad]);
    switch (s->format) {
    case PL_READER_JSONL: return parse_json(s, rec, len, d);
    case PL_READER_CSV: return parse_csv(s, rec, len, d);
    case PL_READER_TEXT:
        d->first[0] = 0;
        d->first[1] = 1;
        return push_text(d, rec, len);
    }
    return pl_errorf(PL_ERR_INTERNAL, "unknown input format %d", (int)s->format);
}

pl_status pl_reader_csv_column(const pl_reader_spec *s, const char *rec, size_t len,
                               const char *name, int64_t *column)
{
    pl_reader_spec one = *s;
    pl_reader_doc d = {0};
    pl_status st = PL_OK;
    size_t want = strlen(name);
    for (int64_t c = 0;; c++) {
        one.column = c;
        st = pl_reader_parse(&one, rec, len, &d);
        if (st || d.blank) {
            st = pl_errorf(PL_ERR_ARG, "--csv-column '%s': no such column in the header row",
                           name);
            break;
        }
        if (d.len[0] == want && memcmp(d.text[0], name, want) == 0) {
            *column = c;
            break;
        }
    }
    pl_reader_doc_free(&d);
    return st;
}
