/* UTF-8 validation over whole buffers. */
#include "base/utf8.h"

#include <string.h>

size_t pl_utf8_check(const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < len) {
        if (len - i >= 8) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ull)) {
                i += 8;
                continue;
            }
        }
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        unsigned lo = 0x80, hi = 0xBF; /* range of the second byte */
        if (c >= 0xC2 && c <= 0xDF)
            need = 1;
        else if (c == 0xE0)
            need = 2, lo = 0xA0; /* no overlongs */
        else if (c == 0xED)
            need = 2, hi = 0x9F; /* no surrogates */
        else if (c >= 0xE1 && c <= 0xEF)
            need = 2;
        else if (c == 0xF0)
            need = 3, lo = 0x90;
        else if (c >= 0xF1 && c <= 0xF3)
            need = 3;
        else if (c == 0xF4)
            need = 3, hi = 0x8F; /* <= U+10FFFF */
        else
            return i;
        if (len - i <= need || s[i + 1] < lo || s[i + 1] > hi)
            return i;
        for (size_t k = 2; k <= need; k++)
            if ((s[i + k] & 0xC0) != 0x80)
                return i;
        i += need + 1;
    }
    return len;
}
