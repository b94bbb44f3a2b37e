/* The figures chemists read from a SMILES model's outputs, computed with
 * plait's own molecule checks (data/smiles_chem.h), as MOSES and MegaMolBART
 * define them:
 *   validity       = outputs that parse and pass RDKit's default sanitisation
 *                    checks / outputs;
 *   reconstruction = outputs that are the input molecule (equal canonical
 *                    keys, stereo included) / outputs;
 *   uniqueness     = distinct molecules among the valid outputs / valid outputs.
 * bench/megamolbart_eval.sh cross-checks these figures with RDKit. */
#ifndef PL_DATA_SMILES_EVAL_H
#define PL_DATA_SMILES_EVAL_H

#include "base/vec.h"
#include "data/smiles_chem.h"

typedef struct pl_smiles_eval {
    int64_t n, valid, same, inputs_invalid;
    pl_smiles_mol m;
    pl_smiles_chem c;
    pl_bytes key_in, key_out, keys; /* keys: every valid output's key, NUL-separated */
    pl_i64s offsets;                /* into keys */
} pl_smiles_eval;

typedef struct pl_smiles_eval_summary {
    int64_t n, valid, reconstructed, unique, inputs_invalid;
} pl_smiles_eval_summary;

/* Scores one (input, output) pair; *valid and *same (may be NULL) say how
 * this output scored. An invalid input (rare: it came from the data) counts
 * in inputs_invalid, and its output is never a reconstruction. Errors:
 * PL_ERR_NOMEM only. */
pl_status pl_smiles_eval_add(pl_smiles_eval *e, const char *input, size_t in_len,
                             const char *output, size_t out_len, int *valid, int *same);

/* The counts so far (sorts the stored keys to count distinct ones). */
pl_status pl_smiles_eval_summarize(pl_smiles_eval *e, pl_smiles_eval_summary *out);

void pl_smiles_eval_free(pl_smiles_eval *e);

#endif
