/* Validity, reconstruction and uniqueness of SMILES outputs (see smiles_eval.h). */
#include "data/smiles_eval.h"

#include "base/alloc.h"
#include "base/status.h"

#include <stdlib.h>
#include <string.h>

/* The key of s into key; 1 if s is a valid molecule. Only PL_ERR_NOMEM fails. */
static pl_status identify(pl_smiles_eval *e, const char *s, size_t len, pl_bytes *key, int *ok)
{
    pl_status st = pl_smiles_identify(&e->m, &e->c, s, len, key);
    *ok = st == PL_OK;
    if (st == PL_ERR_FORMAT || st == PL_ERR_UNSUPPORTED) {
        pl_error_clear();
        st = PL_OK;
    }
    return st;
}

pl_status pl_smiles_eval_add(pl_smiles_eval *e, const char *input, size_t in_len,
                             const char *output, size_t out_len, int *valid, int *same)
{
    int in_ok = 0, out_ok = 0;
    pl_status st = identify(e, input, in_len, &e->key_in, &in_ok);
    if (st == PL_OK)
        st = identify(e, output, out_len, &e->key_out, &out_ok);
    if (st != PL_OK)
        return st;
    const int eq = in_ok && out_ok && e->key_in.n == e->key_out.n &&
                   memcmp(e->key_in.data, e->key_out.data, e->key_in.n) == 0;
    e->n++;
    e->inputs_invalid += !in_ok;
    e->valid += out_ok;
    e->same += eq;
    if (out_ok) {
        if ((st = pl_i64s_push(&e->offsets, (int64_t)e->keys.n)) != PL_OK ||
            (st = pl_bytes_append(&e->keys, e->key_out.data, e->key_out.n + 1)) != PL_OK)
            return st;
    }
    if (valid)
        *valid = out_ok;
    if (same)
        *same = eq;
    return PL_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

pl_status pl_smiles_eval_summarize(pl_smiles_eval *e, pl_smiles_eval_summary *out)
{
    out->n = e->n;
    out->valid = e->valid;
    out->reconstructed = e->same;
    out->inputs_invalid = e->inputs_invalid;
    out->unique = 0;
    const int64_t k = e->offsets.n;
    if (k == 0)
        return PL_OK;
    const char **p = pl_malloc((size_t)k * sizeof *p);
    if (!p)
        return pl_errorf(PL_ERR_NOMEM, "SMILES evaluation: out of memory for %lld keys",
                         (long long)k);
    for (int64_t i = 0; i < k; i++)
        p[i] = e->keys.data + e->offsets.data[i];
    qsort(p, (size_t)k, sizeof *p, cmp_str);
    for (int64_t i = 0; i < k; i++)
        out->unique += i == 0 || strcmp(p[i], p[i - 1]) != 0;
    pl_free(p);
    return PL_OK;
}

void pl_smiles_eval_free(pl_smiles_eval *e)
{
    pl_smiles_mol_free(&e->m);
    pl_smiles_chem_free(&e->c);
    pl_bytes_free(&e->key_in);
    pl_bytes_free(&e->key_out);
    pl_bytes_free(&e->keys);
    pl_i64s_free(&e->offsets);
    memset(e, 0, sizeof *e);
}
