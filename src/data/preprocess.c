/* The preprocess pipeline (tools/preprocess_data.py) and dataset merging
 * (tools/merge_datasets.py). Contract: preprocess.h.
 *
 * Threads: the calling thread reads chunks of whole records into a ring of
 * slots and writes finished slots in order; worker threads take slots in
 * order, parse and tokenize them. A slot is refilled only after it has been
 * written, so at most n_slots chunks exist at once. Errors found by a worker
 * are stored in its slot and reported when the writer reaches that slot, so
 * the first bad record in input order is the one reported, for any workers. */
#include "data/preprocess.h"

#include "base/alloc.h"
#include "base/log.h"
#include "base/zread.h"
#include "data/indexed.h"
#include "data/reader.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { MAX_WARNINGS = 5, MAX_WORKERS = 1024 };
static const size_t DEFAULT_CHUNK = (size_t)1 << 20;

/* ---- work units ------------------------------------------------------------- */

typedef struct pp_key_out {
    pl_ids tokens; /* the chunk's tokens for this key, document after document */
    pl_ids lens;   /* the length of each item */
    pl_ids items;  /* the number of items of each document */
} pp_key_out;

typedef struct pp_note {
    int64_t line; /* relative to the chunk */
    char msg[240];
} pp_note;

typedef struct pp_chunk {
    pl_bytes in;          /* whole records */
    size_t start;         /* where records start (after a CSV header) */
    int64_t start_lines;  /* line terminators before start */
    /* filled by a worker */
    int64_t lines;        /* line terminators in the chunk */
    pp_key_out *keys;
    pl_i64s doc_end;      /* byte offset after each document's record, for progress */
    int64_t skipped;
    pp_note notes[MAX_WARNINGS]; /* the first skipped records */
    int n_notes;
    pl_status st;         /* a record that stops the run */
    int64_t err_line;     /* its relative line, -1 if not about a line */
    char err[1024];
    int done;             /* under the lock */
} pp_chunk;

typedef struct pp_run {
    const pl_preprocess_config *cfg;
    pl_reader_spec spec;
    int32_t eod;
    pp_chunk *slots;
    int n_slots;
    pthread_mutex_t lock;
    pthread_cond_t work, finished;
    int64_t queued, taken; /* chunks handed to workers, chunks taken by them */
    int input_done;
    atomic_int stop;
} pp_run;

typedef struct pp_worker {
    pp_run *run;
    pl_tokenizer *tok;
    pthread_t thread;
    int started;
} pp_worker;

static void chunk_reset_output(pp_chunk *c, int n_keys)
{
    for (int k = 0; k < n_keys; k++)
        c->keys[k].tokens.n = c->keys[k].lens.n = c->keys[k].items.n = 0;
    c->doc_end.n = 0;
    c->lines = c->skipped = 0;
    c->n_notes = 0;
    c->st = PL_OK;
    c->err_line = -1;
    c->err[0] = '\0';
}

static void chunk_free(pp_chunk *c, int n_keys)
{
    pl_bytes_free(&c->in);
    if (c->keys)
        for (int k = 0; k < n_keys; k++) {
            pl_ids_free(&c->keys[k].tokens);
            pl_ids_free(&c->keys[k].lens);
            pl_ids_free(&c->keys[k].items);
        }
    pl_free(c->keys);
    pl_i64s_free(&c->doc_end);
}

/* Per-worker scratch: the ids of one text, the sentence spans of one text. */
typedef struct pp_scratch {
    pl_ids ids;
    pl_i64s spans;
} pp_scratch;

/* Appends text[0..len)'s tokens as one item of o, unless they are none. */
static pl_status add_item(pl_tokenizer *tok, const char *text, size_t len, pp_key_out *o,
                          pl_ids *ids, int32_t *items)
{
    ids->n = 0;
    pl_status st = pl_tokenizer_encode(tok, text, len, ids);
    if (st)
        return st;
    if (ids->n == 0)
        return PL_OK; /* Megatron drops empty sentences */
    if (ids->n > INT32_MAX)
        return pl_errorf(PL_ERR_FORMAT, "a text of %lld tokens exceeds the int32 length field",
                         (long long)ids->n);
    PL_ASSERT(*items < INT32_MAX);
    st = pl_ids_append(&o->tokens, ids->data, ids->n);
    if (!st)
        st = pl_ids_push(&o->lens, (int32_t)ids->n);
    if (!st)
        (*items)++;
    return st;
}

/* Tokenizes the texts of one parsed record into c's outputs (Encoder.encode);
 * with a splitter, each text is first split into sentences (Encoder.split),
 * each sentence one item. */
static pl_status tokenize_doc(pp_run *r, pl_tokenizer *tok, const pl_reader_doc *d, pp_chunk *c,
                              pp_scratch *sc)
{
    const pl_reader_spec *s = &r->spec;
    const pl_punkt *splitter = r->cfg->splitter;
    for (int k = 0; k < s->n_keys; k++) {
        pp_key_out *o = &c->keys[k];
        int32_t items = 0;
        for (int64_t t = d->first[k]; t < d->first[k + 1]; t++) {
            pl_status st = PL_OK;
            if (splitter) {
                sc->spans.n = 0;
                st = pl_punkt_split(splitter, d->text[t], d->len[t], &sc->spans);
                for (int64_t i = 0; i + 1 < sc->spans.n && st == PL_OK; i += 2)
                    st = add_item(tok, d->text[t] + sc->spans.data[i],
                                  (size_t)(sc->spans.data[i + 1] - sc->spans.data[i]), o,
                                  &sc->ids, &items);
            } else {
                st = add_item(tok, d->text[t], d->len[t], o, &sc->ids, &items);
            }
            if (st) {
                if (st == PL_ERR_FORMAT && s->format == PL_READER_JSONL)
                    return pl_error_wrap(st, "key '%s' text %lld", s->keys[k],
                                         (long long)(t - d->first[k]));
                return st;
            }
        }
        if (items > 0 && r->cfg->append_eod) {
            pl_status st = pl_ids_push(&o->tokens, r->eod);
            if (st)
                return st;
            if (o->lens.data[o->lens.n - 1] == INT32_MAX)
                return pl_errorf(PL_ERR_FORMAT, "a text of %d tokens plus eod exceeds int32",
                                 INT32_MAX);
            o->lens.data[o->lens.n - 1]++;
        }
        pl_status st = pl_ids_push(&o->items, items);
        if (st)
            return st;
    }
    return PL_OK;
}

static void note_copy(char *dst, size_t cap, const char *msg)
{
    snprintf(dst, cap, "%s", msg);
}

/* Parses and tokenizes every record of c. */
static void process_chunk(pp_run *r, pl_tokenizer *tok, pp_chunk *c, pl_reader_doc *doc,
                          pp_scratch *sc)
{
    const int n_keys = r->spec.n_keys;
    size_t pos = c->start;
    int64_t lines = c->start_lines;
    pl_reader_record rec;
    chunk_reset_output(c, n_keys);
    while (pl_reader_next(&r->spec, c->in.data, c->in.n, &pos, &lines, &rec)) {
        if (atomic_load_explicit(&r->stop, memory_order_relaxed))
            break;
        int64_t m[3 * 64]; /* check_config: n_keys <= 64 */
        for (int k = 0; k < n_keys; k++) {
            m[3 * k] = c->keys[k].tokens.n;
            m[3 * k + 1] = c->keys[k].lens.n;
            m[3 * k + 2] = c->keys[k].items.n;
        }
        pl_status st = pl_reader_parse(&r->spec, rec.text, rec.len, doc);
        if (st == PL_OK && doc->blank)
            continue;
        if (st == PL_OK)
            st = tokenize_doc(r, tok, doc, c, sc);
        if (st == PL_OK)
            st = pl_i64s_push(&c->doc_end, (int64_t)rec.end);
        if (st == PL_OK)
            continue;
        if (st == PL_ERR_FORMAT && r->cfg->skip_bad) {
            for (int k = 0; k < n_keys; k++) { /* drop what the record had added */
                c->keys[k].tokens.n = m[3 * k];
                c->keys[k].lens.n = m[3 * k + 1];
                c->keys[k].items.n = m[3 * k + 2];
            }
            if (c->n_notes < MAX_WARNINGS) {
                c->notes[c->n_notes].line = rec.line;
                note_copy(c->notes[c->n_notes].msg, sizeof c->notes[0].msg, pl_error_msg());
                c->n_notes++;
            }
            c->skipped++;
            continue;
        }
        c->st = st;
        c->err_line = rec.line;
        note_copy(c->err, sizeof c->err, pl_error_msg());
        break;
    }
    c->lines = lines;
}

static void *worker_main(void *arg)
{
    pp_worker *w = arg;
    pp_run *r = w->run;
    /* Signals (Ctrl-C) go to the reading thread, whose blocking read they interrupt. */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    pl_reader_doc doc = {0};
    pp_scratch sc = {{0}, {0}};
    for (;;) {
        pthread_mutex_lock(&r->lock);
        while (!atomic_load(&r->stop) && r->taken == r->queued && !r->input_done)
            pthread_cond_wait(&r->work, &r->lock);
        if (atomic_load(&r->stop) || r->taken == r->queued) {
            pthread_mutex_unlock(&r->lock);
            break;
        }
        pp_chunk *c = &r->slots[r->taken++ % r->n_slots];
        pthread_mutex_unlock(&r->lock);
        process_chunk(r, w->tok, c, &doc, &sc);
        pthread_mutex_lock(&r->lock);
        c->done = 1;
        pthread_cond_broadcast(&r->finished);
        pthread_mutex_unlock(&r->lock);
    }
    pl_reader_doc_free(&doc);
    pl_ids_free(&sc.ids);
    pl_i64s_free(&sc.spans);
    return NULL;
}

/* ---- reading -------------------------------------------------------------------- */

typedef struct pp_input {
    FILE *fp;
    pl_zread *z;         /* fp, decompressed when it is gzip/xz/zstd */
    int is_stdin;
    int eof;
    pl_bytes carry;      /* the incomplete record at the end of the last read */
    int64_t bytes_read;
    int64_t size;        /* -1 if not a regular file */
    int first;           /* no chunk read yet */
} pp_input;

/* Fills c with whole records: the carried-over bytes, then about chunk bytes
 * more, cut at the last record boundary; a record longer than a chunk grows it. */
static pl_status read_chunk(pp_run *r, pp_input *in, pp_chunk *c, size_t chunk)
{
    c->in.n = 0;
    c->start = 0;
    c->start_lines = 0;
    pl_status st = pl_bytes_append(&c->in, in->carry.data, in->carry.n);
    if (st)
        return st;
    in->carry.n = 0;
    size_t cut;
    for (;;) {
        size_t want = chunk;
        if (c->in.n < chunk)
            want = chunk - c->in.n;
        if (!in->eof) {
            st = pl_bytes_reserve(&c->in, c->in.n + want);
            if (st)
                return st;
            size_t got = 0;
            while (got < want && !in->eof) {
                size_t n;
                st = pl_zread_read(in->z, c->in.data + c->in.n + got, want - got, &n);
                if (st)
                    return pl_error_wrap(st, "--input");
                got += n;
                in->eof = n == 0;
            }
            c->in.n += got;
            in->bytes_read += (int64_t)got;
        }
        cut = pl_reader_boundary(&r->spec, c->in.data, c->in.n, in->eof);
        if (cut > 0 || in->eof)
            break;
    }
    st = pl_bytes_append(&in->carry, c->in.data + cut, c->in.n - cut);
    if (st)
        return st;
    c->in.n = cut;
    if (c->in.data)
        c->in.data[cut] = '\0';
    return PL_OK;
}

/* With a CSV header: resolves the column and makes c start after the header. */
static pl_status take_header(pp_run *r, pp_chunk *c, int by_name, const char *name)
{
    size_t pos = 0;
    int64_t lines = 0;
    pl_reader_record rec;
    if (!pl_reader_next(&r->spec, c->in.data, c->in.n, &pos, &lines, &rec))
        return PL_OK; /* empty input */
    if (by_name) {
        pl_status st = pl_reader_csv_column(&r->spec, rec.text, rec.len, name, &r->spec.column);
        if (st)
            return pl_error_wrap(st, "%s:1", r->cfg->input);
    }
    c->start = pos;
    c->start_lines = lines;
    return PL_OK;
}

/* ---- the run --------------------------------------------------------------------- */

char *pl_preprocess_output_prefix(const char *prefix, const char *key, const char *level)
{
    size_t n = strlen(prefix) + strlen(key) + strlen(level) + 3;
    char *p = pl_malloc(n);
    if (p)
        snprintf(p, n, "%s_%s_%s", prefix, key, level);
    return p;
}

static void format_eta(char *out, size_t cap, double seconds)
{
    if (seconds < 0 || seconds > 1e9)
        snprintf(out, cap, "?");
    else if (seconds < 60)
        snprintf(out, cap, "%.0fs", seconds);
    else if (seconds < 3600)
        snprintf(out, cap, "%dm%02ds", (int)(seconds / 60), (int)seconds % 60);
    else
        snprintf(out, cap, "%dh%02dm", (int)(seconds / 3600), (int)(seconds / 60) % 60);
}

typedef struct pp_writer {
    pl_indexed_builder **builders;
    int64_t docs, tokens, skipped, line_base, bytes_base;
    int64_t notes_printed;
    double t0;
    int64_t input_size;
} pp_writer;

static void progress(const pl_preprocess_config *cfg, pp_writer *w, int64_t bytes_done)
{
    double el = pl_time_now() - w->t0;
    if (el <= 0)
        el = 1e-9;
    char eta[32] = "?";
    if (w->input_size > 0 && bytes_done > 0)
        format_eta(eta, sizeof eta, el * (double)(w->input_size - bytes_done) / (double)bytes_done);
    fprintf(cfg->log,
            "Processed %lld documents (%.0f docs/s, %.2f MB/s, %.0f tokens/s, ETA %s).\n",
            (long long)w->docs, (double)w->docs / el, (double)bytes_done / el / 1048576.0,
            (double)w->tokens / el, eta);
    fflush(cfg->log);
}

/* Appends chunk c to the datasets, in order; reports its warnings or its error. */
static pl_status write_chunk(pp_run *r, pp_writer *w, pp_chunk *c)
{
    const pl_preprocess_config *cfg = r->cfg;
    const int n_keys = r->spec.n_keys;
    /* Documents before the chunk's error are not needed: the run fails. */
    if (c->st != PL_OK) {
        if (c->err_line >= 0)
            return pl_errorf(c->st, "%s:%lld: %s%s", cfg->input,
                             (long long)(w->line_base + c->err_line), c->err,
                             c->st == PL_ERR_FORMAT ? " (--on-error skip skips such lines)" : "");
        return pl_errorf(c->st, "%s", c->err);
    }
    for (int i = 0; i < c->n_notes && cfg->log; i++) {
        if (w->notes_printed < MAX_WARNINGS)
            fprintf(cfg->log, "warning: %s:%lld: %s (skipped)\n", cfg->input,
                    (long long)(w->line_base + c->notes[i].line), c->notes[i].msg);
        w->notes_printed++;
    }
    int64_t tpos[64] = {0}, lpos[64] = {0};
    int64_t n_docs = c->doc_end.n;
    for (int64_t d = 0; d < n_docs; d++) {
        for (int k = 0; k < n_keys; k++) {
            pp_key_out *o = &c->keys[k];
            int32_t items = o->items.data[d];
            for (int32_t j = 0; j < items; j++) {
                int32_t len = o->lens.data[lpos[k]++];
                pl_status st = pl_indexed_builder_add_item(w->builders[k], o->tokens.data + tpos[k], len);
                if (st)
                    return st;
                tpos[k] += len;
                w->tokens += len;
            }
            if (!cfg->one_document) {
                pl_status st = pl_indexed_builder_end_document(w->builders[k]);
                if (st)
                    return st;
            }
        }
        w->docs++;
        if (cfg->log && cfg->log_interval > 0 && w->docs % cfg->log_interval == 0)
            progress(cfg, w, w->bytes_base + c->doc_end.data[d]);
    }
    w->skipped += c->skipped;
    w->line_base += c->lines;
    w->bytes_base += (int64_t)c->in.n;
    return PL_OK;
}

static pl_status check_config(const pl_preprocess_config *cfg, const pl_tokenizer *tok)
{
    if (!cfg->input)
        return pl_errorf(PL_ERR_ARG, "--input is required");
    if (!cfg->output_prefix || !*cfg->output_prefix)
        return pl_errorf(PL_ERR_ARG, "--output-prefix is required");
    if (cfg->n_keys < 1 || cfg->n_keys > 64)
        return pl_errorf(PL_ERR_ARG, "--json-keys: %d keys given, expected 1 to 64", cfg->n_keys);
    for (int k = 0; k < cfg->n_keys; k++) {
        if (!*cfg->keys[k])
            return pl_errorf(PL_ERR_ARG, "--json-keys: empty key");
        for (int j = 0; j < k; j++)
            if (strcmp(cfg->keys[j], cfg->keys[k]) == 0)
                return pl_errorf(PL_ERR_ARG, "--json-keys: '%s' given twice (one dataset each)",
                                 cfg->keys[k]);
    }
    if (cfg->workers < 1 || cfg->workers > MAX_WORKERS)
        return pl_errorf(PL_ERR_ARG, "--workers %d: expected 1 to %d", cfg->workers, MAX_WORKERS);
    if (cfg->log_interval < 0)
        return pl_errorf(PL_ERR_ARG, "--log-interval %lld: expected >= 0 (0: no progress lines)",
                         (long long)cfg->log_interval);
    if (cfg->append_eod && tok->eod < 0)
        return pl_errorf(PL_ERR_ARG, "--append-eod: tokenizer %s has no end-of-document token",
                         tok->type ? tok->type : "?");
    /* The output directory must exist (Megatron does not create it either). */
    const char *slash = strrchr(cfg->output_prefix, '/');
    if (slash && slash != cfg->output_prefix) {
        char dir[4096];
        size_t n = (size_t)(slash - cfg->output_prefix);
        if (n >= sizeof dir)
            return pl_errorf(PL_ERR_ARG, "--output-prefix: path too long");
        memcpy(dir, cfg->output_prefix, n);
        dir[n] = '\0';
        struct stat sb;
        if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
            return pl_errorf(PL_ERR_ARG, "--output-prefix %s: directory %s does not exist",
                             cfg->output_prefix, dir);
    }
    return PL_OK;
}

static pl_status resolve_column(const pl_preprocess_config *cfg, pl_reader_spec *spec,
                                int *by_name)
{
    const char *col = cfg->csv_column ? cfg->csv_column : "0";
    char *end;
    errno = 0;
    long long v = strtoll(col, &end, 10);
    *by_name = 0;
    if (*col && !*end && !errno) {
        if (v < 0)
            return pl_errorf(PL_ERR_ARG, "--csv-column %s: expected a 0-based index or a header name",
                             col);
        spec->column = v;
    } else {
        *by_name = 1;
        spec->column = 0;
    }
    if (spec->format != PL_READER_CSV && (cfg->csv_column || cfg->csv_header))
        return pl_errorf(PL_ERR_ARG, "%s is for CSV input; %s is read as %s",
                         cfg->csv_column ? "--csv-column" : "--csv-header", cfg->input,
                         spec->format == PL_READER_JSONL ? "JSON lines" : "text");
    return PL_OK;
}

pl_status pl_preprocess_run(const pl_preprocess_config *cfg, const pl_tokenizer *tok,
                            pl_preprocess_stats *stats)
{
    pl_status st = PL_OK;
    pp_run run;
    pp_input in;
    pp_writer w;
    pp_worker *workers = NULL;
    char **names = NULL;
    int n_keys = cfg->n_keys, lock_ready = 0, committed = 0;
    memset(&run, 0, sizeof run);
    memset(&in, 0, sizeof in);
    memset(&w, 0, sizeof w);
    if (stats)
        memset(stats, 0, sizeof *stats);
    w.t0 = pl_time_now();
    PL_TRY(check_config(cfg, tok));
    run.cfg = cfg;
    run.eod = tok->eod;
    run.spec.keys = cfg->keys;
    run.spec.n_keys = n_keys;
    PL_TRY(pl_reader_spec_init(&run.spec, cfg->format, cfg->input));
    if (run.spec.format != PL_READER_JSONL && n_keys != 1) {
        st = pl_errorf(PL_ERR_ARG, "--json-keys: %s input gives one dataset; name it with one key",
                       run.spec.format == PL_READER_TEXT ? "text" : "CSV");
        goto fail;
    }
    int by_name = 0;
    PL_TRY(resolve_column(cfg, &run.spec, &by_name));
    const int dtype = pl_indexed_best_dtype(tok->vocab_size);

    /* input */
    in.size = -1;
    in.is_stdin = strcmp(cfg->input, "-") == 0;
    in.fp = in.is_stdin ? stdin : fopen(cfg->input, "rb");
    if (!in.fp) {
        st = pl_errorf(PL_ERR_IO, "--input %s: cannot open: %s", cfg->input, strerror(errno));
        goto fail;
    }
    struct stat sb;
    if (fstat(fileno(in.fp), &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) {
            st = pl_errorf(PL_ERR_ARG, "--input %s is a directory (a file is expected; --merge "
                                       "takes directories)", cfg->input);
            goto fail;
        }
        if (S_ISREG(sb.st_mode))
            in.size = (int64_t)sb.st_size;
    }
    PL_TRY(pl_zread_open(&in.z, in.fp, cfg->input));
    if (pl_zread_codec(in.z))
        in.size = -1; /* the progress line counts decompressed bytes: no ETA */
    w.input_size = in.size;

    /* outputs, under temporary names until the end */
    names = pl_calloc((size_t)n_keys, sizeof *names);
    w.builders = pl_calloc((size_t)n_keys, sizeof *w.builders);
    if (!names || !w.builders) {
        st = pl_errorf(PL_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (int k = 0; k < n_keys; k++) {
        names[k] = pl_preprocess_output_prefix(cfg->output_prefix, cfg->keys[k],
                                               cfg->splitter ? "sentence" : "document");
        if (!names[k]) {
            st = pl_errorf(PL_ERR_NOMEM, "out of memory");
            goto fail;
        }
        PL_TRY(pl_indexed_builder_open(&w.builders[k], names[k], dtype));
    }

    /* slots and workers */
    run.n_slots = 2 * cfg->workers + 2;
    run.slots = pl_calloc((size_t)run.n_slots, sizeof *run.slots);
    workers = pl_calloc((size_t)cfg->workers, sizeof *workers);
    if (!run.slots || !workers) {
        st = pl_errorf(PL_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (int i = 0; i < run.n_slots; i++) {
        run.slots[i].keys = pl_calloc((size_t)n_keys, sizeof *run.slots[i].keys);
        if (!run.slots[i].keys) {
            st = pl_errorf(PL_ERR_NOMEM, "out of memory");
            goto fail;
        }
    }
    for (int i = 0; i < cfg->workers; i++) {
        workers[i].run = &run;
        PL_TRY(pl_tokenizer_fork(tok, &workers[i].tok));
    }
    if (pthread_mutex_init(&run.lock, NULL) != 0 || pthread_cond_init(&run.work, NULL) != 0 ||
        pthread_cond_init(&run.finished, NULL) != 0) {
        st = pl_errorf(PL_ERR_INTERNAL, "cannot create thread primitives");
        goto fail;
    }
    lock_ready = 1;
    atomic_init(&run.stop, 0);
    for (int i = 0; i < cfg->workers; i++) {
        if (pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]) != 0) {
            st = pl_errorf(PL_ERR_INTERNAL, "cannot start worker thread %d", i);
            goto fail;
        }
        workers[i].started = 1;
    }

    /* read, hand out, write in order */
    const size_t chunk = cfg->chunk_bytes ? cfg->chunk_bytes : DEFAULT_CHUNK;
    int64_t written = 0;
    w.line_base = 1;
    in.first = 1;
    for (;;) {
        if (cfg->cancel && *cfg->cancel) {
            st = pl_errorf(PL_ERR_IO, "interrupted; no output written");
            goto fail;
        }
        if (!in.eof && run.queued - written < run.n_slots) {
            pp_chunk *c = &run.slots[run.queued % run.n_slots];
            PL_TRY(read_chunk(&run, &in, c, chunk));
            if (in.first && run.spec.format == PL_READER_CSV && (cfg->csv_header || by_name))
                PL_TRY(take_header(&run, c, by_name, cfg->csv_column));
            in.first = 0;
            pthread_mutex_lock(&run.lock);
            if (c->in.n > c->start) {
                c->done = 0;
                run.queued++;
                pthread_cond_signal(&run.work);
            } else {
                w.line_base += c->start_lines; /* a header alone */
            }
            if (in.eof) {
                run.input_done = 1;
                pthread_cond_broadcast(&run.work);
            }
            pthread_mutex_unlock(&run.lock);
            continue;
        }
        if (written == run.queued)
            break;
        pp_chunk *c = &run.slots[written % run.n_slots];
        pthread_mutex_lock(&run.lock);
        while (!c->done)
            pthread_cond_wait(&run.finished, &run.lock);
        pthread_mutex_unlock(&run.lock);
        PL_TRY(write_chunk(&run, &w, c));
        written++;
    }
    pthread_mutex_lock(&run.lock);
    run.input_done = 1;
    pthread_cond_broadcast(&run.work);
    pthread_mutex_unlock(&run.lock);
    for (int i = 0; i < cfg->workers; i++) {
        pthread_join(workers[i].thread, NULL);
        workers[i].started = 0;
    }

    if (cfg->one_document)
        for (int k = 0; k < n_keys; k++)
            PL_TRY(pl_indexed_builder_end_document(w.builders[k]));
    /* commit every dataset, or none */
    for (; committed < n_keys; committed++) {
        st = pl_indexed_builder_finish(w.builders[committed]);
        w.builders[committed] = NULL;
        if (st)
            goto fail;
    }
    double secs = pl_time_now() - w.t0;
    if (cfg->log) {
        double el = secs > 0 ? secs : 1e-9;
        fprintf(cfg->log,
                "Done: %lld documents, %lld tokens, %.2f MB in %.2f s (%.0f docs/s, %.2f MB/s, "
                "%.0f tokens/s), dtype %s.\n",
                (long long)w.docs, (long long)w.tokens, (double)in.bytes_read / 1048576.0, secs,
                (double)w.docs / el, (double)in.bytes_read / el / 1048576.0,
                (double)w.tokens / el, pl_indexed_dtype_name(dtype));
        if (w.skipped)
            fprintf(cfg->log, "Skipped %lld malformed lines (--on-error skip).\n",
                    (long long)w.skipped);
        for (int k = 0; k < n_keys; k++)
            fprintf(cfg->log, "Wrote %s.bin and %s.idx\n", names[k], names[k]);
    }
    if (stats) {
        stats->documents = w.docs;
        stats->skipped = w.skipped;
        stats->tokens = w.tokens;
        stats->bytes = in.bytes_read;
        stats->dtype = dtype;
        stats->seconds = secs;
    }
    st = PL_OK;
    goto done;
fail:
    if (lock_ready) {
        pthread_mutex_lock(&run.lock);
        atomic_store(&run.stop, 1);
        pthread_cond_broadcast(&run.work);
        pthread_mutex_unlock(&run.lock);
    }
    if (workers)
        for (int i = 0; i < cfg->workers; i++)
            if (workers[i].started)
                pthread_join(workers[i].thread, NULL);
    /* datasets already committed by a failed commit loop come down too */
    for (int k = 0; names && k < committed; k++) {
        char p[4200];
        snprintf(p, sizeof p, "%s.bin", names[k]);
        unlink(p);
        snprintf(p, sizeof p, "%s.idx", names[k]);
        unlink(p);
    }
done:
    if (w.builders)
        for (int k = 0; k < n_keys; k++)
            pl_indexed_builder_abort(w.builders[k]);
    if (workers)
        for (int i = 0; i < cfg->workers; i++)
            pl_tokenizer_free(workers[i].tok);
    if (lock_ready) {
        pthread_mutex_destroy(&run.lock);
        pthread_cond_destroy(&run.work);
        pthread_cond_destroy(&run.finished);
    }
    if (run.slots)
        for (int i = 0; i < run.n_slots; i++)
            chunk_free(&run.slots[i], n_keys);
    pl_free(run.slots);
    pl_free(workers);
    pl_free(w.builders);
    if (names)
        for (int k = 0; k < n_keys; k++)
            pl_free(names[k]);
    pl_free(names);
    pl_bytes_free(&in.carry);
    pl_zread_close(in.z);
    if (in.fp && !in.is_stdin)
        fclose(in.fp);
    return st;
}

/* ---- merge -------------------------------------------------------------------------- */

typedef struct pp_names {
    char **v;
    int n, cap;
} pp_names;

static pl_status names_push(pp_names *l, const char *s, size_t len)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        char **v = pl_realloc(l->v, (size_t)cap * sizeof *v);
        if (!v)
            return pl_errorf(PL_ERR_NOMEM, "out of memory listing datasets");
        l->v = v;
        l->cap = cap;
    }
    char *c = pl_malloc(len + 1);
    if (!c)
        return pl_errorf(PL_ERR_NOMEM, "out of memory listing datasets");
    memcpy(c, s, len);
    c[len] = '\0';
    l->v[l->n++] = c;
    return PL_OK;
}

static void names_free(pp_names *l)
{
    for (int i = 0; i < l->n; i++)
        pl_free(l->v[i]);
    pl_free(l->v);
    memset(l, 0, sizeof *l);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int has_suffix(const char *s, size_t n, const char *suffix)
{
    size_t m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

/* Appends the dataset prefixes of directory dir, sorted (merge_datasets.py). */
static pl_status list_directory(const char *dir, pp_names *out)
{
    pl_status st = PL_OK;
    pp_names found = {0};
    DIR *d = opendir(dir);
    if (!d)
        return pl_errorf(PL_ERR_IO, "--input %s: cannot list: %s", dir, strerror(errno));
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/')
        dl--;
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (!has_suffix(e->d_name, n, ".idx") && !has_suffix(e->d_name, n, ".bin"))
            continue;
        char path[4200];
        snprintf(path, sizeof path, "%.*s/%s", (int)dl, dir, e->d_name);
        struct stat sb;
        if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
            continue;
        path[strlen(path) - 4] = '\0';
        int dup = 0;
        for (int i = 0; i < found.n && !dup; i++)
            dup = strcmp(found.v[i], path) == 0;
        if (!dup)
            PL_TRY(names_push(&found, path, strlen(path)));
    }
    if (found.n > 1)
        qsort(found.v, (size_t)found.n, sizeof *found.v, cmp_str);
    for (int i = 0; i < found.n; i++) {
        char path[4200];
        for (int k = 0; k < 2; k++) {
            snprintf(path, sizeof path, "%s%s", found.v[i], k ? ".bin" : ".idx");
            if (!pl_file_exists(path)) {
                st = pl_errorf(PL_ERR_ARG, "--input %s: %s.%s has no %s beside it", dir,
                               found.v[i], k ? "idx" : "bin", k ? ".bin" : ".idx");
                goto fail;
            }
        }
        PL_TRY(names_push(out, found.v[i], strlen(found.v[i])));
    }
fail:
    closedir(d);
    names_free(&found);
    return st;
}

pl_status pl_preprocess_merge(const char *const *inputs, int n_inputs, const char *output_prefix,
                              FILE *log, int64_t *n_datasets)
{
    pl_status st = PL_OK;
    pp_names prefixes = {0};
    pl_indexed_builder *b = NULL;
    if (n_datasets)
        *n_datasets = 0;
    if (!output_prefix || !*output_prefix)
        return pl_errorf(PL_ERR_ARG, "--output-prefix is required");
    for (int i = 0; i < n_inputs; i++) {
        struct stat sb;
        size_t n = strlen(inputs[i]);
        if (stat(inputs[i], &sb) == 0 && S_ISDIR(sb.st_mode)) {
            int before = prefixes.n;
            PL_TRY(list_directory(inputs[i], &prefixes));
            if (prefixes.n == before) {
                st = pl_errorf(PL_ERR_ARG, "--input %s: no .idx/.bin datasets in this directory",
                               inputs[i]);
                goto fail;
            }
            continue;
        }
        if (has_suffix(inputs[i], n, ".idx") || has_suffix(inputs[i], n, ".bin"))
            n -= 4;
        PL_TRY(names_push(&prefixes, inputs[i], n));
    }
    if (prefixes.n == 0) {
        st = pl_errorf(PL_ERR_ARG, "--input: no datasets to merge");
        goto fail;
    }
    pl_indexed first;
    st = pl_indexed_open(&first, prefixes.v[0]);
    if (st)
        goto fail;
    int dtype = first.h.dtype;
    pl_indexed_close(&first);
    PL_TRY(pl_indexed_builder_open(&b, output_prefix, dtype));
    for (int i = 0; i < prefixes.n; i++) {
        PL_TRY(pl_indexed_builder_add_index(b, prefixes.v[i]));
        if (log)
            fprintf(log, "Merged %s\n", prefixes.v[i]);
    }
    st = pl_indexed_builder_finish(b);
    b = NULL;
    if (st)
        goto fail;
    if (log)
        fprintf(log, "Wrote %s.bin and %s.idx (%d datasets, dtype %s)\n", output_prefix,
                output_prefix, prefixes.n, pl_indexed_dtype_name(dtype));
    if (n_datasets)
        *n_datasets = prefixes.n;
fail:
    pl_indexed_builder_abort(b);
    names_free(&prefixes);
    return st;
}
