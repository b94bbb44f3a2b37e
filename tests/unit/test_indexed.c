/* data/indexed: the MMIDIDX reader and builder against the format itself.
 *
 * Expected bytes are assembled here, field by field, from the layout in
 * megatron-facts.md 1.1 (Megatron-LM megatron/core/datasets/indexed_dataset.py):
 * magic "MMIDIDX\0\0", u64 version 1, u8 dtype code, u64 sequence_count,
 * u64 document_count, i32 lengths, i64 byte pointers, i64 document indices. */
#include "base/alloc.h"
#include "base/fileio.h"
#include "data/indexed.h"
#include "test.h"

#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers -------------------------------------------------------------- */

typedef struct buf {
    uint8_t data[4096];
    size_t n;
} buf;

static void put_le(buf *b, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        b->data[b->n++] = (uint8_t)(v >> (8 * i));
}

/* The .idx Megatron's _IndexWriter produces for these lengths and documents. */
static void expected_idx(buf *b, int dtype_code, int item_size, const int32_t *lengths, int s,
                         const int64_t *docs, int d)
{
    static const char magic[9] = "MMIDIDX\0";
    b->n = 0;
    memcpy(b->data, magic, 9); /* 'M','M','I','D','I','D','X',0,0 */
    b->n = 9;
    put_le(b, 1, 8);
    put_le(b, (uint64_t)dtype_code, 1);
    put_le(b, (uint64_t)s, 8);
    put_le(b, (uint64_t)d, 8);
    for (int i = 0; i < s; i++)
        put_le(b, (uint64_t)(uint32_t)lengths[i], 4);
    uint64_t ptr = 0;
    for (int i = 0; i < s; i++) {
        put_le(b, ptr, 8);
        ptr += (uint64_t)lengths[i] * (uint64_t)item_size;
    }
    for (int k = 0; k < d; k++)
        put_le(b, (uint64_t)docs[k], 8);
}

static void path_of(char *out, size_t cap, const char *name, const char *ext)
{
    snprintf(out, cap, "%s/%s%s", test_tmpdir(), name, ext);
}

static int read_whole(const char *path, buf *b)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    b->n = fread(b->data, 1, sizeof b->data, f);
    fclose(f);
    return 0;
}

static void write_whole(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(2);
    }
    if (n)
        fwrite(data, 1, n, f);
    fclose(f);
}

static int exists(const char *name, const char *ext)
{
    char p[512];
    path_of(p, sizeof p, name, ext);
    return pl_file_exists(p);
}

static void remove_dataset(const char *name)
{
    char p[512];
    path_of(p, sizeof p, name, ".idx");
    unlink(p);
    path_of(p, sizeof p, name, ".bin");
    unlink(p);
}

/* A document is a list of items; items are {n, tokens...}. */
typedef struct item {
    int n;
    int32_t t[8];
} item;

/* Builds name from docs: doc k has counts[k] items, taken in order from items. */
static pl_status build(const char *name, int dtype, const item *items, const int *counts,
                       int n_docs)
{
    char prefix[512];
    path_of(prefix, sizeof prefix, name, "");
    pl_indexed_builder *b;
    pl_status st = pl_indexed_builder_open(&b, prefix, dtype);
    if (st)
        return st;
    int it = 0;
    for (int k = 0; k < n_docs; k++) {
        for (int j = 0; j < counts[k]; j++, it++) {
            st = pl_indexed_builder_add_item(b, items[it].t, items[it].n);
            if (st)
                goto fail;
        }
        st = pl_indexed_builder_end_document(b);
        if (st)
            goto fail;
    }
    return pl_indexed_builder_finish(b);
fail:
    pl_indexed_builder_abort(b);
    return st;
}

/* ---- exact bytes ---------------------------------------------------------- */

TEST(idx_and_bin_bytes_match_the_format_computed_by_hand)
{
    /* doc 0: [1 2 3] [4]; doc 1: empty; doc 2: [65535] */
    const item items[] = {{3, {1, 2, 3}}, {1, {4}}, {1, {65535}}};
    const int counts[] = {2, 0, 1};
    remove_dataset("exact");
    CHECK_OK(build("exact", PL_DT_UINT16, items, counts, 3));

    buf want, got;
    const int32_t lengths[] = {3, 1, 1};
    const int64_t docs[] = {0, 2, 2, 3};
    expected_idx(&want, 8 /* uint16 */, 2, lengths, 3, docs, 4);
    CHECK(want.n == 34 + 12 * 3 + 8 * 4, "hand-built size %zu", want.n);
    char p[512];
    path_of(p, sizeof p, "exact", ".idx");
    CHECK(read_whole(p, &got) == 0, "no %s", p);
    CHECK(got.n == want.n && memcmp(got.data, want.data, want.n) == 0,
          ".idx differs from the hand-computed bytes (%zu vs %zu bytes)", got.n, want.n);

    const uint8_t bin[] = {1, 0, 2, 0, 3, 0, 4, 0, 0xff, 0xff};
    path_of(p, sizeof p, "exact", ".bin");
    CHECK(read_whole(p, &got) == 0, "no %s", p);
    CHECK(got.n == sizeof bin && memcmp(got.data, bin, sizeof bin) == 0, ".bin differs");
}

TEST(empty_builder_writes_header_and_one_document_index)
{
    remove_dataset("empty");
    CHECK_OK(build("empty", PL_DT_INT32, NULL, NULL, 0));
    buf want, got;
    const int64_t docs[] = {0};
    expected_idx(&want, 4, 4, NULL, 0, docs, 1);
    char p[512];
    path_of(p, sizeof p, "empty", ".idx");
    CHECK(read_whole(p, &got) == 0 && got.n == 42 && memcmp(got.data, want.data, 42) == 0,
          "empty .idx (%zu bytes)", got.n);
    path_of(p, sizeof p, "empty", ".bin");
    CHECK(read_whole(p, &got) == 0 && got.n == 0, ".bin of %zu bytes", got.n);
    pl_indexed ds;
    path_of(p, sizeof p, "empty", "");
    CHECK_OK(pl_indexed_open(&ds, p));
    CHECK(ds.h.n_sequences == 0 && ds.h.n_documents == 0 && ds.h.data_bytes == 0, "counts");
    pl_indexed_close(&ds);
}

/* ---- round trips, dtypes -------------------------------------------------- */

TEST(round_trip_preserves_tokens_for_every_integer_dtype)
{
    struct {
        int code, size;
        int32_t lo, hi;
    } dts[] = {
        {PL_DT_UINT8, 1, 0, 255},          {PL_DT_INT8, 1, -128, 127},
        {PL_DT_INT16, 2, -32768, 32767},   {PL_DT_UINT16, 2, 0, 65535},
        {PL_DT_INT32, 4, INT32_MIN, INT32_MAX}, {PL_DT_INT64, 8, INT32_MIN, INT32_MAX},
    };
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
        int32_t lo = dts[d].lo, hi = dts[d].hi;
        const item items[] = {{4, {lo, hi, 0, 1}}, {0, {0}}, {3, {hi - 1, lo + 1, 7}}, {1, {hi}}};
        const int counts[] = {2, 2};
        char name[64], prefix[512];
        snprintf(name, sizeof name, "rt_%s", pl_indexed_dtype_name(dts[d].code));
        remove_dataset(name);
        CHECK_OK(build(name, dts[d].code, items, counts, 2));
        path_of(prefix, sizeof prefix, name, "");
        pl_indexed ds;
        pl_status st = pl_indexed_open(&ds, prefix);
        CHECK(st == PL_OK, "%s: %s", name, pl_error_msg());
        if (st)
            continue;
        CHECK(ds.h.dtype == dts[d].code && ds.h.item_size == dts[d].size, "%s: dtype %d size %d",
              name, ds.h.dtype, ds.h.item_size);
        CHECK(ds.h.n_sequences == 4 && ds.h.n_documents == 2, "%s: counts", name);
        CHECK(ds.bin_map.size == (size_t)(8 * dts[d].size), "%s: .bin %zu bytes", name,
              ds.bin_map.size);
        CHECK(pl_indexed_doc(&ds.h, 1) == 2 && pl_indexed_doc(&ds.h, 2) == 4, "%s: docs", name);
        for (int i = 0; i < 4; i++) {
            int32_t out[8];
            CHECK(pl_indexed_length(&ds.h, i) == items[i].n, "%s: length %d", name, i);
            CHECK_OK(pl_indexed_read(&ds, i, 0, items[i].n, out));
            for (int k = 0; k < items[i].n; k++)
                CHECK(out[k] == items[i].t[k], "%s: seq %d token %d: %d != %d", name, i, k, out[k],
                      items[i].t[k]);
        }
        int32_t two[2];
        CHECK_OK(pl_indexed_read(&ds, 2, 1, 2, two)); /* a slice inside a sequence */
        CHECK(two[0] == lo + 1 && two[1] == 7, "%s: slice %d %d", name, two[0], two[1]);
        pl_indexed_close(&ds);
    }
}

TEST(best_dtype_switches_to_int32_at_65500)
{
    CHECK(pl_indexed_best_dtype(65499) == PL_DT_UINT16, "65499");
    CHECK(pl_indexed_best_dtype(65500) == PL_DT_INT32, "65500");
    CHECK(pl_indexed_best_dtype(50257) == PL_DT_UINT16, "GPT-2 vocabulary");
    CHECK(pl_indexed_best_dtype(30522) == PL_DT_UINT16, "BERT vocabulary");
    CHECK(pl_indexed_best_dtype(128256) == PL_DT_INT32, "Llama-3 vocabulary");
    CHECK(pl_indexed_dtype_size(PL_DT_UINT16) == 2 && pl_indexed_dtype_size(PL_DT_INT64) == 8 &&
              pl_indexed_dtype_size(0) == 0 && pl_indexed_dtype_size(9) == 0,
          "sizes");
    CHECK(strcmp(pl_indexed_dtype_name(PL_DT_UINT16), "uint16") == 0, "name");
}

TEST(out_of_range_tokens_are_rejected_and_leave_the_builder_intact)
{
    struct {
        int code;
        int32_t bad;
    } cases[] = {{PL_DT_UINT8, 256},    {PL_DT_UINT8, -1},     {PL_DT_INT8, 128},
                 {PL_DT_INT8, -129},    {PL_DT_INT16, 32768},  {PL_DT_INT16, -32769},
                 {PL_DT_UINT16, 65536}, {PL_DT_UINT16, -1}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char prefix[512], needle[32];
        path_of(prefix, sizeof prefix, "range", "");
        remove_dataset("range");
        pl_indexed_builder *b;
        CHECK_OK(pl_indexed_builder_open(&b, prefix, cases[c].code));
        const int32_t good[2] = {1, 2};
        /* Long enough to span several write buffers before the bad token. */
        static int32_t bad[20000];
        for (int k = 0; k < 20000; k++)
            bad[k] = k % 100;
        bad[19000] = cases[c].bad;
        CHECK_OK(pl_indexed_builder_add_item(b, good, 2));
        pl_status st = pl_indexed_builder_add_item(b, bad, 20000);
        snprintf(needle, sizeof needle, "token id %d ", cases[c].bad);
        CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), needle) &&
                  strstr(pl_error_msg(), pl_indexed_dtype_name(cases[c].code)),
              "case %zu: %d '%s'", c, st, pl_error_msg());
        CHECK_OK(pl_indexed_builder_end_document(b));
        CHECK_OK(pl_indexed_builder_finish(b));
        pl_indexed ds;
        CHECK_OK(pl_indexed_open(&ds, prefix));
        CHECK(ds.h.n_sequences == 1 && ds.bin_map.size == 2 * (size_t)ds.h.item_size,
              "case %zu: the rejected item left %lld sequences, %zu bytes", c,
              (long long)ds.h.n_sequences, ds.bin_map.size);
        pl_indexed_close(&ds);
    }
    pl_indexed_builder *b = NULL;
    char prefix[512];
    path_of(prefix, sizeof prefix, "float", "");
    CHECK(pl_indexed_builder_open(&b, prefix, PL_DT_FLOAT32) == PL_ERR_ARG && b == NULL,
          "float32 builder");
    CHECK(pl_indexed_builder_open(&b, prefix, 0) == PL_ERR_ARG, "unknown code");
    CHECK(!exists("float", ".bin") && !exists("float", ".idx"), "files left by a refused builder");
}

TEST(finish_refuses_items_outside_a_document)
{
    char prefix[512];
    path_of(prefix, sizeof prefix, "unclosed", "");
    remove_dataset("unclosed");
    pl_indexed_builder *b;
    const int32_t t[2] = {1, 2};
    CHECK_OK(pl_indexed_builder_open(&b, prefix, PL_DT_UINT16));
    CHECK_OK(pl_indexed_builder_add_item(b, t, 2));
    CHECK_OK(pl_indexed_builder_end_document(b));
    CHECK_OK(pl_indexed_builder_add_item(b, t, 1));
    pl_status st = pl_indexed_builder_finish(b);
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "1 items after the last end_document"),
          "%d %s", st, pl_error_msg());
    CHECK(!exists("unclosed", ".bin") && !exists("unclosed", ".idx"), "files written");
}

TEST(read_rejects_requests_outside_a_sequence)
{
    const item items[] = {{3, {1, 2, 3}}};
    const int counts[] = {1};
    remove_dataset("reads");
    CHECK_OK(build("reads", PL_DT_INT32, items, counts, 1));
    char prefix[512];
    path_of(prefix, sizeof prefix, "reads", "");
    pl_indexed ds;
    CHECK_OK(pl_indexed_open(&ds, prefix));
    int32_t out[4];
    CHECK(pl_indexed_read(&ds, 1, 0, 1, out) == PL_ERR_ARG, "sequence 1 of 1");
    CHECK(pl_indexed_read(&ds, -1, 0, 1, out) == PL_ERR_ARG, "sequence -1");
    CHECK(pl_indexed_read(&ds, 0, 2, 2, out) == PL_ERR_ARG, "tokens [2,4) of 3");
    CHECK(pl_indexed_read(&ds, 0, 1, INT64_MAX, out) == PL_ERR_ARG, "n = INT64_MAX");
    CHECK(pl_indexed_read(&ds, 0, -1, 1, out) == PL_ERR_ARG, "negative offset");
    CHECK_OK(pl_indexed_read(&ds, 0, 3, 0, out));
    pl_indexed_close(&ds);
}

/* ---- corrupt files -------------------------------------------------------- */

/* A good dataset to mutate: uint16, lengths {2,1,3}, documents {0,1,1,3} (an empty one). */
static void good_dataset(buf *idx, buf *bin)
{
    const int32_t lengths[] = {2, 1, 3};
    const int64_t docs[] = {0, 1, 1, 3};
    expected_idx(idx, 8, 2, lengths, 3, docs, 4);
    bin->n = 12;
    for (int i = 0; i < 12; i++)
        bin->data[i] = (uint8_t)i;
}

enum { OFF_VERSION = 9, OFF_DTYPE = 17, OFF_S = 18, OFF_D = 26, OFF_LEN = 34 };
enum { OFF_PTR = OFF_LEN + 4 * 3, OFF_DOC = OFF_PTR + 8 * 3 };

static void set_le(buf *b, size_t off, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        b->data[off + (size_t)i] = (uint8_t)(v >> (8 * i));
}

TEST(corrupt_or_truncated_files_are_rejected_naming_file_and_field)
{
    struct {
        const char *what;
        size_t off;
        uint64_t v;
        int bytes;      /* 0: no field change */
        long idx_cut;   /* bytes removed from the end of .idx (-1: keep) */
        long bin_cut;   /* bytes removed from the end of .bin */
        const char *field;
        int names_bin;  /* message names the .bin instead of the .idx */
    } cases[] = {
        {"magic", 0, 'X', 1, 0, 0, "magic", 0},
        {"magic last byte", 8, 1, 1, 0, 0, "magic", 0},
        {"version 2", OFF_VERSION, 2, 8, 0, 0, "version", 0},
        {"version 0", OFF_VERSION, 0, 8, 0, 0, "version", 0},
        {"dtype 0", OFF_DTYPE, 0, 1, 0, 0, "dtype", 0},
        {"dtype 9", OFF_DTYPE, 9, 1, 0, 0, "dtype", 0},
        {"sequence_count + 1", OFF_S, 4, 8, 0, 0, "sequence_count", 0},
        {"sequence_count - 1", OFF_S, 2, 8, 0, 0, "sequence_count", 0},
        {"sequence_count huge", OFF_S, (uint64_t)1 << 62, 8, 0, 0, "sequence_count", 0},
        {"document_count 0", OFF_D, 0, 8, 0, 0, "document_count", 0},
        {"document_count + 1", OFF_D, 5, 8, 0, 0, "document_count", 0},
        {"document_count huge", OFF_D, UINT64_MAX, 8, 0, 0, "document_count", 0},
        {"negative length", OFF_LEN + 4, 0xffffffff, 4, 0, 0, "sequence_lengths[1]", 0},
        {"length past the .bin", OFF_LEN + 8, 4, 4, 0, 0, "truncated", 1},
        {"pointer past the .bin", OFF_PTR + 16, 100, 8, 0, 0, "sequence_pointers[2]", 0},
        {"pointer not the running sum", OFF_PTR + 8, 2, 8, 0, 0, "sequence_pointers[1]", 0},
        {"negative pointer", OFF_PTR, UINT64_MAX, 8, 0, 0, "sequence_pointers[0]", 0},
        {"document indices start at 1", OFF_DOC, 1, 8, 0, 0, "document_indices[0]", 0},
        {"document indices decrease", OFF_DOC + 16, 0, 8, 0, 0, "document_indices[2]", 0},
        {"document index past sequence_count", OFF_DOC + 8, 4, 8, 0, 0, "document_indices[1]", 0},
        {"document indices end below sequence_count", OFF_DOC + 24, 2, 8, 0, 0,
         "document_indices", 0},
        {"truncated .idx (1 byte)", 0, 0, 0, 1, 0, "sequence_count", 0},
        {"truncated .idx (header)", 0, 0, 0, 102 - 33, 0, "header", 0},
        {"empty .idx", 0, 0, 0, 102, 0, "header", 0},
        {"truncated .bin", 0, 0, 0, 0, 1, "truncated", 1},
        {"empty .bin", 0, 0, 0, 0, 12, "truncated", 1},
    };
    buf idx0, bin0;
    good_dataset(&idx0, &bin0);
    CHECK(idx0.n == 102, "good .idx is %zu bytes", idx0.n);
    char prefix[512], ipath[512], bpath[512];
    path_of(prefix, sizeof prefix, "corrupt", "");
    path_of(ipath, sizeof ipath, "corrupt", ".idx");
    path_of(bpath, sizeof bpath, "corrupt", ".bin");
    write_whole(ipath, idx0.data, idx0.n);
    write_whole(bpath, bin0.data, bin0.n);
    pl_indexed ds;
    CHECK_OK(pl_indexed_open(&ds, prefix)); /* the unmutated files are valid */
    pl_indexed_close(&ds);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        buf idx = idx0, bin = bin0;
        if (cases[c].bytes)
            set_le(&idx, cases[c].off, cases[c].v, cases[c].bytes);
        idx.n -= (size_t)cases[c].idx_cut;
        bin.n -= (size_t)cases[c].bin_cut;
        write_whole(ipath, idx.data, idx.n);
        write_whole(bpath, bin.data, bin.n);
        memset(&ds, 0x5a, sizeof ds);
        pl_status st = pl_indexed_open(&ds, prefix);
        const char *msg = pl_error_msg();
        CHECK(st == PL_ERR_FORMAT, "%s: status %d (%s)", cases[c].what, st, msg);
        CHECK(strstr(msg, cases[c].names_bin ? bpath : ipath) != NULL, "%s: file not named: %s",
              cases[c].what, msg);
        CHECK(strstr(msg, cases[c].field) != NULL, "%s: field '%s' not named: %s", cases[c].what,
              cases[c].field, msg);
        CHECK(ds.idx_map.data == NULL && ds.bin_map.data == NULL && ds.prefix == NULL,
              "%s: the failed open left state behind", cases[c].what);
        if (st == PL_OK)
            pl_indexed_close(&ds);
        /* The same bytes through the in-memory parser (the fuzzer's entry point). */
        pl_indexed_header h;
        st = pl_indexed_parse(idx.data, idx.n, bin.n, "mem.idx", &h);
        CHECK(st == PL_ERR_FORMAT && strstr(pl_error_msg(), "mem.idx"), "%s: parse status %d",
              cases[c].what, st);
    }
    /* Megatron's multimodal variant appends one int8 mode per sequence: accepted. */
    buf idx = idx0;
    for (int i = 0; i < 3; i++)
        idx.data[idx.n++] = 0;
    write_whole(ipath, idx.data, idx.n);
    write_whole(bpath, bin0.data, bin0.n);
    CHECK_OK(pl_indexed_open(&ds, prefix));
    pl_indexed_close(&ds);
    /* A .bin longer than the index needs is accepted (Megatron never checks). */
    bin0.data[bin0.n++] = 0;
    write_whole(ipath, idx0.data, idx0.n);
    write_whole(bpath, bin0.data, bin0.n);
    CHECK_OK(pl_indexed_open(&ds, prefix));
    CHECK(ds.h.data_bytes == 12, "data_bytes %llu", (unsigned long long)ds.h.data_bytes);
    pl_indexed_close(&ds);
    unlink(bpath);
    pl_status st = pl_indexed_open(&ds, prefix);
    CHECK(st == PL_ERR_IO && strstr(pl_error_msg(), bpath), "missing .bin: %d %s", st,
          pl_error_msg());
}

/* ---- merge ------------------------------------------------------------------ */

TEST(merge_appends_sequences_and_shifted_document_indices_including_empty_documents)
{
    /* A: [1 2][3] | empty | [4];  B: one empty document, no sequences;  C: [5 6 7] | empty;
     * D: no documents at all. */
    const item a[] = {{2, {1, 2}}, {1, {3}}, {1, {4}}};
    const int ac[] = {2, 0, 1};
    const int bc[] = {0};
    const item c[] = {{3, {5, 6, 7}}};
    const int cc[] = {1, 0};
    remove_dataset("mA");
    remove_dataset("mB");
    remove_dataset("mC");
    remove_dataset("mD");
    remove_dataset("merged");
    CHECK_OK(build("mA", PL_DT_UINT16, a, ac, 3));
    CHECK_OK(build("mB", PL_DT_UINT16, NULL, bc, 1));
    CHECK_OK(build("mC", PL_DT_UINT16, c, cc, 2));
    CHECK_OK(build("mD", PL_DT_UINT16, NULL, NULL, 0));
    char prefix[512], p[512];
    path_of(prefix, sizeof prefix, "merged", "");
    pl_indexed_builder *b;
    CHECK_OK(pl_indexed_builder_open(&b, prefix, PL_DT_UINT16));
    const char *parts[] = {"mA", "mB", "mD", "mC"};
    for (int i = 0; i < 4; i++) {
        path_of(p, sizeof p, parts[i], "");
        CHECK_OK(pl_indexed_builder_add_index(b, p));
    }
    CHECK_OK(pl_indexed_builder_finish(b));
    buf want, got;
    const int32_t lengths[] = {2, 1, 1, 3};
    /* A's [0,2,2,3], then B's [0] shifted by 3 minus its leading 0 -> [3], D adds nothing,
     * C's [0,1,1] shifted by 3 minus its leading 0 -> [4,4]. */
    const int64_t docs[] = {0, 2, 2, 3, 3, 4, 4};
    expected_idx(&want, 8, 2, lengths, 4, docs, 7);
    path_of(p, sizeof p, "merged", ".idx");
    CHECK(read_whole(p, &got) == 0 && got.n == want.n && memcmp(got.data, want.data, want.n) == 0,
          "merged .idx differs (%zu vs %zu bytes)", got.n, want.n);
    const uint8_t bin[] = {1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0};
    path_of(p, sizeof p, "merged", ".bin");
    CHECK(read_whole(p, &got) == 0 && got.n == sizeof bin && memcmp(got.data, bin, sizeof bin) == 0,
          "merged .bin differs (%zu bytes)", got.n);

    /* dtypes must match */
    remove_dataset("m32");
    CHECK_OK(build("m32", PL_DT_INT32, a, ac, 3));
    path_of(prefix, sizeof prefix, "merged2", "");
    CHECK_OK(pl_indexed_builder_open(&b, prefix, PL_DT_UINT16));
    path_of(p, sizeof p, "m32", "");
    pl_status st = pl_indexed_builder_add_index(b, p);
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), p) && strstr(pl_error_msg(), "int32"),
          "dtype mismatch: %d %s", st, pl_error_msg());
    pl_indexed_builder_abort(b);
    CHECK(!exists("merged2", ".bin") && !exists("merged2", ".idx"), "aborted merge left files");
}

/* ---- fault injection -------------------------------------------------------- */

/* Files whose name contains ".tmp." in the scratch directory. */
static int count_tmp_files(const char *stem)
{
    DIR *d = opendir(test_tmpdir());
    int n = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));)
        if (strncmp(e->d_name, stem, strlen(stem)) == 0 && strstr(e->d_name, ".tmp."))
            n++;
    closedir(d);
    return n;
}

TEST(every_allocation_failure_in_build_and_open_is_clean)
{
    /* 40 one-token items force the length and document arrays to grow past 16. */
    item items[40];
    int counts[20];
    for (int i = 0; i < 40; i++) {
        items[i].n = 1 + i % 3;
        for (int k = 0; k < items[i].n; k++)
            items[i].t[k] = i * 10 + k;
    }
    for (int k = 0; k < 20; k++)
        counts[k] = 2;
    remove_dataset("fi_src");
    CHECK_OK(build("fi_src", PL_DT_UINT16, items, counts, 20));
    char prefix[512], src[512];
    path_of(prefix, sizeof prefix, "fi", "");
    path_of(src, sizeof src, "fi_src", "");
    int n = 0, failures = 0;
    for (;; n++) {
        remove_dataset("fi");
        int64_t live0 = pl_alloc_live();
        int build_failed = 0;
        pl_alloc_fail_after(n);
        pl_indexed_builder *b = NULL;
        pl_status st = pl_indexed_builder_open(&b, prefix, PL_DT_UINT16);
        for (int i = 0; st == PL_OK && i < 40; i++) {
            st = pl_indexed_builder_add_item(b, items[i].t, items[i].n);
            if (st == PL_OK && i % 2)
                st = pl_indexed_builder_end_document(b);
        }
        if (st == PL_OK)
            st = pl_indexed_builder_add_index(b, src);
        if (st == PL_OK)
            st = pl_indexed_builder_finish(b);
        else
            pl_indexed_builder_abort(b);
        build_failed = st != PL_OK;
        if (st == PL_OK) {
            pl_indexed ds;
            st = pl_indexed_open(&ds, prefix);
            if (st == PL_OK) {
                int32_t out[4];
                CHECK(ds.h.n_sequences == 80 && ds.h.n_documents == 40, "n=%d: counts", n);
                CHECK_OK(pl_indexed_read(&ds, 79, 0, pl_indexed_length(&ds.h, 79), out));
                pl_indexed_close(&ds);
            }
        }
        pl_alloc_fail_after(-1);
        CHECK(pl_alloc_live() == live0, "n=%d: %lld blocks leaked", n,
              (long long)(pl_alloc_live() - live0));
        CHECK(count_tmp_files("fi.") == 0, "n=%d: temporary files left", n);
        if (st == PL_OK)
            break;
        failures++;
        CHECK(st == PL_ERR_NOMEM, "n=%d: status %d (%s)", n, st, pl_error_msg());
        if (build_failed)
            CHECK(!exists("fi", ".bin") && !exists("fi", ".idx"), "n=%d: final files after failure",
                  n);
        if (n > 10000) {
            CHECK(0, "no success after %d injected failures", n);
            break;
        }
    }
    CHECK(failures > 10, "only %d allocation sites exercised", failures);
}

TEST(a_builder_poisoned_by_a_failed_merge_refuses_to_finish)
{
    item items[40];
    int counts[1] = {40};
    for (int i = 0; i < 40; i++)
        items[i] = (item){1, {i}};
    remove_dataset("poison_src");
    CHECK_OK(build("poison_src", PL_DT_UINT16, items, counts, 1));
    char prefix[512], src[512];
    path_of(prefix, sizeof prefix, "poison", "");
    path_of(src, sizeof src, "poison_src", "");
    int refused = 0;
    for (int n = 0; n < 100; n++) {
        remove_dataset("poison");
        pl_indexed_builder *b;
        CHECK_OK(pl_indexed_builder_open(&b, prefix, PL_DT_UINT16));
        CHECK_OK(pl_indexed_builder_add_item(b, items[0].t, 1));
        CHECK_OK(pl_indexed_builder_end_document(b));
        pl_alloc_fail_after(n);
        pl_status st = pl_indexed_builder_add_index(b, src);
        pl_alloc_fail_after(-1);
        if (st == PL_OK) {
            CHECK_OK(pl_indexed_builder_finish(b));
            break;
        }
        /* Failed while opening src: the builder is intact; failed while copying: poisoned. */
        st = pl_indexed_builder_finish(b);
        if (st != PL_OK) {
            refused++;
            CHECK(st == PL_ERR_INTERNAL, "n=%d: finish status %d", n, st);
            CHECK(!exists("poison", ".bin") && !exists("poison", ".idx"), "n=%d: files", n);
        } else {
            pl_indexed ds;
            CHECK_OK(pl_indexed_open(&ds, prefix));
            CHECK(ds.h.n_sequences == 1, "n=%d: %lld sequences", n, (long long)ds.h.n_sequences);
            pl_indexed_close(&ds);
        }
    }
    CHECK(refused > 0, "no failure landed after the merge started");
}

int main(void)
{
    RUN(idx_and_bin_bytes_match_the_format_computed_by_hand);
    RUN(empty_builder_writes_header_and_one_document_index);
    RUN(round_trip_preserves_tokens_for_every_integer_dtype);
    RUN(best_dtype_switches_to_int32_at_65500);
    RUN(out_of_range_tokens_are_rejected_and_leave_the_builder_intact);
    RUN(finish_refuses_items_outside_a_document);
    RUN(read_rejects_requests_outside_a_sequence);
    RUN(corrupt_or_truncated_files_are_rejected_naming_file_and_field);
    RUN(merge_appends_sequences_and_shifted_document_indices_including_empty_documents);
    RUN(every_allocation_failure_in_build_and_open_is_clean);
    RUN(a_builder_poisoned_by_a_failed_merge_refuses_to_finish);
    return test_summary("indexed");
}
