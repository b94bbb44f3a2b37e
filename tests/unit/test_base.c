/* base/: options tables, the allocation hook, atomic files, growable arrays. */
#include "base/alloc.h"
#include "base/md5.h"
#include "base/xxh64.h"
#include "base/fileio.h"
#include "base/options.h"
#include "base/vec.h"
#include "test.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct demo_opts {
    int64_t seq_length;
    double lr;
    int append_eod;
    const char *input;
    const char *style;
    pl_strlist keys;
} demo_opts;

static const pl_option demo_table[] = {
    {"--seq-length", PL_OPT_INT, "1024", offsetof(demo_opts, seq_length), "tokens per sample", NULL, 0},
    {"--lr", PL_OPT_FLOAT, "1e-4", offsetof(demo_opts, lr), "learning rate", NULL, 0},
    {"--append-eod", PL_OPT_BOOL, NULL, offsetof(demo_opts, append_eod), "append EOD", NULL, 0},
    {"--input", PL_OPT_STRING, NULL, offsetof(demo_opts, input), "input file", NULL, PL_OPT_REQUIRED},
    {"--lr-decay-style", PL_OPT_CHOICE, "linear", offsetof(demo_opts, style), "decay", "constant|linear|cosine", 0},
    {"--json-keys", PL_OPT_LIST, "text", offsetof(demo_opts, keys), "keys", NULL, 0},
};
static const pl_command_spec demo_cmd = {"demo", "a test table", demo_table,
                                         (int)(sizeof demo_table / sizeof *demo_table), 0};

static pl_status parse(demo_opts *o, int argc, const char **argv, unsigned char *given)
{
    return pl_options_parse(&demo_cmd, o, argc, (char **)argv, given);
}

TEST(options_apply_defaults_and_parse_every_type)
{
    demo_opts o;
    unsigned char given[6];
    const char *argv[] = {"--input", "a.jsonl", "--lr=-3e-4", "--append-eod", "--json-keys",
                          "text", "title", "--lr-decay-style", "cosine"};
    CHECK_OK(parse(&o, 9, argv, given));
    CHECK(o.seq_length == 1024, "default seq_length %lld", (long long)o.seq_length);
    CHECK(o.lr == -3e-4, "lr %g", o.lr);
    CHECK(o.append_eod == 1, "append_eod");
    CHECK(strcmp(o.input, "a.jsonl") == 0, "input %s", o.input);
    CHECK(strcmp(o.style, "cosine") == 0, "style %s", o.style);
    CHECK(o.keys.n == 2 && strcmp(o.keys.items[1], "title") == 0, "keys n=%d", o.keys.n);
    CHECK(given[0] == 0 && given[1] == 1 && given[3] == 1, "given flags");
    pl_options_free(&demo_cmd, &o);
    const char *argv2[] = {"--input", "x"};
    CHECK_OK(parse(&o, 2, argv2, NULL));
    CHECK(o.keys.n == 1 && strcmp(o.keys.items[0], "text") == 0, "default list");
    pl_options_free(&demo_cmd, &o);
}

TEST(options_errors_name_the_flag)
{
    demo_opts o;
    struct {
        int argc;
        const char *argv[4];
        const char *needle;
    } cases[] = {
        {2, {"--input", "a", NULL, NULL}, NULL},
        {3, {"--input", "a", "--bogus"}, "unknown flag '--bogus'"},
        {4, {"--input", "a", "--seq-length", "12x"}, "--seq-length expects an integer, got '12x'"},
        {4, {"--input", "a", "--lr", "fast"}, "--lr expects a decimal number"},
        {4, {"--input", "a", "--lr", "0x10"}, "--lr expects a decimal number, got '0x10'"},
        {4, {"--input", "a", "--lr-decay-style", "cubic"}, "--lr-decay-style must be one of"},
        {1, {"--append-eod"}, "missing required flag --input"},
        {3, {"--input", "a", "--json-keys"}, "--json-keys expects one or more values"},
        {3, {"--input", "a", "--lr"}, "--lr expects a value"},
        {3, {"--input", "a", "--seq-lenght"}, "unknown flag '--seq-lenght' (did you mean --seq-length?)"},
        {3, {"--input", "a", "--seq"}, "unknown flag '--seq' (did you mean --seq-length?)"},
        {3, {"--input", "a", "--zzzzzzzz"}, "unknown flag '--zzzzzzzz' (see plait demo --help)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        unsigned char given[6];
        pl_status st = parse(&o, cases[i].argc, cases[i].argv, given);
        if (!cases[i].needle) {
            CHECK(st == PL_OK, "case %zu: %s", i, pl_error_msg());
            pl_options_free(&demo_cmd, &o);
            continue;
        }
        CHECK(st == PL_ERR_ARG, "case %zu: status %d", i, st);
        CHECK(strstr(pl_error_msg(), cases[i].needle) != NULL, "case %zu: message '%s'", i,
              pl_error_msg());
    }
}

/* argparse: a repeated flag takes its last value; abbreviations only where the
 * command allows them (tools/preprocess_data.py), ambiguous ones list the candidates. */
TEST(options_repeat_takes_the_last_value_and_prefixes_follow_allow_abbrev)
{
    demo_opts o;
    const char *argv[] = {"--input", "a", "--lr", "1", "--input", "b", "--lr=2", "--json-keys",
                          "x", "y", "--json-keys", "z"};
    CHECK_OK(parse(&o, 12, argv, NULL));
    CHECK(strcmp(o.input, "b") == 0 && o.lr == 2 && o.keys.n == 1 &&
              strcmp(o.keys.items[0], "z") == 0,
          "last values: input %s lr %g keys %d", o.input, o.lr, o.keys.n);
    pl_options_free(&demo_cmd, &o);
    pl_command_spec abbrev = demo_cmd;
    abbrev.allow_abbrev = 1;
    const char *argv2[] = {"--inp", "a", "--seq", "7", "--append", "--lr-d=cosine"};
    CHECK_OK(pl_options_parse(&abbrev, &o, 6, (char **)argv2, NULL));
    CHECK(strcmp(o.input, "a") == 0 && o.seq_length == 7 && o.append_eod &&
              strcmp(o.style, "cosine") == 0,
          "prefixes");
    pl_options_free(&abbrev, &o);
    const char *argv3[] = {"--input", "a", "--lr", "1"}; /* exact name beats a longer flag */
    CHECK_OK(pl_options_parse(&abbrev, &o, 4, (char **)argv3, NULL));
    CHECK(o.lr == 1, "exact --lr");
    pl_options_free(&abbrev, &o);
    const char *argv4[] = {"--input", "a", "--l", "1"};
    pl_status st = pl_options_parse(&abbrev, &o, 4, (char **)argv4, NULL);
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "ambiguous option: --l could match --lr, "
                                                     "--lr-decay-style"),
          "%s", pl_error_msg());
    const char *argv5[] = {"--input", "a", "--seq"};
    st = parse(&o, 3, argv5, NULL);
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "did you mean --seq-length?"), "%s",
          pl_error_msg());
}

TEST(alloc_hook_fails_on_request_and_counts_live_blocks)
{
    int64_t live0 = pl_alloc_live();
    void *a = pl_malloc(10);
    CHECK(a != NULL && pl_alloc_live() == live0 + 1, "live count");
    pl_alloc_fail_after(1);
    void *b = pl_malloc(10);
    void *c = pl_malloc(10);
    pl_alloc_fail_after(-1);
    CHECK(b != NULL && c == NULL, "second allocation after fail_after(1) must fail");
    pl_free(a);
    pl_free(b);
    CHECK(pl_alloc_live() == live0, "leak: %lld", (long long)(pl_alloc_live() - live0));
    size_t out;
    CHECK(pl_mul_size(SIZE_MAX / 2 + 1, 2, &out) != 0, "overflow detected");
    CHECK(pl_mul_size(1000, 1000, &out) == 0 && out == 1000000, "1000*1000");
}

TEST(wfile_is_invisible_until_commit_and_abort_leaves_nothing)
{
    char path[512];
    snprintf(path, sizeof path, "%s/atomic.txt", test_tmpdir());
    unlink(path);
    pl_wfile w;
    CHECK_OK(pl_wfile_open(&w, path));
    CHECK_OK(pl_wfile_write(&w, "hello", 5));
    CHECK(!pl_file_exists(path), "visible before commit");
    CHECK_OK(pl_wfile_commit(&w));
    char *text = NULL;
    size_t n = 0;
    CHECK_OK(pl_file_read_all(path, &text, &n));
    CHECK(n == 5 && text && strcmp(text, "hello") == 0, "content");
    pl_free(text);
    CHECK_OK(pl_wfile_open(&w, path));
    CHECK_OK(pl_wfile_write(&w, "other", 5));
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s", w.tmp_path);
    pl_wfile_abort(&w);
    CHECK(!pl_file_exists(tmp), "temporary left behind");
    CHECK_OK(pl_file_read_all(path, &text, &n));
    CHECK(n == 5 && strcmp(text, "hello") == 0, "abort changed the committed file");
    pl_free(text);
    pl_status st = pl_mmap_open(&(pl_mmap){0}, "/nonexistent/file.idx");
    CHECK(st == PL_ERR_IO && strstr(pl_error_msg(), "/nonexistent/file.idx"), "%s", pl_error_msg());
}

TEST(growable_arrays_keep_contents_when_growth_fails)
{
    pl_ids v = {0};
    for (int i = 0; i < 100; i++)
        CHECK_OK(pl_ids_push(&v, i));
    pl_alloc_fail_after(0);
    pl_status st = pl_ids_reserve(&v, 1 << 20);
    pl_alloc_fail_after(-1);
    CHECK(st == PL_ERR_NOMEM, "status %d", st);
    CHECK(v.n == 100 && v.data[99] == 99, "contents lost");
    pl_ids_free(&v);
    pl_bytes b = {0};
    CHECK_OK(pl_bytes_printf(&b, "%d-%s", 42, "x"));
    CHECK_OK(pl_bytes_append(&b, "yz", 2));
    CHECK(b.n == 6 && strcmp(b.data, "42-xyz") == 0, "bytes '%s'", b.data);
    pl_bytes_free(&b);
}

/* VmFlags of the mapping that holds address a (/proc/self/smaps), or "" */
static void vm_flags_of(const void *a, char *out, size_t cap)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    int inside = 0;
    out[0] = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            inside = (uintptr_t)a >= lo && (uintptr_t)a < hi;
        else if (inside && strncmp(line, "VmFlags:", 8) == 0) {
            snprintf(out, cap, "%s", line + 8);
            break;
        }
    }
    if (f)
        fclose(f);
}

/* Blocks of 8 MiB and more are advised onto transparent huge pages (the
 * mapping's VmFlags show "hg"); small ones and PLAIT_THP=0 are left alone. */
TEST(large_blocks_are_advised_onto_huge_pages)
{
    char flags[512], mode[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f) {
        if (!fgets(mode, sizeof mode, f))
            mode[0] = 0;
        fclose(f);
    }
    if (!strstr(mode, "[madvise]") && !strstr(mode, "[always]")) {
        printf("# transparent huge pages are off here (%s): nothing to check\n", mode);
        return;
    }
    size_t big = (size_t)64 << 20;
    char *p = pl_malloc(big);
    CHECK(p != NULL, "64 MiB block");
    if (!p)
        return;
    vm_flags_of(p + big / 2, flags, sizeof flags);
    CHECK(strstr(flags, " hg") != NULL, "64 MiB block not advised: VmFlags%s", flags);
    pl_free(p);
    char *q = pl_calloc(16, (size_t)1 << 20);
    vm_flags_of(q ? q + (8 << 20) : NULL, flags, sizeof flags);
    CHECK(q && strstr(flags, " hg") != NULL, "16 MiB calloc block not advised: VmFlags%s", flags);
    pl_free(q);
}

/* XXH64 against `xxhsum -H64` (Debian's xxhash), and MD5 against RFC 1321's
 * test suite: the library calls behind plait's names give the published digests. */
TEST(xxh64_and_md5_give_the_published_digests)
{
    static const struct {
        const char *in;
        uint64_t xxh;
        const char *md5;
    } v[] = {{"", 0xef46db3751d8e999ull, "d41d8cd98f00b204e9800998ecf8427e"},
             {"a", 0xd24ec4f1a98c6e5bull, "0cc175b9c0f1b6a831c399e269772661"},
             {"The quick brown fox jumps over the lazy dog", 0x0b242d361fda71bcull,
              "9e107d9d372bb6826bd81d3542a419d6"}};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        char hex[33];
        pl_md5_hex(v[i].in, strlen(v[i].in), hex);
        CHECK(pl_xxh64(v[i].in, strlen(v[i].in), 0) == v[i].xxh, "xxh64 of \"%s\"", v[i].in);
        CHECK(strcmp(hex, v[i].md5) == 0, "md5 of \"%s\": %s", v[i].in, hex);
    }
}

int main(void)
{
    RUN(options_apply_defaults_and_parse_every_type);
    RUN(options_errors_name_the_flag);
    RUN(options_repeat_takes_the_last_value_and_prefixes_follow_allow_abbrev);
    RUN(alloc_hook_fails_on_request_and_counts_live_blocks);
    RUN(wfile_is_invisible_until_commit_and_abort_leaves_nothing);
    RUN(growable_arrays_keep_contents_when_growth_fails);
    RUN(large_blocks_are_advised_onto_huge_pages);
    RUN(xxh64_and_md5_give_the_published_digests);
    return test_summary("base");
}
