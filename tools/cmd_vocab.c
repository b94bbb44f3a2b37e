/* plait data build-vocab: a SMILES vocabulary (MegaMolBART layout) from corpus
 * files. Each input line is one SMILES: the whole line, or with --csv-column N
 * its N-th field (1-based) — comma-separated with "quoted" fields in files
 * named *.csv, separated by spaces or tabs (as .smi files) otherwise. Empty
 * lines are skipped. Errors name the file and line. */
#include "commands.h"

#include "base/alloc.h"
#include "base/zread.h"
#include "base/fileio.h"
#include "data/tokenizer/smiles.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef struct vocab_opts {
    const char *tokenizer_type;
    pl_strlist input;
    int64_t csv_column;
    int skip_header;
    const char *output;
    int64_t chem_tokens_start;
    int64_t min_count;
} vocab_opts;

static const pl_option vocab_options[] = {
    {"--tokenizer-type", PL_OPT_CHOICE, NULL, offsetof(vocab_opts, tokenizer_type),
     "tokenizer whose vocabulary to build", "SmilesTokenizer", PL_OPT_REQUIRED},
    {"--input", PL_OPT_LIST, NULL, offsetof(vocab_opts, input),
     "corpus files, one SMILES a line", NULL, PL_OPT_REQUIRED},
    {"--csv-column", PL_OPT_INT, "0", offsetof(vocab_opts, csv_column),
     "take field N (1-based) of each line: CSV in *.csv files, whitespace-separated otherwise; "
     "0: the whole line", NULL, 0},
    {"--skip-header", PL_OPT_BOOL, NULL, offsetof(vocab_opts, skip_header),
     "skip the first line of each input file", NULL, 0},
    {"--output", PL_OPT_STRING, NULL, offsetof(vocab_opts, output),
     "vocabulary file to write (one token a line)", NULL, PL_OPT_REQUIRED},
    {"--chem-tokens-start", PL_OPT_INT, "272", offsetof(vocab_opts, chem_tokens_start),
     "id of the first chemical token; ids 6.. below it are <UNUSED_i> placeholders (>= 6)", NULL,
     0},
    {"--min-count", PL_OPT_INT, "1", offsetof(vocab_opts, min_count),
     "keep tokens seen at least this many times", NULL, 0},
};

static const pl_command_spec vocab_cmd = {
    "data build-vocab",
    "Build a SMILES vocabulary from corpus files: the 6 MegaMolBART specials, <UNUSED_i> up to "
    "--chem-tokens-start, then the tokens found, most frequent first.",
    vocab_options,
    (int)(sizeof vocab_options / sizeof *vocab_options),
    0,
};

static int ends_with_csv(const char *path)
{
    size_t n = strlen(path);
    static const char *const forms[] = {".csv", ".csv.gz", ".csv.xz", ".csv.zst"};
    for (size_t i = 0; i < sizeof forms / sizeof *forms; i++) {
        size_t e = strlen(forms[i]);
        if (n >= e && strcasecmp(path + n - e, forms[i]) == 0)
            return 1;
    }
    return 0;
}

/* Field col (1-based) of line[0..n): CSV (RFC 4180 quoting, "" inside quotes)
 * or whitespace-separated. The field goes to *field (a copy in buf when it was
 * quoted). */
static pl_status line_field(const char *path, int64_t line_no, const char *line, size_t n,
                            int64_t col, int csv, pl_bytes *buf, const char **field, size_t *len)
{
    int64_t k = 0;
    size_t i = 0;
    if (!csv) {
        for (;;) {
            while (i < n && (line[i] == ' ' || line[i] == '\t'))
                i++;
            if (i == n)
                break;
            size_t s = i;
            while (i < n && line[i] != ' ' && line[i] != '\t')
                i++;
            if (++k == col) {
                *field = line + s;
                *len = i - s;
                return PL_OK;
            }
        }
    } else {
        for (;;) {
            k++;
            buf->n = 0;
            if (i < n && line[i] == '"') {
                size_t s = ++i;
                for (;;) {
                    if (i >= n)
                        return pl_errorf(PL_ERR_FORMAT, "%s:%lld: unterminated quoted field %lld",
                                         path, (long long)line_no, (long long)k);
                    if (line[i] == '"' && i + 1 < n && line[i + 1] == '"') {
                        pl_status st = pl_bytes_append(buf, line + s, i + 1 - s);
                        if (st != PL_OK)
                            return st;
                        i += 2;
                        s = i;
                    } else if (line[i] == '"') {
                        pl_status st = pl_bytes_append(buf, line + s, i - s);
                        if (st != PL_OK)
                            return st;
                        i++;
                        break;
                    } else {
                        i++;
                    }
                }
                if (i < n && line[i] != ',')
                    return pl_errorf(PL_ERR_FORMAT, "%s:%lld: text after the closing quote of "
                                     "field %lld", path, (long long)line_no, (long long)k);
                if (k == col) {
                    *field = buf->data ? buf->data : "";
                    *len = buf->n;
                    return PL_OK;
                }
            } else {
                size_t s = i;
                while (i < n && line[i] != ',')
                    i++;
                if (k == col) {
                    *field = line + s;
                    *len = i - s;
                    return PL_OK;
                }
            }
            if (i >= n)
                break;
            i++; /* the comma */
        }
    }
    return pl_errorf(PL_ERR_FORMAT, "%s:%lld: --csv-column %lld asks for field %lld, the line has "
                     "%lld", path, (long long)line_no, (long long)col, (long long)col, (long long)k);
}

static pl_status add_file(pl_smiles_vocab_builder *b, const vocab_opts *o, const char *path,
                          int64_t *n_smiles)
{
    pl_mmap m = {0};
    pl_bytes buf = {0};
    char *unpacked = NULL; /* a compressed corpus, decompressed in memory */
    size_t size = 0;
    pl_status st = pl_zread_compressed_name(path) ? pl_zread_file(path, &unpacked, &size)
                                                  : pl_mmap_open(&m, path);
    if (st != PL_OK)
        return pl_error_wrap(st, "--input");
    int csv = ends_with_csv(path);
    const char *data = unpacked ? unpacked : (const char *)m.data;
    if (!unpacked)
        size = m.size;
    int64_t line_no = 0;
    for (size_t i = 0; i < size;) {
        const char *nl = memchr(data + i, '\n', size - i);
        size_t e = nl ? (size_t)(nl - data) : size;
        const char *line = data + i;
        size_t n = e - i;
        i = e + 1;
        line_no++;
        if (n > 0 && line[n - 1] == '\r')
            n--;
        if (n == 0 || (line_no == 1 && o->skip_header))
            continue;
        const char *smi = line;
        size_t len = n;
        if (o->csv_column > 0)
            PL_TRY(line_field(path, line_no, line, n, o->csv_column, csv, &buf, &smi, &len));
        st = pl_smiles_vocab_builder_add(b, smi, len);
        if (st != PL_OK) {
            st = pl_error_wrap(st, "%s:%lld", path, (long long)line_no);
            goto fail;
        }
        (*n_smiles)++;
    }
fail:
    pl_bytes_free(&buf);
    pl_free(unpacked);
    pl_mmap_close(&m);
    return st;
}

int plait_data_build_vocab(int argc, char **argv)
{
    vocab_opts o;
    int rc = plait_parse(&vocab_cmd, &o, argc, argv, NULL);
    if (rc >= 0)
        return rc;
    pl_smiles_vocab_builder *b = NULL;
    pl_status st = PL_OK;
    int64_t n_smiles = 0, n_tokens = 0;
    if (o.csv_column < 0) {
        st = pl_errorf(PL_ERR_ARG, "plait data build-vocab: --csv-column must be >= 0, got %lld",
                       (long long)o.csv_column);
        goto fail;
    }
    if (o.chem_tokens_start < PL_SMILES_N_SPECIAL || o.chem_tokens_start > 1000000) {
        st = pl_errorf(PL_ERR_ARG, "plait data build-vocab: --chem-tokens-start must be in "
                       "[6, 1000000], got %lld", (long long)o.chem_tokens_start);
        goto fail;
    }
    if (o.min_count < 1) {
        st = pl_errorf(PL_ERR_ARG, "plait data build-vocab: --min-count must be >= 1, got %lld",
                       (long long)o.min_count);
        goto fail;
    }
    PL_TRY(pl_smiles_vocab_builder_init(&b));
    for (int i = 0; i < o.input.n; i++)
        PL_TRY(add_file(b, &o, o.input.items[i], &n_smiles));
    PL_TRY(pl_smiles_vocab_builder_write(b, o.output, o.chem_tokens_start, o.min_count, &n_tokens));
    printf("build-vocab: %lld SMILES from %d file%s, %lld distinct tokens; wrote %lld tokens to %s "
           "(chemical tokens from id %lld)\n",
           (long long)n_smiles, o.input.n, o.input.n == 1 ? "" : "s",
           (long long)pl_smiles_vocab_builder_distinct(b), (long long)n_tokens, o.output,
           (long long)o.chem_tokens_start);
fail:
    pl_smiles_vocab_builder_free(b);
    pl_options_free(&vocab_cmd, &o);
    return st == PL_OK ? 0 : plait_report(st);
}
