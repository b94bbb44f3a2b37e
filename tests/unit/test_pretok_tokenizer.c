/* PretokenizedTokenizer: whitespace-separated tokens through a vocabulary JSON,
 * as [vocab.get(t, vocab["<unk>"]) for t in text.split()] (the Python oracle
 * over a whole corpus is tests/scripts/pretokenized.sh); vocabulary errors. */
#include "base/alloc.h"
#include "data/tokenizer/tokenizer.h"
#include "test.h"

static const char *write_tmp(const char *name, const char *text)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir(), name);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

static const char vocab[] = "{\"<unk>\": 3, \"the\": 0, \"C\": 1, \"c1ccccc1\": 2, "
                            "\"<|endoftext|>\": 4, \"caf\\u00e9\": 5}";

static int encode_is(pl_tokenizer *t, const char *text, const int32_t *want, int64_t n)
{
    pl_ids ids = {0};
    pl_status st = pl_tokenizer_encode(t, text, strlen(text), &ids);
    int ok = st == PL_OK && ids.n == n && (n == 0 || memcmp(ids.data, want, (size_t)n * 4) == 0);
    if (!ok) {
        fprintf(stderr, "  '%s' ->", text);
        for (int64_t i = 0; i < ids.n; i++)
            fprintf(stderr, " %d", ids.data[i]);
        fprintf(stderr, "\n");
    }
    pl_ids_free(&ids);
    return ok;
}

TEST(tokens_map_through_the_vocabulary_unknown_to_unk)
{
    pl_tokenizer *t = NULL;
    const char *path = write_tmp("pretok_vocab.json", vocab);
    CHECK_OK(pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "PretokenizedTokenizer",
                                                        .vocab_file = path}));
    if (!t)
        return;
    CHECK(t->vocab_size == 6 && t->eod == 4, "vocab %lld eod %d", (long long)t->vocab_size, t->eod);
    CHECK(encode_is(t, "the C c1ccccc1", (int32_t[]){0, 1, 2}, 3), "plain");
    CHECK(encode_is(t, "  the\t\tC\r\nzzz  ", (int32_t[]){0, 1, 3}, 3), "runs of blanks, unknown");
    CHECK(encode_is(t, "caf\xc3\xa9 the", (int32_t[]){5, 0}, 2), "UTF-8 token");
    /* Python's str.split() also splits at U+00A0, U+2003, U+3000 and \x1f */
    CHECK(encode_is(t, "the\xc2\xa0" "C\xe2\x80\x83the\xe3\x80\x80" "C\x1f" "the",
                    (int32_t[]){0, 1, 0, 1, 0}, 5), "Unicode whitespace");
    /* ...but not at U+200B (zero width space) or U+180E */
    CHECK(encode_is(t, "the\xe2\x80\x8b" "C", (int32_t[]){3}, 1), "U+200B joins");
    CHECK(encode_is(t, "", NULL, 0) && encode_is(t, " \n\t", NULL, 0), "empty");
    CHECK(encode_is(t, "<|endoftext|> <unk>", (int32_t[]){4, 3}, 2), "special tokens by spelling");
    CHECK(encode_is(t, "The", (int32_t[]){3}, 1), "case-sensitive");
    pl_bytes b = {0};
    CHECK_OK(pl_tokenizer_decode(t, (int32_t[]){0, 1, 5, 4}, 4, &b));
    CHECK(b.data && strcmp(b.data, "the C caf\xc3\xa9 <|endoftext|>") == 0, "decode '%s'",
          b.data ? b.data : "");
    pl_bytes_free(&b);
    CHECK(pl_tokenizer_decode(t, (int32_t[]){6}, 1, &b) == PL_ERR_ARG &&
              strstr(pl_error_msg(), "unknown id 6"), "%s", pl_error_msg());
    pl_bytes_free(&b);
    CHECK(pl_tokenizer_token_id(t, "c1ccccc1") == 2 && pl_tokenizer_token_id(t, "x") == -1, "ids");
    pl_tokenizer *f = NULL;
    CHECK_OK(pl_tokenizer_fork(t, &f));
    pl_tokenizer_free(t);
    CHECK(f && encode_is(f, "C the", (int32_t[]){1, 0}, 2), "a fork outlives its parent");
    pl_tokenizer_free(f);
}

TEST(bad_vocabularies_are_errors_naming_file_and_token)
{
    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"{\"<unk>\": 0, \"a\": 1}", "no <|endoftext|> token"},
        {"{\"<|endoftext|>\": 0, \"a\": 1}", "no <unk> token"},
        {"{\"<unk>\": 0, \"<|endoftext|>\": 0}", "both have id 0"},
        {"{\"<unk>\": 0, \"<|endoftext|>\": 2}", "\"<|endoftext|>\": id must be an integer in 0..1"},
        {"{\"<unk>\": 0, \"<|endoftext|>\": \"1\"}", "id must be an integer"},
        {"{\"<unk>\": 0, \"<|endoftext|>\": 1, \"<unk>\": 2}", "\"<unk>\" appears twice"},
        {"[\"<unk>\"]", "expected a JSON object of token -> id"},
        {"{\"<unk>\": 0,", "malformed JSON"},
        {"{}", "got 0 entries"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *path = write_tmp("pretok_bad.json", bad[i].text);
        pl_tokenizer *t = NULL;
        pl_status st = pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "PretokenizedTokenizer",
                                                                  .vocab_file = path});
        CHECK(st == PL_ERR_FORMAT && strstr(pl_error_msg(), bad[i].msg) &&
                  strstr(pl_error_msg(), "pretok_bad.json"),
              "case %zu: %s '%s'", i, pl_status_str(st), pl_error_msg());
        pl_tokenizer_free(t);
    }
    pl_tokenizer *t = NULL;
    CHECK(pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "PretokenizedTokenizer"}) == PL_ERR_ARG &&
              strstr(pl_error_msg(), "--vocab-file is required"), "%s", pl_error_msg());
}

TEST(allocation_faults_come_back_cleanly)
{
    const char *path = write_tmp("pretok_vocab.json", vocab);
    int64_t live = pl_alloc_live();
    int failed = 0;
    for (int64_t k = 0; k < 200; k++) {
        pl_alloc_fail_after(k);
        pl_tokenizer *t = NULL;
        pl_status st = pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "PretokenizedTokenizer",
                                                                  .vocab_file = path});
        pl_ids ids = {0};
        if (st == PL_OK)
            st = pl_tokenizer_encode(t, "the C x", 7, &ids);
        pl_alloc_fail_after(-1);
        pl_ids_free(&ids);
        pl_tokenizer_free(t);
        if (st == PL_OK)
            break;
        failed++;
        CHECK(st == PL_ERR_NOMEM, "fault %lld: %s", (long long)k, pl_error_msg());
    }
    CHECK(failed > 3, "only %d allocation points", failed);
    CHECK(pl_alloc_live() == live, "leaked %lld", (long long)(pl_alloc_live() - live));
}

int main(void)
{
    RUN(tokens_map_through_the_vocabulary_unknown_to_unk);
    RUN(bad_vocabularies_are_errors_naming_file_and_token);
    RUN(allocation_faults_come_back_cleanly);
    return test_summary("pretok_tokenizer");
}
