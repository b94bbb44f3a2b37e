/* Test helper for tests/scripts/smiles_chem.sh: for each line of a file (one
 * SMILES a line, nothing else), prints one line:
 *   valid<TAB>KEY            the molecule's canonical key (data/smiles_chem.h)
 *   invalid<TAB>MESSAGE      parsed, refused by the sanitisation checks
 *   syntax<TAB>MESSAGE       refused by the SMILES parser
 *   smiles_chem FILE */
#include "data/smiles_chem.h"

#include "plait.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
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
