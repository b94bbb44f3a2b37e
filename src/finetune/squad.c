/* SQuAD v1.1 reading, context words and WordPiece features (see squad.h). */
#include "finetune/squad.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/json.h"
#include "base/utf8.h"

#include <cjson/cJSON.h>
#include <string.h>

/* ---- reading ---- */

typedef struct sq_builder {
    pl_bytes arena;
    int64_t *ctx_off; /* offsets while the arena grows */
    int64_t n_ctx, cap_ctx;
    struct q_off {
        int64_t id, question, context, first_answer, n_answers;
        int impossible;
    } * q;
    int64_t n_q, cap_q;
    struct a_off {
        int64_t text, start;
    } * a;
    int64_t n_a, cap_a;
} sq_builder;

static pl_status grow(void **p, int64_t *cap, int64_t need, size_t elem)
{
    if (need <= *cap)
        return PL_OK;
    int64_t c = *cap ? *cap * 2 : 64;
    while (c < need)
        c *= 2;
    void *np = pl_realloc(*p, (size_t)c * elem);
    if (!np)
        return pl_errorf(PL_ERR_NOMEM, "SQuAD: %lld entries", (long long)c);
    *p = np, *cap = c;
    return PL_OK;
}

/* A string member of o, checked for UTF-8, appended to the arena. */
static pl_status get_str(sq_builder *b, const cJSON *o, const char *key, int64_t *off, const char *name,
                         const char *where)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(v))
        return pl_errorf(PL_ERR_FORMAT, "%s: %s: %s \"%s\"", name, where, v ? "non-string" : "no", key);
    size_t n = strlen(v->valuestring);
    if (!pl_utf8_valid(v->valuestring, n))
        return pl_errorf(PL_ERR_FORMAT, "%s: %s: \"%s\" is not valid UTF-8", name, where, key);
    *off = (int64_t)b->arena.n;
    pl_status st = pl_bytes_append(&b->arena, v->valuestring, n + 1);
    return st;
}

static const cJSON *get_array(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsArray(v) ? v : NULL;
}

static pl_status read_qa(sq_builder *b, const cJSON *qa, int64_t ctx, const char *name, char *where,
                         size_t wn)
{
    pl_status st;
    size_t base = strlen(where);
    if (!cJSON_IsObject(qa))
        return pl_errorf(PL_ERR_FORMAT, "%s: %s: expected an object", name, where);
    const cJSON *imp = cJSON_GetObjectItemCaseSensitive(qa, "is_impossible");
    if (imp && !cJSON_IsBool(imp))
        return pl_errorf(PL_ERR_FORMAT, "%s: %s: \"is_impossible\" must be true or false", name, where);
    if ((st = grow((void **)&b->q, &b->cap_q, b->n_q + 1, sizeof *b->q)))
        return st;
    struct q_off *q = &b->q[b->n_q];
    *q = (struct q_off){.context = ctx, .first_answer = b->n_a, .impossible = cJSON_IsTrue(imp)};
    if ((st = get_str(b, qa, "id", &q->id, name, where)) || (st = get_str(b, qa, "question", &q->question, name, where)))
        return st;
    const cJSON *ans = get_array(qa, "answers");
    if (!ans)
        return pl_errorf(PL_ERR_FORMAT, "%s: %s: no \"answers\" array", name, where);
    int64_t k = 0;
    for (const cJSON *a = q->impossible ? NULL : ans->child; a; a = a->next, k++) {
        snprintf(where + base, wn - base, ".answers[%lld]", (long long)k);
        if (!cJSON_IsObject(a))
            return pl_errorf(PL_ERR_FORMAT, "%s: %s: expected an object", name, where);
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(a, "answer_start");
        if (!cJSON_IsNumber(s) || !(s->valuedouble >= 0 && s->valuedouble <= 1e15) ||
            s->valuedouble != (double)(int64_t)s->valuedouble)
            return pl_errorf(PL_ERR_FORMAT, "%s: %s: \"answer_start\" must be a non-negative integer", name, where);
        if ((st = grow((void **)&b->a, &b->cap_a, b->n_a + 1, sizeof *b->a)))
            return st;
        b->a[b->n_a].start = (int64_t)s->valuedouble;
        if ((st = get_str(b, a, "text", &b->a[b->n_a].text, name, where)))
            return st;
        b->n_a++;
    }
    where[base] = '\0';
    b->q[b->n_q].n_answers = k;
    b->n_q++;
    return PL_OK;
}

static pl_status read_tree(sq_builder *b, const cJSON *root, const char *name)
{
    char where[160];
    pl_status st;
    const cJSON *data = cJSON_IsObject(root) ? get_array(root, "data") : NULL;
    if (!data)
        return pl_errorf(PL_ERR_FORMAT, "%s: expected an object with a \"data\" array (SQuAD v1.1)", name);
    int64_t i = 0;
    for (const cJSON *art = data->child; art; art = art->next, i++) {
        const cJSON *paras = cJSON_IsObject(art) ? get_array(art, "paragraphs") : NULL;
        if (!paras)
            return pl_errorf(PL_ERR_FORMAT, "%s: data[%lld]: no \"paragraphs\" array", name, (long long)i);
        int64_t j = 0;
        for (const cJSON *p = paras->child; p; p = p->next, j++) {
            snprintf(where, sizeof where, "data[%lld].paragraphs[%lld]", (long long)i, (long long)j);
            if (!cJSON_IsObject(p))
                return pl_errorf(PL_ERR_FORMAT, "%s: %s: expected an object", name, where);
            if ((st = grow((void **)&b->ctx_off, &b->cap_ctx, b->n_ctx + 1, sizeof *b->ctx_off)) ||
                (st = get_str(b, p, "context", &b->ctx_off[b->n_ctx], name, where)))
                return st;
            const cJSON *qas = get_array(p, "qas");
            if (!qas)
                return pl_errorf(PL_ERR_FORMAT, "%s: %s: no \"qas\" array", name, where);
            int64_t k = 0;
            for (const cJSON *qa = qas->child; qa; qa = qa->next, k++) {
                snprintf(where, sizeof where, "data[%lld].paragraphs[%lld].qas[%lld]", (long long)i,
                         (long long)j, (long long)k);
                if ((st = read_qa(b, qa, b->n_ctx, name, where, sizeof where)))
                    return st;
            }
            b->n_ctx++;
        }
    }
    if (b->n_q == 0)
        return pl_errorf(PL_ERR_FORMAT, "%s: no questions", name);
    return PL_OK;
}

void pl_squad_set_free(pl_squad_set *s)
{
    pl_free(s->contexts);
    pl_free(s->q);
    pl_free(s->answers);
    pl_free(s->arena);
    pl_free(s->path);
    *s = (pl_squad_set){0};
}

pl_status pl_squad_parse(pl_squad_set *out, const char *text, size_t n, const char *name)
{
    *out = (pl_squad_set){0};
    sq_builder b = {0};
    pl_status st = PL_OK;
    pl_json_init();
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, n, &end, 0);
    if (!root) {
        if (pl_json_oom_take())
            return pl_errorf(PL_ERR_NOMEM, "%s: parsing JSON", name);
        size_t at = end && end >= text && end <= text + n ? (size_t)(end - text) : 0;
        int64_t line = 1, col = 1;
        for (size_t i = 0; i < at; i++)
            text[i] == '\n' ? (line++, col = 1) : col++;
        return pl_errorf(PL_ERR_FORMAT, "%s:%lld:%lld: invalid JSON", name, (long long)line, (long long)col);
    }
    PL_TRY(read_tree(&b, root, name));
    out->contexts = pl_malloc((size_t)b.n_ctx * sizeof *out->contexts);
    out->q = pl_malloc((size_t)b.n_q * sizeof *out->q);
    out->answers = pl_malloc(((size_t)b.n_a + 1) * sizeof *out->answers);
    out->path = pl_strdup(name);
    if (!out->contexts || !out->q || !out->answers || !out->path) {
        st = pl_errorf(PL_ERR_NOMEM, "%s: %lld questions", name, (long long)b.n_q);
        goto fail;
    }
    out->arena = b.arena.data;
    b.arena = (pl_bytes){0};
    for (int64_t i = 0; i < b.n_ctx; i++)
        out->contexts[i] = out->arena + b.ctx_off[i];
    for (int64_t i = 0; i < b.n_a; i++)
        out->answers[i] = (pl_squad_answer){out->arena + b.a[i].text, b.a[i].start};
    for (int64_t i = 0; i < b.n_q; i++) {
        out->q[i] = (pl_squad_question){out->arena + b.q[i].id, out->arena + b.q[i].question, b.q[i].context,
                                        out->answers + b.q[i].first_answer, b.q[i].n_answers, b.q[i].impossible};
        out->n_impossible += b.q[i].impossible;
    }
    out->n_contexts = b.n_ctx, out->n_q = b.n_q, out->n_answers = b.n_a;
    goto done;
fail:
    pl_squad_set_free(out);
done:
    cJSON_Delete(root);
    pl_bytes_free(&b.arena);
    pl_free(b.ctx_off);
    pl_free(b.q);
    pl_free(b.a);
    return st;
}

pl_status pl_squad_read(pl_squad_set *out, const char *path)
{
    char *text = NULL;
    size_t n = 0;
    *out = (pl_squad_set){0};
    pl_status st = pl_file_read_all(path, &text, &n);
    if (st == PL_OK)
        st = pl_squad_parse(out, text, n, path);
    pl_free(text);
    return st;
}

/* ---- context words ---- */

static int is_squad_space(int32_t c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == 0x202F; }

void pl_squad_doc_free(pl_squad_doc *d)
{
    pl_free(d->word_start);
    pl_free(d->word_end);
    pl_free(d->cp_to_word);
    pl_ids_free(&d->tok);
    pl_free(d->tok_to_word);
    pl_free(d->word_to_tok);
    *d = (pl_squad_doc){0};
}

pl_status pl_squad_doc_init(pl_squad_doc *d, pl_tokenizer *t, const char *context)
{
    *d = (pl_squad_doc){.text = context};
    size_t n = strlen(context);
    pl_status st = PL_OK;
    d->word_start = pl_malloc((n + 1) * sizeof *d->word_start);
    d->word_end = pl_malloc((n + 1) * sizeof *d->word_end);
    d->cp_to_word = pl_malloc((n + 1) * sizeof *d->cp_to_word);
    d->word_to_tok = pl_malloc((n + 2) * sizeof *d->word_to_tok);
    if (!d->word_start || !d->word_end || !d->cp_to_word || !d->word_to_tok)
        goto nomem;
    int prev_space = 1;
    for (size_t i = 0; i < n;) {
        int32_t c;
        size_t k = pl_utf8_next((const unsigned char *)context + i, n - i, &c);
        if (is_squad_space(c)) {
            prev_space = 1;
        } else {
            if (prev_space)
                d->word_start[d->n_words++] = (int64_t)i;
            prev_space = 0;
            d->word_end[d->n_words - 1] = (int64_t)(i + k);
        }
        d->cp_to_word[d->n_cp++] = d->n_words - 1;
        i += k;
    }
    int64_t cap = 0;
    for (int64_t w = 0; w < d->n_words; w++) {
        d->word_to_tok[w] = d->tok.n;
        PL_TRY(pl_tokenizer_encode(t, context + d->word_start[w], (size_t)(d->word_end[w] - d->word_start[w]), &d->tok));
        if (d->tok.n > cap) {
            int64_t c = d->tok.n * 2;
            int64_t *p = pl_realloc(d->tok_to_word, (size_t)c * sizeof *p);
            if (!p)
                goto nomem;
            d->tok_to_word = p, cap = c;
        }
        for (int64_t j = d->word_to_tok[w]; j < d->tok.n; j++)
            d->tok_to_word[j] = w;
    }
    d->word_to_tok[d->n_words] = d->tok.n;
    return PL_OK;
nomem:
    st = pl_errorf(PL_ERR_NOMEM, "SQuAD context of %zu bytes", n);
fail:
    pl_squad_doc_free(d);
    return st;
}

/* ---- features ---- */

void pl_squad_features_free(pl_squad_features *fs)
{
    pl_free(fs->f);
    pl_free(fs->ids);
    pl_free(fs->types);
    pl_free(fs->mask);
    pl_free(fs->max_context);
    *fs = (pl_squad_features){0};
}

static pl_status features_grow(pl_squad_features *fs)
{
    if (fs->n < fs->cap)
        return PL_OK;
    int64_t c = fs->cap ? fs->cap * 2 : 16;
    size_t cells;
    if (pl_mul_size((size_t)c, (size_t)fs->seq_len, &cells))
        return pl_errorf(PL_ERR_NOMEM, "SQuAD features: %lld x %lld overflows", (long long)c, (long long)fs->seq_len);
    void *f = pl_realloc(fs->f, (size_t)c * sizeof *fs->f);
    if (f)
        fs->f = f;
    void *a = f ? pl_realloc(fs->ids, cells * sizeof(int32_t)) : NULL;
    if (a)
        fs->ids = a;
    void *b = a ? pl_realloc(fs->types, cells * sizeof(int32_t)) : NULL;
    if (b)
        fs->types = b;
    void *m = b ? pl_realloc(fs->mask, cells * sizeof(int32_t)) : NULL;
    if (m)
        fs->mask = m;
    void *x = m ? pl_realloc(fs->max_context, cells) : NULL;
    if (!x)
        return pl_errorf(PL_ERR_NOMEM, "SQuAD features: %lld rows of %lld", (long long)c, (long long)fs->seq_len);
    fs->max_context = x;
    fs->cap = c;
    return PL_OK;
}

/* Code points of s[0..n) (s valid UTF-8). */
static int64_t cp_len(const char *s, size_t n)
{
    int64_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

/* " ".join(s.split()) with SQuAD's whitespace, into out. */
static pl_status clean_ws(const char *s, size_t n, pl_bytes *out)
{
    out->n = 0;
    pl_status st = pl_bytes_append(out, "", 0);
    int pending = 0;
    for (size_t i = 0; i < n && st == PL_OK;) {
        int32_t c;
        size_t k = pl_utf8_next((const unsigned char *)s + i, n - i, &c);
        if (is_squad_space(c)) {
            pending = out->n > 0;
        } else {
            if (pending)
                st = pl_bytes_append(out, " ", 1);
            if (st == PL_OK)
                st = pl_bytes_append(out, s + i, k);
            pending = 0;
        }
        i += k;
    }
    return st;
}

/* The answer's first and last token in doc, or -1 when it does not match the
 * context (run_squad.py's actual_text.find(cleaned_answer_text) == -1). */
static pl_status answer_tokens(pl_tokenizer *t, const pl_squad_doc *doc, const pl_squad_answer *a,
                               int64_t *tok_s, int64_t *tok_e)
{
    *tok_s = *tok_e = -1;
    int64_t len = cp_len(a->text, strlen(a->text));
    if (len == 0 || a->start + len > doc->n_cp)
        return PL_OK;
    int64_t ws = doc->cp_to_word[a->start], we = doc->cp_to_word[a->start + len - 1];
    if (ws < 0 || we < 0)
        return PL_OK;
    pl_bytes actual = {0}, want = {0};
    pl_ids ans = {0};
    pl_status st = PL_OK;
    for (int64_t w = ws; w <= we && st == PL_OK; w++) {
        if (w > ws)
            st = pl_bytes_append(&actual, " ", 1);
        if (st == PL_OK)
            st = pl_bytes_append(&actual, doc->text + doc->word_start[w], (size_t)(doc->word_end[w] - doc->word_start[w]));
    }
    if (st == PL_OK)
        st = clean_ws(a->text, strlen(a->text), &want);
    if (st != PL_OK || !actual.data || !want.data || !strstr(actual.data, want.data))
        goto done;
    int64_t s = doc->word_to_tok[ws], e = doc->word_to_tok[we + 1] - 1;
    /* _improve_answer_span: the tokens of the answer text, if inside [s, e]. */
    st = pl_tokenizer_encode(t, a->text, strlen(a->text), &ans);
    if (st != PL_OK)
        goto done;
    for (int64_t i = s; i <= e && ans.n > 0; i++)
        for (int64_t j = e; j >= i; j--)
            if (j - i + 1 == ans.n && memcmp(doc->tok.data + i, ans.data, (size_t)ans.n * sizeof *ans.data) == 0) {
                s = i, e = j;
                goto found;
            }
found:
    *tok_s = s, *tok_e = e;
done:
    pl_bytes_free(&actual);
    pl_bytes_free(&want);
    pl_ids_free(&ans);
    return st;
}

/* _check_is_max_context: is token pos (of the doc) best placed in window cur? */
static int is_max_context(const int64_t *starts, const int64_t *lens, int64_t n_win, int64_t cur, int64_t pos)
{
    double best = -1;
    int64_t best_i = -1;
    for (int64_t i = 0; i < n_win; i++) {
        int64_t end = starts[i] + lens[i] - 1;
        if (pos < starts[i] || pos > end)
            continue;
        int64_t left = pos - starts[i], right = end - pos;
        double score = (double)(left < right ? left : right) + 0.01 * (double)lens[i];
        if (best_i < 0 || score > best)
            best = score, best_i = i;
    }
    return best_i == cur;
}

pl_status pl_squad_features_add(pl_squad_features *fs, pl_tokenizer *t, const pl_squad_set *s,
                                int64_t q, const pl_squad_doc *doc, const pl_squad_config *cfg)
{
    pl_bert_specials sp;
    pl_ids query = {0};
    int64_t *starts = NULL, *lens = NULL;
    pl_status st = pl_bert_tokenizer_specials(t, &sp);
    if (st != PL_OK)
        return st;
    if (fs->seq_len == 0)
        fs->seq_len = cfg->max_seq_len;
    if (fs->seq_len != cfg->max_seq_len)
        return pl_errorf(PL_ERR_ARG, "SQuAD features: max_seq_len %lld differs from the set's %lld",
                         (long long)cfg->max_seq_len, (long long)fs->seq_len);
    if (cfg->doc_stride <= 0 || cfg->max_query_len <= 0)
        return pl_errorf(PL_ERR_ARG, "SQuAD features: doc_stride %lld and max_query_len %lld must be positive",
                         (long long)cfg->doc_stride, (long long)cfg->max_query_len);
    const pl_squad_question *qq = &s->q[q];
    PL_TRY(pl_tokenizer_encode(t, qq->question, strlen(qq->question), &query));
    if (query.n > cfg->max_query_len)
        query.n = cfg->max_query_len;
    int64_t room = cfg->max_seq_len - query.n - 3;
    if (room <= 0) {
        st = pl_errorf(PL_ERR_ARG, "SQuAD features: max_seq_len %lld leaves no room for context after a %lld-token question (%s)",
                       (long long)cfg->max_seq_len, (long long)query.n, qq->id);
        goto fail;
    }
    int64_t tok_s = -1, tok_e = -1;
    if (qq->n_answers > 0) {
        PL_TRY(answer_tokens(t, doc, &qq->answers[0], &tok_s, &tok_e));
        fs->n_skipped_answers += tok_s < 0;
        if (tok_s < 0 && cfg->training)
            goto fail; /* st is PL_OK: no features, as run_squad.py */
    }
    int64_t n_win = 0, cap = doc->tok.n / (room < cfg->doc_stride ? room : cfg->doc_stride) + 2;
    starts = pl_malloc((size_t)cap * sizeof *starts);
    lens = pl_malloc((size_t)cap * sizeof *lens);
    if (!starts || !lens) {
        st = pl_errorf(PL_ERR_NOMEM, "SQuAD features: %lld windows", (long long)cap);
        goto fail;
    }
    for (int64_t off = 0;;) {
        int64_t len = doc->tok.n - off < room ? doc->tok.n - off : room;
        starts[n_win] = off, lens[n_win++] = len;
        if (off + len >= doc->tok.n)
            break;
        off += len < cfg->doc_stride ? len : cfg->doc_stride;
    }
    for (int64_t w = 0; w < n_win; w++) {
        PL_TRY(features_grow(fs));
        int64_t L = fs->seq_len, k = 0;
        int32_t *ids = fs->ids + fs->n * L, *ty = fs->types + fs->n * L, *mk = fs->mask + fs->n * L;
        uint8_t *mc = fs->max_context + fs->n * L;
        memset(mc, 0, (size_t)L);
        ids[k] = sp.cls, ty[k++] = 0;
        for (int64_t i = 0; i < query.n; i++)
            ids[k] = query.data[i], ty[k++] = 0;
        ids[k] = sp.sep, ty[k++] = 0;
        int64_t doc_offset = k;
        for (int64_t i = 0; i < lens[w]; i++) {
            mc[k] = (uint8_t)is_max_context(starts, lens, n_win, w, starts[w] + i);
            ids[k] = doc->tok.data[starts[w] + i], ty[k++] = 1;
        }
        ids[k] = sp.sep, ty[k++] = 1;
        for (int64_t i = 0; i < L; i++)
            mk[i] = i < k;
        for (; k < L; k++)
            ids[k] = sp.pad, ty[k] = 0;
        pl_squad_feature *f = &fs->f[fs->n++];
        *f = (pl_squad_feature){.question = q, .doc_start = starts[w], .doc_len = lens[w], .doc_offset = doc_offset};
        if (tok_s >= starts[w] && tok_e <= starts[w] + lens[w] - 1 && tok_s >= 0) {
            f->start = tok_s - starts[w] + doc_offset;
            f->end = tok_e - starts[w] + doc_offset;
        }
    }
fail:
    pl_ids_free(&query);
    pl_free(starts);
    pl_free(lens);
    return st;
}

pl_status pl_squad_features_build(pl_squad_features *fs, pl_tokenizer *t, const pl_squad_set *s,
                                  const pl_squad_config *cfg)
{
    pl_squad_doc doc = {0};
    int64_t cur = -1;
    pl_status st = PL_OK;
    for (int64_t q = 0; q < s->n_q; q++) {
        if (s->q[q].context != cur) {
            pl_squad_doc_free(&doc);
            cur = s->q[q].context;
            PL_TRY(pl_squad_doc_init(&doc, t, s->contexts[cur]));
        }
        PL_TRY(pl_squad_features_add(fs, t, s, q, &doc, cfg));
    }
fail:
    pl_squad_doc_free(&doc);
    return st == PL_OK ? st : pl_error_wrap(st, "%s", s->path ? s->path : "SQuAD");
}
