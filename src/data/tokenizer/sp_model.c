/* SentencePiece's ModelProto (tokenizer.model), read with a minimal protobuf
 * wire-format reader.
 *
 * Wire format: a message is a sequence of (key, value); key = varint(field << 3 |
 * wire type); wire types 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32 (3 and 4,
 * groups, are refused). Unknown fields are skipped; a known field with the wrong wire
 * type, a varint over 10 bytes, or a length past the end of its message is an error
 * naming the byte offset in the file.
 *
 * Fields read (sentencepiece_model.proto):
 *   ModelProto      1 pieces (repeated SentencePiece), 2 trainer_spec, 3 normalizer_spec,
 *                   5 denormalizer_spec
 *   SentencePiece   1 piece, 2 score (float), 3 type (default NORMAL)
 *   TrainerSpec     3 model_type (default UNIGRAM), 24 treat_whitespace_as_suffix,
 *                   35 byte_fallback, 44 unk_surface, 45..48 unk/bos/eos/pad_piece
 *   NormalizerSpec  1 name, 2 precompiled_charsmap, 3 add_dummy_prefix (default true),
 *                   4 remove_extra_whitespaces (default true), 5 escape_whitespaces
 *                   (default true)
 *
 * Checked as SentencePiece's ModelInterface::InitializePieces does: no empty or
 * duplicate piece, exactly one UNKNOWN piece, BYTE pieces only with byte_fallback and
 * then all 256 of them. The normalizer's precompiled_charsmap (nmt_nfkc and the other
 * built-in rules) is <uint32 trie bytes><Darts double-array trie><replacements>, as
 * normalizer.cc DecodePrecompiledCharsMap reads it; a malformed one is an error.
 * Refused as not implemented (each a clear error): the WORD and CHAR model types, a
 * denormalizer charsmap, and for BPE: UNUSED pieces (SentencePiece re-segments them)
 * and pieces holding a character that is not itself a piece (the merge table below
 * would miss merges SentencePiece makes). */
#include "data/tokenizer/sp_internal.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/utf8.h"

#include <float.h>
#include <stdio.h>
#include <string.h>

/* --- the wire format ---------------------------------------------------------------------- */

typedef struct pb {
    const uint8_t *p;
    size_t end;        /* this message ends at p[end] */
    size_t pos;
    size_t base;       /* file offset of p[0] */
    const char *path;
    const char *what;  /* the message being read, for errors */
} pb;

static const char *wire_name(int wt)
{
    static const char *names[] = {"varint", "fixed64", "length-delimited", "start-group",
                                  "end-group", "fixed32", "6", "7"};
    return names[wt & 7];
}

static pl_status pb_varint(pb *r, uint64_t *v)
{
    uint64_t x = 0;
    size_t at = r->pos;
    for (int shift = 0; shift < 70; shift += 7) {
        if (r->pos >= r->end)
            return pl_errorf(PL_ERR_FORMAT, "%s: truncated varint at byte offset %zu (in %s)",
                             r->path, r->base + at, r->what);
        uint8_t b = r->p[r->pos++];
        x |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return PL_OK;
        }
    }
    return pl_errorf(PL_ERR_FORMAT, "%s: bad varint at byte offset %zu (more than 10 bytes, in %s)",
                     r->path, r->base + at, r->what);
}

/* The next key; *field = 0 at the end of the message. */
static pl_status pb_key(pb *r, uint32_t *field, int *wt, size_t *at)
{
    uint64_t k;
    *field = 0;
    *at = r->base + r->pos;
    if (r->pos >= r->end)
        return PL_OK;
    pl_status st = pb_varint(r, &k);
    if (st)
        return st;
    *wt = (int)(k & 7);
    if (k >> 3 == 0 || k >> 3 > 0x1FFFFFFF)
        return pl_errorf(PL_ERR_FORMAT, "%s: bad field number %llu at byte offset %zu (in %s)",
                         r->path, (unsigned long long)(k >> 3), *at, r->what);
    if (*wt == 3 || *wt == 4 || *wt > 5)
        return pl_errorf(PL_ERR_FORMAT, "%s: unsupported wire type %d (%s) at byte offset %zu (in %s)",
                         r->path, *wt, wire_name(*wt), *at, r->what);
    *field = (uint32_t)(k >> 3);
    return PL_OK;
}

static pl_status pb_expect(const pb *r, uint32_t field, int wt, int want, size_t at)
{
    if (wt == want)
        return PL_OK;
    return pl_errorf(PL_ERR_FORMAT, "%s: %s field %u has wire type %s, expected %s (byte offset %zu)",
                     r->path, r->what, field, wire_name(wt), wire_name(want), at);
}

static pl_status pb_len(pb *r, const uint8_t **p, size_t *n)
{
    uint64_t len;
    size_t at = r->base + r->pos;
    pl_status st = pb_varint(r, &len);
    if (st)
        return st;
    if (len > r->end - r->pos)
        return pl_errorf(PL_ERR_FORMAT, "%s: length %llu at byte offset %zu runs past the end of "
                         "its %s (%zu bytes left)", r->path, (unsigned long long)len, at, r->what,
                         r->end - r->pos);
    *p = r->p + r->pos;
    *n = (size_t)len;
    r->pos += (size_t)len;
    return PL_OK;
}

static pl_status pb_skip(pb *r, int wt)
{
    const uint8_t *p;
    size_t n, need = wt == 1 ? 8 : 4;
    uint64_t v;
    switch (wt) {
    case 0:
        return pb_varint(r, &v);
    case 2:
        return pb_len(r, &p, &n);
    default:
        if (r->end - r->pos < need)
            return pl_errorf(PL_ERR_FORMAT, "%s: truncated %s at byte offset %zu (in %s)", r->path,
                             wire_name(wt), r->base + r->pos, r->what);
        r->pos += need;
        return PL_OK;
    }
}

static pb sub(const pb *r, const uint8_t *p, size_t n, const char *what)
{
    return (pb){p, n, 0, r->base + (size_t)(p - r->p), r->path, what};
}

/* A varint field as bool / int32 (proto int32 is sign-extended to 64 bits). */
static pl_status pb_int(pb *r, uint32_t field, int wt, size_t at, int64_t *out)
{
    uint64_t v;
    pl_status st = pb_expect(r, field, wt, 0, at);
    if (!st && !(st = pb_varint(r, &v)))
        *out = (int64_t)v;
    return st;
}

static pl_status pb_string(pb *r, uint32_t field, int wt, size_t at, char **out)
{
    const uint8_t *p;
    size_t n;
    pl_status st = pb_expect(r, field, wt, 2, at);
    if (!st)
        st = pb_len(r, &p, &n);
    if (st)
        return st;
    char *s = pl_malloc(n + 1);
    if (!s)
        return pl_errorf(PL_ERR_NOMEM, "%s: out of memory", r->path);
    memcpy(s, p, n);
    s[n] = '\0';
    pl_free(*out);
    *out = s;
    return PL_OK;
}

/* --- the messages ------------------------------------------------------------------------ */

static pl_status read_piece(pl_sp_model *m, pb *r, int32_t index, size_t at0)
{
    pl_status st = PL_OK;
    const uint8_t *piece = NULL;
    size_t plen = 0;
    float score = 0;
    int64_t type = PL_SP_NORMAL;
    uint32_t field;
    int wt;
    size_t at;
    for (;;) {
        PL_TRY(pb_key(r, &field, &wt, &at));
        if (!field)
            break;
        if (field == 1) {
            PL_TRY(pb_expect(r, field, wt, 2, at));
            PL_TRY(pb_len(r, &piece, &plen));
        } else if (field == 2) {
            PL_TRY(pb_expect(r, field, wt, 5, at));
            if (r->end - r->pos < 4)
                return pl_errorf(PL_ERR_FORMAT, "%s: truncated float at byte offset %zu (in %s)",
                                 r->path, r->base + r->pos, r->what);
            uint32_t bits = (uint32_t)r->p[r->pos] | (uint32_t)r->p[r->pos + 1] << 8 |
                            (uint32_t)r->p[r->pos + 2] << 16 | (uint32_t)r->p[r->pos + 3] << 24;
            memcpy(&score, &bits, 4);
            r->pos += 4;
        } else if (field == 3) {
            PL_TRY(pb_int(r, field, wt, at, &type));
        } else {
            PL_TRY(pb_skip(r, wt));
        }
    }
    if (!piece || plen == 0)
        return pl_errorf(PL_ERR_FORMAT, "%s: piece %d (byte offset %zu) is empty", m->path,
                         (int)index, at0);
    if (type < 1 || type > 6)
        return pl_errorf(PL_ERR_FORMAT, "%s: piece %d '%.*s' has unknown type %lld", m->path,
                         (int)index, (int)(plen > 100 ? 100 : plen), (const char *)piece,
                         (long long)type);
    if (!pl_utf8_valid((const char *)piece, plen))
        return pl_errorf(PL_ERR_FORMAT, "%s: piece %d (byte offset %zu) is not valid UTF-8", m->path,
                         (int)index, at0);
    int32_t id;
    int added;
    PL_TRY(pl_strtab_add(&m->pieces, (const char *)piece, plen, &id, &added));
    if (!added)
        return pl_errorf(PL_ERR_FORMAT, "%s: piece %d '%.*s' is already defined (as piece %d)",
                         m->path, (int)index, (int)(plen > 100 ? 100 : plen), (const char *)piece,
                         (int)id);
    m->score[id] = score;
    m->type[id] = (uint8_t)type;
fail:
    return st;
}

static pl_status read_trainer(pl_sp_model *m, pb *r)
{
    pl_status st = PL_OK;
    uint32_t field;
    int wt;
    size_t at;
    int64_t v;
    for (;;) {
        PL_TRY(pb_key(r, &field, &wt, &at));
        if (!field)
            break;
        switch (field) {
        case 3:
            PL_TRY(pb_int(r, field, wt, at, &v));
            m->model_type = (int)v;
            break;
        case 24:
            PL_TRY(pb_int(r, field, wt, at, &v));
            m->treat_whitespace_as_suffix = v != 0;
            break;
        case 35:
            PL_TRY(pb_int(r, field, wt, at, &v));
            m->byte_fallback = v != 0;
            break;
        case 44:
            PL_TRY(pb_string(r, field, wt, at, &m->unk_surface));
            break;
        case 45:
            PL_TRY(pb_string(r, field, wt, at, &m->unk_piece));
            break;
        case 46:
            PL_TRY(pb_string(r, field, wt, at, &m->bos_piece));
            break;
        case 47:
            PL_TRY(pb_string(r, field, wt, at, &m->eos_piece));
            break;
        case 48:
            PL_TRY(pb_string(r, field, wt, at, &m->pad_piece));
            break;
        default:
            PL_TRY(pb_skip(r, wt));
        }
    }
fail:
    return st;
}

static pl_status read_normalizer(pl_sp_model *m, pb *r, int denorm)
{
    pl_status st = PL_OK;
    uint32_t field;
    int wt;
    size_t at;
    int64_t v;
    for (;;) {
        PL_TRY(pb_key(r, &field, &wt, &at));
        if (!field)
            break;
        if (field == 2) { /* precompiled_charsmap */
            const uint8_t *p;
            size_t n;
            PL_TRY(pb_expect(r, field, wt, 2, at));
            PL_TRY(pb_len(r, &p, &n));
            if (denorm) {
                m->denorm_charsmap_len = n;
            } else {
                pl_free(m->charsmap);
                m->charsmap_len = n;
                if (!(m->charsmap = pl_malloc(n + 4))) {
                    st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory", m->path);
                    goto fail;
                }
                memcpy(m->charsmap, p, n);
            }
        } else if (denorm) {
            PL_TRY(pb_skip(r, wt));
        } else if (field == 1) {
            PL_TRY(pb_string(r, field, wt, at, &m->norm_name));
        } else if (field >= 3 && field <= 5) {
            PL_TRY(pb_int(r, field, wt, at, &v));
            int *dst[3] = {&m->add_dummy_prefix, &m->remove_extra_whitespaces, &m->escape_whitespaces};
            *dst[field - 3] = v != 0;
        } else {
            PL_TRY(pb_skip(r, wt));
        }
    }
fail:
    return st;
}

/* Counts the pieces (field 1 entries) so the arrays are allocated once. */
static pl_status count_pieces(pb r, int64_t *n)
{
    pl_status st = PL_OK;
    uint32_t field;
    int wt;
    size_t at;
    *n = 0;
    for (;;) {
        PL_TRY(pb_key(&r, &field, &wt, &at));
        if (!field)
            break;
        *n += field == 1;
        PL_TRY(pb_skip(&r, wt));
    }
fail:
    return st;
}

static pl_status dup_default(char **s, const char *def)
{
    if (*s)
        return PL_OK;
    *s = pl_strdup(def);
    return *s ? PL_OK : pl_errorf(PL_ERR_NOMEM, "out of memory");
}

int32_t pl_sp_piece_to_id(const pl_sp_model *m, const char *s, size_t n)
{
    int32_t id = pl_strtab_find(&m->pieces, s, n);
    return id >= 0 ? id : m->unk_id;
}

static int32_t special_id(const pl_sp_model *m, const char *piece, int type)
{
    int32_t id = pl_sp_piece_to_id(m, piece, strlen(piece));
    return id >= 0 && m->type[id] == type ? id : -1;
}

static int mergeable(int type)
{
    return type == PL_SP_NORMAL || type == PL_SP_USER_DEFINED || type == PL_SP_UNUSED;
}

/* Ranks pieces by score (highest first; equal scores share a rank) and records every
 * split of a piece into two pieces as a merge. */
static pl_status build_bpe(pl_sp_model *m)
{
    pl_status st = PL_OK;
    int32_t n = m->pieces.n, *order = NULL;
    uint32_t *rank = NULL;
    static const char space[] = "\xE2\x96\x81"; /* U+2581 */
    order = pl_malloc((size_t)n * sizeof *order);
    rank = pl_malloc((size_t)n * sizeof *rank);
    if (!order || !rank) {
        st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory", m->path);
        goto fail;
    }
    int32_t k = 0;
    for (int32_t id = 0; id < n; id++)
        if (mergeable(m->type[id]))
            order[k++] = id;
    /* by score, highest first (Shell sort; equal scores get equal ranks, so their order
     * does not matter) */
    for (int32_t gap = k / 2; gap > 0; gap /= 2)
        for (int32_t i = gap; i < k; i++)
            for (int32_t j = i; j >= gap && m->score[order[j - gap]] < m->score[order[j]]; j -= gap) {
                int32_t t = order[j];
                order[j] = order[j - gap];
                order[j - gap] = t;
            }
    for (int32_t i = 0, r = 0; i < k; i++) {
        if (i > 0 && m->score[order[i]] != m->score[order[i - 1]])
            r = i;
        rank[order[i]] = (uint32_t)r;
    }
    PL_TRY(pl_bpe_table_init(&m->merges, 4 * (int64_t)k));
    int32_t space_id = pl_strtab_find(&m->pieces, space, 3);
    m->split_words = space_id >= 0 && mergeable(m->type[space_id]);
    for (int32_t i = 0; i < k; i++) {
        int32_t id = order[i];
        const char *s = pl_strtab_str(&m->pieces, id);
        size_t len = pl_strtab_len(&m->pieces, id);
        int leading = 1; /* still in the piece's leading U+2581 run */
        for (size_t p = 0; p < len;) {
            int32_t cp;
            size_t cl = pl_utf8_next((const unsigned char *)s + p, len - p, &cp);
            int32_t c = pl_strtab_find(&m->pieces, s + p, cl);
            if (m->type[id] == PL_SP_NORMAL && (c < 0 || !mergeable(m->type[c]))) {
                st = pl_errorf(PL_ERR_UNSUPPORTED, "%s: piece %d '%.100s' holds the character "
                               "'%.*s', which is not itself a piece; plait's BPE cannot "
                               "reproduce SentencePiece's merges for such a model", m->path,
                               (int)id, s, (int)cl, s + p);
                goto fail;
            }
            int is_space = cl == 3 && memcmp(s + p, space, 3) == 0;
            if (is_space && !leading)
                m->split_words = 0;
            if (!is_space)
                leading = 0;
            if (p > 0) {
                int32_t l = pl_strtab_find(&m->pieces, s, p);
                int32_t rr = pl_strtab_find(&m->pieces, s + p, len - p);
                if (l >= 0 && rr >= 0 && mergeable(m->type[l]) && mergeable(m->type[rr]))
                    PL_TRY(pl_bpe_table_put(&m->merges, l, rr, rank[id], id, 0));
            }
            p += cl;
        }
    }
fail:
    pl_free(order);
    pl_free(rank);
    return st;
}

/* <uint32 trie size in bytes><trie units><replacement strings> */
static pl_status decode_charsmap(pl_sp_model *m)
{
    if (!m->charsmap_len)
        return PL_OK;
    uint32_t trie_bytes;
    if (m->charsmap_len <= 4)
        return pl_errorf(PL_ERR_FORMAT, "%s: precompiled_charsmap of %zu bytes is too short",
                         m->path, m->charsmap_len);
    memcpy(&trie_bytes, m->charsmap, 4); /* little-endian, as the host here */
    if (trie_bytes >= m->charsmap_len - 4 || trie_bytes % 4)
        return pl_errorf(PL_ERR_FORMAT, "%s: precompiled_charsmap: trie of %u bytes in a blob of %zu",
                         m->path, trie_bytes, m->charsmap_len);
    /* the units start at byte 4 of a pl_malloc'd block: 4-aligned */
    m->cm_units = (const uint32_t *)(const void *)(m->charsmap + 4);
    m->cm_n_units = trie_bytes / 4;
    m->cm_strings = (const char *)m->charsmap + 4 + trie_bytes;
    m->cm_strings_len = m->charsmap_len - 4 - trie_bytes;
    if (m->cm_n_units == 0)
        return pl_errorf(PL_ERR_FORMAT, "%s: precompiled_charsmap: empty trie", m->path);
    return PL_OK;
}

/* Darts-clone's unit: has_leaf bit 8, value bits 0..30, label bits 0..7 and 31,
 * offset (bits 10..31) shifted left by 8 when bit 9 is set. */
static uint32_t unit_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }
static uint32_t unit_label(uint32_t u) { return u & ((1u << 31) | 0xFF); }

size_t pl_sp_charsmap_match(const pl_sp_model *m, const uint8_t *s, size_t n, const char **rep,
                            size_t *rep_len)
{
    const uint32_t *u = m->cm_units;
    size_t nu = m->cm_n_units, best = 0;
    uint32_t best_value = 0;
    if (!nu)
        return 0;
    uint32_t id = unit_offset(u[0]);
    for (size_t i = 0; i < n; i++) { /* commonPrefixSearch, keeping the longest */
        id ^= s[i];
        if (id >= nu || unit_label(u[id]) != s[i])
            break;
        uint32_t unit = u[id];
        id ^= unit_offset(unit);
        if ((unit >> 8) & 1) {
            if (id >= nu)
                break;
            best = i + 1;
            best_value = u[id] & ((1u << 31) - 1);
        }
    }
    if (!best || best_value >= m->cm_strings_len)
        return 0;
    *rep = m->cm_strings + best_value;
    *rep_len = strnlen(*rep, m->cm_strings_len - best_value);
    return best;
}

static pl_status build_unigram(pl_sp_model *m)
{
    pl_status st = PL_OK;
    m->min_score = FLT_MAX;
    m->max_score = FLT_MIN;
    for (int32_t id = 0; id < m->pieces.n; id++) {
        int type = m->type[id];
        if (type == PL_SP_NORMAL) {
            if (m->score[id] < m->min_score)
                m->min_score = m->score[id];
            if (m->score[id] > m->max_score)
                m->max_score = m->score[id];
        }
        if (mergeable(type))
            PL_TRY(pl_trie_add(&m->piece_trie, pl_strtab_str(&m->pieces, id),
                               pl_strtab_len(&m->pieces, id), id));
    }
fail:
    return st;
}

/* The byte of "<0xXX>" with XX two upper-case hex digits (SentencePiece's
 * PieceToByte knows only the 256 canonical spellings), else -1. */
static int byte_of_piece(const char *s, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return -1;
    const char *hi = s[3] ? strchr(hex, s[3]) : NULL, *lo = s[4] ? strchr(hex, s[4]) : NULL;
    return hi && lo ? (int)((hi - hex) * 16 + (lo - hex)) : -1;
}

static pl_status check_model(pl_sp_model *m)
{
    pl_status st = PL_OK;
    int byte_seen[256] = {0};
    m->unk_id = -1;
    for (int32_t id = 0; id < m->pieces.n; id++) {
        const char *s = pl_strtab_str(&m->pieces, id);
        size_t len = pl_strtab_len(&m->pieces, id);
        switch (m->type[id]) {
        case PL_SP_UNKNOWN:
            if (m->unk_id >= 0)
                return pl_errorf(PL_ERR_FORMAT, "%s: unk is already defined (pieces %d and %d)",
                                 m->path, (int)m->unk_id, (int)id);
            m->unk_id = id;
            break;
        case PL_SP_UNUSED:
            if (m->model_type == PL_SP_BPE)
                return pl_errorf(PL_ERR_UNSUPPORTED, "%s: piece %d '%.100s' is UNUSED; SentencePiece's "
                                 "BPE re-segments such pieces, which plait does not implement",
                                 m->path, (int)id, s);
            break;
        case PL_SP_USER_DEFINED:
            PL_TRY(pl_trie_add(&m->user_defined, s, len, id));
            break;
        case PL_SP_BYTE: {
            int b = byte_of_piece(s, len);
            if (!m->byte_fallback)
                return pl_errorf(PL_ERR_FORMAT, "%s: byte piece %.20s is found although "
                                 "byte_fallback is false", m->path, s);
            if (b < 0)
                return pl_errorf(PL_ERR_FORMAT, "%s: byte piece %.20s is invalid (expected <0x00> "
                                 "to <0xFF>)", m->path, s);
            byte_seen[b] = 1;
            m->byte_id[b] = id;
            break;
        }
        default:
            break;
        }
    }
    if (m->unk_id < 0)
        return pl_errorf(PL_ERR_FORMAT, "%s: unk is not defined (no piece of type UNKNOWN)", m->path);
    if (m->byte_fallback)
        for (int b = 0; b < 256; b++)
            if (!byte_seen[b])
                return pl_errorf(PL_ERR_FORMAT, "%s: there are not 256 byte pieces although "
                                 "byte_fallback is true (no <0x%02X>)", m->path, b);
    if (m->model_type != PL_SP_BPE && m->model_type != PL_SP_UNIGRAM) {
        static const char *names[] = {"?", "UNIGRAM", "BPE", "WORD", "CHAR"};
        return pl_errorf(PL_ERR_UNSUPPORTED, "%s: model_type %s is not supported (plait implements "
                         "SentencePiece's BPE and unigram models)", m->path,
                         m->model_type >= 1 && m->model_type <= 4 ? names[m->model_type] : "?");
    }
    if (m->denorm_charsmap_len)
        return pl_errorf(PL_ERR_UNSUPPORTED, "%s: the denormalizer has a precompiled charsmap (%zu "
                         "bytes); plait does not implement denormalization", m->path,
                         m->denorm_charsmap_len);
    PL_TRY(decode_charsmap(m));
    if (m->model_type == PL_SP_BPE)
        PL_TRY(build_bpe(m));
    else
        PL_TRY(build_unigram(m));
fail:
    return st;
}

static void model_free(pl_sp_model *m)
{
    if (!m)
        return;
    pl_free(m->path);
    pl_strtab_free(&m->pieces);
    pl_free(m->score);
    pl_free(m->type);
    pl_free(m->unk_piece);
    pl_free(m->bos_piece);
    pl_free(m->eos_piece);
    pl_free(m->pad_piece);
    pl_free(m->unk_surface);
    pl_free(m->norm_name);
    pl_trie_free(&m->user_defined);
    pl_trie_free(&m->piece_trie);
    pl_bpe_table_free(&m->merges);
    pl_free(m->charsmap);
    pl_free(m);
}

pl_status pl_sp_model_parse(pl_sp_model **out, const uint8_t *data, size_t n, const char *path)
{
    pl_status st = PL_OK;
    *out = NULL;
    pl_sp_model *m = pl_calloc(1, sizeof *m);
    if (!m)
        return pl_errorf(PL_ERR_NOMEM, "%s: out of memory", path);
    atomic_init(&m->refs, 1);
    m->model_type = PL_SP_UNIGRAM;
    m->add_dummy_prefix = m->remove_extra_whitespaces = m->escape_whitespaces = 1;
    for (int b = 0; b < 256; b++)
        m->byte_id[b] = -1;
    if (!(m->path = pl_strdup(path))) {
        st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    pb r = {data, n, 0, 0, path, "ModelProto"};
    int64_t npieces;
    PL_TRY(count_pieces(r, &npieces));
    if (npieces == 0 || npieces >= INT32_MAX) {
        st = pl_errorf(PL_ERR_FORMAT, "%s: not a SentencePiece model (%lld pieces)", path,
                       (long long)npieces);
        goto fail;
    }
    m->score = pl_calloc((size_t)npieces, sizeof *m->score);
    m->type = pl_calloc((size_t)npieces, sizeof *m->type);
    if (!m->score || !m->type) {
        st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory for %lld pieces", path, (long long)npieces);
        goto fail;
    }
    uint32_t field;
    int wt;
    size_t at;
    int32_t index = 0;
    for (;;) {
        PL_TRY(pb_key(&r, &field, &wt, &at));
        if (!field)
            break;
        const uint8_t *p;
        size_t len;
        if (field >= 1 && field <= 5 && field != 4) {
            static const char *what[] = {"", "SentencePiece", "TrainerSpec", "NormalizerSpec", "",
                                         "denormalizer NormalizerSpec"};
            PL_TRY(pb_expect(&r, field, wt, 2, at));
            PL_TRY(pb_len(&r, &p, &len));
            pb s = sub(&r, p, len, what[field]);
            if (field == 1)
                PL_TRY(read_piece(m, &s, index++, at));
            else if (field == 2)
                PL_TRY(read_trainer(m, &s));
            else
                PL_TRY(read_normalizer(m, &s, field == 5));
        } else {
            PL_TRY(pb_skip(&r, wt));
        }
    }
    PL_TRY(dup_default(&m->unk_piece, "<unk>"));
    PL_TRY(dup_default(&m->bos_piece, "<s>"));
    PL_TRY(dup_default(&m->eos_piece, "</s>"));
    PL_TRY(dup_default(&m->pad_piece, "<pad>"));
    PL_TRY(dup_default(&m->unk_surface, " \xE2\x81\x87 "));
    PL_TRY(check_model(m));
    m->bos_id = special_id(m, m->bos_piece, PL_SP_CONTROL);
    m->eos_id = special_id(m, m->eos_piece, PL_SP_CONTROL);
    m->pad_id = special_id(m, m->pad_piece, PL_SP_CONTROL);
    *out = m;
    return PL_OK;
fail:
    model_free(m);
    return st;
}

pl_status pl_sp_model_load(pl_sp_model **out, const char *path)
{
    char *buf = NULL;
    size_t n;
    *out = NULL;
    pl_status st = pl_file_read_all(path, &buf, &n);
    if (st)
        return st;
    st = pl_sp_model_parse(out, (const uint8_t *)buf, n, path);
    pl_free(buf);
    return st;
}

void pl_sp_model_retain(pl_sp_model *m) { atomic_fetch_add(&m->refs, 1); }

void pl_sp_model_release(pl_sp_model *m)
{
    if (m && atomic_fetch_sub(&m->refs, 1) == 1)
        model_free(m);
}
