/* GPT-2's pre-tokenizer, written out by hand.
 *
 * GPT-2 (OpenAI's encoder.py, Megatron's gpt2_tokenization.py, tiktoken r50k_base,
 * gpt-3-encoder) splits text with the regex
 *
 *     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *
 * This file finds the same matches on UTF-8 bytes, one at a time, with no regex
 * engine. Alternatives are tried in order at each position, which works out to:
 *   - "'" followed by s t m d (or re ve ll): the contraction. Case-sensitive: "'S" is
 *     not one.
 *   - a U+0020 space followed by a letter, number or "other" (neither \s, \p{L} nor
 *     \p{N}): the space and the run of that class after it.
 *   - a letter, number or other: the run of its class. Apostrophes are "other", so
 *     "!'" is one run.
 *   - white space: the run of it, minus its last code point when something follows
 *     (\s+(?!\S) backtracks one step so the last space goes with the next word); a
 *     single white space code point before a non-space is matched alone (\s+).
 *
 * Classes follow gpt-3-encoder, the JavaScript reference (/gu): \s is JavaScript's
 * set (TAB LF VT FF CR, the Zs spaces, U+2028, U+2029, U+FEFF; not U+0085), \p{L} is
 * Lu Ll Lt Lm Lo and \p{N} is Nd Nl No, from utf8proc's tables. Python's `regex`
 * module, which Megatron uses, and Oniguruma, which Hugging Face `tokenizers` uses,
 * differ on two code points: their \s is Unicode's White_Space, with U+0085 and
 * without U+FEFF. pl_gpt2_pretok_next_unicode() matches with that \s (the
 * HuggingFaceTokenizer's ByteLevel pre-tokenizer). Code points unassigned in
 * utf8proc's Unicode version are "other".
 *
 * Input must be valid UTF-8 (no overlongs, surrogates or values past U+10FFFF). */
#include "data/tokenizer/gpt2_internal.h"

#include "base/utf8.h"

#include <utf8proc.h>

enum { CL_OTHER, CL_SPACE, CL_LETTER, CL_NUMBER };

#define O_ CL_OTHER
#define S_ CL_SPACE
#define L_ CL_LETTER
#define N_ CL_NUMBER
static const uint8_t ascii_class[128] = {
    O_, O_, O_, O_, O_, O_, O_, O_, O_, S_, S_, S_, S_, S_, O_, O_, /* 0x00: TAB..CR */
    O_, O_, O_, O_, O_, O_, O_, O_, O_, O_, O_, O_, O_, O_, O_, O_, /* 0x10 */
    S_, O_, O_, O_, O_, O_, O_, O_, O_, O_, O_, O_, O_, O_, O_, O_, /* 0x20: space */
    N_, N_, N_, N_, N_, N_, N_, N_, N_, N_, O_, O_, O_, O_, O_, O_, /* 0x30: 0-9 */
    O_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, /* 0x40: A-O */
    L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, O_, O_, O_, O_, O_, /* 0x50: P-Z */
    O_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, /* 0x60: a-o */
    L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, O_, O_, O_, O_, O_, /* 0x70: p-z */
};
#undef O_
#undef S_
#undef L_
#undef N_

/* uni: \s is Unicode's White_Space (U+0085, not U+FEFF); else JavaScript's. */
static int cp_class(uint32_t c, int uni)
{
    if (c < 128)
        return ascii_class[c];
    switch (c) { /* \s beyond ASCII, common to both */
    case 0x00A0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F:
    case 0x3000:
        return CL_SPACE;
    case 0x0085:
        if (uni)
            return CL_SPACE;
        break;
    case 0xFEFF:
        if (!uni)
            return CL_SPACE;
        break;
    default:
        break;
    }
    if (c >= 0x2000 && c <= 0x200A)
        return CL_SPACE;
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
        return CL_LETTER;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
        return CL_NUMBER;
    default:
        return CL_OTHER;
    }
}

/* Decodes the code point at s[i] (i < n) into *c and returns its length in bytes,
 * or 0 if the bytes there are not a well-formed UTF-8 sequence. */
static int utf8_decode(const uint8_t *s, size_t n, size_t i, uint32_t *c)
{
    int32_t cp;
    size_t len = pl_utf8_next(s + i, n - i, &cp);
    if (cp < 0)
        return 0;
    *c = (uint32_t)cp;
    return (int)len;
}

/* Extends a run of class cls from byte j; sets *end to where it stops. */
static int run_of(const uint8_t *s, size_t n, size_t j, int cls, int uni, size_t *end)
{
    while (j < n) {
        uint8_t b = s[j];
        if (b < 0x80) {
            if (ascii_class[b] != cls)
                break;
            j++;
            continue;
        }
        uint32_t c;
        int len = utf8_decode(s, n, j, &c);
        if (!len) {
            *end = j;
            return -1;
        }
        if (cp_class(c, uni) != cls)
            break;
        j += (size_t)len;
    }
    *end = j;
    return 0;
}

static int is_contraction(const uint8_t *s, size_t n, size_t pos, size_t *end)
{
    if (pos + 1 >= n)
        return 0;
    uint8_t a = s[pos + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') {
        *end = pos + 2;
        return 1;
    }
    if (pos + 2 >= n)
        return 0;
    uint8_t b = s[pos + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
        *end = pos + 3;
        return 1;
    }
    return 0;
}

static int pretok_next(const uint8_t *s, size_t n, size_t pos, int uni, size_t *end)
{
    uint32_t c;
    int len = utf8_decode(s, n, pos, &c);
    if (!len) {
        *end = pos;
        return -1;
    }
    if (c == '\'' && is_contraction(s, n, pos, end))
        return 0;
    size_t j = pos + (size_t)len;
    if (c == ' ' && j < n) { /* " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+" */
        uint32_t c1;
        int len1 = utf8_decode(s, n, j, &c1);
        if (!len1) {
            *end = j;
            return -1;
        }
        int cls1 = cp_class(c1, uni);
        if (cls1 != CL_SPACE)
            return run_of(s, n, j + (size_t)len1, cls1, uni, end);
    }
    int cls = cp_class(c, uni);
    if (cls != CL_SPACE)
        return run_of(s, n, j, cls, uni, end);
    size_t last = pos; /* start of the run's last code point */
    while (j < n) {
        len = utf8_decode(s, n, j, &c);
        if (!len) {
            *end = j;
            return -1;
        }
        if (cp_class(c, uni) != CL_SPACE)
            break;
        last = j;
        j += (size_t)len;
    }
    if (j == n)
        *end = n;    /* \s+(?!\S) at the end of the text */
    else if (last > pos)
        *end = last; /* \s+(?!\S), backtracked off the last code point */
    else
        *end = j;    /* \s+: one white space code point before a non-space */
    return 0;
}

int pl_gpt2_pretok_next(const uint8_t *s, size_t n, size_t pos, size_t *end)
{
    return pretok_next(s, n, pos, 0, end);
}

int pl_gpt2_pretok_next_unicode(const uint8_t *s, size_t n, size_t pos, size_t *end)
{
    return pretok_next(s, n, pos, 1, end);
}
