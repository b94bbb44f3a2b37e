/* HuggingFaceTokenizer: the Split regexes written out by hand, and character classes.
 *
 * tokenizers compiles a Split pattern with Oniguruma. plait knows two patterns and
 * matches them without a regex engine, alternative by alternative as Oniguruma's
 * backtracking does (the loader refuses any other pattern):
 *
 *   HF_RE_LLAMA3 (Llama 3's tokenizer.json)
 *     (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *      ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *   HF_RE_GPT2 (ByteLevel's use_regex, GPT-2's pattern): gpt2_pretok.c with \s =
 *     Unicode White_Space.
 *
 * Classes: \p{L} = Lu Ll Lt Lm Lo, \p{N} = Nd Nl No (utf8proc's tables), \s =
 * Unicode White_Space (TAB..CR, space, U+0085, U+00A0, U+1680, U+2000..U+200A,
 * U+2028, U+2029, U+202F, U+205F, U+3000). Case-insensitive contractions follow
 * Unicode simple case folding: 'S', and U+017F (long s) folds to 's'. */
#include "data/tokenizer/gpt2_internal.h"
#include "data/tokenizer/hf_internal.h"

#include "base/utf8.h"

#include <string.h>
#include <utf8proc.h>

int pl_hf_is_space(int32_t c)
{
    if (c < 0x80)
        return c == ' ' || (c >= 0x09 && c <= 0x0D);
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
           c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

int pl_hf_is_word(int32_t c)
{
    if (c == 0x200C || c == 0x200D) /* Join_Control */
        return 1;
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
        return 1;
    default:
        return 0;
    }
}

enum { C_OTHER, C_SPACE, C_LETTER, C_NUMBER };

static int cls_of(int32_t c)
{
    if (c < 0x80) {
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
            return C_LETTER;
        if (c >= '0' && c <= '9')
            return C_NUMBER;
        return pl_hf_is_space(c) ? C_SPACE : C_OTHER;
    }
    if (pl_hf_is_space(c))
        return C_SPACE;
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
        return C_LETTER;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
        return C_NUMBER;
    default:
        return C_OTHER;
    }
}

/* The code point at s[i] (i < n): its length, or 0 if not valid UTF-8. */
static size_t cp_at(const uint8_t *s, size_t n, size_t i, int32_t *c)
{
    size_t len = pl_utf8_next(s + i, n - i, c);
    return *c < 0 ? 0 : len;
}

static int is_crlf(int32_t c) { return c == '\r' || c == '\n'; }

/* End of the run of class cls from j; -1 on invalid UTF-8 (*end = where). max: at
 * most that many code points (0: no limit). */
static int run(const uint8_t *s, size_t n, size_t j, int cls, int max, size_t *end)
{
    int k = 0;
    while (j < n && (max == 0 || k < max)) {
        int32_t c;
        size_t len = cp_at(s, n, j, &c);
        if (!len) {
            *end = j;
            return -1;
        }
        if (cls_of(c) != cls)
            break;
        j += len;
        k++;
    }
    *end = j;
    return 0;
}

static int fold_is(int32_t c, char lower)
{
    return c == lower || c == lower - 32 || (lower == 's' && c == 0x017F);
}

static int llama3_next(const uint8_t *s, size_t n, size_t pos, size_t *end)
{
    int32_t c, c1 = -1, c2 = -1;
    size_t len = cp_at(s, n, pos, &c), len1 = 0, len2 = 0;
    if (!len) {
        *end = pos;
        return -1;
    }
    if (pos + len < n && !(len1 = cp_at(s, n, pos + len, &c1))) {
        *end = pos + len;
        return -1;
    }
    /* (?i:'s|'t|'re|'ve|'m|'ll|'d) */
    if (c == '\'' && len1) {
        if (fold_is(c1, 's') || fold_is(c1, 't') || fold_is(c1, 'm') || fold_is(c1, 'd')) {
            *end = pos + len + len1;
            return 0;
        }
        size_t p2 = pos + len + len1;
        if (p2 < n && !(len2 = cp_at(s, n, p2, &c2))) {
            *end = p2;
            return -1;
        }
        if (len2 && ((fold_is(c1, 'r') && fold_is(c2, 'e')) || (fold_is(c1, 'v') && fold_is(c2, 'e')) ||
                     (fold_is(c1, 'l') && fold_is(c2, 'l')))) {
            *end = p2 + len2;
            return 0;
        }
    }
    int cl = cls_of(c), cl1 = len1 ? cls_of(c1) : -1;
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (cl != C_LETTER && cl != C_NUMBER && !is_crlf(c) && cl1 == C_LETTER)
        return run(s, n, pos + len + len1, C_LETTER, 0, end);
    if (cl == C_LETTER)
        return run(s, n, pos + len, C_LETTER, 0, end);
    /* \p{N}{1,3} */
    if (cl == C_NUMBER)
        return run(s, n, pos + len, C_NUMBER, 2, end);
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    size_t j = 0;
    if (c == ' ' && cl1 == C_OTHER)
        j = pos + len + len1;
    else if (cl == C_OTHER)
        j = pos + len;
    if (j) {
        if (run(s, n, j, C_OTHER, 0, &j) < 0) {
            *end = j;
            return -1;
        }
        while (j < n && (s[j] == '\r' || s[j] == '\n'))
            j++;
        *end = j;
        return 0;
    }
    /* c is white space: \s*[\r\n]+, else \s+(?!\S), else \s+ */
    size_t last_crlf = 0, last_start = pos;
    int has_crlf = 0;
    j = pos;
    while (j < n) {
        int32_t d;
        size_t l = cp_at(s, n, j, &d);
        if (!l) {
            *end = j;
            return -1;
        }
        if (!pl_hf_is_space(d))
            break;
        if (is_crlf(d)) {
            has_crlf = 1;
            last_crlf = j + l;
        }
        last_start = j;
        j += l;
    }
    if (has_crlf)
        *end = last_crlf;
    else if (j == n || last_start == pos)
        *end = j;
    else
        *end = last_start;
    return 0;
}

int pl_hf_regex_next(hf_regex re, const uint8_t *s, size_t n, size_t pos, size_t *end)
{
    if (re == HF_RE_GPT2)
        return pl_gpt2_pretok_next_unicode(s, n, pos, end);
    return llama3_next(s, n, pos, end);
}
