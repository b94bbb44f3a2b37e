/* base/zread: gzip, xz and zstd read back byte for byte (compressed here with
 * the libraries' own encoders), several members/streams/frames in one file,
 * tiny reads, and every truncation and a corrupt byte as errors naming the file. */
#include "base/alloc.h"
#include "base/zread.h"
#include "test.h"

#include <lzma.h>
#include <zlib.h>
#include <zstd.h>

enum { N = 50000 };
static unsigned char text[N];

/* Text with some redundancy, so it compresses, but not a constant. */
static void make_text(void)
{
    uint32_t x = 12345;
    for (int i = 0; i < N; i++) {
        x = x * 1103515245u + 12345u;
        text[i] = (i % 61 == 60) ? '\n' : (unsigned char)('a' + (x >> 16) % 7);
    }
}

static size_t gzip_of(const unsigned char *in, size_t n, unsigned char *out, size_t cap)
{
    z_stream s = {0};
    deflateInit2(&s, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    s.next_in = (unsigned char *)in;
    s.avail_in = (uInt)n;
    s.next_out = out;
    s.avail_out = (uInt)cap;
    deflate(&s, Z_FINISH);
    size_t len = cap - s.avail_out;
    deflateEnd(&s);
    return len;
}

static size_t xz_of(const unsigned char *in, size_t n, unsigned char *out, size_t cap)
{
    size_t pos = 0;
    lzma_easy_buffer_encode(6, LZMA_CHECK_CRC64, NULL, in, n, out, &pos, cap);
    return pos;
}

static size_t zstd_of(const unsigned char *in, size_t n, unsigned char *out, size_t cap)
{
    return ZSTD_compress(out, cap, in, n, 3);
}

typedef size_t (*compressor)(const unsigned char *, size_t, unsigned char *, size_t);
static const struct {
    const char *name, *ext;
    compressor fn;
} codecs[] = {{"gzip", "gz", gzip_of}, {"xz", "xz", xz_of}, {"zstd", "zst", zstd_of}};

static const char *write_tmp(const char *name, const void *data, size_t n)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir(), name);
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, n, f);
    fclose(f);
    return path;
}

/* Reads path through zread in reads of `step` bytes into out. */
static pl_status read_all(const char *path, unsigned char *out, size_t cap, size_t step,
                          size_t *n, const char **codec)
{
    FILE *f = fopen(path, "rb");
    pl_zread *z = NULL;
    pl_status st = pl_zread_open(&z, f, path);
    *n = 0;
    if (st == PL_OK && codec)
        *codec = pl_zread_codec(z);
    while (st == PL_OK) {
        size_t got;
        st = pl_zread_read(z, out + *n, *n + step <= cap ? step : cap - *n, &got);
        if (st || got == 0)
            break;
        *n += got;
    }
    pl_zread_close(z);
    fclose(f);
    return st;
}

static unsigned char comp[2 * N + 1024], back[2 * N];

TEST(each_codec_reads_back_byte_for_byte_in_any_read_size)
{
    static const size_t steps[] = {1, 7, 4096, 1 << 20};
    for (size_t c = 0; c < 3; c++) {
        size_t m = codecs[c].fn(text, N, comp, sizeof comp);
        char name[32];
        snprintf(name, sizeof name, "z1.txt.%s", codecs[c].ext);
        const char *path = write_tmp(name, comp, m);
        for (size_t s = 0; s < sizeof steps / sizeof *steps; s++) {
            size_t n;
            const char *codec = NULL;
            if (c == 0 && steps[s] == 1)
                continue; /* 50k one-byte reads through inflate: slow, and 7 covers it */
            pl_status st = read_all(path, back, sizeof back, steps[s], &n, &codec);
            CHECK(st == PL_OK, "%s step %zu: %s", codecs[c].name, steps[s], pl_error_msg());
            CHECK(n == N && memcmp(back, text, N) == 0, "%s step %zu: %zu bytes back",
                  codecs[c].name, steps[s], n);
            CHECK(codec && strcmp(codec, codecs[c].name) == 0, "codec %s", codec ? codec : "plain");
        }
    }
}

TEST(plain_files_pass_through_and_are_detected_by_content_not_name)
{
    size_t n;
    const char *codec = "x";
    const char *path = write_tmp("plain.jsonl", text, N);
    CHECK_OK(read_all(path, back, sizeof back, 4096, &n, &codec));
    CHECK(n == N && memcmp(back, text, N) == 0 && codec == NULL, "plain: %zu bytes", n);
    /* zstd content under a plain name is still decompressed */
    size_t m = zstd_of(text, N, comp, sizeof comp);
    path = write_tmp("looks_plain.jsonl", comp, m);
    CHECK_OK(read_all(path, back, sizeof back, 4096, &n, &codec));
    CHECK(n == N && memcmp(back, text, N) == 0 && codec && strcmp(codec, "zstd") == 0,
          "by content: %zu bytes", n);
    path = write_tmp("empty.txt", "", 0);
    CHECK_OK(read_all(path, back, sizeof back, 4096, &n, NULL));
    CHECK(n == 0, "empty plain file: %zu bytes", n);
}

TEST(concatenated_members_streams_and_frames_read_as_one)
{
    for (size_t c = 0; c < 3; c++) {
        size_t a = codecs[c].fn(text, N / 2, comp, sizeof comp);
        size_t b = codecs[c].fn(text + N / 2, N - N / 2, comp + a, sizeof comp - a);
        char name[32];
        snprintf(name, sizeof name, "cat.%s", codecs[c].ext);
        const char *path = write_tmp(name, comp, a + b);
        size_t n;
        CHECK_OK(read_all(path, back, sizeof back, 4096, &n, NULL));
        CHECK(n == N && memcmp(back, text, N) == 0, "%s: two parts give %zu bytes",
              codecs[c].name, n);
    }
}

TEST(every_truncation_is_an_error_naming_the_file)
{
    for (size_t c = 0; c < 3; c++) {
        size_t m = codecs[c].fn(text, 3000, comp, sizeof comp);
        char name[32];
        snprintf(name, sizeof name, "trunc.%s", codecs[c].ext);
        int silent = 0;
        for (size_t cut = 0; cut < m; cut += (cut < 64 || m - cut < 64) ? 1 : 97) {
            const char *path = write_tmp(name, comp, cut);
            size_t n;
            pl_status st = read_all(path, back, sizeof back, 4096, &n, NULL);
            if (st != PL_ERR_FORMAT || !strstr(pl_error_msg(), path)) {
                silent++;
                if (silent < 3)
                    CHECK(0, "%s cut at %zu of %zu: %s '%s'", codecs[c].name, cut, m,
                          pl_status_str(st), pl_error_msg());
            }
        }
        CHECK(silent == 0, "%s: %d truncations not reported", codecs[c].name, silent);
    }
}

TEST(corrupt_data_and_wrong_names_are_errors)
{
    for (size_t c = 0; c < 3; c++) {
        size_t m = codecs[c].fn(text, N, comp, sizeof comp);
        comp[m / 2] ^= 0x55;
        char name[32];
        snprintf(name, sizeof name, "corrupt.%s", codecs[c].ext);
        const char *path = write_tmp(name, comp, m);
        size_t n;
        pl_status st = read_all(path, back, sizeof back, 4096, &n, NULL);
        CHECK(st == PL_ERR_FORMAT && strstr(pl_error_msg(), "corrupt"), "%s: %s '%s'",
              codecs[c].name, pl_status_str(st), pl_error_msg());
    }
    size_t n;
    const char *path = write_tmp("notgz.jsonl.gz", "{\"text\": 1}\n", 12);
    pl_status st = read_all(path, back, sizeof back, 4096, &n, NULL);
    CHECK(st == PL_ERR_FORMAT && strstr(pl_error_msg(), "named .gz but not gzip data"), "%s",
          pl_error_msg());
    path = write_tmp("empty.zst", "", 0);
    st = read_all(path, back, sizeof back, 4096, &n, NULL);
    CHECK(st == PL_ERR_FORMAT && strstr(pl_error_msg(), "named .zst but empty"), "%s",
          pl_error_msg());
    /* a gzip member followed by junk */
    size_t m = gzip_of(text, 100, comp, sizeof comp);
    memcpy(comp + m, "junk", 4);
    path = write_tmp("junk.gz", comp, m + 4);
    st = read_all(path, back, sizeof back, 4096, &n, NULL);
    CHECK(st == PL_ERR_FORMAT && strstr(pl_error_msg(), "not another gzip member"), "%s",
          pl_error_msg());
}

TEST(read_whole_file_and_allocation_faults)
{
    size_t m = xz_of(text, N, comp, sizeof comp);
    const char *path = write_tmp("whole.xz", comp, m);
    char *data = NULL;
    size_t n = 0;
    CHECK_OK(pl_zread_file(path, &data, &n));
    CHECK(n == N && data && memcmp(data, text, N) == 0 && data[N] == '\0', "%zu bytes", n);
    pl_free(data);
    int64_t live = pl_alloc_live();
    for (int64_t k = 0; k < 20; k++) {
        pl_alloc_fail_after(k);
        data = NULL;
        pl_status st = pl_zread_file(path, &data, &n);
        pl_alloc_fail_after(-1);
        if (st == PL_OK) {
            pl_free(data);
            break;
        }
        CHECK(st == PL_ERR_NOMEM, "fault %lld: %s", (long long)k, pl_error_msg());
    }
    CHECK(pl_alloc_live() == live, "leaked %lld", (long long)(pl_alloc_live() - live));
    CHECK(pl_zread_compressed_name("a/b.jsonl.GZ") && pl_zread_compressed_name("x.zst") &&
              !pl_zread_compressed_name("x.json") && !pl_zread_compressed_name(".gz"),
          "names");
}

int main(void)
{
    make_text();
    RUN(each_codec_reads_back_byte_for_byte_in_any_read_size);
    RUN(plain_files_pass_through_and_are_detected_by_content_not_name);
    RUN(concatenated_members_streams_and_frames_read_as_one);
    RUN(every_truncation_is_an_error_naming_the_file);
    RUN(corrupt_data_and_wrong_names_are_errors);
    RUN(read_whole_file_and_allocation_faults);
    return test_summary("zread");
}
