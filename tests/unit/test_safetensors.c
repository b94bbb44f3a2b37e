/* ckpt/safetensors: hand-built header bytes, round trip, corrupt files. */
#include "base/alloc.h"
#include "ckpt/safetensors.h"
#include "test.h"

#include <stdint.h>

static char *tmp_path(const char *name)
{
    static char buf[512];
    snprintf(buf, sizeof buf, "%s/%s", test_tmpdir(), name);
    return buf;
}

TEST(written_file_has_the_documented_bytes_and_reads_back)
{
    float a[6] = {1, 2, 3, 4, 5, 6};
    int64_t b[2] = {-7, 1LL << 40};
    int64_t sa[2] = {2, 3}, sb[1] = {2};
    pl_st_writer *w;
    CHECK_OK(pl_st_writer_new(&w));
    CHECK_OK(pl_st_writer_add(w, "a", "F32", 2, sa, a));
    CHECK_OK(pl_st_writer_add(w, "b", "I64", 1, sb, b));
    CHECK_OK(pl_st_writer_meta(w, "format", "pt"));
    const char *path = tmp_path("t.safetensors");
    CHECK_OK(pl_st_writer_finish(w, path));
    /* Expected bytes, from the format: header JSON padded with spaces to 8. */
    const char *json = "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],"
                       "\"data_offsets\":[0,24]},\"b\":{\"dtype\":\"I64\",\"shape\":[2],"
                       "\"data_offsets\":[24,40]}}";
    size_t jl = strlen(json), padded = (jl + 7) / 8 * 8;
    char *file = NULL;
    size_t n = 0;
    CHECK_OK(pl_file_read_all(path, &file, &n));
    CHECK(n == 8 + padded + 40, "size %zu, expected %zu", n, 8 + padded + 40);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = hl << 8 | (uint8_t)file[i];
    CHECK(hl == padded, "header length %llu", (unsigned long long)hl);
    CHECK(memcmp(file + 8, json, jl) == 0, "header json: %.*s", (int)jl, file + 8);
    CHECK(memcmp(file + 8 + padded, a, 24) == 0 && memcmp(file + 8 + padded + 24, b, 16) == 0,
          "data bytes");
    pl_free(file);
    pl_safetensors st;
    CHECK_OK(pl_safetensors_open(&st, path));
    const pl_st_tensor *t = pl_safetensors_find(&st, "a");
    CHECK(st.n == 2 && t && t->ndim == 2 && t->shape[1] == 3 && strcmp(t->dtype, "F32") == 0,
          "tensor a");
    CHECK(t && memcmp(st.data + t->begin, a, 24) == 0, "a data");
    const char *fmt = pl_safetensors_meta(&st, "format");
    CHECK(fmt && strcmp(fmt, "pt") == 0, "metadata");
    pl_safetensors_close(&st);
}

/* Builds a file image with the given header JSON and data size. */
static size_t image(uint8_t *buf, const char *json, size_t data)
{
    size_t jl = strlen(json);
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)((uint64_t)jl >> (8 * i));
    memcpy(buf + 8, json, jl);
    memset(buf + 8 + jl, 0, data);
    return 8 + jl + data;
}

TEST(corrupt_headers_are_rejected_with_the_reason)
{
    struct {
        const char *json;
        size_t data;
        const char *needle;
    } cases[] = {
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, NULL},
        {"[1,2]", 0, "not a JSON object"},
        {"{\"a\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "unknown dtype 'F33'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "8 bytes for shape with 3"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "outside the 4-byte"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "tile the data"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, "cover 4 of 8"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "not a size"},
        {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "expected {"},
        {"{\"__metadata__\":{\"k\":1}}", 0, "not a string"},
    };
    uint8_t buf[512];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t n = image(buf, cases[i].json, cases[i].data);
        pl_safetensors st = {0};
        pl_status s = pl_safetensors_parse(&st, buf, n, "x.safetensors");
        if (!cases[i].needle) {
            CHECK(s == PL_OK, "case %zu: %s", i, pl_error_msg());
            pl_safetensors_close(&st);
        } else {
            CHECK(s == PL_ERR_FORMAT && strstr(pl_error_msg(), cases[i].needle) &&
                      strstr(pl_error_msg(), "x.safetensors"),
                  "case %zu: %s", i, pl_error_msg());
        }
    }
    buf[0] = 200; /* header longer than the file */
    pl_safetensors st = {0};
    CHECK(pl_safetensors_parse(&st, buf, 16, "y") == PL_ERR_FORMAT &&
              strstr(pl_error_msg(), "exceeds the file"),
          "%s", pl_error_msg());
}

TEST(writer_and_reader_release_everything_when_allocation_fails)
{
    float a[4] = {1, 2, 3, 4};
    int64_t sh[1] = {4};
    const char *path = tmp_path("fi.safetensors");
    int64_t live0 = pl_alloc_live();
    for (int n = 0; n < 100; n++) {
        pl_alloc_fail_after(n);
        pl_st_writer *w = NULL;
        pl_status s = pl_st_writer_new(&w);
        if (!s)
            s = pl_st_writer_add(w, "a", "F32", 1, sh, a);
        if (!s)
            s = pl_st_writer_meta(w, "k", "v");
        if (!s) {
            s = pl_st_writer_finish(w, path);
            w = NULL;
        }
        pl_st_writer_free(w);
        pl_safetensors st;
        if (!s)
            s = pl_safetensors_open(&st, path);
        pl_alloc_fail_after(-1);
        if (!s) {
            pl_safetensors_close(&st);
            break;
        }
        CHECK(s == PL_ERR_NOMEM, "n=%d: status %d %s", n, s, pl_error_msg());
        CHECK(pl_alloc_live() == live0, "n=%d: leaked %lld", n, (long long)(pl_alloc_live() - live0));
    }
    CHECK(pl_alloc_live() == live0, "leak after success");
}

int main(void)
{
    RUN(written_file_has_the_documented_bytes_and_reads_back);
    RUN(corrupt_headers_are_rejected_with_the_reason);
    RUN(writer_and_reader_release_everything_when_allocation_fails);
    return test_summary("safetensors");
}
