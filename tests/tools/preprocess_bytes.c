/* preprocess_bytes: `plait preprocess` with the byte-level test tokenizer
 * (byte_tokenizer.h), for script suites that check the pipeline's output
 * against an independent writer (tests/scripts/megatron_writer.py) before
 * the real tokenizers exist. Flags: the pipeline's own, plus --vocab-size
 * (default 257; >= 65500 gives int32 datasets), --chunk-bytes and
 * --reject-byte. SIGINT/SIGTERM cancel the run as in plait preprocess. */
#include "base/options.h"
#include "byte_tokenizer.h"
#include "data/preprocess.h"

#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef struct opts {
    const char *input, *input_format, *csv_column, *output_prefix, *on_error;
    pl_strlist json_keys;
    int csv_header, append_eod, one_document;
    int64_t workers, log_interval, vocab_size, chunk_bytes, reject;
} opts;

#define O(f) offsetof(opts, f)
static const pl_option table[] = {
    {"--input", PL_OPT_STRING, NULL, O(input), "input file", NULL, PL_OPT_REQUIRED},
    {"--input-format", PL_OPT_CHOICE, "auto", O(input_format), "format", "auto|jsonl|text|csv", 0},
    {"--json-keys", PL_OPT_LIST, "text", O(json_keys), "keys", NULL, 0},
    {"--csv-column", PL_OPT_STRING, NULL, O(csv_column), "CSV column", NULL, 0},
    {"--csv-header", PL_OPT_BOOL, NULL, O(csv_header), "CSV header row", NULL, 0},
    {"--append-eod", PL_OPT_BOOL, NULL, O(append_eod), "append eod", NULL, 0},
    {"--one-document", PL_OPT_BOOL, NULL, O(one_document), "one document", NULL, 0},
    {"--output-prefix", PL_OPT_STRING, NULL, O(output_prefix), "output prefix", NULL,
     PL_OPT_REQUIRED},
    {"--workers", PL_OPT_INT, "1", O(workers), "threads", NULL, 0},
    {"--on-error", PL_OPT_CHOICE, "stop", O(on_error), "policy", "stop|skip", 0},
    {"--log-interval", PL_OPT_INT, "1000", O(log_interval), "progress interval", NULL, 0},
    {"--vocab-size", PL_OPT_INT, "257", O(vocab_size), "vocabulary size reported", NULL, 0},
    {"--chunk-bytes", PL_OPT_INT, "0", O(chunk_bytes), "bytes per work unit (0: default)", NULL, 0},
    {"--reject-byte", PL_OPT_INT, "-1", O(reject), "byte value the tokenizer refuses", NULL, 0},
};
#undef O
static const pl_command_spec spec = {"preprocess_bytes", "byte-level preprocess for tests", table,
                                     (int)(sizeof table / sizeof *table), 0};

static volatile sig_atomic_t interrupted;

static void on_signal(int sig) { interrupted = sig; }

int main(int argc, char **argv)
{
    opts o;
    pl_status st = pl_options_parse(&spec, &o, argc - 1, argv + 1, NULL);
    if (st) {
        fprintf(stderr, "preprocess_bytes: error: %s\n", pl_error_msg());
        return 2;
    }
    pl_tokenizer *tok;
    st = byte_tok_open(&tok, o.vocab_size, (int)o.reject);
    if (!st) {
        pl_preprocess_config cfg = {
            .input = o.input,
            .format = o.input_format,
            .keys = o.json_keys.items,
            .n_keys = o.json_keys.n,
            .csv_column = o.csv_column,
            .csv_header = o.csv_header,
            .append_eod = o.append_eod,
            .one_document = o.one_document,
            .output_prefix = o.output_prefix,
            .workers = (int)o.workers,
            .skip_bad = strcmp(o.on_error, "skip") == 0,
            .log_interval = o.log_interval,
            .chunk_bytes = (size_t)o.chunk_bytes,
            .log = stderr,
            .cancel = &interrupted,
        };
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal; /* no SA_RESTART: a blocked read returns */
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        st = pl_preprocess_run(&cfg, tok, NULL);
        pl_tokenizer_free(tok);
    }
    pl_options_free(&spec, &o);
    if (st && interrupted) {
        fprintf(stderr, "preprocess_bytes: interrupted by signal %d; no output written\n",
                (int)interrupted);
        return 128 + (int)interrupted;
    }
    if (st) {
        fprintf(stderr, "preprocess_bytes: error: %s\n", pl_error_msg());
        return st == PL_ERR_ARG ? 2 : 1;
    }
    return 0;
}
