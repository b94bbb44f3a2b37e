/* SmilesTokenizer (MegaMolBART) and the SMILES vocabulary builder: the regex
 * alternation case by case, extra tokens, ids, decoding, vocabulary files and
 * their errors, fork and allocation failures. Agreement with Python's
 * re.findall on every molecule of the data files is
 * tests/scripts/smiles_reference.sh. */
#include "base/alloc.h"
#include "base/fileio.h"
#include "base/vec.h"
#include "data/tokenizer/smiles.h"
#include "test.h"

#include <stdarg.h>
#include <unistd.h>

static char path_buf[1024];

static const char *tmp_path(const char *name)
{
    snprintf(path_buf, sizeof path_buf, "%s/%s", test_tmpdir(), name);
    return path_buf;
}

/* Writes the tokens (NULL-ended), one a line, to a temp file. */
static const char *write_vocab(const char *name, ...)
{
    const char *path = tmp_path(name);
    FILE *f = fopen(path, "wb");
    va_list ap;
    va_start(ap, name);
    for (const char *t; (t = va_arg(ap, const char *));)
        fprintf(f, "%s\n", t);
    va_end(ap);
    fclose(f);
    return path;
}

#define SPECIALS "<PAD>", "?", "^", "&", "<MASK>", "<SEP>"

static pl_status join_token(void *ctx, const char *tok, size_t len, int32_t id)
{
    (void)id;
    pl_bytes *b = ctx;
    pl_status st = b->n ? pl_bytes_append(b, "|", 1) : PL_OK;
    return st == PL_OK ? pl_bytes_append(b, tok, len) : st;
}

/* Tokens of text[0..len) joined by '|' equal want. */
static int splits_to_n(const pl_tokenizer *t, const char *text, size_t len, const char *want)
{
    pl_bytes b = {0};
    pl_status st = pl_smiles_tokenizer_each(t, text, len, join_token, &b);
    const char *got = b.data ? b.data : "";
    int ok = st == PL_OK && strcmp(got, want) == 0;
    if (!ok)
        fprintf(stderr, "    '%.*s' -> '%s', expected '%s'\n", (int)len, text, got, want);
    pl_bytes_free(&b);
    return ok;
}
#define splits_to(t, text, want) splits_to_n(t, text, sizeof(text) - 1, want)

static pl_tokenizer *open_small(void)
{
    const char *v = write_vocab("small.vocab", SPECIALS, "C", "c", "(", ")", "1", "O", "=", "Br",
                                "Cl", "[nH]", "%12", NULL);
    pl_tokenizer *t = NULL;
    pl_status st = pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "SmilesTokenizer", .vocab_file = v});
    CHECK(st == PL_OK, "%s", pl_error_msg());
    return t;
}

TEST(specials_ids_and_eod_is_the_end_token)
{
    pl_tokenizer *t = open_small();
    if (!t)
        return;
    CHECK(t->vocab_size == 17, "vocab_size %lld", (long long)t->vocab_size);
    CHECK(t->eod == 3 && t->eod == PL_SMILES_END, "eod %d", t->eod);
    CHECK(strcmp(t->type, "SmilesTokenizer") == 0, "type");
    CHECK(pl_tokenizer_token_id(t, "<PAD>") == 0 && pl_tokenizer_token_id(t, "?") == 1 &&
              pl_tokenizer_token_id(t, "^") == 2 && pl_tokenizer_token_id(t, "&") == 3 &&
              pl_tokenizer_token_id(t, "<MASK>") == 4 && pl_tokenizer_token_id(t, "<SEP>") == 5,
          "special ids");
    pl_ids ids = {0};
    CHECK_OK(pl_tokenizer_encode(t, "Cc1(O)=Nx", 9, &ids));
    int32_t want[] = {6, 7, 10, 8, 11, 9, 12, 1, 1}; /* N and x are not in this vocab */
    CHECK(ids.n == 9 && memcmp(ids.data, want, sizeof want) == 0, "ids, n=%lld", (long long)ids.n);
    pl_ids_free(&ids);
    pl_tokenizer_free(t);
}

TEST(regex_alternatives_match_in_megamolbart_order)
{
    pl_tokenizer *t = open_small();
    if (!t)
        return;
    CHECK(splits_to(t, "BrBBrr", "Br|B|Br|r"), "Br?");
    CHECK(splits_to(t, "ClCCL", "Cl|C|C|L"), "Cl?");
    CHECK(splits_to(t, "[nH+]c1", "[nH+]|c|1"), "bracket atom");
    CHECK(splits_to(t, "[C[N]]", "[C[N]|]"), "first ] closes");
    CHECK(splits_to(t, "[]C", "[|]|C"), "[] is not an atom");
    CHECK(splits_to(t, "C[C", "C|[|C"), "unclosed [");
    CHECK(splits_to(t, "C%12C%1%", "C|%12|C|%|1|%"), "ring closure %%nn");
    CHECK(splits_to(t, "C\\C", "C|\\|C"), "one backslash: '.'");
    CHECK(splits_to(t, "C\\\\C", "C|\\\\|C"), "two backslashes: one token");
    CHECK(splits_to(t, "C\\\\\\", "C|\\\\|\\"), "three backslashes");
    CHECK(splits_to(t, "NOSPFIbcnosp()[.]=#-+/:~@?>*$", "N|O|S|P|F|I|b|c|n|o|s|p|(|)|[.]|=|#|-|+|/|:|~|@|?|>|*|$"),
          "single characters");
    CHECK(splits_to(t, "a Z\t", "a| |Z|\t"), "anything else: one character");
    CHECK(splits_to(t, "C\nC\n", "C|C"), "newlines are skipped");
    CHECK(splits_to(t, "[C\nH]", "[C\nH]"), "[^\\]] takes a newline");
    CHECK(splits_to(t, "é日🤗", "é|日|🤗"), "one code point each");
    CHECK(splits_to(t, "C\xff\xc3" "C\xe6\x97", "C|\xff|\xc3|C|\xe6|\x97"), "invalid bytes one each");
    CHECK(splits_to(t, "", ""), "empty");
    pl_tokenizer_free(t);
}

TEST(extra_tokens_match_first_in_file_order)
{
    const char *v = write_vocab("extra.vocab", SPECIALS, "LogD_change_(-0.1, 0.1]", "<UNUSED_1>",
                                "<UNUSED_10>", "Cc", "C", "c", "1", NULL);
    pl_tokenizer *t;
    CHECK_OK(pl_smiles_tokenizer_open_ex(&t, v, 10));
    if (!t)
        return;
    CHECK(splits_to(t, "LogD_change_(-0.1, 0.1]Cc1", "LogD_change_(-0.1, 0.1]|Cc|1"), "extras");
    CHECK(splits_to(t, "<UNUSED_10><UNUSED_1>", "<UNUSED_10>|<UNUSED_1>"), "literal, whole");
    CHECK(splits_to(t, "Ccc", "Cc|c"), "an extra token shadows the regex");
    pl_ids ids = {0};
    CHECK_OK(pl_tokenizer_encode(t, "Cc<UNUSED_10>", 13, &ids));
    CHECK(ids.n == 2 && ids.data[0] == 9 && ids.data[1] == 8, "extra ids");
    pl_ids_free(&ids);
    pl_tokenizer_free(t);
    /* With chem_tokens_start 6 there are no extra tokens. */
    CHECK_OK(pl_smiles_tokenizer_open_ex(&t, v, 6));
    if (t)
        CHECK(splits_to(t, "Ccc<U", "C|c|c|<|U"), "no extras");
    pl_tokenizer_free(t);
}

TEST(default_chem_start_is_272_when_the_vocab_is_that_long)
{
    pl_smiles_vocab_builder *b;
    CHECK_OK(pl_smiles_vocab_builder_init(&b));
    CHECK_OK(pl_smiles_vocab_builder_add(b, "CCO", 3));
    char p272[1024], p6[1024];
    snprintf(p272, sizeof p272, "%s", tmp_path("d272.vocab"));
    snprintf(p6, sizeof p6, "%s", tmp_path("d6.vocab"));
    CHECK_OK(pl_smiles_vocab_builder_write(b, p272, PL_SMILES_CHEM_TOKENS_START, 1, NULL));
    CHECK_OK(pl_smiles_vocab_builder_write(b, p6, 6, 1, NULL));
    pl_smiles_vocab_builder_free(b);
    pl_tokenizer *t;
    CHECK_OK(pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "SmilesTokenizer", .vocab_file = p272}));
    if (t) {
        CHECK(splits_to(t, "C<UNUSED_3>O", "C|<UNUSED_3>|O"), "placeholders are extra tokens");
        CHECK(pl_tokenizer_token_id(t, "C") == 272 && t->vocab_size == 274, "C at 272");
    }
    pl_tokenizer_free(t);
    CHECK_OK(pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "SmilesTokenizer", .vocab_file = p6}));
    if (t)
        CHECK(splits_to(t, "C<UN", "C|<|U|N"), "a short vocab has no extras");
    pl_tokenizer_free(t);
}

TEST(decode_is_megamolbart_detokenize)
{
    pl_tokenizer *t = open_small();
    if (!t)
        return;
    int32_t ids[] = {2, 6, 6, 11, 3, 6, 9};
    pl_bytes s = {0};
    CHECK_OK(pl_tokenizer_decode(t, ids, 7, &s));
    CHECK(s.data && strcmp(s.data, "CCO") == 0, "begin dropped, cut at end: '%s'", s.data);
    s.n = 0;
    int32_t mid[] = {6, 2, 4, 16};
    CHECK_OK(pl_tokenizer_decode(t, mid, 4, &s));
    CHECK(s.data && strcmp(s.data, "C^<MASK>%12") == 0, "other tokens verbatim: '%s'", s.data);
    int32_t bad[] = {6, 3, 17};
    s.n = 0;
    pl_status st = pl_tokenizer_decode(t, bad, 3, &s);
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "17"), "unknown id even after &: %s",
          pl_error_msg());
    pl_bytes_free(&s);
    /* encode then decode gives the text back when every token is known */
    pl_ids e = {0};
    CHECK_OK(pl_tokenizer_encode(t, "Cc1(O)=O", 8, &e));
    s = (pl_bytes){0};
    CHECK_OK(pl_tokenizer_decode(t, e.data, e.n, &s));
    CHECK(s.data && strcmp(s.data, "Cc1(O)=O") == 0, "round trip '%s'", s.data);
    pl_ids_free(&e);
    pl_bytes_free(&s);
    pl_tokenizer_free(t);
}

TEST(vocab_files_are_read_like_megamolbart)
{
    /* CRLF and empty lines: ids count non-empty lines only. */
    const char *p = tmp_path("crlf.vocab");
    FILE *f = fopen(p, "wb");
    fputs("<PAD>\r\n?\r\n\r\n^\r&\n<MASK>\n\n<SEP>\nC \n", f);
    fclose(f);
    pl_tokenizer *t;
    CHECK_OK(pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "SmilesTokenizer", .vocab_file = p}));
    if (!t)
        return;
    CHECK(t->vocab_size == 7 && pl_tokenizer_token_id(t, "^") == 2 &&
              pl_tokenizer_token_id(t, "C ") == 6,
          "ids over non-empty lines, spaces kept");
    pl_tokenizer_free(t);
}

TEST(vocab_errors_name_the_file_and_line)
{
    pl_tokenizer *t;
    pl_status st = pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "SmilesTokenizer", .vocab_file = "/nonexistent/x.vocab"});
    CHECK(st == PL_ERR_IO && !t && strstr(pl_error_msg(), "/nonexistent/x.vocab"), "%s", pl_error_msg());
    st = pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "SmilesTokenizer", .vocab_file = write_vocab("few.vocab", "<PAD>", "?", NULL)});
    CHECK(st == PL_ERR_FORMAT && strstr(pl_error_msg(), "2 tokens"), "%s", pl_error_msg());
    st = pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "SmilesTokenizer", .vocab_file = write_vocab("dup.vocab", SPECIALS, "C", "?", NULL)});
    CHECK(st == PL_ERR_FORMAT && strstr(pl_error_msg(), "dup.vocab:8: duplicate token '?' (first on line 2)"),
          "%s", pl_error_msg());
    st = pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "SmilesTokenizer", .vocab_file = write_vocab("utf.vocab", SPECIALS, "\xc3", NULL)});
    CHECK(st == PL_ERR_FORMAT && strstr(pl_error_msg(), "utf.vocab:7: invalid UTF-8"), "%s", pl_error_msg());
    const char *meta = write_vocab("meta.vocab", SPECIALS, "<ok>", "C+", "C", NULL);
    st = pl_smiles_tokenizer_open_ex(&t, meta, 8);
    CHECK(st == PL_ERR_UNSUPPORTED && strstr(pl_error_msg(), "meta.vocab:8: extra token 'C+'"), "%s",
          pl_error_msg());
    st = pl_smiles_tokenizer_open_ex(&t, meta, 10);
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "chem_tokens_start_idx 10"), "%s", pl_error_msg());
}

/* Reads a whole file into a static buffer. */
static const char *slurp(const char *path)
{
    static char buf[8192];
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    return buf;
}

TEST(builder_orders_by_count_then_bytes_and_skips_specials)
{
    pl_smiles_vocab_builder *b;
    CHECK_OK(pl_smiles_vocab_builder_init(&b));
    if (!b)
        return;
    const char *corpus[] = {"c1ccccc1", "CCO", "C?[nH]", "OC(=O)C&", "^"};
    for (size_t i = 0; i < sizeof corpus / sizeof *corpus; i++)
        CHECK_OK(pl_smiles_vocab_builder_add(b, corpus[i], strlen(corpus[i])));
    CHECK(pl_smiles_vocab_builder_distinct(b) == 11, "distinct %lld",
          (long long)pl_smiles_vocab_builder_distinct(b));
    char p[1024];
    snprintf(p, sizeof p, "%s", tmp_path("built.vocab"));
    int64_t n = 0;
    CHECK_OK(pl_smiles_vocab_builder_write(b, p, 8, 1, &n));
    /* c:6 C:5 O:3 1:2, then the ones seen once in byte order; ? ^ & keep ids 1-3. */
    const char *want = "<PAD>\n?\n^\n&\n<MASK>\n<SEP>\n<UNUSED_0>\n<UNUSED_1>\n"
                       "c\nC\nO\n1\n(\n)\n=\n[nH]\n";
    CHECK(strcmp(slurp(p), want) == 0, "got:\n%s", slurp(p));
    CHECK(n == 16, "n %lld", (long long)n);
    CHECK_OK(pl_smiles_vocab_builder_write(b, p, 6, 2, &n));
    CHECK(strcmp(slurp(p), "<PAD>\n?\n^\n&\n<MASK>\n<SEP>\nc\nC\nO\n1\n") == 0, "min_count 2:\n%s",
          slurp(p));
    pl_smiles_vocab_builder_free(b);
}

TEST(builder_refuses_what_a_vocab_file_cannot_hold)
{
    pl_smiles_vocab_builder *b;
    CHECK_OK(pl_smiles_vocab_builder_init(&b));
    if (!b)
        return;
    pl_status st = pl_smiles_vocab_builder_add(b, "CC\xff", 3);
    CHECK(st == PL_ERR_FORMAT && strstr(pl_error_msg(), "UTF-8"), "%s", pl_error_msg());
    st = pl_smiles_vocab_builder_add(b, "N\rC", 3);
    CHECK(st == PL_ERR_FORMAT && strstr(pl_error_msg(), "line break"), "%s", pl_error_msg());
    st = pl_smiles_vocab_builder_add(b, "[C\nH]", 5);
    CHECK(st == PL_ERR_FORMAT, "newline inside brackets");
    CHECK_OK(pl_smiles_vocab_builder_add(b, "C\nC", 3)); /* a bare newline is skipped */
    char p[1024];
    snprintf(p, sizeof p, "%s", tmp_path("refused.vocab"));
    CHECK_OK(pl_smiles_vocab_builder_write(b, p, 6, 1, NULL));
    /* The refused strings counted nothing: N (before the \r) is not there. */
    CHECK(strcmp(slurp(p), "<PAD>\n?\n^\n&\n<MASK>\n<SEP>\nC\n") == 0, "got:\n%s", slurp(p));
    st = pl_smiles_vocab_builder_write(b, "/nonexistent/dir/v.vocab", 6, 1, NULL);
    CHECK(st == PL_ERR_IO && strstr(pl_error_msg(), "/nonexistent/dir/v.vocab"), "%s", pl_error_msg());
    st = pl_smiles_vocab_builder_write(b, p, 5, 1, NULL);
    CHECK(st == PL_ERR_ARG, "chem start 5");
    st = pl_smiles_vocab_builder_write(b, p, 6, 0, NULL);
    CHECK(st == PL_ERR_ARG, "min count 0");
    pl_smiles_vocab_builder_free(b);
}

static pl_status cat_token(void *ctx, const char *tok, size_t len, int32_t id)
{
    (void)id;
    if (len == 0)
        return pl_errorf(PL_ERR_INTERNAL, "empty token");
    return pl_bytes_append(ctx, tok, len);
}

TEST(tokens_concatenate_to_the_input_without_newlines)
{
    pl_tokenizer *t = open_small();
    if (!t)
        return;
    static const char alphabet[] = "CcBrl[]%12\\\n\xc3\xa9\xff()=#";
    unsigned seed = 12345;
    for (int iter = 0; iter < 2000; iter++) {
        char text[64], want[64];
        size_t n = (size_t)(iter % 60), nw = 0;
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            text[i] = (seed >> 16) & 1 ? alphabet[(seed >> 17) % (sizeof alphabet - 1)]
                                       : (char)(seed >> 20);
            if (text[i] != '\n')
                want[nw++] = text[i];
        }
        /* Newlines are dropped, except inside a bracket atom ([^\]] takes them). */
        pl_bytes b = {0};
        CHECK_OK(pl_smiles_tokenizer_each(t, text, n, cat_token, &b));
        size_t k = 0;
        for (size_t i = 0; i < b.n; i++)
            if (b.data[i] != '\n')
                b.data[k++] = b.data[i];
        CHECK(k == nw && (nw == 0 || memcmp(b.data, want, nw) == 0), "iteration %d", iter);
        pl_bytes_free(&b);
    }
    pl_tokenizer_free(t);
}

TEST(fork_shares_the_vocabulary_and_outlives_its_parent)
{
    int64_t live0 = pl_alloc_live();
    pl_tokenizer *t = open_small(), *f = NULL;
    if (!t)
        return;
    int64_t live1 = pl_alloc_live();
    CHECK_OK(pl_tokenizer_fork(t, &f));
    CHECK(pl_alloc_live() - live1 == 1, "fork allocated %lld blocks",
          (long long)(pl_alloc_live() - live1));
    pl_tokenizer_free(t);
    if (f) {
        CHECK(splits_to(f, "BrC", "Br|C"), "fork works after the parent is freed");
        CHECK(f->vocab_size == 17 && f->eod == 3, "fork fields");
    }
    pl_tokenizer_free(f);
    CHECK(pl_alloc_live() == live0, "leaked %lld blocks", (long long)(pl_alloc_live() - live0));
}

TEST(allocation_failures_return_nomem_and_leak_nothing)
{
    char v[1024], out[1024];
    snprintf(v, sizeof v, "%s", write_vocab("fail.vocab", SPECIALS, "<x>", "LogD_(0, 1]", "C", "c",
                                            "1", "[nH]", NULL));
    snprintf(out, sizeof out, "%s", tmp_path("fail_out.vocab"));
    const char *text = "c1cc[nH]c1LogD_(0, 1]<x>BrCl%12\\é";
    int64_t live0 = pl_alloc_live();
    int n;
    for (n = 0; n < 10000; n++) {
        pl_tokenizer *t = NULL, *f = NULL;
        pl_smiles_vocab_builder *b = NULL;
        pl_ids ids = {0};
        pl_bytes s = {0};
        pl_alloc_fail_after(n);
        pl_status st = pl_smiles_tokenizer_open_ex(&t, v, 8);
        if (st == PL_OK)
            st = pl_tokenizer_encode(t, text, strlen(text), &ids);
        if (st == PL_OK)
            st = pl_tokenizer_fork(t, &f);
        if (st == PL_OK)
            st = pl_tokenizer_decode(f, ids.data, ids.n, &s);
        if (st == PL_OK)
            st = pl_smiles_vocab_builder_init(&b);
        for (int k = 0; k < 40 && st == PL_OK; k++) /* enough tokens to grow every table */
            st = pl_smiles_vocab_builder_add(b, k % 2 ? text : "C[13CH3][C@@H]", strlen(k % 2 ? text : "C[13CH3][C@@H]"));
        if (st == PL_OK)
            st = pl_smiles_vocab_builder_write(b, out, 272, 1, NULL);
        pl_alloc_fail_after(-1);
        pl_smiles_vocab_builder_free(b);
        pl_tokenizer_free(f);
        pl_tokenizer_free(t);
        pl_ids_free(&ids);
        pl_bytes_free(&s);
        CHECK(pl_alloc_live() == live0, "n=%d: %lld blocks leaked", n,
              (long long)(pl_alloc_live() - live0));
        if (st == PL_OK)
            break;
        CHECK(st == PL_ERR_NOMEM, "n=%d: %s: %s", n, pl_status_str(st), pl_error_msg());
        if (st != PL_ERR_NOMEM)
            break;
    }
    CHECK(n > 10 && n < 10000, "succeeded after %d allocations", n);
}

int main(void)
{
    RUN(specials_ids_and_eod_is_the_end_token);
    RUN(regex_alternatives_match_in_megamolbart_order);
    RUN(extra_tokens_match_first_in_file_order);
    RUN(default_chem_start_is_272_when_the_vocab_is_that_long);
    RUN(decode_is_megamolbart_detokenize);
    RUN(vocab_files_are_read_like_megamolbart);
    RUN(vocab_errors_name_the_file_and_line);
    RUN(builder_orders_by_count_then_bytes_and_skips_specials);
    RUN(builder_refuses_what_a_vocab_file_cannot_hold);
    RUN(tokens_concatenate_to_the_input_without_newlines);
    RUN(fork_shares_the_vocabulary_and_outlives_its_parent);
    RUN(allocation_failures_return_nomem_and_leak_nothing);
    return test_summary("smiles_tokenizer");
}
