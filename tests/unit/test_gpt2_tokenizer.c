/* GPT2BPETokenizer: outside test vectors, round trips, errors, fault injection, forks.
 *
 * References are outside plait: the 64 r50k_base vectors of gpt-tokenizer's
 * TestPlans.txt (tiktoken's ids) and the vectors of /work/shared/reference/
 * data-sources.md (a), made with gpt-3-encoder's Encoder.js. The comparison with
 * Encoder.js on whole texts is tests/scripts/gpt2_vs_node.sh. One test is white-box:
 * the two merge algorithms (quadratic and heap) must agree, as a kernel and its
 * reference twin do. */
#include "base/alloc.h"
#include "base/fileio.h"
#include "data/tokenizer/gpt2_internal.h"
#include "data/tokenizer/tokenizer.h"
#include "test.h"

#include <pthread.h>
#include <stdint.h>

static char enc_path[4096], bpe_path[4096];

static void real_paths(void)
{
    snprintf(enc_path, sizeof enc_path, "%s/gpt2/encoder.json", test_datadir());
    snprintf(bpe_path, sizeof bpe_path, "%s/gpt2/vocab.bpe", test_datadir());
}

static pl_tokenizer *open_real(void)
{
    pl_tokenizer *t = NULL;
    real_paths();
    pl_status st = pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "GPT2BPETokenizer", .vocab_file = enc_path, .merge_file = bpe_path});
    CHECK(st == PL_OK, "open: %s", pl_error_msg());
    return t;
}

static int ids_equal(const pl_ids *got, const int32_t *want, int64_t n)
{
    return got->n == n && (n == 0 || memcmp(got->data, want, (size_t)n * sizeof *want) == 0);
}

static void print_ids(const char *what, const int32_t *ids, int64_t n)
{
    fprintf(stderr, "    %s (%lld):", what, (long long)n);
    for (int64_t i = 0; i < n && i < 40; i++)
        fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "%s\n", n > 40 ? " ..." : "");
}

/* Encodes s, compares with want, and checks that decode gives s back. */
static void check_vector(pl_tokenizer *t, const char *s, size_t len, const int32_t *want, int64_t n)
{
    pl_ids ids = {0};
    pl_bytes back = {0};
    CHECK_OK(pl_tokenizer_encode(t, s, len, &ids));
    int same = ids_equal(&ids, want, n);
    CHECK(same, "ids of \"%.60s\" differ from the reference", s);
    if (!same) {
        print_ids("got ", ids.data, ids.n);
        print_ids("want", want, n);
    }
    CHECK_OK(pl_tokenizer_decode(t, ids.data, ids.n, &back));
    CHECK(back.n == len && memcmp(back.data, s, len) == 0, "decode(encode(\"%.60s\")) differs", s);
    pl_bytes_free(&back);
    pl_ids_free(&ids);
}

/* --- outside vectors ----------------------------------------------------------------- */

TEST(r50k_test_plans_all_64_vectors_match)
{
    char path[4096], *buf = NULL;
    size_t size;
    snprintf(path, sizeof path, "%s/gpt-tokenizer/TestPlans.txt", test_datadir());
    CHECK_OK(pl_file_read_all(path, &buf, &size));
    if (!buf)
        return;
    pl_tokenizer *t = open_real();
    int blocks = 0, in_r50k = 0;
    const char *sample = NULL;
    size_t sample_len = 0;
    for (char *line = buf, *nl; line < buf + size; line = nl + 1) {
        nl = memchr(line, '\n', (size_t)(buf + size - line));
        if (!nl)
            nl = buf + size;
        size_t len = (size_t)(nl - line);
        if (len > 14 && memcmp(line, "EncodingName: ", 14) == 0) {
            in_r50k = len == 23 && memcmp(line + 14, "r50k_base", 9) == 0;
            sample = NULL;
        } else if (in_r50k && len >= 8 && memcmp(line, "Sample: ", 8) == 0) {
            sample = line + 8;
            sample_len = len - 8;
        } else if (in_r50k && sample && len >= 10 && memcmp(line, "Encoded: [", 10) == 0) {
            int32_t want[512];
            int64_t n = 0;
            for (char *p = line + 10; *p != ']' && n < 512;) {
                want[n++] = (int32_t)strtol(p, &p, 10);
                while (*p == ',' || *p == ' ')
                    p++;
            }
            if (t)
                check_vector(t, sample, sample_len, want, n);
            blocks++;
            sample = NULL;
        }
    }
    CHECK(blocks == 64, "found %d r50k_base blocks in %s, expected 64", blocks, path);
    pl_tokenizer_free(t);
    pl_free(buf);
}

TEST(data_sources_vectors_match)
{
    static const struct {
        const char *text;
        int32_t ids[20];
        int n;
    } v[] = {
        {"Hello world", {15496, 995}, 2},
        {"Hello, world!", {15496, 11, 995, 0}, 4},
        {"The quick brown fox jumps over the lazy dog.",
         {464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13}, 10},
        {"CC(=O)Oc1ccccc1C(=O)O",
         {4093, 7, 28, 46, 8, 46, 66, 16, 535, 535, 66, 16, 34, 7, 28, 46, 8, 46}, 18},
        {"h\xc3\xa9llo \xf0\x9f\xa4\x97 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", /* héllo 🤗 日本語 */
         {71, 2634, 18798, 12520, 97, 245, 10545, 245, 98, 17312, 105, 45739, 252}, 13},
        {"<|endoftext|>", {27, 91, 437, 1659, 5239, 91, 29}, 7}, /* plain text, not 50256 */
        {"Hello, World! How are you today? \xf0\x9f\x8c\x8d",
         {15496, 11, 2159, 0, 1374, 389, 345, 1909, 30, 12520, 234, 235}, 12},
        {"", {0}, 0},
    };
    pl_tokenizer *t = open_real();
    if (!t)
        return;
    for (size_t i = 0; i < sizeof v / sizeof *v; i++)
        check_vector(t, v[i].text, strlen(v[i].text), v[i].ids, v[i].n);
    pl_tokenizer_free(t);
}

TEST(megatron_fields_and_token_ids)
{
    pl_tokenizer *t = open_real();
    if (!t)
        return;
    CHECK(strcmp(t->type, "GPT2BPETokenizer") == 0, "type %s", t->type);
    CHECK(t->vocab_size == 50257, "vocab_size %lld", (long long)t->vocab_size);
    CHECK(t->eod == 50256, "eod %d", t->eod);
    CHECK(pl_tokenizer_token_id(t, "<|endoftext|>") == 50256, "<|endoftext|>");
    CHECK(pl_tokenizer_token_id(t, "Hello") == 15496, "Hello");
    CHECK(pl_tokenizer_token_id(t, "\xc4\xa0world") == 995, "\xc4\xa0world"); /* "Ġworld" */
    CHECK(pl_tokenizer_token_id(t, " world") == -1, "a raw space is not in the alphabet");
    CHECK(pl_tokenizer_token_id(t, "") == -1, "empty");
    CHECK(pl_tokenizer_token_id(t, "<|endoftext|") == -1, "prefix of a token");
    pl_bytes b = {0};
    const int32_t hw[] = {15496, 995, 50256};
    CHECK_OK(pl_tokenizer_decode(t, hw, 3, &b));
    CHECK(b.n == 24 && memcmp(b.data, "Hello world<|endoftext|>", 24) == 0, "decode %s", b.data);
    pl_bytes_free(&b);
    pl_tokenizer_free(t);
}

/* --- errors ------------------------------------------------------------------------------- */

TEST(invalid_utf8_is_a_format_error_with_its_offset)
{
    static const struct {
        const char *s;
        size_t len, offset;
    } v[] = {
        {"abc \xff", 5, 4},              /* never a UTF-8 byte */
        {"ab\x80", 3, 2},                /* lone continuation */
        {"x \xc0\x80", 4, 2},            /* overlong NUL */
        {"\xe0\x80\xaf", 3, 0},          /* overlong '/' */
        {"ok \xed\xa0\x80", 6, 3},       /* surrogate U+D800 */
        {"\xf4\x90\x80\x80", 4, 0},      /* past U+10FFFF */
        {"\xf5\x80\x80\x80", 4, 0},
        {"end \xe2\x82", 6, 4},          /* truncated at the end */
        {"a   \xe2\x82\x41", 7, 4},      /* truncated inside, after a space run */
        {"\xe6\x97\xa5 \xf0\x9f\xa4", 8, 4},
        {"don't \xc3", 7, 6},
    };
    pl_tokenizer *t = open_real();
    if (!t)
        return;
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        pl_ids ids = {0};
        CHECK_OK(pl_ids_push(&ids, 7));
        pl_status st = pl_tokenizer_encode(t, v[i].s, v[i].len, &ids);
        char want[64];
        snprintf(want, sizeof want, "byte offset %zu", v[i].offset);
        CHECK(st == PL_ERR_FORMAT, "case %zu: status %s", i, pl_status_str(st));
        CHECK(strstr(pl_error_msg(), want) != NULL, "case %zu: '%s' lacks '%s'", i, pl_error_msg(), want);
        CHECK(ids.n == 1 && ids.data[0] == 7, "case %zu: output changed on error (n=%lld)", i,
              (long long)ids.n);
        pl_ids_free(&ids);
    }
    pl_tokenizer_free(t);
}

TEST(decode_rejects_ids_outside_the_vocabulary)
{
    pl_tokenizer *t = open_real();
    if (!t)
        return;
    const int32_t bad[][2] = {{15496, -1}, {15496, 50257}, {INT32_MAX, 0}};
    for (int i = 0; i < 3; i++) {
        pl_bytes b = {0};
        CHECK_OK(pl_bytes_append(&b, "x", 1));
        pl_status st = pl_tokenizer_decode(t, bad[i], 2, &b);
        char want[32];
        snprintf(want, sizeof want, "id %d", bad[i][0] == 15496 ? bad[i][1] : bad[i][0]);
        CHECK(st != PL_OK && strstr(pl_error_msg(), want), "case %d: %s", i, pl_error_msg());
        CHECK(b.n == 1, "case %d: output changed on error", i);
        pl_bytes_free(&b);
    }
    pl_tokenizer_free(t);
}

/* Writes a file under the test's scratch directory; returns its path (static buffer per slot). */
static const char *write_tmp(int slot, const char *name, const char *text, size_t len)
{
    static char paths[4][4096];
    snprintf(paths[slot], sizeof paths[slot], "%s/%s", test_tmpdir(), name);
    FILE *fp = fopen(paths[slot], "wb");
    CHECK(fp != NULL, "cannot write %s", paths[slot]);
    if (fp) {
        fwrite(text, 1, len, fp);
        fclose(fp);
    }
    return paths[slot];
}

/* GPT-2's byte alphabet (bytes_to_unicode), written out here for the test fixtures. */
static int byte_char(int b, char *out)
{
    int cp = b, extra = 0;
    int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    if (!printable) {
        for (int k = 0; k < b; k++)
            extra += !((k >= 0x21 && k <= 0x7E) || (k >= 0xA1 && k <= 0xAC) || k >= 0xAE);
        cp = 0x100 + extra;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/* A small vocabulary in the scratch directory: the 256 byte tokens (ids in byte order),
 * the results of the first k merges of the real vocab.bpe, the space-separated tokens of
 * extra_tokens (ASCII letters), then <|endoftext|>; merges_extra is appended to the merges
 * file as is. Sets enc/bpe to the paths written. */
static void write_small_vocab(int k, const char *merges_extra, const char *extra_tokens,
                              const char **enc, const char **bpe)
{
    real_paths();
    char *real = NULL;
    size_t size;
    CHECK_OK(pl_file_read_all(bpe_path, &real, &size));
    pl_bytes json = {0}, merges = {0};
    CHECK_OK(pl_bytes_append(&json, "{", 1));
    for (int b = 0; b < 256; b++) {
        char u[3];
        int n = byte_char(b, u);
        const char *esc = u[0] == '"' ? "\\\"" : u[0] == '\\' ? "\\\\" : NULL;
        CHECK_OK(pl_bytes_printf(&json, "%s\"%.*s\": %d", b ? ", " : "", esc ? 2 : n, esc ? esc : u, b));
    }
    const char *p = real ? strchr(real, '\n') + 1 : NULL;
    CHECK_OK(pl_bytes_append(&merges, "#version: 0.2\n", 14));
    for (int i = 0; p && i < k; i++) {
        const char *nl = strchr(p, '\n'), *sp = memchr(p, ' ', (size_t)(nl - p));
        CHECK_OK(pl_bytes_append(&merges, p, (size_t)(nl + 1 - p)));
        CHECK_OK(pl_bytes_printf(&json, ", \""));
        for (const char *q = p; q < nl; q++) {
            if (q == sp)
                continue;
            if (*q == '"' || *q == '\\')
                CHECK_OK(pl_bytes_append(&json, "\\", 1));
            CHECK_OK(pl_bytes_append(&json, q, 1));
        }
        CHECK_OK(pl_bytes_printf(&json, "\": %d", 256 + i));
        p = nl + 1;
    }
    int next_id = 256 + k;
    for (const char *q = extra_tokens; q && *q;) {
        size_t len = strcspn(q, " ");
        CHECK_OK(pl_bytes_printf(&json, ", \"%.*s\": %d", (int)len, q, next_id++));
        q += len + (q[len] == ' ');
    }
    CHECK_OK(pl_bytes_printf(&json, ", \"<|endoftext|>\": %d}", next_id));
    if (merges_extra)
        CHECK_OK(pl_bytes_append(&merges, merges_extra, strlen(merges_extra)));
    *enc = write_tmp(0, "small_encoder.json", json.data, json.n);
    *bpe = write_tmp(1, "small_vocab.bpe", merges.data, merges.n);
    pl_bytes_free(&json);
    pl_bytes_free(&merges);
    pl_free(real);
}

static void expect_open_error(const char *enc, const char *bpe, pl_status want, const char *needle,
                              const char *what)
{
    pl_tokenizer *t = NULL;
    pl_status st = pl_gpt2_tokenizer_open(&t, enc, bpe);
    CHECK(st == want, "%s: status %s (%s)", what, pl_status_str(st), pl_error_msg());
    CHECK(strstr(pl_error_msg(), needle) != NULL, "%s: message '%s' lacks '%s'", what, pl_error_msg(),
          needle);
    CHECK(t == NULL, "%s: handle set on error", what);
    pl_tokenizer_free(t);
}

TEST(small_vocabulary_fixture_matches_the_real_one)
{
    /* The fixture's byte tokens are the real vocabulary's spellings, and its merges
     * reproduce the real encodings (ids differ: the fixture numbers bytes in order). */
    const char *enc, *bpe;
    write_small_vocab(50000, NULL, NULL, &enc, &bpe);
    pl_tokenizer *small = NULL, *t = open_real();
    CHECK_OK(pl_gpt2_tokenizer_open(&small, enc, bpe));
    if (!small || !t)
        return;
    CHECK(small->vocab_size == 50257 && small->eod == 50256, "small: %lld tokens, eod %d",
          (long long)small->vocab_size, small->eod);
    const char *text = "The quick brown fox jumps over the lazy dog. Don't panic!";
    pl_ids a = {0}, b = {0};
    pl_bytes da = {0}, db = {0};
    CHECK_OK(pl_tokenizer_encode(t, text, strlen(text), &a));
    CHECK_OK(pl_tokenizer_encode(small, text, strlen(text), &b));
    CHECK_OK(pl_tokenizer_decode(t, a.data, a.n, &da));
    CHECK(a.n == b.n, "token counts %lld vs %lld", (long long)a.n, (long long)b.n);
    for (int64_t i = 0; i < a.n && i < b.n; i++) { /* token by token, the same bytes */
        db.n = 0;
        da.n = 0;
        CHECK_OK(pl_tokenizer_decode(t, a.data + i, 1, &da));
        CHECK_OK(pl_tokenizer_decode(small, b.data + i, 1, &db));
        CHECK(da.n == db.n && memcmp(da.data, db.data, da.n) == 0, "token %lld differs", (long long)i);
    }
    pl_bytes_free(&da);
    pl_bytes_free(&db);
    pl_ids_free(&a);
    pl_ids_free(&b);
    pl_tokenizer_free(small);
    pl_tokenizer_free(t);
}

TEST(open_errors_name_the_file_and_the_fault)
{
    const char *enc, *bpe;
    char missing[4096];
    snprintf(missing, sizeof missing, "%s/no_such_encoder.json", test_tmpdir());
    write_small_vocab(10, NULL, NULL, &enc, &bpe);
    expect_open_error(missing, bpe, PL_ERR_IO, "no_such_encoder.json", "missing vocab file");
    expect_open_error(enc, missing, PL_ERR_IO, "no_such_encoder.json", "missing merges file");

    const char *j = write_tmp(2, "bad1.json", "{\"a\": 0,\n \"b\": 1,\n \"c\" 2}", 25);
    expect_open_error(j, bpe, PL_ERR_FORMAT, "bad1.json:3: malformed JSON", "malformed JSON");
    j = write_tmp(2, "bad2.json", "[1, 2]", 6);
    expect_open_error(j, bpe, PL_ERR_FORMAT, "bad2.json: expected a JSON object", "not an object");
    j = write_tmp(2, "bad3.json", "{\"a\": 0, \"b\": 0.5}", 18);
    expect_open_error(j, bpe, PL_ERR_FORMAT, "bad3.json: token \"b\": id must be an integer", "fraction");
    j = write_tmp(2, "bad4.json", "{\"a\": 0, \"b\": \"1\"}", 18);
    expect_open_error(j, bpe, PL_ERR_FORMAT, "bad4.json: token \"b\"", "string id");
    j = write_tmp(2, "bad5.json", "{\"a\": 1, \"b\": 1}", 16);
    expect_open_error(j, bpe, PL_ERR_FORMAT, "bad5.json: tokens \"a\" and \"b\" both have id 1", "dup id");
    j = write_tmp(2, "bad6.json", "{\"a\": 0, \"b\": 1}", 16);
    expect_open_error(j, bpe, PL_ERR_FORMAT, "bad6.json: no token for byte 0x00", "no byte tokens");
    j = write_tmp(2, "bad7.json", "{\"a b\": 0}", 10);
    expect_open_error(j, bpe, PL_ERR_FORMAT, "bad7.json: token \"a b\" (id 0) has a character outside",
                      "raw space in a token");

    /* merges: header, line shape, tokens in the vocabulary */
    write_small_vocab(10, "\xc4\xa0 t h\n", NULL, &enc, &bpe);
    expect_open_error(enc, bpe, PL_ERR_FORMAT, "small_vocab.bpe:12: expected a merge of two tokens",
                      "three fields");
    write_small_vocab(10, "zz q\n", NULL, &enc, &bpe);
    expect_open_error(enc, bpe, PL_ERR_FORMAT, "small_vocab.bpe:12: token 'zz' is not in the vocabulary",
                      "unknown token");
    write_small_vocab(10, "q z\n", NULL, &enc, &bpe);
    expect_open_error(enc, bpe, PL_ERR_FORMAT, "small_vocab.bpe:12: merged token 'qz' is not in",
                      "unknown merge result");
    const char *m = write_tmp(3, "noheader.bpe", "\xc4\xa0 t\n", 5);
    expect_open_error(enc, m, PL_ERR_FORMAT, "noheader.bpe:1: expected a '#version' header", "no header");
}

TEST(merges_file_quirks_follow_megatron)
{
    /* Megatron reads split('\n')[1:-1]: text after the last newline is not a merge. */
    const char *enc, *bpe;
    write_small_vocab(0, "h e\n\n", NULL, &enc, &bpe); /* "he" is not a token of a 0-merge vocab */
    expect_open_error(enc, bpe, PL_ERR_FORMAT, "merged token 'he'", "result checked");
    write_small_vocab(0, "h e", NULL, &enc, &bpe);    /* unterminated: ignored, so it loads */
    pl_tokenizer *t = NULL;
    CHECK_OK(pl_gpt2_tokenizer_open(&t, enc, bpe));
    if (t) {
        pl_ids ids = {0};
        CHECK_OK(pl_tokenizer_encode(t, "he", 2, &ids));
        CHECK(ids.n == 2 && ids.data[0] == 'h' && ids.data[1] == 'e', "n=%lld", (long long)ids.n);
        pl_ids_free(&ids);
    }
    pl_tokenizer_free(t);
}

TEST(bpe_merges_every_occurrence_before_looking_again)
{
    /* Python's bpe() takes the best pair, merges all its occurrences in one pass, then
     * looks again. Here "ab a" (rank 0) ranks above "a b" (rank 1), as no trainer would
     * write: in "abab" both (a, b) pairs merge first, giving [ab, ab]; merging one pair
     * and then the best pair at once would give [aba, b]. Short words take the quadratic
     * loop, long ones the heap. */
    const char *enc, *bpe;
    write_small_vocab(0, "ab a\na b\n", "ab aba", &enc, &bpe); /* ab = 256, aba = 257 */
    pl_tokenizer *t = NULL;
    CHECK_OK(pl_gpt2_tokenizer_open(&t, enc, bpe));
    if (!t)
        return;
    for (int len = 4; len <= 400; len *= 10) {
        char word[401];
        for (int i = 0; i < len; i++)
            word[i] = "ab"[i % 2];
        pl_ids ids = {0};
        CHECK_OK(pl_tokenizer_encode(t, word, (size_t)len, &ids));
        int all_ab = ids.n == len / 2;
        for (int64_t i = 0; all_ab && i < ids.n; i++)
            all_ab = ids.data[i] == 256;
        CHECK(all_ab, "%d letters: %lld ids, first %d", len, (long long)ids.n, ids.n ? ids.data[0] : -1);
        pl_ids_free(&ids);
    }
    pl_tokenizer_free(t);
}

/* --- memory -------------------------------------------------------------------------------- */

TEST(fault_injection_releases_everything)
{
    /* Every allocation of open, encode (a long pre-token grows the scratch), fork,
     * encode on the fork and decode fails in turn; each failure must come back as
     * PL_ERR_NOMEM with nothing leaked. The small vocabulary keeps cJSON's share of
     * allocations (two per token) to a few hundred. */
    const char *enc, *bpe;
    write_small_vocab(300, NULL, NULL, &enc, &bpe);
    char text[600];
    snprintf(text, sizeof text, "Hello world, it's a test of the loop!  %0200d \xe6\x97\xa5\xe6\x9c\xac"
             " done\n", 0);
    int64_t live0 = pl_alloc_live();
    int n, failures = 0, ok = 0;
    for (n = 0; n < 100000 && !ok; n++) {
        pl_tokenizer *t = NULL, *f = NULL;
        pl_ids ids = {0}, ids2 = {0};
        pl_bytes back = {0};
        pl_alloc_fail_after(n);
        pl_status st = pl_gpt2_tokenizer_open(&t, enc, bpe);
        if (!st)
            st = pl_tokenizer_encode(t, text, strlen(text), &ids);
        if (!st)
            st = pl_tokenizer_fork(t, &f);
        if (!st)
            st = pl_tokenizer_encode(f, text, strlen(text), &ids2);
        if (!st)
            st = pl_tokenizer_decode(f, ids2.data, ids2.n, &back);
        pl_alloc_fail_after(-1);
        if (st == PL_OK) {
            ok = 1;
            CHECK(ids_equal(&ids2, ids.data, ids.n), "fork encodes differently");
            CHECK(back.n == strlen(text) && memcmp(back.data, text, back.n) == 0, "round trip");
        } else {
            failures++;
            CHECK(st == PL_ERR_NOMEM, "n=%d: status %s (%s)", n, pl_status_str(st), pl_error_msg());
        }
        pl_bytes_free(&back);
        pl_ids_free(&ids);
        pl_ids_free(&ids2);
        pl_tokenizer_free(f);
        pl_tokenizer_free(t);
        CHECK(pl_alloc_live() == live0, "n=%d: %lld blocks leaked", n, (long long)(pl_alloc_live() - live0));
        if (pl_alloc_live() != live0)
            break;
    }
    CHECK(ok, "never succeeded");
    CHECK(failures > 600, "only %d failure points (expected cJSON's and ours)", failures);
    printf("# fault injection: %d failure points, all PL_ERR_NOMEM without leaks\n", failures);
}

TEST(fork_and_free_in_either_order)
{
    const char *text = "Forks share tables; each keeps its own cache. \xf0\x9f\xa4\x97";
    int64_t live0 = pl_alloc_live();
    for (int order = 0; order < 2; order++) {
        pl_tokenizer *t = open_real(), *f = NULL;
        if (!t)
            return;
        CHECK_OK(pl_tokenizer_fork(t, &f));
        if (!f)
            return;
        CHECK(f->vocab_size == 50257 && f->eod == 50256 && strcmp(f->type, t->type) == 0, "fields");
        pl_ids a = {0}, b = {0};
        CHECK_OK(pl_tokenizer_encode(t, text, strlen(text), &a));
        pl_tokenizer *first = order ? f : t, *last = order ? t : f;
        pl_tokenizer_free(first);
        CHECK_OK(pl_tokenizer_encode(last, text, strlen(text), &b)); /* tables still there */
        CHECK(ids_equal(&b, a.data, a.n), "order %d: ids differ after freeing one handle", order);
        CHECK(pl_tokenizer_token_id(last, "<|endoftext|>") == 50256, "token_id after free");
        pl_tokenizer_free(last);
        pl_ids_free(&a);
        pl_ids_free(&b);
    }
    CHECK(pl_alloc_live() == live0, "%lld blocks leaked", (long long)(pl_alloc_live() - live0));
}

typedef struct job {
    pl_tokenizer *t;
    const char *text;
    size_t len;
    pl_ids ids;
    pl_status st;
} job;

static void *run_job(void *arg)
{
    job *j = arg;
    j->st = pl_tokenizer_encode(j->t, j->text, j->len, &j->ids);
    return NULL;
}

TEST(forks_encode_in_parallel_threads)
{
    char path[4096], *text = NULL;
    size_t size;
    snprintf(path, sizeof path, "%s/kjv.txt", test_datadir());
    CHECK_OK(pl_file_read_all(path, &text, &size));
    pl_tokenizer *t = open_real();
    if (!t || !text)
        return;
    job jobs[2] = {{0}, {0}};
    size_t half = size / 2;
    jobs[0].text = text, jobs[0].len = half;
    jobs[1].text = text + half, jobs[1].len = size - half;
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        CHECK_OK(pl_tokenizer_fork(t, &jobs[i].t));
        CHECK(pthread_create(&th[i], NULL, run_job, &jobs[i]) == 0, "pthread_create");
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++) { /* the same pieces, one after the other, on the parent */
        pl_ids want = {0};
        CHECK_OK(jobs[i].st);
        CHECK_OK(pl_tokenizer_encode(t, jobs[i].text, jobs[i].len, &want));
        CHECK(ids_equal(&jobs[i].ids, want.data, want.n), "thread %d differs", i);
        pl_ids_free(&want);
        pl_ids_free(&jobs[i].ids);
        pl_tokenizer_free(jobs[i].t);
    }
    pl_tokenizer_free(t);
    pl_free(text);
}

TEST(word_cache_stays_bounded_and_exact)
{
    /* 200,000 distinct words overflow the cache (32,768 entries) several times. The
     * result must equal encoding in chunks, each on a fresh fork (a cold cache that
     * never fills), and encoding must keep no new memory blocks. */
    enum { WORDS = 200000, CHUNK = 5000 };
    pl_bytes text = {0};
    size_t cut[WORDS / CHUNK + 1];
    for (int i = 0; i < WORDS; i++) {
        if (i % CHUNK == 0)
            cut[i / CHUNK] = text.n;
        unsigned x = (unsigned)i * 2654435761u;
        CHECK_OK(pl_bytes_printf(&text, " %c%c%c%u", 'a' + x % 26, 'a' + x / 26 % 26, 'A' + x / 676 % 26,
                                 i));
    }
    cut[WORDS / CHUNK] = text.n;
    pl_tokenizer *t = open_real();
    if (!t)
        return;
    pl_ids whole = {0}, parts = {0};
    CHECK_OK(pl_ids_reserve(&whole, (int64_t)text.n));
    int64_t live = pl_alloc_live();
    CHECK_OK(pl_tokenizer_encode(t, text.data, text.n, &whole));
    CHECK(pl_alloc_live() == live, "encode kept %lld new blocks", (long long)(pl_alloc_live() - live));
    for (int c = 0; c < WORDS / CHUNK; c++) {
        pl_tokenizer *f = NULL;
        CHECK_OK(pl_tokenizer_fork(t, &f));
        CHECK_OK(pl_tokenizer_encode(f, text.data + cut[c], cut[c + 1] - cut[c], &parts));
        pl_tokenizer_free(f);
    }
    CHECK(ids_equal(&whole, parts.data, parts.n), "whole %lld ids vs chunks %lld", (long long)whole.n,
          (long long)parts.n);
    pl_ids_free(&whole);
    pl_ids_free(&parts);
    pl_bytes_free(&text);
    pl_tokenizer_free(t);
}

/* --- the two merge algorithms ---------------------------------------------------------------- */

TEST(merge_algorithms_agree)
{
    /* Every KJV pre-token (and KJV lines with the spaces taken out, long words), plus
     * random byte strings, merged by the quadratic loop and by the heap. */
    real_paths();
    pl_gpt2_vocab *v = NULL;
    CHECK_OK(pl_gpt2_vocab_load(&v, enc_path, bpe_path));
    char path[4096], *text = NULL;
    size_t size;
    snprintf(path, sizeof path, "%s/kjv.txt", test_datadir());
    CHECK_OK(pl_file_read_all(path, &text, &size));
    if (!v || !text)
        return;
    pl_gpt2_scratch s1 = {0}, s2 = {0};
    int32_t *a = pl_malloc(4096 * sizeof *a), *b = pl_malloc(4096 * sizeof *b);
    uint8_t word[4096];
    int64_t words = 0, differ = 0, longest = 0;
    uint64_t rng = 42;
    const uint8_t *u = (const uint8_t *)text;
    for (size_t pos = 0, end; pos < size && words < 400000; words++) {
        size_t n;
        if (words % 4 == 3) { /* random bytes, biased to letters so merges happen */
            rng = rng * 6364136223846793005u + 1442695040888963407u;
            n = 2 + (rng >> 33) % 300;
            for (size_t k = 0; k < n; k++) {
                rng = rng * 6364136223846793005u + 1442695040888963407u;
                unsigned r = (unsigned)(rng >> 40);
                word[k] = r % 4 ? (uint8_t)"etaoinshrdlu  ,.'\n"[r % 18] : (uint8_t)(r >> 8);
            }
        } else if (words % 4 == 2) { /* a line without spaces: long merges */
            n = 0;
            for (; pos < size && u[pos] != '\n' && n < sizeof word; pos++)
                if (u[pos] != ' ')
                    word[n++] = u[pos];
            pos++;
        } else {
            if (pl_gpt2_pretok_next(u, size, pos, &end) < 0)
                break;
            n = end - pos;
            memcpy(word, u + pos, n < sizeof word ? n : sizeof word);
            pos = end;
        }
        if (n < 2 || n > sizeof word)
            continue;
        for (size_t k = 0; k < n; k++)
            a[k] = b[k] = v->byte_id[word[k]];
        CHECK_OK(pl_gpt2_scratch_reserve(&s1, (int64_t)n));
        CHECK_OK(pl_gpt2_scratch_reserve(&s2, (int64_t)n));
        int64_t na = pl_gpt2_merge_small(v, a, (int64_t)n, &s1);
        int64_t nb = pl_gpt2_merge_heap(v, b, (int64_t)n, &s2);
        if (na != nb || memcmp(a, b, (size_t)na * sizeof *a) != 0) {
            if (differ++ < 3)
                fprintf(stderr, "    differ on \"%.*s\"\n", (int)n, (const char *)word);
        }
        if ((int64_t)n > longest)
            longest = (int64_t)n;
    }
    CHECK(differ == 0, "%lld of %lld words merge differently", (long long)differ, (long long)words);
    CHECK(longest > 200, "longest word %lld bytes", (long long)longest);
    pl_free(a);
    pl_free(b);
    pl_gpt2_scratch_free(&s1);
    pl_gpt2_scratch_free(&s2);
    pl_gpt2_vocab_release(v);
    pl_free(text);
}

int main(void)
{
    RUN(r50k_test_plans_all_64_vectors_match);
    RUN(data_sources_vectors_match);
    RUN(megatron_fields_and_token_ids);
    RUN(invalid_utf8_is_a_format_error_with_its_offset);
    RUN(decode_rejects_ids_outside_the_vocabulary);
    RUN(small_vocabulary_fixture_matches_the_real_one);
    RUN(open_errors_name_the_file_and_the_fault);
    RUN(merges_file_quirks_follow_megatron);
    RUN(bpe_merges_every_occurrence_before_looking_again);
    RUN(fault_injection_releases_everything);
    RUN(fork_and_free_in_either_order);
    RUN(forks_encode_in_parallel_threads);
    RUN(word_cache_stays_bounded_and_exact);
    RUN(merge_algorithms_agree);
    return test_summary("gpt2_tokenizer");
}
