/* data/preprocess + data/reader: the pipeline with the byte-level test
 * tokenizer (id = byte, eod = 256), checked against datasets this file writes
 * itself from the format (megatron-facts.md 1.1) and Megatron's rules
 * (tools/preprocess_data.py Encoder.encode): per key, a string is one item, a
 * list is one item per non-empty string, empty tokenizations are dropped,
 * --append-eod extends the last item of a non-empty document, a record with no
 * items is an empty document. Expected tokens are written as byte values. */
#include "../tools/byte_tokenizer.h"
#include "base/alloc.h"
#include "base/fileio.h"
#include "data/indexed.h"
#include "data/preprocess.h"
#include "base/utf8.h"
#include "data/reader.h"
#include "test.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the reference writer --------------------------------------------------- */

/* Expected datasets are int32 lists: token ids, EI ends an item, ED ends a document. */
enum { EI = -1, ED = -2, EOD = 256 };

static void put_le(pl_bytes *b, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) {
        char c = (char)(v >> (8 * i));
        pl_bytes_append(b, &c, 1);
    }
}

/* The .idx and .bin Megatron's IndexedDatasetBuilder writes for spec. */
static void ref_dataset(const int32_t *spec, size_t n, int dtype, int item_size, pl_bytes *idx,
                        pl_bytes *bin)
{
    pl_i64s lens = {0}, docs = {0};
    pl_i64s_push(&docs, 0);
    int64_t cur = 0;
    idx->n = bin->n = 0;
    for (size_t i = 0; i < n; i++) {
        if (spec[i] == EI) {
            pl_i64s_push(&lens, cur);
            cur = 0;
        } else if (spec[i] == ED) {
            pl_i64s_push(&docs, lens.n);
        } else {
            put_le(bin, (uint64_t)(int64_t)spec[i], item_size);
            cur++;
        }
    }
    pl_bytes_append(idx, "MMIDIDX\0\0", 9);
    put_le(idx, 1, 8);
    put_le(idx, (uint64_t)dtype, 1);
    put_le(idx, (uint64_t)lens.n, 8);
    put_le(idx, (uint64_t)docs.n, 8);
    for (int64_t i = 0; i < lens.n; i++)
        put_le(idx, (uint64_t)lens.data[i], 4);
    uint64_t ptr = 0;
    for (int64_t i = 0; i < lens.n; i++) {
        put_le(idx, ptr, 8);
        ptr += (uint64_t)lens.data[i] * (uint64_t)item_size;
    }
    for (int64_t k = 0; k < docs.n; k++)
        put_le(idx, (uint64_t)docs.data[k], 8);
    pl_i64s_free(&lens);
    pl_i64s_free(&docs);
}

static void tmp_path(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", test_tmpdir(), name);
}

static int file_equals(const char *path, const pl_bytes *want, const char *what)
{
    char *data = NULL;
    size_t n = 0;
    if (pl_file_read_all(path, &data, &n) != PL_OK) {
        fprintf(stderr, "  %s: cannot read %s\n", what, path);
        return 0;
    }
    int ok = n == want->n && (n == 0 || memcmp(data, want->data, n) == 0);
    if (!ok) {
        size_t i = 0;
        while (i < n && i < want->n && data[i] == want->data[i])
            i++;
        fprintf(stderr, "  %s: %s is %zu bytes, expected %zu; first difference at byte %zu\n", what,
                path, n, want->n, i);
    }
    pl_free(data);
    return ok;
}

/* Compares PREFIX.idx/.bin with the reference dataset of spec (uint16 unless told). */
static int dataset_is(const char *prefix, const int32_t *spec, size_t n, int dtype)
{
    pl_bytes idx = {0}, bin = {0};
    ref_dataset(spec, n, dtype, pl_indexed_dtype_size(dtype), &idx, &bin);
    char p[600];
    snprintf(p, sizeof p, "%s.idx", prefix);
    int ok = file_equals(p, &idx, prefix);
    snprintf(p, sizeof p, "%s.bin", prefix);
    ok = file_equals(p, &bin, prefix) && ok;
    pl_bytes_free(&idx);
    pl_bytes_free(&bin);
    return ok;
}

#define DATASET_IS(prefix, dtype, ...)                                                             \
    do {                                                                                           \
        const int32_t spec_[] = {__VA_ARGS__};                                                     \
        CHECK(dataset_is(prefix, spec_, sizeof spec_ / sizeof *spec_, dtype), "%s", prefix);       \
    } while (0)

static void write_input(const char *name, const char *data, size_t n)
{
    char p[600];
    tmp_path(p, sizeof p, name);
    FILE *f = fopen(p, "wb");
    if (!f) {
        perror(p);
        exit(2);
    }
    fwrite(data, 1, n, f);
    fclose(f);
}

#define WRITE_INPUT(name, literal) write_input(name, literal, sizeof literal - 1)

static int exists_in_tmp(const char *name)
{
    char p[600];
    tmp_path(p, sizeof p, name);
    return pl_file_exists(p);
}

static void remove_outputs(const char *prefix_name, const char *key)
{
    char p[700];
    snprintf(p, sizeof p, "%s/%s_%s_document.idx", test_tmpdir(), prefix_name, key);
    unlink(p);
    snprintf(p, sizeof p, "%s/%s_%s_document.bin", test_tmpdir(), prefix_name, key);
    unlink(p);
}

/* Runs the pipeline on tmp/input into tmp/prefix with the byte tokenizer. */
typedef struct run_opts {
    const char *keys[4];
    int n_keys;
    const char *format, *csv_column;
    int csv_header, append_eod, one_document, workers, skip;
    size_t chunk;
    int64_t vocab;
    int reject;
    int64_t log_interval;
    FILE *log;
    volatile sig_atomic_t *cancel;
} run_opts;

static pl_status run(const char *input, const char *prefix, run_opts o, pl_preprocess_stats *stats)
{
    char in[600], out[600];
    tmp_path(in, sizeof in, input);
    tmp_path(out, sizeof out, prefix);
    if (o.n_keys == 0) {
        o.keys[0] = "text";
        o.n_keys = 1;
    }
    pl_tokenizer *tok;
    pl_status st = byte_tok_open(&tok, o.vocab ? o.vocab : 257, o.reject ? o.reject : -1);
    if (st)
        return st;
    pl_preprocess_config cfg = {
        .input = in,
        .format = o.format,
        .keys = o.keys,
        .n_keys = o.n_keys,
        .csv_column = o.csv_column,
        .csv_header = o.csv_header,
        .append_eod = o.append_eod,
        .one_document = o.one_document,
        .output_prefix = out,
        .workers = o.workers ? o.workers : 1,
        .skip_bad = o.skip,
        .log_interval = o.log_interval,
        .chunk_bytes = o.chunk,
        .log = o.log,
        .cancel = o.cancel,
    };
    st = pl_preprocess_run(&cfg, tok, stats);
    pl_tokenizer_free(tok);
    return st;
}

static void out_prefix(char *p, size_t cap, const char *prefix, const char *key)
{
    snprintf(p, cap, "%s/%s_%s_document", test_tmpdir(), prefix, key);
}

/* ---- JSON lines ---------------------------------------------------------------- */

TEST(json_keys_list_values_and_empty_texts_follow_megatron)
{
    WRITE_INPUT("keys.jsonl", "{\"text\": \"ab\", \"title\": [\"c\", \"\", \"de\"]}\n"
                              "{\"text\": \"\", \"title\": []}\n"
                              "{\"title\": \"f\", \"text\": [\"\", \"g\"], \"other\": 1}\n");
    run_opts o = {.keys = {"text", "title"}, .n_keys = 2};
    pl_preprocess_stats s;
    CHECK_OK(run("keys.jsonl", "keys", o, &s));
    CHECK(s.documents == 3 && s.tokens == 3 + 4 && s.skipped == 0 && s.dtype == PL_DT_UINT16,
          "stats %lld docs %lld tokens", (long long)s.documents, (long long)s.tokens);
    char p[600];
    out_prefix(p, sizeof p, "keys", "text");
    DATASET_IS(p, PL_DT_UINT16, 'a', 'b', EI, ED, ED, 'g', EI, ED);
    out_prefix(p, sizeof p, "keys", "title");
    DATASET_IS(p, PL_DT_UINT16, 'c', EI, 'd', 'e', EI, ED, ED, 'f', EI, ED);

    o.append_eod = 1;
    CHECK_OK(run("keys.jsonl", "keys_eod", o, NULL));
    out_prefix(p, sizeof p, "keys_eod", "text");
    DATASET_IS(p, PL_DT_UINT16, 'a', 'b', EOD, EI, ED, ED, 'g', EOD, EI, ED);
    out_prefix(p, sizeof p, "keys_eod", "title");
    DATASET_IS(p, PL_DT_UINT16, 'c', EI, 'd', 'e', EOD, EI, ED, ED, 'f', EOD, EI, ED);
}

TEST(json_escapes_duplicates_and_python_nonfinite_numbers_are_read_as_python_does)
{
    /* \u00e9 -> C3 A9; a surrogate pair -> F0 9F 98 80; the last duplicate key wins;
     * NaN/Infinity elsewhere in the line are valid for json.loads. CRLF ends a line. */
    WRITE_INPUT("esc.jsonl", "{\"text\": \"a\\\"\\\\\\n\\u00e9\\ud83d\\ude00\"}\r\n"
                             "{\"text\": \"x\", \"text\": \"yz\"}\n"
                             "{\"score\": NaN, \"text\": \"n\", \"v\": [-Infinity, Infinity]}\r"
                             "  {\"text\" : \"\\t\"}  ");
    CHECK_OK(run("esc.jsonl", "esc", (run_opts){.n_keys = 0}, NULL));
    char p[600];
    out_prefix(p, sizeof p, "esc", "text");
    DATASET_IS(p, PL_DT_UINT16, 'a', '"', '\\', '\n', 0xC3, 0xA9, 0xF0, 0x9F, 0x98, 0x80, EI, ED,
               'y', 'z', EI, ED, 'n', EI, ED, '\t', EI, ED);
}

TEST(vocab_size_picks_uint16_below_65500_and_int32_from_it)
{
    WRITE_INPUT("dt.jsonl", "{\"text\": \"hi\"}\n");
    char p[600];
    run_opts o = {.vocab = 65499};
    CHECK_OK(run("dt.jsonl", "dt16", o, NULL));
    out_prefix(p, sizeof p, "dt16", "text");
    DATASET_IS(p, PL_DT_UINT16, 'h', 'i', EI, ED);
    o.vocab = 65500;
    CHECK_OK(run("dt.jsonl", "dt32", o, NULL));
    out_prefix(p, sizeof p, "dt32", "text");
    DATASET_IS(p, PL_DT_INT32, 'h', 'i', EI, ED);
}

/* ---- bad lines -------------------------------------------------------------------- */

typedef struct bad_case {
    const char *line;
    const char *needle;
} bad_case;

static const bad_case bad_cases[] = {
    {"{\"text\": \"unterminated}", "not valid JSON"},
    {"{\"txt\": \"a\"}", "missing key 'text'"},
    {"{\"text\": 12}", "key 'text' is a number"},
    {"{\"text\": null}", "key 'text' is null"},
    {"{\"text\": [\"a\", {\"b\": 1}]}", "list item 1 is an object"},
    {"[\"text\"]", "is a list, expected a JSON object"},
    {"{\"text\": \"bad \xff byte\"}", "invalid UTF-8 at byte offset 14"},
    {"{\"text\": \"surrogate \xed\xa0\x80\"}", "invalid UTF-8"},
    {"", "empty line"},
    {"{\"text\": \"a\"} trailing", "extra data"},
    {"{\"text\": \"nul \\u0000 here\"}", "\\u0000"},
    {"{\"text\": \"the byte ~ is refused\"}", "byte 0x7e at offset 9 is not in the vocabulary"},
};

/* good lines 1-2, then one bad line (3), then good line 4; with CRLF endings. */
static void write_bad_file(const char *name, const bad_case *c)
{
    pl_bytes b = {0};
    pl_bytes_printf(&b, "{\"text\": \"one\"}\r\n{\"text\": \"two\"}\r\n%s\r\n{\"text\": \"four\"}\r\n",
                    c->line);
    write_input(name, b.data, b.n);
    pl_bytes_free(&b);
}

TEST(malformed_lines_stop_the_run_naming_file_and_line)
{
    char in[600];
    tmp_path(in, sizeof in, "bad.jsonl");
    for (size_t i = 0; i < sizeof bad_cases / sizeof *bad_cases; i++) {
        write_bad_file("bad.jsonl", &bad_cases[i]);
        remove_outputs("bad", "text");
        run_opts o = {.reject = '~', .workers = 2};
        pl_status st = run("bad.jsonl", "bad", o, NULL);
        char where[700];
        snprintf(where, sizeof where, "%s:3: ", in);
        CHECK(st == PL_ERR_FORMAT, "case %zu: status %d", i, st);
        CHECK(strstr(pl_error_msg(), where) && strstr(pl_error_msg(), bad_cases[i].needle),
              "case %zu: message '%s' lacks '%s' or '%s'", i, pl_error_msg(), where,
              bad_cases[i].needle);
        CHECK(!exists_in_tmp("bad_text_document.bin") && !exists_in_tmp("bad_text_document.idx"),
              "case %zu: output written despite the error", i);
    }
}

TEST(malformed_lines_are_counted_and_skipped_with_on_error_skip)
{
    pl_bytes all = {0};
    for (size_t i = 0; i < sizeof bad_cases / sizeof *bad_cases; i++)
        pl_bytes_printf(&all, "{\"text\": \"%c\"}\n%s\n", (char)('A' + i), bad_cases[i].line);
    write_input("skip.jsonl", all.data, all.n);
    pl_bytes_free(&all);
    char logp[600];
    tmp_path(logp, sizeof logp, "skip.log");
    FILE *log = fopen(logp, "w+");
    run_opts o = {.reject = '~', .workers = 3, .skip = 1, .chunk = 40, .log = log};
    pl_preprocess_stats s;
    CHECK_OK(run("skip.jsonl", "skip", o, &s));
    const int64_t n = (int64_t)(sizeof bad_cases / sizeof *bad_cases);
    CHECK(s.documents == n && s.skipped == n, "%lld documents, %lld skipped",
          (long long)s.documents, (long long)s.skipped);
    char p[600];
    out_prefix(p, sizeof p, "skip", "text");
    DATASET_IS(p, PL_DT_UINT16, 'A', EI, ED, 'B', EI, ED, 'C', EI, ED, 'D', EI, ED, 'E', EI, ED, 'F',
               EI, ED, 'G', EI, ED, 'H', EI, ED, 'I', EI, ED, 'J', EI, ED, 'K', EI, ED, 'L', EI, ED);
    char text[8192];
    rewind(log);
    size_t got = fread(text, 1, sizeof text - 1, log);
    text[got] = '\0';
    fclose(log);
    char want[700];
    snprintf(want, sizeof want, "warning: %s/skip.jsonl:2: not valid JSON", test_tmpdir());
    CHECK(strstr(text, want), "first warning missing: %s", text);
    snprintf(want, sizeof want, "%s/skip.jsonl:4: missing key", test_tmpdir());
    CHECK(strstr(text, want), "second warning missing: %s", text);
    CHECK(strstr(text, "Skipped 12 malformed lines"), "count missing: %s", text);
}

TEST(the_first_bad_line_in_input_order_is_reported_for_any_number_of_workers)
{
    /* 400 good lines, bad lines at 150 and 300; tiny chunks so they land in different work units. */
    pl_bytes b = {0};
    for (int i = 1; i <= 400; i++)
        pl_bytes_printf(&b, i == 150 || i == 300 ? "{\"text\": %d}\n" : "{\"text\": \"%d\"}\n", i);
    write_input("order.jsonl", b.data, b.n);
    pl_bytes_free(&b);
    char where[700];
    snprintf(where, sizeof where, "%s/order.jsonl:150: key 'text' is a number", test_tmpdir());
    const int workers[] = {1, 2, 3, 8};
    for (int w = 0; w < 4; w++) {
        run_opts o = {.workers = workers[w], .chunk = 64};
        pl_status st = run("order.jsonl", "order", o, NULL);
        CHECK(st == PL_ERR_FORMAT && strstr(pl_error_msg(), where), "workers %d: %s", workers[w],
              pl_error_msg());
    }
}

/* ---- determinism across workers ----------------------------------------------------- */

typedef struct rng {
    uint64_t s;
} rng;

static uint32_t next_u32(rng *r)
{
    r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(r->s >> 33);
}

/* Appends code point cp as UTF-8 to bytes, and as JSON (raw or \u-escaped) to json. */
static void put_cp(uint32_t cp, pl_bytes *bytes, pl_bytes *json, int escape)
{
    char u[4];
    int n;
    if (cp < 0x80)
        u[0] = (char)cp, n = 1;
    else if (cp < 0x800)
        u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 63)), n = 2;
    else if (cp < 0x10000)
        u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | ((cp >> 6) & 63)),
        u[2] = (char)(0x80 | (cp & 63)), n = 3;
    else
        u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | ((cp >> 12) & 63)),
        u[2] = (char)(0x80 | ((cp >> 6) & 63)), u[3] = (char)(0x80 | (cp & 63)), n = 4;
    pl_bytes_append(bytes, u, (size_t)n);
    if (cp == '"' || cp == '\\')
        pl_bytes_printf(json, "\\%c", (char)cp);
    else if (cp == '\n')
        pl_bytes_append(json, "\\n", 2);
    else if (cp < 0x20)
        pl_bytes_printf(json, "\\u%04x", cp);
    else if (escape && cp >= 0x10000)
        pl_bytes_printf(json, "\\u%04x\\u%04x", 0xD800 + ((cp - 0x10000) >> 10),
                        0xDC00 + ((cp - 0x10000) & 0x3FF));
    else if (escape && cp >= 0x80)
        pl_bytes_printf(json, "\\u%04X", cp);
    else
        pl_bytes_append(json, u, (size_t)n);
}

/* A random text: its JSON string literal and its expected tokens (its UTF-8 bytes) + EI. */
static void random_text(rng *r, pl_bytes *json, pl_i64s *expect, int *nonempty)
{
    static const uint32_t alphabet[] = {'a', 'b', 'Z', ' ', '"', '\\', '\n', '\t', 0x01, 0xE9,
                                        0x20AC, 0x1F600, 0x65E5, '{', '}', ','};
    int len = (int)(next_u32(r) % 5 == 0 ? 0 : next_u32(r) % 40);
    pl_bytes bytes = {0};
    pl_bytes_append(json, "\"", 1);
    for (int i = 0; i < len; i++)
        put_cp(alphabet[next_u32(r) % (sizeof alphabet / sizeof *alphabet)], &bytes, json,
               (int)(next_u32(r) % 2));
    pl_bytes_append(json, "\"", 1);
    for (size_t i = 0; i < bytes.n; i++)
        pl_i64s_push(expect, (unsigned char)bytes.data[i]);
    if (bytes.n)
        pl_i64s_push(expect, EI);
    *nonempty = bytes.n > 0;
    pl_bytes_free(&bytes);
}

TEST(outputs_are_identical_for_1_2_3_and_8_workers_and_match_the_reference)
{
    rng r = {12345};
    pl_bytes in = {0};
    pl_i64s want_text = {0}, want_title = {0};
    for (int line = 0; line < 2000; line++) {
        pl_bytes_append(&in, "{\"id\": 1, \"text\": ", 18);
        int nonempty;
        random_text(&r, &in, &want_text, &nonempty);
        if (nonempty) { /* --append-eod: eod before the item end */
            want_text.data[want_text.n - 1] = EOD;
            pl_i64s_push(&want_text, EI);
        }
        pl_i64s_push(&want_text, ED);
        pl_bytes_append(&in, ", \"title\": [", 12);
        int items = (int)(next_u32(&r) % 4), any = 0;
        for (int k = 0; k < items; k++) {
            if (k)
                pl_bytes_append(&in, ", ", 2);
            random_text(&r, &in, &want_title, &nonempty);
            any |= nonempty;
        }
        if (any) {
            want_title.data[want_title.n - 1] = EOD;
            pl_i64s_push(&want_title, EI);
        }
        pl_i64s_push(&want_title, ED);
        static const char *const ends[] = {"]}\n", "]}\r\n", "]}\r"}; /* universal newlines */
        const char *end = ends[next_u32(&r) % 3];
        pl_bytes_append(&in, end, strlen(end));
    }
    write_input("many.jsonl", in.data, in.n);
    pl_bytes_free(&in);
    int32_t *wt = pl_malloc((size_t)want_text.n * sizeof *wt);
    int32_t *wl = pl_malloc((size_t)want_title.n * sizeof *wl);
    for (int64_t i = 0; i < want_text.n; i++)
        wt[i] = (int32_t)want_text.data[i];
    for (int64_t i = 0; i < want_title.n; i++)
        wl[i] = (int32_t)want_title.data[i];
    const int workers[] = {1, 2, 3, 8};
    const size_t chunks[] = {0, 777, 301, 4096};
    for (int w = 0; w < 4; w++) {
        char name[64], p[600];
        snprintf(name, sizeof name, "many_w%d", workers[w]);
        run_opts o = {.keys = {"text", "title"}, .n_keys = 2, .append_eod = 1,
                      .workers = workers[w], .chunk = chunks[w]};
        pl_preprocess_stats s;
        CHECK_OK(run("many.jsonl", name, o, &s));
        CHECK(s.documents == 2000, "workers %d: %lld documents", workers[w], (long long)s.documents);
        out_prefix(p, sizeof p, name, "text");
        CHECK(dataset_is(p, wt, (size_t)want_text.n, PL_DT_UINT16), "workers %d: text", workers[w]);
        out_prefix(p, sizeof p, name, "title");
        CHECK(dataset_is(p, wl, (size_t)want_title.n, PL_DT_UINT16), "workers %d: title",
              workers[w]);
    }
    pl_free(wt);
    pl_free(wl);
    pl_i64s_free(&want_text);
    pl_i64s_free(&want_title);
}

TEST(an_empty_input_gives_empty_datasets)
{
    write_input("empty.jsonl", "", 0);
    pl_preprocess_stats s;
    CHECK_OK(run("empty.jsonl", "empty", (run_opts){.workers = 2}, &s));
    CHECK(s.documents == 0 && s.tokens == 0, "%lld documents", (long long)s.documents);
    char p[600];
    out_prefix(p, sizeof p, "empty", "text");
    CHECK(dataset_is(p, NULL, 0, PL_DT_UINT16), "empty dataset");
    WRITE_INPUT("header_only.csv", "smiles,id\n");
    CHECK_OK(run("header_only.csv", "header_only", (run_opts){.csv_column = "smiles"}, &s));
    CHECK(s.documents == 0, "%lld documents", (long long)s.documents);
}

TEST(a_record_longer_than_a_chunk_grows_the_chunk)
{
    pl_bytes b = {0};
    pl_bytes_append(&b, "{\"text\": \"", 10);
    for (int i = 0; i < 5000; i++)
        pl_bytes_append(&b, "x", 1);
    pl_bytes_append(&b, "\"}\n{\"text\": \"y\"}", 16);
    write_input("long.jsonl", b.data, b.n);
    pl_bytes_free(&b);
    run_opts o = {.chunk = 16, .workers = 2};
    pl_preprocess_stats s;
    CHECK_OK(run("long.jsonl", "long", o, &s));
    CHECK(s.documents == 2 && s.tokens == 5001, "%lld docs, %lld tokens", (long long)s.documents,
          (long long)s.tokens);
}

/* ---- text and CSV ---------------------------------------------------------------------- */

TEST(text_input_is_one_document_per_line_with_universal_newlines)
{
    WRITE_INPUT("plain.txt", "ab\n\nc d\r\ne\rf");
    pl_preprocess_stats s;
    CHECK_OK(run("plain.txt", "plain", (run_opts){.append_eod = 1}, &s));
    char p[600];
    out_prefix(p, sizeof p, "plain", "text");
    DATASET_IS(p, PL_DT_UINT16, 'a', 'b', EOD, EI, ED, ED, 'c', ' ', 'd', EOD, EI, ED, 'e', EOD, EI,
               ED, 'f', EOD, EI, ED);
    CHECK(s.documents == 5, "%lld documents", (long long)s.documents);
}

TEST(csv_quoted_fields_follow_pythons_csv_module)
{
    /* Row 3 is a quoted field over two lines, then a blank row (skipped, as pandas does). */
    WRITE_INPUT("mols.csv", "\"a,b\",2\n"
                            "\"he said \"\"hi\"\"\",3\n"
                            "\"multi\r\nline\",4\n"
                            "\n"
                            "plain,5\n"
                            "\"q\"tail,6");
    char p[600];
    run_opts o = {.csv_column = "0", .workers = 2, .chunk = 8};
    CHECK_OK(run("mols.csv", "csv0", o, NULL));
    out_prefix(p, sizeof p, "csv0", "text");
    DATASET_IS(p, PL_DT_UINT16, 'a', ',', 'b', EI, ED, 'h', 'e', ' ', 's', 'a', 'i', 'd', ' ', '"',
               'h', 'i', '"', EI, ED, 'm', 'u', 'l', 't', 'i', '\r', '\n', 'l', 'i', 'n', 'e', EI,
               ED, 'p', 'l', 'a', 'i', 'n', EI, ED, 'q', 't', 'a', 'i', 'l', EI, ED);
    o.csv_column = "1";
    CHECK_OK(run("mols.csv", "csv1", o, NULL));
    out_prefix(p, sizeof p, "csv1", "text");
    DATASET_IS(p, PL_DT_UINT16, '2', EI, ED, '3', EI, ED, '4', EI, ED, '5', EI, ED, '6', EI, ED);
    /* A short row is reported at its own line, counting the line inside the quotes. */
    WRITE_INPUT("short.csv", "a,1\n\"x\ny\",2\nlonely\nb,3\n");
    o.csv_column = "1";
    pl_status st = run("short.csv", "short", o, NULL);
    char where[700];
    snprintf(where, sizeof where, "%s/short.csv:4: the row has 1 fields", test_tmpdir());
    CHECK(st == PL_ERR_FORMAT && strstr(pl_error_msg(), where), "%s", pl_error_msg());
    WRITE_INPUT("open.csv", "a,1\n\"never closed,2\n");
    st = run("open.csv", "open", o, NULL);
    snprintf(where, sizeof where, "%s/open.csv:2: unterminated quoted field", test_tmpdir());
    CHECK(st == PL_ERR_FORMAT && strstr(pl_error_msg(), where), "%s", pl_error_msg());
}

TEST(csv_header_names_select_the_column)
{
    WRITE_INPUT("head.csv", "smiles,id\r\nCCO,1\r\nc1ccccc1,2\r\n");
    char p[600];
    run_opts o = {.csv_column = "smiles"};
    CHECK_OK(run("head.csv", "head_s", o, NULL));
    out_prefix(p, sizeof p, "head_s", "text");
    DATASET_IS(p, PL_DT_UINT16, 'C', 'C', 'O', EI, ED, 'c', '1', 'c', 'c', 'c', 'c', 'c', '1',
               EI, ED);
    o.csv_column = "1";
    o.csv_header = 1;
    CHECK_OK(run("head.csv", "head_1", o, NULL));
    out_prefix(p, sizeof p, "head_1", "text");
    DATASET_IS(p, PL_DT_UINT16, '1', EI, ED, '2', EI, ED);
    o.csv_column = "name";
    pl_status st = run("head.csv", "head_x", o, NULL);
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "--csv-column 'name'") &&
              strstr(pl_error_msg(), "head.csv:1"),
          "%d %s", st, pl_error_msg());
    /* A bad row after the header is reported with the header counted as line 1. */
    WRITE_INPUT("head_bad.csv", "smiles,id\nCCO,1\n\"x,2\n");
    o.csv_column = "smiles";
    st = run("head_bad.csv", "head_bad", o, NULL);
    CHECK(st == PL_ERR_FORMAT && strstr(pl_error_msg(), "head_bad.csv:3:"), "%s", pl_error_msg());
}

TEST(smi_files_split_fields_on_runs_of_blanks)
{
    WRITE_INPUT("mols.smi", "CCO 1\n  c1ccccc1\t2\n\n \t\nC(=O)O   3\n");
    char p[600];
    CHECK_OK(run("mols.smi", "smi0", (run_opts){.n_keys = 0}, NULL));
    out_prefix(p, sizeof p, "smi0", "text");
    DATASET_IS(p, PL_DT_UINT16, 'C', 'C', 'O', EI, ED, 'c', '1', 'c', 'c', 'c', 'c', 'c', '1',
               EI, ED, 'C', '(', '=', 'O', ')', 'O', EI, ED);
    CHECK_OK(run("mols.smi", "smi1", (run_opts){.csv_column = "1"}, NULL));
    out_prefix(p, sizeof p, "smi1", "text");
    DATASET_IS(p, PL_DT_UINT16, '1', EI, ED, '2', EI, ED, '3', EI, ED);
}

TEST(one_document_makes_each_record_an_item_of_a_single_document)
{
    /* MegaMolBART's csv_to_binary.py: add_item per SMILES, end_document() once per file. */
    WRITE_INPUT("one.csv", "zinc_id,smiles\n1,CCO\n2,\n3,C#N\n");
    char p[600];
    run_opts o = {.csv_column = "smiles", .one_document = 1, .workers = 2, .chunk = 8};
    pl_preprocess_stats s;
    CHECK_OK(run("one.csv", "one", o, &s));
    out_prefix(p, sizeof p, "one", "text");
    DATASET_IS(p, PL_DT_UINT16, 'C', 'C', 'O', EI, 'C', '#', 'N', EI, ED);
    CHECK(s.documents == 3, "%lld records", (long long)s.documents);
    WRITE_INPUT("one_empty.csv", "zinc_id,smiles\n");
    CHECK_OK(run("one_empty.csv", "one_empty", o, NULL));
    out_prefix(p, sizeof p, "one_empty", "text");
    DATASET_IS(p, PL_DT_UINT16, ED);
}

/* ---- configuration errors, cancellation, progress --------------------------------------- */

TEST(configuration_errors_name_the_flag)
{
    WRITE_INPUT("cfg.jsonl", "{\"text\": \"a\"}\n");
    WRITE_INPUT("cfg.txt", "a\n");
    struct {
        const char *input, *prefix;
        run_opts o;
        const char *needle;
    } cases[] = {
        {"cfg.jsonl", "nodir/x", {.n_keys = 0}, "--output-prefix"},
        {"missing.jsonl", "x", {.n_keys = 0}, "--input"},
        {"cfg.jsonl", "x", {.keys = {"text", "text"}, .n_keys = 2}, "--json-keys"},
        {"cfg.txt", "x", {.keys = {"a", "b"}, .n_keys = 2}, "--json-keys"},
        {"cfg.jsonl", "x", {.csv_column = "1"}, "--csv-column"},
        {"cfg.jsonl", "x", {.csv_header = 1}, "--csv-header"},
        {"cfg.jsonl", "x", {.format = "xml"}, "--input-format"},
        {"cfg.jsonl", "x", {.workers = -1}, "--workers"},
        {"cfg.jsonl", "x", {.log_interval = -5}, "--log-interval"},
        {"cfg.jsonl.bz2", "x", {.n_keys = 0}, "bz2 input is not read directly"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        pl_status st = run(cases[i].input, cases[i].prefix, cases[i].o, NULL);
        CHECK(st != PL_OK && strstr(pl_error_msg(), cases[i].needle), "case %zu: %d '%s'", i, st,
              pl_error_msg());
    }
    /* --append-eod with a tokenizer without eod */
    pl_tokenizer *tok;
    CHECK_OK(byte_tok_open(&tok, 257, -1));
    tok->eod = -1;
    char in[600], out[600];
    tmp_path(in, sizeof in, "cfg.jsonl");
    tmp_path(out, sizeof out, "noeod");
    const char *keys[] = {"text"};
    pl_preprocess_config cfg = {.input = in, .keys = keys, .n_keys = 1, .append_eod = 1,
                                .output_prefix = out, .workers = 1};
    pl_status st = pl_preprocess_run(&cfg, tok, NULL);
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "--append-eod"), "%s", pl_error_msg());
    pl_tokenizer_free(tok);
}

TEST(a_cancelled_run_writes_nothing)
{
    WRITE_INPUT("cancel.jsonl", "{\"text\": \"a\"}\n{\"text\": \"b\"}\n");
    volatile sig_atomic_t flag = 1;
    remove_outputs("cancel", "text");
    pl_status st = run("cancel.jsonl", "cancel", (run_opts){.cancel = &flag, .workers = 2}, NULL);
    CHECK(st != PL_OK && strstr(pl_error_msg(), "interrupted"), "%d %s", st, pl_error_msg());
    CHECK(!exists_in_tmp("cancel_text_document.bin") && !exists_in_tmp("cancel_text_document.idx"),
          "files after cancel");
}

TEST(progress_lines_come_every_log_interval_documents)
{
    WRITE_INPUT("prog.jsonl", "{\"text\": \"a\"}\n{\"text\": \"b\"}\n{\"text\": \"c\"}\n"
                              "{\"text\": \"d\"}\n{\"text\": \"e\"}\n");
    char logp[600];
    tmp_path(logp, sizeof logp, "prog.log");
    FILE *log = fopen(logp, "w+");
    CHECK_OK(run("prog.jsonl", "prog", (run_opts){.log = log, .log_interval = 2, .chunk = 20}, NULL));
    char text[4096];
    rewind(log);
    size_t got = fread(text, 1, sizeof text - 1, log);
    text[got] = '\0';
    fclose(log);
    CHECK(strstr(text, "Processed 2 documents (") && strstr(text, "Processed 4 documents (") &&
              !strstr(text, "Processed 5 documents") && !strstr(text, "Processed 3 documents"),
          "%s", text);
    CHECK(strstr(text, "docs/s") && strstr(text, "MB/s") && strstr(text, "tokens/s") &&
              strstr(text, "ETA"),
          "%s", text);
    CHECK(strstr(text, "Done: 5 documents, 5 tokens"), "%s", text);
}

TEST(every_allocation_failure_in_the_pipeline_is_clean)
{
    pl_bytes b = {0};
    for (int i = 0; i < 60; i++)
        pl_bytes_printf(&b, "{\"text\": \"line %d\", \"title\": [\"t\", \"%d\"]}\n", i, i);
    write_input("fi.jsonl", b.data, b.n);
    pl_bytes_free(&b);
    int failures = 0;
    for (int n = 0;; n++) {
        remove_outputs("fi", "text");
        remove_outputs("fi", "title");
        int64_t live0 = pl_alloc_live();
        pl_tokenizer *tok = NULL;
        pl_status st = byte_tok_open(&tok, 257, -1); /* not under injection: the test's own */
        CHECK_OK(st);
        char in[600], out[600];
        tmp_path(in, sizeof in, "fi.jsonl");
        tmp_path(out, sizeof out, "fi");
        const char *keys[] = {"text", "title"};
        pl_preprocess_config cfg = {.input = in, .keys = keys, .n_keys = 2, .output_prefix = out,
                                    .workers = 2, .chunk_bytes = 300, .append_eod = 1};
        pl_alloc_fail_after(n);
        st = pl_preprocess_run(&cfg, tok, NULL);
        pl_alloc_fail_after(-1);
        pl_tokenizer_free(tok);
        CHECK(pl_alloc_live() == live0, "n=%d: %lld blocks leaked", n,
              (long long)(pl_alloc_live() - live0));
        if (st == PL_OK)
            break;
        failures++;
        CHECK(st == PL_ERR_NOMEM, "n=%d: status %d (%s)", n, st, pl_error_msg());
        CHECK(!exists_in_tmp("fi_text_document.bin") && !exists_in_tmp("fi_text_document.idx") &&
                  !exists_in_tmp("fi_title_document.bin") && !exists_in_tmp("fi_title_document.idx"),
              "n=%d: final files after a failure", n);
        if (n > 20000) {
            CHECK(0, "no success after %d injected failures", n);
            break;
        }
    }
    CHECK(failures > 20, "only %d allocation sites exercised", failures);
    DIR *d = opendir(test_tmpdir());
    int tmps = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        tmps += strncmp(e->d_name, "fi_", 3) == 0 && strstr(e->d_name, ".tmp.") != NULL;
    if (d)
        closedir(d);
    CHECK(tmps == 0, "%d temporary files left", tmps);
}

/* ---- merge ------------------------------------------------------------------------------ */

TEST(merge_takes_prefixes_or_a_directory_in_sorted_order)
{
    char dir[600], p[700];
    tmp_path(dir, sizeof dir, "mergedir");
    mkdir(dir, 0777);
    WRITE_INPUT("mergedir/b.jsonl", "{\"text\": \"b1\"}\n{\"text\": \"\"}\n");
    WRITE_INPUT("mergedir/a.jsonl", "{\"text\": \"a1\"}\n");
    CHECK_OK(run("mergedir/b.jsonl", "mergedir/b", (run_opts){.n_keys = 0}, NULL));
    CHECK_OK(run("mergedir/a.jsonl", "mergedir/a", (run_opts){.n_keys = 0}, NULL));
    char out[600];
    tmp_path(out, sizeof out, "merged_dir");
    const char *inputs[] = {dir};
    int64_t n = 0;
    CHECK_OK(pl_preprocess_merge(inputs, 1, out, NULL, &n));
    CHECK(n == 2, "%lld datasets", (long long)n);
    DATASET_IS(out, PL_DT_UINT16, 'a', '1', EI, ED, 'b', '1', EI, ED, ED);
    /* explicit prefixes keep the given order; a trailing .idx is dropped */
    char pa[700], pb[700];
    snprintf(pa, sizeof pa, "%s/a_text_document.idx", dir);
    snprintf(pb, sizeof pb, "%s/b_text_document", dir);
    const char *two[] = {pb, pa};
    tmp_path(out, sizeof out, "merged_list");
    CHECK_OK(pl_preprocess_merge(two, 2, out, NULL, NULL));
    DATASET_IS(out, PL_DT_UINT16, 'b', '1', EI, ED, ED, 'a', '1', EI, ED);
    /* a lone .idx in the directory is an error naming it */
    snprintf(p, sizeof p, "%s/lone.idx", dir);
    FILE *f = fopen(p, "w");
    fclose(f);
    tmp_path(out, sizeof out, "merged_bad");
    pl_status st = pl_preprocess_merge(inputs, 1, out, NULL, NULL);
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "lone.idx has no .bin"), "%s", pl_error_msg());
    unlink(p);
    CHECK(!exists_in_tmp("merged_bad.bin") && !exists_in_tmp("merged_bad.idx"), "files left");
    /* dtypes must match */
    WRITE_INPUT("wide.jsonl", "{\"text\": \"w\"}\n");
    CHECK_OK(run("wide.jsonl", "wide", (run_opts){.vocab = 100000}, NULL));
    char pw[700];
    snprintf(pw, sizeof pw, "%s/wide_text_document", test_tmpdir());
    const char *mixed[] = {pb, pw};
    st = pl_preprocess_merge(mixed, 2, out, NULL, NULL);
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "dtype int32"), "%s", pl_error_msg());
    CHECK(!exists_in_tmp("merged_bad.bin") && !exists_in_tmp("merged_bad.idx"), "files left");
    char empty[600];
    tmp_path(empty, sizeof empty, "emptydir");
    mkdir(empty, 0777);
    const char *none[] = {empty};
    st = pl_preprocess_merge(none, 1, out, NULL, NULL);
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "no .idx/.bin datasets"), "%s",
          pl_error_msg());
}

/* ---- reader units -------------------------------------------------------------------- */

TEST(utf8_check_accepts_exactly_the_strict_encoding)
{
    struct {
        const char *s;
        size_t n, bad;
    } cases[] = {
        {"plain ascii text", 16, 16},
        {"\xC3\xA9", 2, 2},             /* é */
        {"\xE2\x82\xAC", 3, 3},         /* € */
        {"\xF0\x9F\x98\x80", 4, 4},     /* U+1F600 */
        {"\xF4\x8F\xBF\xBF", 4, 4},     /* U+10FFFF */
        {"ab\xC0\xAF", 4, 2},           /* overlong '/' */
        {"\xE0\x80\xAF", 3, 0},         /* overlong */
        {"\xED\xA0\x80", 3, 0},         /* surrogate U+D800 */
        {"\xF4\x90\x80\x80", 4, 0},     /* U+110000 */
        {"x\xC3", 2, 1},                /* truncated */
        {"\xE2\x82", 2, 0},             /* truncated */
        {"\x80", 1, 0},                 /* lone continuation */
        {"12345678\xFF", 9, 8},         /* after the 8-byte fast path */
        {"\xF5\x80\x80\x80", 4, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        CHECK(pl_utf8_check(cases[i].s, cases[i].n) == cases[i].bad, "case %zu: %zu", i,
              pl_utf8_check(cases[i].s, cases[i].n));
}

TEST(record_boundaries_never_split_a_crlf_or_a_quoted_field)
{
    pl_reader_spec js = {.format = PL_READER_JSONL}, csv = {.format = PL_READER_CSV, .delim = ','};
    CHECK(pl_reader_boundary(&js, "ab\ncd", 5, 0) == 3, "after the newline");
    CHECK(pl_reader_boundary(&js, "ab\r", 3, 0) == 0, "a final CR may start CRLF");
    CHECK(pl_reader_boundary(&js, "ab\r", 3, 1) == 3, "at eof it ends the line");
    CHECK(pl_reader_boundary(&js, "ab\rc", 4, 0) == 3, "a lone CR ends a line");
    CHECK(pl_reader_boundary(&js, "abc", 3, 0) == 0, "no terminator");
    CHECK(pl_reader_boundary(&csv, "\"a\nb\",1\nx", 9, 0) == 8, "newline inside quotes");
    CHECK(pl_reader_boundary(&csv, "\"a\nb", 4, 0) == 0, "open quote");
    CHECK(pl_reader_boundary(&csv, "x\"y\nz", 5, 0) == 4, "a quote inside a field is literal");
    size_t pos = 0;
    int64_t lines = 0;
    pl_reader_record r;
    const char *buf = "\"a\r\nb\",1\r\nc,2";
    int n = 0;
    while (pl_reader_next(&csv, buf, strlen(buf), &pos, &lines, &r))
        n++;
    CHECK(n == 2 && lines == 2 && r.line == 2 && r.len == 3, "records %d lines %lld", n,
          (long long)lines);
}

int main(void)
{
    RUN(json_keys_list_values_and_empty_texts_follow_megatron);
    RUN(json_escapes_duplicates_and_python_nonfinite_numbers_are_read_as_python_does);
    RUN(vocab_size_picks_uint16_below_65500_and_int32_from_it);
    RUN(malformed_lines_stop_the_run_naming_file_and_line);
    RUN(malformed_lines_are_counted_and_skipped_with_on_error_skip);
    RUN(the_first_bad_line_in_input_order_is_reported_for_any_number_of_workers);
    RUN(outputs_are_identical_for_1_2_3_and_8_workers_and_match_the_reference);
    RUN(an_empty_input_gives_empty_datasets);
    RUN(a_record_longer_than_a_chunk_grows_the_chunk);
    RUN(text_input_is_one_document_per_line_with_universal_newlines);
    RUN(csv_quoted_fields_follow_pythons_csv_module);
    RUN(csv_header_names_select_the_column);
    RUN(smi_files_split_fields_on_runs_of_blanks);
    RUN(one_document_makes_each_record_an_item_of_a_single_document);
    RUN(configuration_errors_name_the_flag);
    RUN(a_cancelled_run_writes_nothing);
    RUN(progress_lines_come_every_log_interval_documents);
    RUN(every_allocation_failure_in_the_pipeline_is_clean);
    RUN(merge_takes_prefixes_or_a_directory_in_sorted_order);
    RUN(utf8_check_accepts_exactly_the_strict_encoding);
    RUN(record_boundaries_never_split_a_crlf_or_a_quoted_field);
    return test_summary("preprocess");
}
