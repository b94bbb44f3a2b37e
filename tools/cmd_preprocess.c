/* plait preprocess: Megatron-LM's tools/preprocess_data.py (tokenize a corpus
 * into .bin/.idx datasets) and, with --merge, tools/merge_datasets.py.
 * Flags keep Megatron's names; those plait cannot honour are an error naming
 * the flag, never silently ignored. The work is data/preprocess.c. */
#include "commands.h"

#include "data/preprocess.h"

#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef struct pp_opts {
    pl_strlist input;
    const char *input_format;
    pl_strlist json_keys;
    const char *csv_column;
    int csv_header;
    int split_sentences, keep_newlines;
    const char *lang, *punkt_params;
    const char *tokenizer_type, *vocab_file, *merge_file, *tokenizer_model;
    int64_t vocab_extra_ids;
    int legacy_tokenizer;
    int append_eod, one_document;
    const char *output_prefix;
    int64_t workers, partitions, log_interval;
    int keep_sequential_samples;
    const char *dataset_impl;
    const char *on_error;
    int merge;
} pp_opts;

#define O(f) offsetof(pp_opts, f)
static const pl_option table[] = {
    {"--input", PL_OPT_LIST, NULL, O(input),
     "input file: JSON lines, text (one document a line) or CSV/.tsv/.smi; '-' reads stdin; "
     ".gz, .xz and .zst are decompressed. "
     "With --merge: dataset prefixes and/or directories of .bin/.idx pairs",
     NULL, PL_OPT_REQUIRED},
    {"--input-format", PL_OPT_CHOICE, "auto", O(input_format),
     "input format; auto: .txt text, .csv/.tsv/.smi CSV, anything else JSON lines", "auto|jsonl|text|csv", 0},
    {"--json-keys", PL_OPT_LIST, "text", O(json_keys),
     "JSON keys to extract, one dataset each (text/CSV input: the dataset name)", NULL, 0},
    {"--csv-column", PL_OPT_STRING, NULL, O(csv_column),
     "CSV field holding the text: 0-based index or header name (default 0)", NULL, 0},
    {"--csv-header", PL_OPT_BOOL, NULL, O(csv_header),
     "the first CSV row is a header (implied by a --csv-column name)", NULL, 0},
    {"--split-sentences", PL_OPT_BOOL, NULL, O(split_sentences),
     "split each text into sentences with Punkt (NLTK's algorithm; needs --punkt-params), one "
     "item each; outputs are PREFIX_KEY_sentence", NULL, 0},
    {"--punkt-params", PL_OPT_STRING, NULL, O(punkt_params),
     "Punkt parameters for --split-sentences (plait's; scripts/punkt_params.py writes them from "
     "NLTK's tokenizers/punkt/LANG.pickle or trains them)", NULL, 0},
    {"--keep-newlines", PL_OPT_BOOL, NULL, O(keep_newlines),
     "keep newlines between sentences (only with --split-sentences)", NULL, 0},
    {"--lang", PL_OPT_STRING, "english", O(lang),
     "NLTK language (only with --split-sentences; the language is that of --punkt-params)", NULL,
     0},
    {"--tokenizer-type", PL_OPT_CHOICE, NULL, O(tokenizer_type), "tokenizer",
     pl_tokenizer_types, 0},
    {"--vocab-file", PL_OPT_STRING, NULL, O(vocab_file), "vocabulary file", NULL, 0},
    {"--vocab", PL_OPT_STRING, NULL, O(vocab_file),
     "= --vocab-file: the abbreviation Megatron v1-v2's preprocess_data.py accepted, where it was "
     "the only --vocab flag", NULL, 0},
    {"--merge-file", PL_OPT_STRING, NULL, O(merge_file), "BPE merges (GPT2BPETokenizer)", NULL, 0},
    {"--tokenizer-model", PL_OPT_STRING, NULL, O(tokenizer_model),
     "HuggingFaceTokenizer: directory with tokenizer.json (or the file); SentencePieceTokenizer, "
     "GPTSentencePieceTokenizer, Llama2Tokenizer: tokenizer.model", NULL, 0},
    {"--vocab-extra-ids", PL_OPT_INT, "0", O(vocab_extra_ids),
     "<extra_id_N> sentinels (BERT; SentencePieceTokenizer with --legacy-tokenizer)", NULL, 0},
    {"--legacy-tokenizer", PL_OPT_BOOL, NULL, O(legacy_tokenizer),
     "Megatron's legacy tokenizer classes (megatron/training/tokenizer); they differ for the "
     "SentencePiece types", NULL, 0},
    {"--append-eod", PL_OPT_BOOL, NULL, O(append_eod),
     "append the end-of-document token to each non-empty document", NULL, 0},
    {"--one-document", PL_OPT_BOOL, NULL, O(one_document),
     "the whole input is one document, each record adds items (MegaMolBART csv_to_binary.py)",
     NULL, 0},
    {"--output-prefix", PL_OPT_STRING, NULL, O(output_prefix),
     "output path without suffix; writes PREFIX_KEY_document.bin/.idx (--merge: PREFIX.bin/.idx)",
     NULL, PL_OPT_REQUIRED},
    {"--workers", PL_OPT_INT, "1", O(workers), "tokenizing threads", NULL, 0},
    {"--partitions", PL_OPT_INT, "1", O(partitions),
     "accepted for compatibility; the output is always that of one partition in input order",
     NULL, 0},
    {"--keep-sequential-samples", PL_OPT_BOOL, NULL, O(keep_sequential_samples),
     "accepted for compatibility (order is always kept)", NULL, 0},
    {"--log-interval", PL_OPT_INT, "1000", O(log_interval),
     "documents between progress lines (0: none)", NULL, 0},
    {"--dataset-impl", PL_OPT_STRING, "mmap", O(dataset_impl),
     "dataset format; only mmap (MMIDIDX) exists in current Megatron", NULL, 0},
    {"--on-error", PL_OPT_CHOICE, "stop", O(on_error),
     "malformed lines: stop with FILE:LINE, or skip them and count them", "stop|skip", 0},
    {"--merge", PL_OPT_BOOL, NULL, O(merge),
     "merge the datasets of --input into --output-prefix (tools/merge_datasets.py)", NULL, 0},
};
#undef O

static const pl_command_spec spec = {
    "preprocess", "Tokenize text into Megatron .bin/.idx datasets (tools/preprocess_data.py).",
    table, (int)(sizeof table / sizeof *table),
    1 /* tools/preprocess_data.py's argparse allows abbreviations (--vocab) */};

static volatile sig_atomic_t interrupted;

static void on_signal(int sig) { interrupted = sig; }

/* Flags Megatron has but plait cannot honour. */
static pl_status check_flags(const pp_opts *o)
{
    if (o->split_sentences && !o->punkt_params)
        return pl_errorf(PL_ERR_ARG,
                         "--split-sentences needs --punkt-params FILE: Punkt's parameters "
                         "(scripts/punkt_params.py writes them from NLTK's "
                         "tokenizers/punkt/%s.pickle, or trains them with NLTK); or split the text "
                         "beforehand and give each document as a JSON list of sentences",
                         o->lang);
    if (o->punkt_params && !o->split_sentences)
        return pl_errorf(PL_ERR_ARG, "--punkt-params: only used with --split-sentences");
    if (o->split_sentences && o->keep_newlines)
        return pl_errorf(PL_ERR_ARG,
                         "--keep-newlines: Megatron's CustomLanguageVars splitting is not "
                         "implemented (plait splits as NLTK's default Punkt does, without it)");
    if (strcmp(o->dataset_impl, "mmap") != 0)
        return pl_errorf(PL_ERR_ARG,
                         "--dataset-impl %s: only mmap is supported (the lazy/cached formats "
                         "were removed from Megatron)",
                         o->dataset_impl);
    if (o->workers < 1 || o->workers > 1024)
        return pl_errorf(PL_ERR_ARG, "--workers %lld: expected 1 to 1024", (long long)o->workers);
    if (o->partitions < 1 || o->workers % o->partitions != 0)
        return pl_errorf(PL_ERR_ARG,
                         "--partitions %lld: expected >= 1 and dividing --workers %lld (as "
                         "Megatron requires)",
                         (long long)o->partitions, (long long)o->workers);
    if (o->log_interval < 0)
        return pl_errorf(PL_ERR_ARG, "--log-interval %lld: expected >= 0",
                         (long long)o->log_interval);
    if (!o->merge && o->input.n != 1)
        return pl_errorf(PL_ERR_ARG, "--input: one file expected, %d given (several datasets are "
                                     "combined with --merge)",
                         o->input.n);
    return PL_OK;
}

int plait_cmd_preprocess(int argc, char **argv)
{
    pp_opts o;
    int rc = plait_parse(&spec, &o, argc, argv, NULL);
    if (rc >= 0)
        return rc;
    pl_status st = check_flags(&o);
    if (st) {
        pl_options_free(&spec, &o);
        return plait_report(st);
    }
    if (o.merge) {
        st = pl_preprocess_merge(o.input.items, o.input.n, o.output_prefix, stderr, NULL);
        pl_options_free(&spec, &o);
        return st ? plait_report(st) : 0;
    }
    pl_punkt *splitter = NULL;
    if (o.split_sentences && (st = pl_punkt_load(&splitter, o.punkt_params)) != PL_OK) {
        pl_options_free(&spec, &o);
        return plait_report(pl_error_wrap(st, "--punkt-params"));
    }
    pl_tokenizer *tok = NULL;
    pl_tokenizer_spec ts = {o.tokenizer_type, o.vocab_file, o.merge_file, o.tokenizer_model,
                            o.vocab_extra_ids, o.legacy_tokenizer};
    st = pl_tokenizer_open(&tok, &ts);
    if (st) {
        pl_punkt_free(splitter);
        pl_options_free(&spec, &o);
        return plait_report(st);
    }
    pl_preprocess_config cfg = {
        .input = o.input.items[0],
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
        .log = stderr,
        .cancel = &interrupted,
        .splitter = splitter,
    };
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    st = pl_preprocess_run(&cfg, tok, NULL);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    pl_tokenizer_free(tok);
    pl_punkt_free(splitter);
    pl_options_free(&spec, &o);
    if (st && interrupted) {
        fprintf(stderr, "plait: interrupted by signal %d; no output written\n", (int)interrupted);
        return 128 + (int)interrupted;
    }
    return st ? plait_report(st) : 0;
}
