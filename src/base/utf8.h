/* UTF-8 decoding and validation, with Python's strictness: overlong forms,
 * surrogates and code points past U+10FFFF are invalid. */
#ifndef PL_BASE_UTF8_H
#define PL_BASE_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Decodes one code point of s[0..n), n >= 1, and returns its length in bytes.
 * An invalid or truncated sequence gives *cp = -1 and a length of 1 (the byte
 * Python's decoder would drop or escape). Inline: tokenizers call it per
 * character. */
static inline size_t pl_utf8_next(const unsigned char *s, size_t n, int32_t *cp)
{
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = (int32_t)c;
        return 1;
    }
    size_t need;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF)
        need = 1, v = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF)
        need = 2, v = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4)
        need = 3, v = c & 0x07, min = 0x10000;
    else
        return *cp = -1, 1;
    if (n < need + 1)
        return *cp = -1, 1;
    for (size_t k = 1; k <= need; k++) {
        if ((s[k] & 0xC0) != 0x80)
            return *cp = -1, 1;
        v = (v << 6) | (s[k] & 0x3Fu);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return *cp = -1, 1;
    *cp = (int32_t)v;
    return need + 1;
}

/* Offset of the first byte that does not start a valid sequence, or len when
 * all of s[0..len) is valid UTF-8 (ASCII runs are skipped 8 bytes at a time). */
size_t pl_utf8_check(const char *s, size_t len);

static inline int pl_utf8_valid(const char *s, size_t len) { return pl_utf8_check(s, len) == len; }

#endif
