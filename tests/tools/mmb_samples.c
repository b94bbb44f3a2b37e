/* Test helper for tests/scripts/mmb_dataset.sh: builds MegaMolBART samples
 * (data/mmb_dataset.h) from a split of a MegaMolBART dataset directory and
 * prints one line per sample, tab-separated:
 *   index molecule file:line input enc_smiles dec_smiles enc_unmasked
 *   enc_masks enc_truncated dec_truncated enc_length enc_ids(Te) dec_length
 *   dec_ids(Td) labels(Td) unknown
 * (id lists space-separated, padded as the sample holds them).
 *   mmb_samples DATASET_PATH SPLIT SPEC VOCAB START COUNT [key=value ...]
 * keys: seed seq ea em da dm p lambda column header map_unknown; validate=1 only checks
 * every molecule (pl_mmb_dataset_validate) and prints "valid N". */
#include "base/alloc.h"
#include "data/mmb_dataset.h"
#include "data/tokenizer/smiles.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_ids(const int32_t *a, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        printf(i ? " %d" : "%d", a[i]);
}

int main(int argc, char **argv)
{
    if (argc < 7) {
        fprintf(stderr, "usage: mmb_samples DATASET_PATH SPLIT SPEC VOCAB START COUNT "
                        "[key=value ...]\n");
        return 2;
    }
    pl_mmb_config cfg;
    pl_mmb_config_default(&cfg);
    int64_t column = 1, header = 1, start = atoll(argv[5]), count = atoll(argv[6]);
    int validate = 0;
    for (int i = 7; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) {
            fprintf(stderr, "mmb_samples: '%s': expected key=value\n", argv[i]);
            return 2;
        }
        *eq = '\0';
        const char *k = argv[i], *v = eq + 1;
        if (!strcmp(k, "seed"))
            cfg.seed = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(k, "seq"))
            cfg.seq_length = atoll(v);
        else if (!strcmp(k, "ea"))
            cfg.encoder_augment = atoi(v);
        else if (!strcmp(k, "em"))
            cfg.encoder_mask = atoi(v);
        else if (!strcmp(k, "da"))
            cfg.decoder_augment = atoi(v);
        else if (!strcmp(k, "dm"))
            cfg.decoder_mask = atoi(v);
        else if (!strcmp(k, "p"))
            cfg.mask_prob = atof(v);
        else if (!strcmp(k, "lambda"))
            cfg.span_lambda = atof(v);
        else if (!strcmp(k, "column"))
            column = atoll(v);
        else if (!strcmp(k, "header"))
            header = atoll(v);
        else if (!strcmp(k, "map_unknown"))
            cfg.map_unknown = atoi(v);
        else if (!strcmp(k, "validate"))
            validate = atoi(v);
        else {
            fprintf(stderr, "mmb_samples: unknown key '%s'\n", k);
            return 2;
        }
    }
    char **paths = NULL;
    int32_t n_paths = 0;
    pl_tokenizer *tok = NULL;
    pl_mmb_molecules mols = {0};
    pl_mmb_dataset *d = NULL;
    int32_t *buf = NULL;
    int rc = 1;
    pl_status st = pl_mmb_split_paths(argv[1], argv[2], argv[3], &paths, &n_paths);
    if (st == PL_OK)
        st = pl_smiles_tokenizer_open_ex(&tok, argv[4], -1);
    if (st == PL_OK)
        st = pl_mmb_molecules_load(&mols, (const char *const *)paths, n_paths, column, header);
    if (st == PL_OK)
        st = pl_mmb_dataset_init(&d, &cfg, tok, &mols);
    if (st == PL_OK && validate) {
        st = pl_mmb_dataset_validate(d);
        if (st == PL_OK)
            printf("valid %lld\n", (long long)mols.n);
    }
    if (st != PL_OK || validate)
        goto done;
    int64_t Te, Td;
    pl_mmb_dataset_dims(d, &Te, &Td);
    buf = pl_malloc((size_t)(Te + 2 * Td) * sizeof *buf);
    if (!buf) {
        st = PL_ERR_NOMEM;
        goto done;
    }
    pl_encdec_sample s = {.enc_tokens = buf, .dec_tokens = buf + Te, .labels = buf + Te + Td};
    for (int64_t i = start; i < start + count && st == PL_OK; i++) {
        pl_mmb_sample_info info;
        st = pl_mmb_dataset_sample(d, i, &s, &info);
        if (st != PL_OK)
            break;
        printf("%lld\t%lld\t%s:%lld\t%s\t%s\t%s\t%lld\t%lld\t%d\t%d\t", (long long)i,
               (long long)info.molecule, mols.paths[mols.file[info.molecule]],
               (long long)mols.line[info.molecule], mols.text + mols.offset[info.molecule],
               info.enc_smiles, info.dec_smiles, (long long)info.enc_unmasked,
               (long long)info.enc_masks, info.enc_truncated, info.dec_truncated);
        printf("%lld\t", (long long)s.enc_length);
        print_ids(s.enc_tokens, Te);
        printf("\t%lld\t", (long long)s.dec_length);
        print_ids(s.dec_tokens, Td);
        printf("\t");
        print_ids(s.labels, Td);
        printf("\t%lld\n", (long long)info.unknown);
    }
done:
    if (st != PL_OK)
        fprintf(stderr, "mmb_samples: %s\n", pl_error_msg());
    else
        rc = 0;
    pl_free(buf);
    pl_mmb_dataset_free(d);
    pl_mmb_molecules_free(&mols);
    pl_tokenizer_free(tok);
    pl_mmb_paths_free(paths, n_paths);
    return rc;
}
