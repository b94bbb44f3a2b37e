/* NLTK 3.8's Punkt sentence tokenizer (see punkt.h); each function names the
 * method of nltk/tokenize/punkt.py it reproduces. Positions are code points
 * of the chunk being split; spans are returned in bytes. */
#include "data/punkt.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/utf8.h"
#include "data/tokenizer/strtab.h"

#include <stdio.h>
#include <string.h>
#include <utf8proc.h>

enum {
    ORTHO_BEG_UC = 1 << 1,
    ORTHO_MID_UC = 1 << 2,
    ORTHO_UNK_UC = 1 << 3,
    ORTHO_BEG_LC = 1 << 4,
    ORTHO_MID_LC = 1 << 5,
    ORTHO_UNK_LC = 1 << 6,
    ORTHO_UC = ORTHO_BEG_UC | ORTHO_MID_UC | ORTHO_UNK_UC,
    ORTHO_LC = ORTHO_BEG_LC | ORTHO_MID_LC | ORTHO_UNK_LC,
};

struct pl_punkt {
    pl_strtab abbrev, starters, collocs, ortho; /* collocations keyed "first\tsecond" */
    pl_ids ortho_flags;                         /* per id of ortho */
};

/* ---- Python's character classes ------------------------------------------- */

static utf8proc_category_t cat(int32_t cp) { return utf8proc_category(cp); }

/* str.isspace() and re's \s: bidi class WS, B or S, or category Zs. */
static int py_space(int32_t cp)
{
    if (cp < 0x80)
        return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
    return cp == 0x85 || cp == 0x2028 || cp == 0x2029 || cat(cp) == UTF8PROC_CATEGORY_ZS;
}

/* string.whitespace (ASCII only), as _get_last_whitespace_index tests it. */
static int ascii_space(int32_t cp)
{
    return cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C;
}

/* re's \d: Unicode decimal digits (Nd). */
static int py_digit(int32_t cp)
{
    return cp < 0x80 ? (cp >= '0' && cp <= '9') : cat(cp) == UTF8PROC_CATEGORY_ND;
}

/* re's \w: letters, numbers (str.isalnum) and '_'. */
static int py_word(int32_t cp)
{
    if (cp < 0x80)
        return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
               cp == '_';
    utf8proc_category_t c = cat(cp);
    return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) ||
           (c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO);
}

/* str.isupper() / islower() of one character: the Uppercase / Lowercase
 * properties (Lu, Ll and the Other_* code points). */
static int py_upper(int32_t cp)
{
    if (cp < 0x80)
        return cp >= 'A' && cp <= 'Z';
    return cat(cp) == UTF8PROC_CATEGORY_LU || (cp >= 0x2160 && cp <= 0x216F) ||
           (cp >= 0x24B6 && cp <= 0x24CF) || (cp >= 0x1F130 && cp <= 0x1F149) ||
           (cp >= 0x1F150 && cp <= 0x1F169) || (cp >= 0x1F170 && cp <= 0x1F189);
}

/* Other_Lowercase outside Ll (Unicode 14, as Python 3.11's str.islower sees it). */
static const int32_t other_lower[][2] = {
    {0xAA, 0xAA},       {0xBA, 0xBA},       {0x2B0, 0x2B8},     {0x2C0, 0x2C1},
    {0x2E0, 0x2E4},     {0x345, 0x345},     {0x37A, 0x37A},     {0x1D2C, 0x1D6A},
    {0x1D78, 0x1D78},   {0x1D9B, 0x1DBF},   {0x2071, 0x2071},   {0x207F, 0x207F},
    {0x2090, 0x209C},   {0x2170, 0x217F},   {0x24D0, 0x24E9},   {0x2C7C, 0x2C7D},
    {0xA69C, 0xA69D},   {0xA770, 0xA770},   {0xA7F8, 0xA7F9},   {0xAB5C, 0xAB5F},
    {0x10780, 0x10780}, {0x10783, 0x10785}, {0x10787, 0x107B0}, {0x107B2, 0x107BA},
};

static int py_lower(int32_t cp)
{
    if (cp < 0x80)
        return cp >= 'a' && cp <= 'z';
    if (cat(cp) == UTF8PROC_CATEGORY_LL)
        return 1;
    for (size_t i = 0; i < sizeof other_lower / sizeof *other_lower; i++)
        if (cp >= other_lower[i][0] && cp <= other_lower[i][1])
            return 1;
    return 0;
}

int pl_punkt_char_classes(int32_t cp)
{
    return (py_space(cp) ? PL_PUNKT_SPACE : 0) | (py_word(cp) ? PL_PUNKT_WORD : 0) |
           (py_digit(cp) ? PL_PUNKT_DIGIT : 0) | (py_upper(cp) ? PL_PUNKT_UPPER : 0) |
           (py_lower(cp) ? PL_PUNKT_LOWER : 0);
}

/* Appends str.lower() of t[s, e) as UTF-8 (U+0130 -> "i\u0307"). */
static pl_status lower_utf8(pl_bytes *b, const int32_t *t, int64_t s, int64_t e)
{
    for (int64_t i = s; i < e; i++) {
        utf8proc_uint8_t u[8];
        utf8proc_ssize_t k;
        if (t[i] == 0x130) {
            k = utf8proc_encode_char('i', u);
            k += utf8proc_encode_char(0x307, u + k);
        } else {
            k = utf8proc_encode_char(utf8proc_tolower(t[i]), u);
        }
        pl_status st = pl_bytes_append(b, u, (size_t)k);
        if (st != PL_OK)
            return st;
    }
    return PL_OK;
}

/* ---- PunktLanguageVars ------------------------------------------------------ */

/* _re_non_word_chars: (?:[)\";}\]\*:@\'\({\[?!]) */
static int non_word(int32_t c)
{
    return c > 0 && c < 0x80 && strchr(")\";}]*:@'({[?!", c) != NULL;
}

/* _re_word_start excludes ( " ` { [ : ; & # * @ ) } ] - , */
static int word_start(int32_t c)
{
    return !(c > 0 && c < 0x80 && strchr("(\"`{[:;&#*@)}]-,", c) != NULL);
}

/* _re_multi_char_punct at t[i] (line end le): (?:\-{2,}|\.{2,}|(?:\.\s){2,}\.);
 * the match length, 0 if none. */
static int64_t multi_char(const int32_t *t, int64_t i, int64_t le)
{
    int64_t k = i;
    while (k < le && t[k] == '-')
        k++;
    if (k - i >= 2)
        return k - i;
    k = i;
    while (k < le && t[k] == '.')
        k++;
    if (k - i >= 2)
        return k - i;
    int64_t reps = 0;
    k = i;
    while (k + 1 < le && t[k] == '.' && py_space(t[k + 1])) {
        reps++;
        k += 2;
    }
    if (reps >= 2 && k < le && t[k] == '.')
        return 2 * reps + 1;
    if (reps >= 3) /* backtrack one repetition: its '.' ends the match */
        return 2 * (reps - 1) + 1;
    return 0;
}

/* The lookahead that ends a word in _word_tokenize_fmt, at position q. */
static int word_end(const int32_t *t, int64_t q, int64_t le)
{
    if (q >= le || py_space(t[q]) || non_word(t[q]) || multi_char(t, q, le))
        return 1;
    if (t[q] == ',')
        return q + 1 >= le || py_space(t[q + 1]) || non_word(t[q + 1]) ||
               multi_char(t, q + 1, le) > 0;
    return 0;
}

/* ---- tokens ----------------------------------------------------------------- */

typedef struct ptok {
    int64_t s, e;     /* code points */
    size_t ty, tylen; /* the type, in the work's type buffer */
    uint8_t sentbreak, abbr, ellipsis;
} ptok;

typedef struct work {
    const pl_punkt *p;
    const int32_t *t;
    ptok *tok;
    int64_t ntok, cap;
    pl_bytes types, scratch;
} work;

static int is_number_text(const int32_t *t, int64_t s, int64_t e)
{
    /* ^-?[\.,]?\d[\d,\.-]*\.?$ on the lowered token (lowering keeps these). */
    int64_t i = s;
    if (i < e && t[i] == '-')
        i++;
    if (i < e && (t[i] == '.' || t[i] == ','))
        i++;
    if (i >= e || !py_digit(t[i]))
        return 0;
    for (i++; i < e; i++)
        if (!(py_digit(t[i]) || t[i] == ',' || t[i] == '.' || t[i] == '-'))
            return 0;
    return 1;
}

/* PunktToken.__init__ and _first_pass_annotation. */
static pl_status add_token(work *w, int64_t s, int64_t e)
{
    if (w->ntok == w->cap) {
        int64_t cap = w->cap ? 2 * w->cap : 64;
        ptok *n = pl_realloc(w->tok, sizeof *n * (size_t)cap);
        if (!n)
            return pl_errorf(PL_ERR_NOMEM, "punkt: out of memory");
        w->tok = n;
        w->cap = cap;
    }
    ptok *k = &w->tok[w->ntok];
    memset(k, 0, sizeof *k);
    k->s = s;
    k->e = e;
    k->ty = w->types.n;
    pl_status st;
    if (is_number_text(w->t, s, e))
        st = pl_bytes_append(&w->types, "##number##", 10);
    else
        st = lower_utf8(&w->types, w->t, s, e);
    if (st != PL_OK)
        return st;
    k->tylen = w->types.n - k->ty;
    w->ntok++;

    const int32_t *t = w->t;
    int64_t n = e - s;
    int dots = 1;
    for (int64_t i = s; i < e && dots; i++)
        dots = t[i] == '.';
    if (n == 1 && (t[s] == '.' || t[s] == '?' || t[s] == '!')) {
        k->sentbreak = 1;
    } else if (n >= 2 && dots) {
        k->ellipsis = 1;
    } else if (t[e - 1] == '.' && !(n >= 2 && t[e - 2] == '.')) {
        w->scratch.n = 0;
        if ((st = lower_utf8(&w->scratch, t, s, e - 1)) != PL_OK)
            return st;
        const char *low = w->scratch.data ? w->scratch.data : "";
        size_t ln = w->scratch.n, cut = 0;
        for (size_t i = 0; i < ln; i++)
            if (low[i] == '-')
                cut = i + 1;
        if (pl_strtab_find(&w->p->abbrev, low, ln) >= 0 ||
            pl_strtab_find(&w->p->abbrev, low + cut, ln - cut) >= 0)
            k->abbr = 1;
        else
            k->sentbreak = 1;
    }
    return PL_OK;
}

/* _tokenize_words over t[a, e): lines split on '\n', blank lines skipped,
 * each line through word_tokenize (findall). */
static pl_status tokenize_words(work *w, int64_t a, int64_t e)
{
    const int32_t *t = w->t;
    w->ntok = 0;
    w->types.n = 0;
    for (int64_t ls = a; ls <= e;) {
        int64_t le = ls;
        while (le < e && t[le] != '\n')
            le++;
        for (int64_t pos = ls; pos < le;) {
            int64_t m = multi_char(t, pos, le), end = 0;
            if (m > 0) {
                end = pos + m;
            } else if (!py_space(t[pos]) && word_start(t[pos])) {
                end = pos + 1;
                while (!word_end(t, end, le))
                    end++;
            } else if (!py_space(t[pos])) {
                end = pos + 1;
            }
            if (end > pos) {
                pl_status st = add_token(w, pos, end);
                if (st != PL_OK)
                    return st;
                pos = end;
            } else {
                pos++;
            }
        }
        ls = le + 1;
    }
    return PL_OK;
}

static const char *type_of(const work *w, const ptok *k) { return w->types.data + k->ty; }

/* type_no_period: the type without a final '.', if longer than one character. */
static size_t len_no_period(const work *w, const ptok *k)
{
    return k->tylen > 1 && type_of(w, k)[k->tylen - 1] == '.' ? k->tylen - 1 : k->tylen;
}

static size_t len_no_sentperiod(const work *w, const ptok *k)
{
    return k->sentbreak ? len_no_period(w, k) : k->tylen;
}

static int ortho_of(const work *w, const char *ty, size_t n)
{
    int32_t id = pl_strtab_find(&w->p->ortho, ty, n);
    return id < 0 ? 0 : w->p->ortho_flags.data[id];
}

enum { ORTHO_FALSE, ORTHO_TRUE, ORTHO_UNKNOWN };

/* _ortho_heuristic */
static int ortho_heuristic(const work *w, const ptok *k)
{
    const int32_t *t = w->t;
    if (k->e - k->s == 1 && t[k->s] > 0 && t[k->s] < 0x80 && strchr(";:,.!?", t[k->s]))
        return ORTHO_FALSE;
    int ctx = ortho_of(w, type_of(w, k), len_no_sentperiod(w, k));
    if (py_upper(t[k->s]) && (ctx & ORTHO_LC) && !(ctx & ORTHO_MID_UC))
        return ORTHO_TRUE;
    if (py_lower(t[k->s]) && ((ctx & ORTHO_UC) || !(ctx & ORTHO_BEG_LC)))
        return ORTHO_FALSE;
    return ORTHO_UNKNOWN;
}

/* _second_pass_annotation(a, b). */
static pl_status second_pass(work *w, ptok *a, const ptok *b)
{
    const int32_t *t = w->t;
    if (t[a->e - 1] != '.')
        return PL_OK;
    const char *typ = type_of(w, a), *next = type_of(w, b);
    size_t nt = len_no_period(w, a), nn = len_no_sentperiod(w, b);
    int initial = a->e - a->s == 2 && py_word(t[a->s]) && !py_digit(t[a->s]);
    w->scratch.n = 0;
    pl_status st = pl_bytes_append(&w->scratch, typ, nt);
    if (st == PL_OK)
        st = pl_bytes_append(&w->scratch, "\t", 1);
    if (st != PL_OK)
        return st;
    if (pl_strtab_find2(&w->p->collocs, w->scratch.data, w->scratch.n, next, nn) >= 0) {
        a->sentbreak = 0;
        a->abbr = 1;
        return PL_OK;
    }
    if ((a->abbr || a->ellipsis) && !initial) {
        int h = ortho_heuristic(w, b);
        if (h == ORTHO_TRUE) {
            a->sentbreak = 1;
            return PL_OK;
        }
        if (py_upper(t[b->s]) && pl_strtab_find(&w->p->starters, next, nn) >= 0) {
            a->sentbreak = 1;
            return PL_OK;
        }
    }
    if (initial || (nt == 10 && memcmp(typ, "##number##", 10) == 0)) {
        int h = ortho_heuristic(w, b);
        if (h == ORTHO_FALSE) {
            a->sentbreak = 0;
            a->abbr = 1;
            return PL_OK;
        }
        if (h == ORTHO_UNKNOWN && initial && py_upper(t[b->s]) &&
            !(ortho_of(w, next, nn) & ORTHO_LC)) {
            a->sentbreak = 0;
            a->abbr = 1;
        }
    }
    return PL_OK;
}

/* text_contains_sentbreak(t[a, e)): a token after a (finally annotated) break. */
static pl_status contains_sentbreak(work *w, int64_t a, int64_t e, int *found)
{
    pl_status st = tokenize_words(w, a, e);
    if (st != PL_OK)
        return st;
    *found = 0;
    for (int64_t i = 0; i + 1 < w->ntok; i++) {
        if ((st = second_pass(w, &w->tok[i], &w->tok[i + 1])) != PL_OK)
            return st;
        if (w->tok[i].sentbreak) {
            *found = 1;
            break;
        }
    }
    return PL_OK;
}

/* ---- sentences of one chunk --------------------------------------------------- */

/* period_context_re at p: [.?!] followed by a non-word character, or by
 * whitespace and a token. *after_end: end of after_tok; *next: start of
 * next_tok or -1. Returns 1 on a match. */
static int period_context(const int32_t *t, int64_t n, int64_t p, int64_t *after_end,
                          int64_t *next)
{
    if (!(t[p] == '.' || t[p] == '?' || t[p] == '!') || p + 1 >= n)
        return 0;
    if (non_word(t[p + 1])) {
        *after_end = p + 2;
        *next = -1;
        return 1;
    }
    int64_t q = p + 1;
    while (q < n && py_space(t[q]))
        q++;
    if (q == p + 1 || q >= n)
        return 0;
    int64_t r = q;
    while (r < n && !py_space(t[r]))
        r++;
    *after_end = r;
    *next = q;
    return 1;
}

/* The realignment regex ["')\]}]+?(?:\s+|(?=--)|$) (MULTILINE) matched at the
 * start of t[s, e): *keep = closing characters, *end = match end; 0 if none. */
static int realign_match(const int32_t *t, int64_t s, int64_t e, int64_t *keep, int64_t *end)
{
    for (int64_t q = s; q < e && t[q] < 0x80 && t[q] && strchr("\"')]}", t[q]); q++) {
        int64_t k = q + 1;
        if (k < e && py_space(t[k])) {
            int64_t r = k;
            while (r < e && py_space(t[r]))
                r++;
            *keep = k - s;
            *end = r - s;
            return 1;
        }
        if ((k + 1 < e && t[k] == '-' && t[k + 1] == '-') || k == e || t[k] == '\n') {
            *keep = *end = k - s;
            return 1;
        }
    }
    return 0;
}

typedef struct slices {
    int64_t *v; /* pairs */
    int64_t n, cap;
} slices;

static pl_status slice_push(slices *s, int64_t a, int64_t b)
{
    if (s->n + 2 > s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 64;
        int64_t *v = pl_realloc(s->v, sizeof *v * (size_t)cap);
        if (!v)
            return pl_errorf(PL_ERR_NOMEM, "punkt: out of memory");
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = a;
    s->v[s->n++] = b;
    return PL_OK;
}

/* _match_potential_end_contexts + _slices_from_text over t[0, n). */
static pl_status chunk_slices(work *w, int64_t n, slices *out)
{
    const int32_t *t = w->t;
    int64_t prev_start = 0, prev_stop = 0, prev_p = -1, prev_after = 0, prev_next = -1;
    int64_t last_break = 0;
    pl_status st;
    for (int64_t p = 0; p <= n; p++) {
        int64_t after = 0, next = -1;
        int last = p == n, hit = !last && period_context(t, n, p, &after, &next);
        if (!hit && !last)
            continue;
        int emit = 0;
        int64_t word_start_at = 0;
        if (hit) {
            /* _get_last_whitespace_index of text[prev_stop : p]; index 0 counts as none. */
            int64_t idx = 0;
            for (int64_t i = p - 1; i >= prev_stop; i--)
                if (ascii_space(t[i])) {
                    idx = i - prev_stop;
                    break;
                }
            word_start_at = idx ? prev_stop + idx + 1 : prev_start;
            emit = prev_p >= 0 && prev_stop <= word_start_at;
        } else {
            emit = prev_p >= 0;
        }
        if (emit) {
            int found;
            if ((st = contains_sentbreak(w, prev_start, prev_after, &found)) != PL_OK)
                return st;
            if (found) {
                if ((st = slice_push(out, last_break, prev_p + 1)) != PL_OK)
                    return st;
                last_break = prev_next >= 0 ? prev_next : prev_p + 1;
            }
        }
        if (hit) {
            prev_p = p;
            prev_after = after;
            prev_next = next;
            prev_start = word_start_at;
            prev_stop = p;
        }
    }
    int64_t end = n;
    while (end > 0 && py_space(t[end - 1]))
        end--;
    return slice_push(out, last_break, end);
}

/* _realign_boundaries, appending byte spans (boff: byte offset of each code
 * point, boff[n] the chunk's end) shifted by base. */
static pl_status realign(const int32_t *t, const slices *sl, const int64_t *boff, int64_t base,
                         pl_i64s *spans)
{
    int64_t shift = 0;
    pl_status st = PL_OK;
    for (int64_t i = 0; i < sl->n && st == PL_OK; i += 2) {
        int64_t s = sl->v[i] + shift, e = sl->v[i + 1];
        int64_t keep, end;
        if (i + 2 >= sl->n) {
            if (s < e && (st = pl_i64s_push(spans, base + boff[s])) == PL_OK)
                st = pl_i64s_push(spans, base + boff[e]);
            continue;
        }
        int64_t s2 = sl->v[i + 2], e2 = sl->v[i + 3];
        if (s2 < e2 && realign_match(t, s2, e2, &keep, &end)) {
            int64_t stop = s2 + keep;
            if (stop < s)
                stop = s; /* text[s:stop] is empty then */
            if ((st = pl_i64s_push(spans, base + boff[s])) == PL_OK)
                st = pl_i64s_push(spans, base + boff[stop]);
            shift = end;
        } else {
            shift = 0;
            if (s < e && (st = pl_i64s_push(spans, base + boff[s])) == PL_OK)
                st = pl_i64s_push(spans, base + boff[e]);
        }
    }
    return st;
}

pl_status pl_punkt_split(const pl_punkt *p, const char *text, size_t len, pl_i64s *spans)
{
    pl_status st = PL_OK;
    size_t bad = pl_utf8_check(text, len);
    if (bad != len)
        return pl_errorf(PL_ERR_FORMAT, "punkt: invalid UTF-8 at byte %zu", bad);
    int32_t *t = pl_malloc(sizeof *t * (len + 1));
    int64_t *boff = pl_malloc(sizeof *boff * (len + 2));
    work w = {p, t, NULL, 0, 0, {0}, {0}};
    slices sl = {0};
    if (!t || !boff) {
        st = pl_errorf(PL_ERR_NOMEM, "punkt: out of memory for %zu bytes", len);
        goto fail;
    }
    for (size_t at = 0; at < len;) {
        /* One chunk of at most PL_PUNKT_CHUNK code points, from byte at. */
        int64_t n = 0;
        size_t b = at;
        while (b < len && n < PL_PUNKT_CHUNK) {
            boff[n] = (int64_t)(b - at);
            b += pl_utf8_next((const unsigned char *)text + b, len - b, &t[n]);
            n++;
        }
        boff[n] = (int64_t)(b - at);
        sl.n = 0;
        if ((st = chunk_slices(&w, n, &sl)) != PL_OK ||
            (st = realign(t, &sl, boff, (int64_t)at, spans)) != PL_OK)
            goto fail;
        at = b;
    }
fail:
    pl_free(t);
    pl_free(boff);
    pl_free(w.tok);
    pl_free(sl.v);
    pl_bytes_free(&w.types);
    pl_bytes_free(&w.scratch);
    return st;
}

/* ---- parameters ---------------------------------------------------------------- */

void pl_punkt_free(pl_punkt *p)
{
    if (!p)
        return;
    pl_strtab_free(&p->abbrev);
    pl_strtab_free(&p->starters);
    pl_strtab_free(&p->collocs);
    pl_strtab_free(&p->ortho);
    pl_ids_free(&p->ortho_flags);
    pl_free(p);
}

static pl_status add_key(pl_strtab *t, const char *s, size_t n)
{
    int32_t id;
    int added;
    return pl_strtab_add(t, s, n, &id, &added);
}

pl_status pl_punkt_load(pl_punkt **out, const char *path)
{
    char *data = NULL;
    size_t size = 0;
    *out = NULL;
    pl_status st = pl_file_read_all(path, &data, &size);
    if (st != PL_OK)
        return pl_error_wrap(st, "punkt parameters");
    pl_punkt *p = pl_calloc(1, sizeof *p);
    if (!p) {
        pl_free(data);
        return pl_errorf(PL_ERR_NOMEM, "%s: out of memory", path);
    }
    long line = 0;
    for (char *s = data, *e; s < data + size; s = e + 1) {
        e = memchr(s, '\n', (size_t)(data + size - s));
        if (!e)
            e = data + size;
        line++;
        if (e == s || *s == '#')
            continue;
        char *f[4] = {s, NULL, NULL, NULL};
        int nf = 1;
        for (char *c = s; c < e; c++)
            if (*c == '\t') {
                if (nf == 4)
                    break;
                f[nf++] = c + 1;
            }
        size_t len[4];
        for (int i = 0; i < nf; i++)
            len[i] = (size_t)((i + 1 < nf ? f[i + 1] - 1 : e) - f[i]);
#define IS(word) (len[0] == strlen(word) && memcmp(f[0], word, len[0]) == 0)
        if (IS("abbrev") && nf == 2) {
            st = add_key(&p->abbrev, f[1], len[1]);
        } else if (IS("starter") && nf == 2) {
            st = add_key(&p->starters, f[1], len[1]);
        } else if (IS("colloc") && nf == 3) {
            st = add_key(&p->collocs, f[1], len[1] + 1 + len[2]); /* "first\tsecond" */
        } else if (IS("ortho") && nf == 3) {
            char *end = NULL;
            long flags = strtol(f[2], &end, 10);
            if (end != f[2] + len[2] || flags < 0 || flags > 127) {
                st = pl_errorf(PL_ERR_FORMAT, "%s:%ld: ortho flags '%.*s': expected 0..127", path,
                               line, (int)len[2], f[2]);
                break;
            }
            int32_t id;
            int added;
            st = pl_strtab_add(&p->ortho, f[1], len[1], &id, &added);
            if (st == PL_OK && added)
                st = pl_ids_push(&p->ortho_flags, 0);
            if (st == PL_OK)
                p->ortho_flags.data[id] |= (int32_t)flags;
        } else {
            st = pl_errorf(PL_ERR_FORMAT,
                           "%s:%ld: expected abbrev|starter TYPE, colloc TYPE TYPE or ortho TYPE "
                           "FLAGS, tab-separated",
                           path, line);
        }
#undef IS
        if (st != PL_OK)
            break;
    }
    pl_free(data);
    if (st != PL_OK) {
        pl_punkt_free(p);
        return st;
    }
    *out = p;
    return PL_OK;
}
