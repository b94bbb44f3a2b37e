/* SQuAD v1.1 span decoding: run_squad.py's write_predictions (the n-best
 * list and the best answer) and get_final_text (see squad.h). */
#include "finetune/squad.h"

#include "base/alloc.h"
#include "base/utf8.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Indices of the k largest of x[0..n), largest first, lower index first on
 * ties (Python's stable sort by value, descending). */
static int64_t top_k(const float *x, int64_t n, int64_t k, int64_t *idx)
{
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t p;
        if (m < k)
            p = m++;
        else if (x[i] > x[idx[k - 1]])
            p = k - 1;
        else
            continue;
        while (p > 0 && x[i] > x[idx[p - 1]]) {
            idx[p] = idx[p - 1];
            p--;
        }
        idx[p] = i;
    }
    return m;
}

typedef struct u32s {
    int32_t *c;
    int64_t n, cap;
} u32s;

static pl_status u32_push(u32s *v, int32_t c)
{
    if (v->n == v->cap) {
        int64_t cap = v->cap ? 2 * v->cap : 64;
        int32_t *p = pl_realloc(v->c, (size_t)cap * sizeof *p);
        if (!p)
            return pl_errorf(PL_ERR_NOMEM, "SQuAD decoding: %lld characters", (long long)cap);
        v->c = p, v->cap = cap;
    }
    v->c[v->n++] = c;
    return PL_OK;
}

static pl_status u32_append(u32s *v, const char *s, size_t n)
{
    pl_status st = PL_OK;
    for (size_t i = 0; i < n && st == PL_OK;) {
        int32_t c;
        i += pl_utf8_next((const unsigned char *)s + i, n - i, &c);
        st = u32_push(v, c);
    }
    return st;
}

/* get_final_text(pred, orig): the span of orig that pred (basic-token text)
 * covers, or NULL-length -1 when the alignment fails. Positions are code
 * points of orig. */
static void final_span(const u32s *pred, const u32s *tok, const u32s *orig, int64_t *os, int64_t *oe)
{
    *os = *oe = -1;
    int64_t start = -1;
    for (int64_t i = 0; i + pred->n <= tok->n && pred->n > 0; i++)
        if (memcmp(tok->c + i, pred->c, (size_t)pred->n * sizeof(int32_t)) == 0) {
            start = i;
            break;
        }
    if (start < 0)
        return;
    int64_t end = start + pred->n - 1;
    int64_t orig_ns = 0, tok_ns = 0;
    for (int64_t i = 0; i < orig->n; i++)
        orig_ns += orig->c[i] != ' ';
    for (int64_t i = 0; i < tok->n; i++)
        tok_ns += tok->c[i] != ' ';
    if (orig_ns != tok_ns)
        return;
    /* tok position -> non-space index (only when not a space), then the
     * orig position of that non-space index. */
    if (tok->c[start] == ' ' || tok->c[end] == ' ')
        return;
    int64_t ns_s = 0, ns_e = 0;
    for (int64_t i = 0; i < start; i++)
        ns_s += tok->c[i] != ' ';
    for (int64_t i = 0; i < end; i++)
        ns_e += tok->c[i] != ' ';
    for (int64_t i = 0, k = 0; i < orig->n; i++) {
        if (orig->c[i] == ' ')
            continue;
        if (k == ns_s)
            *os = i;
        if (k == ns_e)
            *oe = i;
        k++;
    }
    if (*os < 0 || *oe < 0)
        *os = *oe = -1;
}

static pl_status put_cps(const int32_t *c, int64_t n, pl_bytes *out)
{
    pl_status st = PL_OK;
    for (int64_t i = 0; i < n && st == PL_OK; i++) {
        char b[4];
        uint32_t v = (uint32_t)c[i];
        size_t k;
        if (v < 0x80)
            b[0] = (char)v, k = 1;
        else if (v < 0x800)
            b[0] = (char)(0xC0 | (v >> 6)), b[1] = (char)(0x80 | (v & 0x3F)), k = 2;
        else if (v < 0x10000)
            b[0] = (char)(0xE0 | (v >> 12)), b[1] = (char)(0x80 | ((v >> 6) & 0x3F)), b[2] = (char)(0x80 | (v & 0x3F)), k = 3;
        else
            b[0] = (char)(0xF0 | (v >> 18)), b[1] = (char)(0x80 | ((v >> 12) & 0x3F)),
            b[2] = (char)(0x80 | ((v >> 6) & 0x3F)), b[3] = (char)(0x80 | (v & 0x3F)), k = 4;
        st = pl_bytes_append(out, b, k);
    }
    return st;
}

/* The text of doc tokens [ts, te] of words [ws, we], as run_squad.py builds it. */
static pl_status span_text(pl_tokenizer *t, const pl_squad_doc *doc, int64_t ts, int64_t te, pl_bytes *out)
{
    int64_t ws = doc->tok_to_word[ts], we = doc->tok_to_word[te];
    u32s pred = {0}, tok = {0}, orig = {0};
    pl_bytes tmp = {0};
    pl_status st = PL_OK;
    int unk = 0;
    int32_t unk_id = pl_tokenizer_token_id(t, "[UNK]");
    /* orig_text: the words joined by spaces. */
    for (int64_t w = ws; w <= we; w++) {
        if (w > ws)
            PL_TRY(u32_push(&orig, ' '));
        PL_TRY(u32_append(&orig, doc->text + doc->word_start[w], (size_t)(doc->word_end[w] - doc->word_start[w])));
    }
    /* tok_text (BasicTokenizer's, rebuilt from the pieces) and pred_text
     * (" ".join(tokens) with " ##" then "##" removed, whitespace cleaned). */
    for (int64_t i = doc->word_to_tok[ws]; i < doc->word_to_tok[we + 1]; i++) {
        size_t n;
        const char *p = pl_bert_tokenizer_piece(t, doc->tok.data[i], &n);
        if (!p) {
            st = pl_errorf(PL_ERR_INTERNAL, "SQuAD decoding: token id %d has no piece", doc->tok.data[i]);
            goto fail;
        }
        unk |= doc->tok.data[i] == unk_id;
        int cont = n >= 2 && p[0] == '#' && p[1] == '#';
        if (tok.n && !cont)
            PL_TRY(u32_push(&tok, ' '));
        PL_TRY(u32_append(&tok, p + (cont ? 2 : 0), n - (cont ? 2 : 0)));
        if (i >= ts && i <= te) {
            if (i > ts)
                PL_TRY(pl_bytes_append(&tmp, " ", 1));
            PL_TRY(pl_bytes_append(&tmp, p, n));
        }
    }
    /* replace(" ##", "") then replace("##", "") then strip and split/join. */
    {
        size_t w = 0;
        char *s = tmp.data;
        for (size_t r = 0; r < tmp.n;) {
            if (r + 3 <= tmp.n && memcmp(s + r, " ##", 3) == 0)
                r += 3;
            else
                s[w++] = s[r++];
        }
        tmp.n = w;
        w = 0;
        for (size_t r = 0; r < tmp.n;) {
            if (r + 2 <= tmp.n && s[r] == '#' && s[r + 1] == '#')
                r += 2;
            else
                s[w++] = s[r++];
        }
        tmp.n = w;
        int pending = 0;
        for (size_t r = 0; r < tmp.n; r++) {
            if (s[r] == ' ') {
                pending = pred.n > 0;
                continue;
            }
            if (pending)
                PL_TRY(u32_push(&pred, ' '));
            pending = 0;
            size_t k = r;
            while (k < tmp.n && s[k] != ' ')
                k++;
            PL_TRY(u32_append(&pred, s + r, k - r));
            r = k - 1;
        }
    }
    int64_t os = -1, oe = -1;
    if (!unk)
        final_span(&pred, &tok, &orig, &os, &oe);
    if (os >= 0)
        st = put_cps(orig.c + os, oe - os + 1, out);
    else
        st = put_cps(orig.c, orig.n, out);
fail:
    pl_free(pred.c);
    pl_free(tok.c);
    pl_free(orig.c);
    pl_bytes_free(&tmp);
    return st;
}

typedef struct cand {
    double score;
    int64_t order, j, s, e; /* order: position in run_squad.py's prelim list */
} cand;

static int cand_cmp(const void *pa, const void *pb)
{
    const cand *a = pa, *b = pb;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

static pl_status cand_push(pl_squad_nbest *nb, int64_t *n, cand c)
{
    if (*n == nb->cand_cap) {
        int64_t cap = nb->cand_cap ? 2 * nb->cand_cap : 256;
        cand *p = pl_realloc(nb->cand, (size_t)cap * sizeof *p);
        if (!p)
            return pl_errorf(PL_ERR_NOMEM, "SQuAD decoding: %lld candidate spans", (long long)cap);
        nb->cand = p, nb->cand_cap = cap;
    }
    ((cand *)nb->cand)[(*n)++] = c;
    return PL_OK;
}

static pl_status entry_push(pl_squad_nbest *nb, size_t text, float sl, float el)
{
    if (nb->n == nb->cap) {
        int64_t cap = nb->cap ? 2 * nb->cap : 32;
        pl_squad_nbest_entry *p = pl_realloc(nb->e, (size_t)cap * sizeof *p);
        if (!p)
            return pl_errorf(PL_ERR_NOMEM, "SQuAD decoding: %lld n-best entries", (long long)cap);
        nb->e = p, nb->cap = cap;
    }
    nb->e[nb->n++] = (pl_squad_nbest_entry){text, sl, el, 0.0};
    return PL_OK;
}

/* The valid (start, end) pairs of every feature, in run_squad.py's prelim
 * order, then ranked. */
static pl_status candidates(const pl_squad_features *fs, const int64_t *feats, int64_t n_feat,
                            const float *start_logits, const float *end_logits, int64_t k,
                            const pl_squad_decode_config *cfg, pl_squad_nbest *nb, int64_t *n_cand)
{
    const int64_t max_answer_len = cfg->max_answer_len;
    int64_t null_j = -1;
    int64_t L = fs->seq_len;
    int64_t *si = pl_malloc((size_t)k * sizeof *si), *ei = pl_malloc((size_t)k * sizeof *ei);
    pl_status st = PL_OK;
    *n_cand = 0;
    if (!si || !ei) {
        st = pl_errorf(PL_ERR_NOMEM, "SQuAD decoding: n_best %lld", (long long)k);
        goto fail;
    }
    for (int64_t j = 0; j < n_feat; j++) {
        const pl_squad_feature *f = &fs->f[feats[j]];
        const float *sl = start_logits + j * L, *el = end_logits + j * L;
        int64_t ns = top_k(sl, L, k, si), ne = top_k(el, L, k, ei);
        int64_t lo = f->doc_offset, hi = f->doc_offset + f->doc_len; /* context positions [lo, hi) */
        if (cfg->version_2 && (double)sl[0] + (double)el[0] < nb->score_null)
            nb->score_null = (double)sl[0] + (double)el[0], null_j = j;
        for (int64_t a = 0; a < ns; a++) {
            int64_t s = si[a];
            if (s < lo || s >= hi || !fs->max_context[feats[j] * L + s])
                continue;
            for (int64_t b = 0; b < ne; b++) {
                int64_t e = ei[b];
                if (e < lo || e >= hi || e < s || e - s + 1 > max_answer_len)
                    continue;
                cand c = {(double)sl[s] + (double)el[e], *n_cand, j, s, e};
                PL_TRY(cand_push(nb, n_cand, c));
            }
        }
    }
    if (cfg->version_2) { /* the null span; j -1: no window, logits 0 */
        double v = null_j < 0 ? 0.0 : (double)start_logits[null_j * L] + (double)end_logits[null_j * L];
        cand c = {v, *n_cand, null_j, 0, 0};
        PL_TRY(cand_push(nb, n_cand, c));
    }
    if (*n_cand > 1)
        qsort(nb->cand, (size_t)*n_cand, sizeof(cand), cand_cmp);
fail:
    pl_free(si);
    pl_free(ei);
    return st;
}

pl_status pl_squad_decode_nbest(pl_tokenizer *t, const pl_squad_features *fs, const pl_squad_doc *doc,
                                const int64_t *feats, int64_t n_feat, const float *start_logits,
                                const float *end_logits, const pl_squad_decode_config *cfg,
                                pl_squad_nbest *nb)
{
    int64_t L = fs->seq_len, k = cfg->n_best, n_cand;
    if (k <= 0 || cfg->max_answer_len <= 0)
        return pl_errorf(PL_ERR_ARG, "SQuAD decoding: n_best %lld and max_answer_len %lld must be positive",
                         (long long)k, (long long)cfg->max_answer_len);
    pl_status st = PL_OK;
    nb->n = 0, nb->empty = 0, nb->texts.n = 0;
    if (nb->texts.data)
        nb->texts.data[0] = '\0';
    nb->pred = -1, nb->score_null = 1000000.0, nb->score_diff = 0.0; /* run_squad.py's start */
    PL_TRY(candidates(fs, feats, n_feat, start_logits, end_logits, k < L ? k : L, cfg, nb, &n_cand));
    const cand *c = nb->cand;
    int null_seen = 0;
    for (int64_t i = 0; i < n_cand && nb->n < cfg->n_best; i++) {
        if (c[i].s == 0) { /* v2.0's null span */
            size_t at = nb->texts.n;
            PL_TRY(pl_bytes_append(&nb->texts, "", 1));
            PL_TRY(entry_push(nb, at, c[i].j < 0 ? 0.0f : start_logits[c[i].j * L],
                              c[i].j < 0 ? 0.0f : end_logits[c[i].j * L]));
            null_seen = 1;
            continue;
        }
        const pl_squad_feature *f = &fs->f[feats[c[i].j]];
        size_t at = nb->texts.n;
        PL_TRY(span_text(t, doc, f->doc_start + c[i].s - f->doc_offset, f->doc_start + c[i].e - f->doc_offset,
                             &nb->texts));
        PL_TRY(pl_bytes_append(&nb->texts, "", 1)); /* the text's NUL */
        int seen = 0;
        for (int64_t m = 0; m < nb->n && !seen; m++)
            seen = strcmp(nb->texts.data + nb->e[m].text, nb->texts.data + at) == 0;
        if (seen) {
            nb->texts.n = at;
            continue;
        }
        PL_TRY(entry_push(nb, at, start_logits[c[i].j * L + c[i].s], end_logits[c[i].j * L + c[i].e]));
    }
    if (cfg->version_2 && !null_seen) {
        const cand *z = c;
        while (z->s != 0) /* the null span is always a candidate under v2.0 */
            z++;
        size_t at = nb->texts.n;
        PL_TRY(pl_bytes_append(&nb->texts, "", 1));
        PL_TRY(entry_push(nb, at, z->j < 0 ? 0.0f : start_logits[z->j * L], z->j < 0 ? 0.0f : end_logits[z->j * L]));
    }
    if (nb->n == 0) {
        size_t at = nb->texts.n;
        PL_TRY(pl_bytes_append(&nb->texts, "empty", 6));
        PL_TRY(entry_push(nb, at, 0.0f, 0.0f));
        nb->empty = 1;
    }
    /* _compute_softmax */
    double mx = 0, sum = 0;
    for (int64_t m = 0; m < nb->n; m++) {
        double v = (double)nb->e[m].start_logit + (double)nb->e[m].end_logit;
        if (m == 0 || v > mx)
            mx = v;
    }
    for (int64_t m = 0; m < nb->n; m++) {
        nb->e[m].probability = exp((double)nb->e[m].start_logit + (double)nb->e[m].end_logit - mx);
        sum += nb->e[m].probability;
    }
    for (int64_t m = 0; m < nb->n; m++)
        nb->e[m].probability /= sum;
    for (int64_t m = 0; m < nb->n && nb->pred < 0; m++) /* best_non_null_entry */
        if (pl_squad_nbest_text(nb, m)[0])
            nb->pred = m;
    if (cfg->version_2) {
        if (nb->pred < 0)
            nb->score_diff = INFINITY;
        else
            nb->score_diff = nb->score_null - (double)nb->e[nb->pred].start_logit - (double)nb->e[nb->pred].end_logit;
        if (nb->score_diff > cfg->null_threshold)
            nb->pred = -1;
    } else if (nb->empty) {
        nb->pred = -1;
    }
fail:
    return st;
}

const char *pl_squad_nbest_text(const pl_squad_nbest *nb, int64_t i)
{
    return nb->texts.data + nb->e[i].text;
}

void pl_squad_nbest_free(pl_squad_nbest *nb)
{
    pl_free(nb->e);
    pl_free(nb->cand);
    pl_bytes_free(&nb->texts);
    *nb = (pl_squad_nbest){0};
}

static pl_status json_string(pl_bytes *out, const char *s)
{
    pl_status st = pl_bytes_append(out, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p && !st; p++) {
        if (*p == '"' || *p == '\\')
            st = pl_bytes_printf(out, "\\%c", *p);
        else if (*p < 0x20)
            st = pl_bytes_printf(out, "\\u%04x", *p);
        else
            st = pl_bytes_append(out, p, 1);
    }
    return st ? st : pl_bytes_append(out, "\"", 1);
}

static pl_status json_number(pl_bytes *out, double v)
{
    if (isnan(v))
        return pl_bytes_printf(out, "NaN");
    if (isinf(v))
        return pl_bytes_printf(out, v > 0 ? "Infinity" : "-Infinity");
    return pl_bytes_printf(out, "%.17g", v);
}

pl_status pl_squad_nbest_json(const pl_squad_nbest *nb, const char *id, pl_bytes *out)
{
    pl_status st = PL_OK;
    PL_TRY(json_string(out, id));
    PL_TRY(pl_bytes_append(out, ": [", 3));
    for (int64_t m = 0; m < nb->n; m++) {
        PL_TRY(pl_bytes_printf(out, "%s{\"text\": ", m ? ", " : ""));
        PL_TRY(json_string(out, pl_squad_nbest_text(nb, m)));
        PL_TRY(pl_bytes_printf(out, ", \"probability\": "));
        PL_TRY(json_number(out, nb->e[m].probability));
        PL_TRY(pl_bytes_printf(out, ", \"start_logit\": "));
        PL_TRY(json_number(out, nb->e[m].start_logit));
        PL_TRY(pl_bytes_printf(out, ", \"end_logit\": "));
        PL_TRY(json_number(out, nb->e[m].end_logit));
        PL_TRY(pl_bytes_append(out, "}", 1));
    }
    st = pl_bytes_append(out, "]", 1);
fail:
    return st;
}

pl_status pl_squad_null_odds_json(const pl_squad_nbest *nb, const char *id, const char *sep, pl_bytes *out)
{
    pl_status st = pl_bytes_append(out, sep, strlen(sep));
    if (!st)
        st = json_string(out, id);
    if (!st)
        st = pl_bytes_append(out, ": ", 2);
    return st ? st : json_number(out, nb->score_diff);
}

pl_status pl_squad_decode(pl_tokenizer *t, const pl_squad_features *fs, const pl_squad_doc *doc,
                          const int64_t *feats, int64_t n_feat, const float *start_logits,
                          const float *end_logits, const pl_squad_decode_config *cfg, pl_bytes *out,
                          float *score)
{
    pl_squad_nbest nb = {0};
    pl_status st = pl_squad_decode_nbest(t, fs, doc, feats, n_feat, start_logits, end_logits, cfg, &nb);
    if (!st && score)
        *score = nb.empty ? 0.0f : (float)((double)nb.e[0].start_logit + (double)nb.e[0].end_logit);
    if (!st && nb.pred >= 0) {
        const char *s = pl_squad_nbest_text(&nb, nb.pred);
        st = pl_bytes_append(out, s, strlen(s));
    }
    pl_squad_nbest_free(&nb);
    return st;
}
