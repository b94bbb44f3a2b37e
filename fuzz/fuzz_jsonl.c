/* libFuzzer target: the preprocess input reader on arbitrary bytes.
 *
 * The first byte picks the format (JSON lines with keys "text" and "title",
 * text, CSV ',', CSV '\t', whitespace .smi) and a CSV column; the second picks
 * a split point. Checked properties:
 *  - every record parses or fails with PL_ERR_FORMAT/NOMEM, never crashes;
 *  - the texts of a parsed record are valid UTF-8 and first[] is monotonic;
 *  - cutting the input at pl_reader_boundary() and reading the two parts
 *    gives the same records (text, length, line) as reading it whole, which is
 *    what makes the chunked pipeline independent of chunk size and workers.
 * Seeds: fuzz/seeds/fuzz_jsonl/. */
#include "base/utf8.h"
#include "data/reader.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct rec {
    size_t off, len;
    int64_t line;
} rec;

/* Records of buf[0..n) with offsets relative to base; returns the count (<= cap). */
static size_t collect(const pl_reader_spec *s, const char *buf, size_t n, size_t base,
                      int64_t line0, rec *out, size_t cap, int64_t *lines_out)
{
    size_t pos = 0, k = 0;
    int64_t lines = line0;
    pl_reader_record r;
    while (k < cap && pl_reader_next(s, buf, n, &pos, &lines, &r)) {
        if (r.text < buf || r.text + r.len > buf + n || r.end > n || r.end <= (size_t)(r.text - buf))
            abort();
        out[k++] = (rec){base + (size_t)(r.text - buf), r.len, r.line};
    }
    *lines_out = lines;
    return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    static const char *const keys[] = {"text", "title"};
    pl_reader_spec s = {.keys = keys};
    switch (data[0] % 5) {
    case 0: s.format = PL_READER_JSONL, s.n_keys = 1 + (data[0] >> 7); break;
    case 1: s.format = PL_READER_TEXT, s.n_keys = 1; break;
    case 2: s.format = PL_READER_CSV, s.delim = ',', s.n_keys = 1; break;
    case 3: s.format = PL_READER_CSV, s.delim = '\t', s.n_keys = 1; break;
    default: s.format = PL_READER_CSV, s.delim = ' ', s.n_keys = 1; break;
    }
    s.column = (data[0] >> 3) & 3;
    const char *buf = (const char *)data + 2;
    size_t n = size - 2;

    enum { CAP = 4096 };
    static rec whole[CAP], parts[CAP];
    int64_t lines_whole, lines_a, lines_b;
    size_t nw = collect(&s, buf, n, 0, 0, whole, CAP, &lines_whole);
    if (nw < CAP) {
        size_t split = n ? (size_t)data[1] * n / 255 : 0;
        size_t cut = pl_reader_boundary(&s, buf, split, 0);
        if (cut > split)
            abort();
        size_t na = collect(&s, buf, cut, 0, 0, parts, CAP, &lines_a);
        size_t nb = collect(&s, buf + cut, n - cut, cut, lines_a, parts + na, CAP - na, &lines_b);
        if (na + nb != nw || lines_b != lines_whole)
            abort();
        for (size_t i = 0; i < nw; i++)
            if (parts[i].off != whole[i].off || parts[i].len != whole[i].len ||
                parts[i].line != whole[i].line)
                abort();
    }

    pl_reader_doc doc = {0};
    for (size_t i = 0; i < nw; i++) {
        pl_status st = pl_reader_parse(&s, buf + whole[i].off, whole[i].len, &doc);
        if (st != PL_OK) {
            if (st != PL_ERR_FORMAT && st != PL_ERR_NOMEM)
                abort();
            continue;
        }
        if (doc.blank)
            continue;
        for (int k = 0; k < s.n_keys; k++)
            if (doc.first[k] > doc.first[k + 1])
                abort();
        if (doc.first[0] != 0 || doc.first[s.n_keys] != doc.n)
            abort();
        for (int64_t t = 0; t < doc.n; t++)
            if (pl_utf8_check(doc.text[t], doc.len[t]) != doc.len[t])
                abort();
    }
    pl_reader_doc_free(&doc);
    return 0;
}
