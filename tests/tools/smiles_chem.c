/* Test helper for tests/scripts/smiles_chem.sh: for each line of a file (one
 * SMILES a line, nothing else), prints one line:
 *   valid<TAB>KEY            the molecule's canonical key (data/smiles_chem.h)
 *   invalid<TAB>MESSAGE      parsed, refused by the sanitisation checks
 *   syntax<TAB>MESSAGE       refused by the SMILES parser
 *   smiles_chem FILE
 * With --pairs, each line is "input<TAB>output" and the tool prints the
 * evaluation's JSON (data/smiles_eval.h) instead:
 *   smiles_chem --pairs FILE */
#include "data/smiles_chem.h"
#include "data/smiles_eval.h"

#include "plait.h"

#include <stdio.h>
#include <string.h>

static int pairs(FILE *fp)
{
    pl_smiles_eval e = {0};
    pl_smiles_eval_summary r;
    char line[16384];
    pl_status st = PL_OK;
    while (st == PL_OK && fgets(line, sizeof line, fp)) {
        size_t len = strcspn(line, "\r\n");
        line[len] = 0;
        char *tab = strchr(line, '\t');
        const char *out = tab ? tab + 1 : "";
        size_t in_len = tab ? (size_t)(tab - line) : len;
        st = pl_smiles_eval_add(&e, line, in_len, out, strlen(out), NULL, NULL);
    }
    if (st == PL_OK)
        st = pl_smiles_eval_summarize(&e, &r);
    pl_smiles_eval_free(&e);
    if (st != PL_OK) {
        fprintf(stderr, "smiles_chem: %s\n", pl_error_msg());
        return 1;
    }
    printf("{\"molecules\": %lld, \"valid\": %lld, \"reconstructed\": %lld, \"unique_valid\": "
           "%lld, \"inputs_invalid\": %lld}\n", (long long)r.n, (long long)r.valid,
           (long long)r.reconstructed, (long long)r.unique, (long long)r.inputs_invalid);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--pairs") == 0) {
        FILE *fp = fopen(argv[2], "r");
        if (!fp) {
            fprintf(stderr, "smiles_chem: cannot open %s\n", argv[2]);
            return 2;
        }
        int rc = pairs(fp);
        fclose(fp);
        return rc;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: smiles_chem FILE\n");
        return 2;
    }
    FILE *fp = fopen(argv[1], "r");
    if (!fp) {
        fprintf(stderr, "smiles_chem: cannot open %s\n", argv[1]);
        return 2;
    }
    pl_smiles_mol m = {0};
    pl_smiles_chem c = {0};
    pl_bytes key = {0};
    char line[8192];
    int rc = 0;
    while (fgets(line, sizeof line, fp)) {
        size_t len = strcspn(line, "\r\n");
        line[len] = 0;
        pl_status st = pl_smiles_parse(&m, line, len);
        if (st == PL_ERR_FORMAT || st == PL_ERR_UNSUPPORTED) {
            printf("syntax\t%s\n", pl_error_msg());
            continue;
        }
        if (st == PL_OK)
            st = pl_smiles_sanitize(&m, &c);
        if (st == PL_ERR_FORMAT) {
            printf("invalid\t%s\n", pl_error_msg());
            continue;
        }
        if (st == PL_OK)
            st = pl_smiles_canon_key(&m, &c, &key);
        if (st != PL_OK) {
            fprintf(stderr, "smiles_chem: %s\n", pl_error_msg());
            rc = 1;
            break;
        }
        printf("valid\t%s\n", key.data);
    }
    fclose(fp);
    pl_bytes_free(&key);
    pl_smiles_chem_free(&c);
    pl_smiles_mol_free(&m);
    return rc;
}
