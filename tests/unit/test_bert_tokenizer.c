/* BERT WordPiece (BertWordPieceLowerCase / BertWordPieceCase): the rules of
 * Megatron's bert_tokenization.py on small vocabularies written here, the
 * special tokens Megatron appends, decoding, errors, fork and allocation
 * failures. Id-for-id agreement with an outside implementation on thousands
 * of sentences is tests/scripts/bert_reference.sh. */
#include "base/alloc.h"
#include "base/vec.h"
#include "data/tokenizer/bert_wordpiece.h"
#include "test.h"

#include <stdarg.h>
#include <unistd.h>

static char real_vocab[1024];

static const char *vocab_path(void)
{
    snprintf(real_vocab, sizeof real_vocab, "%s/bert/vocab.txt", test_datadir());
    return real_vocab;
}

/* Writes a vocabulary (tokens joined by sep) under the test's temp dir. */
static const char *write_vocab(const char *name, const char *sep, ...)
{
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir(), name);
    FILE *f = fopen(path, "wb");
    va_list ap;
    va_start(ap, sep);
    for (const char *t; (t = va_arg(ap, const char *));)
        fprintf(f, "%s%s", t, sep);
    va_end(ap);
    fclose(f);
    return path;
}

#define SPECIALS "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"

/* Encodes text and compares with the ids of the tokens listed (NULL-ended). */
static int encodes_to(pl_tokenizer *t, const char *text, ...)
{
    pl_ids ids = {0}, want = {0};
    va_list ap;
    va_start(ap, text);
    for (const char *tok; (tok = va_arg(ap, const char *));)
        pl_ids_push(&want, pl_tokenizer_token_id(t, tok));
    va_end(ap);
    pl_status st = pl_tokenizer_encode(t, text, strlen(text), &ids);
    int ok = st == PL_OK && ids.n == want.n &&
             (ids.n == 0 || memcmp(ids.data, want.data, (size_t)ids.n * sizeof *ids.data) == 0);
    if (!ok) {
        fprintf(stderr, "    '%s' ->", text);
        for (int64_t i = 0; i < ids.n; i++)
            fprintf(stderr, " %d", ids.data[i]);
        fprintf(stderr, ", expected");
        for (int64_t i = 0; i < want.n; i++)
            fprintf(stderr, " %d", want.data[i]);
        fprintf(stderr, " (%s)\n", st == PL_OK ? "ok" : pl_error_msg());
    }
    pl_ids_free(&ids);
    pl_ids_free(&want);
    return ok;
}

/* a[0..na) and the string b encode to the same ids. */
static int same_ids_n(pl_tokenizer *t, const char *a, size_t na, const char *b)
{
    pl_ids x = {0}, y = {0};
    int ok = pl_tokenizer_encode(t, a, na, &x) == PL_OK &&
             pl_tokenizer_encode(t, b, strlen(b), &y) == PL_OK && x.n == y.n && x.n > 0 &&
             memcmp(x.data, y.data, (size_t)x.n * sizeof *x.data) == 0;
    pl_ids_free(&x);
    pl_ids_free(&y);
    return ok;
}
#define same_ids(t, a, b) same_ids_n(t, a, sizeof(a) - 1, b)

TEST(megatron_appends_bos_eos_and_eod_is_eos)
{
    pl_tokenizer *t;
    CHECK_OK(pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "BertWordPieceLowerCase", .vocab_file = vocab_path()}));
    if (!t)
        return;
    /* bert-base-uncased has 30,522 lines; Megatron adds [BOS] and [EOS]. */
    CHECK(t->vocab_size == 30524, "vocab_size %lld", (long long)t->vocab_size);
    CHECK(t->eod == 30523, "eod %d", t->eod);
    CHECK(strcmp(t->type, "BertWordPieceLowerCase") == 0, "type %s", t->type);
    static const struct { const char *tok; int32_t id; } known[] = {
        {"[PAD]", 0}, {"[UNK]", 100}, {"[CLS]", 101}, {"[SEP]", 102}, {"[MASK]", 103},
        {"[BOS]", 30522}, {"[EOS]", 30523}, {"the", 1996}, {"hello", 7592}, {"world", 2088},
    };
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        CHECK(pl_tokenizer_token_id(t, known[i].tok) == known[i].id, "%s -> %d", known[i].tok,
              pl_tokenizer_token_id(t, known[i].tok));
    CHECK(pl_tokenizer_token_id(t, "<extra_id_0>") == -1, "no extra ids by default");
    pl_tokenizer_free(t);
}

TEST(vocab_extra_ids_follow_bos_and_eos)
{
    pl_tokenizer *t;
    CHECK_OK(pl_bert_tokenizer_open_ex(&t, vocab_path(), 0, 3));
    if (!t)
        return;
    CHECK(t->vocab_size == 30527, "vocab_size %lld", (long long)t->vocab_size);
    CHECK(strcmp(t->type, "BertWordPieceCase") == 0, "type %s", t->type);
    CHECK(pl_tokenizer_token_id(t, "<extra_id_0>") == 30524, "extra 0");
    CHECK(pl_tokenizer_token_id(t, "<extra_id_2>") == 30526, "extra 2");
    /* What the T5 dataset reads: bos, eos and additional_special_tokens_ids. */
    pl_bert_specials sp;
    CHECK_OK(pl_bert_tokenizer_specials(t, &sp));
    CHECK(sp.bos == 30522 && sp.eos == 30523, "bos %d eos %d", sp.bos, sp.eos);
    CHECK(sp.n_extra == 3, "n_extra %lld", (long long)sp.n_extra);
    for (int64_t i = 0; i < sp.n_extra && i < 3; i++)
        CHECK(sp.extra[i] == 30524 + i, "extra[%lld] = %d", (long long)i, sp.extra[i]);
    pl_tokenizer_free(t);
}

TEST(readme_vector_and_special_tokens_in_text_are_plain_text)
{
    pl_tokenizer *t;
    CHECK_OK(pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "BertWordPieceLowerCase", .vocab_file = vocab_path()}));
    if (!t)
        return;
    pl_ids ids = {0};
    CHECK_OK(pl_tokenizer_encode(t, "i like strawberries", 19, &ids));
    int32_t want[] = {1045, 2066, 13137, 20968};
    CHECK(ids.n == 4 && memcmp(ids.data, want, sizeof want) == 0, "n=%lld", (long long)ids.n);
    /* FullTokenizer has no never_split: "[CLS]" is punctuation and letters. */
    CHECK(encodes_to(t, "[CLS]", "[", "cl", "##s", "]", NULL), "[CLS] as text");
    pl_ids_free(&ids);
    pl_tokenizer_free(t);
}

TEST(wordpiece_is_greedy_longest_match_first)
{
    const char *v = write_vocab("wp.txt", "\n", SPECIALS, "un", "##aff", "##able", "u", "##n",
                                "##a", "##ff", "unaff", "a", "##b", NULL);
    pl_tokenizer *t;
    CHECK_OK(pl_bert_tokenizer_open(&t, v, 1));
    if (!t)
        return;
    CHECK(encodes_to(t, "unaffable", "unaff", "##able", NULL), "longest first piece wins");
    CHECK(encodes_to(t, "unable", "un", "##able", NULL), "continuations");
    /* One piece that matches nothing makes the whole word one [UNK]. */
    CHECK(encodes_to(t, "unaffx", "[UNK]", NULL), "unmatched tail");
    CHECK(encodes_to(t, "un unaffx ab", "un", "[UNK]", "a", "##b", NULL), "per word");
    CHECK(encodes_to(t, "", NULL), "empty text");
    CHECK(encodes_to(t, " \t\r\n ", NULL), "whitespace only");
    pl_tokenizer_free(t);
}

TEST(words_over_200_characters_become_unk)
{
    const char *v = write_vocab("long.txt", "\n", SPECIALS, "a", "##a", "é", "##é", NULL);
    pl_tokenizer *t;
    CHECK_OK(pl_bert_tokenizer_open(&t, v, 0));
    if (!t)
        return;
    char text[3 * PL_BERT_MAX_WORD_CHARS + 8];
    pl_ids ids = {0};
    memset(text, 'a', PL_BERT_MAX_WORD_CHARS);
    CHECK_OK(pl_tokenizer_encode(t, text, PL_BERT_MAX_WORD_CHARS, &ids));
    CHECK(ids.n == PL_BERT_MAX_WORD_CHARS, "200 chars: %lld pieces", (long long)ids.n);
    ids.n = 0;
    memset(text, 'a', PL_BERT_MAX_WORD_CHARS + 1);
    CHECK_OK(pl_tokenizer_encode(t, text, PL_BERT_MAX_WORD_CHARS + 1, &ids));
    CHECK(ids.n == 1 && ids.data[0] == pl_tokenizer_token_id(t, "[UNK]"), "201 chars -> [UNK]");
    /* The limit counts code points, not bytes: 200 two-byte characters split. */
    size_t n = 0;
    for (int i = 0; i < PL_BERT_MAX_WORD_CHARS; i++)
        n += (size_t)snprintf(text + n, sizeof text - n, "é");
    ids.n = 0;
    CHECK_OK(pl_tokenizer_encode(t, text, n, &ids));
    CHECK(ids.n == PL_BERT_MAX_WORD_CHARS, "200 x é: %lld pieces", (long long)ids.n);
    pl_ids_free(&ids);
    pl_tokenizer_free(t);
}

TEST(lower_case_folds_case_and_strips_accents_cased_keeps_both)
{
    const char *v = write_vocab("case.txt", "\n", SPECIALS, "hello", "Héllo", "cafe", "i",
                                "οδος", "σας", "σ", "ας", "ς", "##ς", NULL);
    pl_tokenizer *lo, *ca;
    CHECK_OK(pl_bert_tokenizer_open(&lo, v, 1));
    CHECK_OK(pl_bert_tokenizer_open(&ca, v, 0));
    if (!lo || !ca)
        return;
    CHECK(encodes_to(lo, "HÉLLO Héllo", "hello", "hello", NULL), "lower + strip");
    CHECK(encodes_to(lo, "Cafe\xcc\x81 CAFÉ", "cafe", "cafe", NULL), "combining mark dropped");
    CHECK(encodes_to(ca, "Héllo HÉLLO hello", "Héllo", "[UNK]", "hello", NULL), "cased");
    /* Python's str.lower(): a word-final capital sigma becomes ς. */
    CHECK(encodes_to(lo, "ΟΔΟΣ ΣΑΣ Σ", "οδος", "σας", "σ", NULL), "final sigma");
    /* U+0130 lowers to i + U+0307, whose mark is then stripped. */
    CHECK(encodes_to(lo, "\xc4\xb0", "i", NULL), "dotted capital I");
    pl_tokenizer_free(lo);
    pl_tokenizer_free(ca);
}

TEST(clean_text_cjk_and_punctuation_follow_basic_tokenizer)
{
    pl_tokenizer *t;
    CHECK_OK(pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "BertWordPieceLowerCase", .vocab_file = vocab_path()}));
    if (!t)
        return;
    CHECK(encodes_to(t, "he\x07llo wo\xe2\x80\x8brld", "hello", "world", NULL), "Cc and Cf dropped");
    CHECK(encodes_to(t, "hello\tworld\u3000the\xc2\xa0" "end", "hello", "world", "the", "end", NULL),
          "whitespace");
    CHECK(same_ids(t, "hello\xef\xbf\xbd" "world\x00s", "helloworlds"), "U+FFFD and NUL dropped");
    CHECK(encodes_to(t, "中文", "中", "文", NULL), "CJK characters are words");
    CHECK(encodes_to(t, "hello,world!!", "hello", ",", "world", "!", "!", NULL), "punctuation");
    CHECK(encodes_to(t, "a$b^c`d", "a", "$", "b", "^", "c", "`", "d", NULL), "ASCII symbols split");
    /* Invalid UTF-8 bytes are dropped, as decode('utf-8', 'ignore'). */
    CHECK(same_ids(t, "hel\xffl\xc3o", "hello"), "invalid bytes dropped");
    /* Private-use code points are neither control nor whitespace in Megatron
     * (Hugging Face's tokenizers deletes them): the word is kept whole. */
    CHECK(encodes_to(t, "hello\xee\x80\x80", "[UNK]", NULL), "private use kept");
    pl_tokenizer_free(t);
}

TEST(decode_joins_pieces_as_megatron_detokenize)
{
    pl_tokenizer *t;
    CHECK_OK(pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "BertWordPieceLowerCase", .vocab_file = vocab_path()}));
    if (!t)
        return;
    static const struct { const char *in, *out; } cases[] = {
        {"i like strawberries .", "i like strawberries."},
        {"Don't you, or can't you?", "don't you, or can't you?"},
        {"hello [world]", "hello [ world ]"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        pl_ids ids = {0};
        pl_bytes s = {0};
        CHECK_OK(pl_tokenizer_encode(t, cases[i].in, strlen(cases[i].in), &ids));
        CHECK_OK(pl_tokenizer_decode(t, ids.data, ids.n, &s));
        CHECK(s.n == strlen(cases[i].out) && (s.n == 0 || memcmp(s.data, cases[i].out, s.n) == 0),
              "'%s' -> '%.*s'", cases[i].in, (int)s.n, s.data ? s.data : "");
        pl_ids_free(&ids);
        pl_bytes_free(&s);
    }
    int32_t special[] = {101, 7592, 102, 30523};
    pl_bytes s = {0};
    CHECK_OK(pl_tokenizer_decode(t, special, 4, &s));
    CHECK(s.data && strcmp(s.data, "[CLS] hello [SEP] [EOS]") == 0, "specials: %s", s.data);
    int32_t bad[] = {7592, 30524};
    s.n = 0;
    pl_status st = pl_tokenizer_decode(t, bad, 2, &s);
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "30524"), "unknown id: %s", pl_error_msg());
    pl_bytes_free(&s);
    pl_tokenizer_free(t);
}

TEST(vocab_lines_are_read_like_python_readline_and_strip)
{
    /* \r\n, \r and \n all end a line; surrounding whitespace is stripped. */
    const char *path = write_vocab("crlf.txt", "\r\n", "[PAD]", " [UNK] ", "[CLS]\r[SEP]",
                                   "[MASK]\t", "x", NULL);
    pl_tokenizer *t;
    CHECK_OK(pl_bert_tokenizer_open(&t, path, 1));
    if (!t)
        return;
    CHECK(pl_tokenizer_token_id(t, "[UNK]") == 1, "stripped");
    CHECK(pl_tokenizer_token_id(t, "[SEP]") == 3, "lone CR ends a line");
    CHECK(pl_tokenizer_token_id(t, "x") == 5, "x");
    CHECK(t->vocab_size == 8 && t->eod == 7, "size %lld eod %d", (long long)t->vocab_size, t->eod);
    pl_tokenizer_free(t);
}

TEST(vocab_errors_name_the_file_and_line)
{
    pl_tokenizer *t;
    pl_status st = pl_bert_tokenizer_open(&t, "/nonexistent/vocab.txt", 1);
    CHECK(st == PL_ERR_IO && t == NULL && strstr(pl_error_msg(), "/nonexistent/vocab.txt"), "%s",
          pl_error_msg());
    const char *dup = write_vocab("dup.txt", "\n", SPECIALS, "a", "[CLS]", NULL);
    st = pl_bert_tokenizer_open(&t, dup, 1);
    CHECK(st == PL_ERR_FORMAT && strstr(pl_error_msg(), "dup.txt:7: duplicate token '[CLS]'"),
          "%s", pl_error_msg());
    const char *nocls = write_vocab("nocls.txt", "\n", "[PAD]", "[UNK]", "[SEP]", "[MASK]", NULL);
    st = pl_bert_tokenizer_open(&t, nocls, 1);
    CHECK(st == PL_ERR_FORMAT && strstr(pl_error_msg(), "[CLS]"), "%s", pl_error_msg());
    const char *bad = write_vocab("bad.txt", "\n", SPECIALS, "ok", "b\xff", NULL);
    st = pl_bert_tokenizer_open(&t, bad, 1);
    CHECK(st == PL_ERR_FORMAT && strstr(pl_error_msg(), "bad.txt:7: invalid UTF-8"), "%s",
          pl_error_msg());
}

TEST(fork_shares_the_vocabulary_and_outlives_its_parent)
{
    int64_t live0 = pl_alloc_live();
    pl_tokenizer *t, *f;
    CHECK_OK(pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "BertWordPieceLowerCase", .vocab_file = vocab_path()}));
    if (!t)
        return;
    int64_t live1 = pl_alloc_live();
    CHECK_OK(pl_tokenizer_fork(t, &f));
    /* A fork is one handle block: the 30k-token tables are not copied. */
    CHECK(pl_alloc_live() - live1 == 1, "fork allocated %lld blocks",
          (long long)(pl_alloc_live() - live1));
    pl_tokenizer_free(t);
    CHECK(encodes_to(f, "i like strawberries", "i", "like", "straw", "##berries", NULL),
          "fork encodes after the parent is freed");
    CHECK(f->vocab_size == 30524 && f->eod == 30523, "fork fields");
    pl_tokenizer_free(f);
    CHECK(pl_alloc_live() == live0, "leaked %lld blocks", (long long)(pl_alloc_live() - live0));
}

TEST(allocation_failures_return_nomem_and_leak_nothing)
{
    const char *text = "Héllo, Wörld! ΟΔΟΣ 中文 unaffable strawberries \xc4\xb0 don't";
    int64_t live0 = pl_alloc_live();
    int n;
    for (n = 0; n < 10000; n++) {
        pl_tokenizer *t = NULL, *f = NULL;
        pl_ids ids = {0};
        pl_bytes s = {0};
        pl_alloc_fail_after(n);
        pl_status st = pl_bert_tokenizer_open_ex(&t, vocab_path(), 1, 2);
        if (st == PL_OK)
            st = pl_tokenizer_encode(t, text, strlen(text), &ids);
        if (st == PL_OK)
            st = pl_tokenizer_fork(t, &f);
        if (st == PL_OK)
            st = pl_tokenizer_encode(f, text, strlen(text), &ids);
        if (st == PL_OK)
            st = pl_tokenizer_decode(f, ids.data, ids.n, &s);
        pl_alloc_fail_after(-1);
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
    RUN(megatron_appends_bos_eos_and_eod_is_eos);
    RUN(vocab_extra_ids_follow_bos_and_eos);
    RUN(readme_vector_and_special_tokens_in_text_are_plain_text);
    RUN(wordpiece_is_greedy_longest_match_first);
    RUN(words_over_200_characters_become_unk);
    RUN(lower_case_folds_case_and_strips_accents_cased_keeps_both);
    RUN(clean_text_cjk_and_punctuation_follow_basic_tokenizer);
    RUN(decode_joins_pieces_as_megatron_detokenize);
    RUN(vocab_lines_are_read_like_python_readline_and_strip);
    RUN(vocab_errors_name_the_file_and_line);
    RUN(fork_shares_the_vocabulary_and_outlives_its_parent);
    RUN(allocation_failures_return_nomem_and_leak_nothing);
    return test_summary("bert_tokenizer");
}
