/* plait data smiles-augment: SMILES written from random atom orders
 * (src/data/smiles_graph.h), to see what the augmentation of the MegaMolBART
 * objective does and to check it against RDKit. The input is read as
 * `plait preprocess` reads it (the format from the extension: .smi blanks,
 * .csv commas with quoting, .tsv tabs, .txt whole lines; --csv-column is
 * 0-based). Each input SMILES gives one output line: --num randomised SMILES
 * separated by tabs (with --keep-input, the input first). The random stream is
 * numpy's RandomState(--seed), drawn molecule after molecule, so a file and a
 * seed give the same output on every machine. Errors name the file and line. */
#include "commands.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "data/numpy_rng.h"
#include "data/reader.h"
#include "data/smiles_graph.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef struct augment_opts {
    const char *input;
    const char *output;
    int64_t csv_column;
    int skip_header;
    int64_t seed;
    int64_t num;
    int keep_input;
    int parse_order;
} augment_opts;

static const pl_option augment_options[] = {
    {"--input", PL_OPT_STRING, NULL, offsetof(augment_opts, input),
     "SMILES file (.smi, .csv, .tsv or .txt)", NULL, PL_OPT_REQUIRED},
    {"--output", PL_OPT_STRING, "-", offsetof(augment_opts, output),
     "file to write ('-': standard output)", NULL, 0},
    {"--csv-column", PL_OPT_INT, "0", offsetof(augment_opts, csv_column),
     "0-based field holding the SMILES (.smi, .csv, .tsv)", NULL, 0},
    {"--skip-header", PL_OPT_BOOL, NULL, offsetof(augment_opts, skip_header),
     "skip the first record", NULL, 0},
    {"--seed", PL_OPT_INT, "1234", offsetof(augment_opts, seed),
     "seed of numpy's RandomState stream the atom orders are drawn from", NULL, 0},
    {"--num", PL_OPT_INT, "1", offsetof(augment_opts, num), "randomised SMILES per input SMILES",
     NULL, 0},
    {"--keep-input", PL_OPT_BOOL, NULL, offsetof(augment_opts, keep_input),
     "write the input SMILES first on each line", NULL, 0},
    {"--parse-order", PL_OPT_BOOL, NULL, offsetof(augment_opts, parse_order),
     "no randomisation: write each SMILES back in its own atom order", NULL, 0},
};

static const pl_command_spec augment_cmd = {
    "data smiles-augment",
    "Write each SMILES of a file from random atom orders (the same molecule, stereo kept), as "
    "MegaMolBART's augmentation does.",
    augment_options,
    (int)(sizeof augment_options / sizeof *augment_options),
    0,
};

static pl_status augment_file(const augment_opts *o, FILE *out, int64_t *n_mols)
{
    pl_mmap map = {0};
    pl_reader_doc doc = {0};
    pl_smiles_mol mol = {0};
    pl_bytes line = {0};
    pl_np_rng rng;
    pl_reader_spec spec;
    pl_status st;
    const char *const keys[] = {"smiles"};
    pl_np_rng_seed(&rng, (uint32_t)o->seed);
    PL_TRY(pl_reader_spec_init(&spec, "auto", o->input));
    if (spec.format == PL_READER_JSONL) {
        st =
            pl_errorf(PL_ERR_ARG, "--input %s: expected a .smi, .csv, .tsv or .txt file", o->input);
        goto fail;
    }
    spec.column = o->csv_column;
    spec.keys = keys;
    spec.n_keys = 1;
    if ((st = pl_mmap_open(&map, o->input)) != PL_OK) {
        st = pl_error_wrap(st, "--input");
        goto fail;
    }
    const char *data = (const char *)map.data;
    size_t pos = 0;
    int64_t lines = 0, records = 0;
    pl_reader_record rec;
    while (pl_reader_next(&spec, data, map.size, &pos, &lines, &rec)) {
        int64_t at = rec.line + 1; /* 1-based line of the record */
        if (records++ == 0 && o->skip_header)
            continue;
        if ((st = pl_reader_parse(&spec, rec.text, rec.len, &doc)) != PL_OK) {
            st = pl_error_wrap(st, "%s:%lld", o->input, (long long)at);
            goto fail;
        }
        if (doc.blank || doc.n == 0 || doc.len[0] == 0)
            continue;
        if ((st = pl_smiles_parse(&mol, doc.text[0], doc.len[0])) != PL_OK) {
            st = pl_error_wrap(st, "%s:%lld", o->input, (long long)at);
            goto fail;
        }
        line.n = 0;
        if (o->keep_input)
            PL_TRY(pl_bytes_append(&line, doc.text[0], doc.len[0]));
        for (int64_t k = 0; k < o->num; k++) {
            if (line.n > 0 || k > 0)
                PL_TRY(pl_bytes_append(&line, "\t", 1));
            st = o->parse_order ? pl_smiles_write(&mol, NULL, &line)
                                : pl_smiles_write_random(&mol, &rng, &line);
            if (st != PL_OK) {
                st = pl_error_wrap(st, "%s:%lld", o->input, (long long)at);
                goto fail;
            }
        }
        PL_TRY(pl_bytes_append(&line, "\n", 1));
        if (fwrite(line.data, 1, line.n, out) != line.n) {
            st = pl_errorf(PL_ERR_IO, "--output %s: write failed", o->output);
            goto fail;
        }
        (*n_mols)++;
    }
fail:
    pl_bytes_free(&line);
    pl_smiles_mol_free(&mol);
    pl_reader_doc_free(&doc);
    pl_mmap_close(&map);
    return st;
}

int plait_data_smiles_augment(int argc, char **argv)
{
    augment_opts o;
    int rc = plait_parse(&augment_cmd, &o, argc, argv, NULL);
    if (rc >= 0)
        return rc;
    pl_status st = PL_OK;
    FILE *out = stdout;
    int64_t n_mols = 0;
    if (o.num < 1 || o.num > 1000000) {
        st = pl_errorf(PL_ERR_ARG,
                       "plait data smiles-augment: --num must be in [1, 1000000], "
                       "got %lld",
                       (long long)o.num);
        goto fail;
    }
    if (o.seed < 0 || o.seed > UINT32_MAX) {
        st = pl_errorf(PL_ERR_ARG,
                       "plait data smiles-augment: --seed must be in [0, 2^32 - 1] "
                       "(numpy RandomState), got %lld",
                       (long long)o.seed);
        goto fail;
    }
    if (o.csv_column < 0) {
        st = pl_errorf(PL_ERR_ARG, "plait data smiles-augment: --csv-column must be >= 0, got %lld",
                       (long long)o.csv_column);
        goto fail;
    }
    if (strcmp(o.output, "-") != 0 && !(out = fopen(o.output, "w"))) {
        st = pl_errorf(PL_ERR_IO, "--output %s: cannot open for writing", o.output);
        goto fail;
    }
    st = augment_file(&o, out, &n_mols);
    if (out != stdout && fclose(out) != 0 && st == PL_OK)
        st = pl_errorf(PL_ERR_IO, "--output %s: write failed", o.output);
    if (st == PL_OK)
        fprintf(stderr, "smiles-augment: %lld SMILES, %lld output%s each\n", (long long)n_mols,
                (long long)o.num, o.num == 1 ? "" : "s");
fail:
    pl_options_free(&augment_cmd, &o);
    return st == PL_OK ? 0 : plait_report(st);
}
