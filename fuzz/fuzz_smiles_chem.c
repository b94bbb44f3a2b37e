/* libFuzzer target: plait's molecule checks (src/data/smiles_chem.h) on
 * arbitrary bytes. Invariants: nothing crashes; a refusal is PL_ERR_FORMAT
 * (or the parser's PL_ERR_UNSUPPORTED) with a message; whatever parses and
 * passes the sanitisation checks has a key, and two random atom orders of it
 * (pl_smiles_write_random, seeded by the input) parse, pass the checks and
 * have the same key: the verdict and the molecule do not depend on how the
 * SMILES is written. Not for molecules RDKit's cleanUp changed (a 5-valent N
 * next to another, say): cleanUp works in atom order, in RDKit as here, so
 * the first of two such atoms is the one charge-separated and the verdict can
 * depend on the writing. */
#include "base/vec.h"
#include "data/smiles_chem.h"
#include "data/smiles_graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const uint8_t *data, size_t size, const pl_bytes *out)
{
    fprintf(stderr, "fuzz_smiles_chem: %s: %s\n  input  %.*s\n  output %s\n", what, pl_error_msg(),
            (int)size, (const char *)data, out && out->data ? out->data : "");
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static pl_smiles_mol m, again;
    static pl_smiles_chem c;
    static pl_bytes out, key, key2;
    pl_status st = pl_smiles_parse(&m, (const char *)data, size);
    if (st != PL_OK)
        return 0;
    st = pl_smiles_sanitize(&m, &c);
    if (st != PL_OK) {
        if (st != PL_ERR_FORMAT || pl_error_msg()[0] == '\0')
            fail("refusal without a format status and message", data, size, NULL);
        return 0;
    }
    if (pl_smiles_canon_key(&m, &c, &key) != PL_OK)
        fail("no key for a valid molecule", data, size, NULL);
    for (int32_t a = 0; a < m.n_atoms; a++)
        if (c.charge[a] != m.atoms[a].charge)
            return 0; /* cleanUp acted: order-dependent, as RDKit's */
    uint32_t seed = 2166136261u;
    for (size_t i = 0; i < size; i++)
        seed = (seed ^ data[i]) * 16777619u;
    pl_np_rng rng;
    pl_np_rng_seed(&rng, seed);
    for (int k = 0; k < 2; k++) {
        out.n = 0;
        st = pl_smiles_write_random(&m, &rng, &out);
        if (st == PL_ERR_UNSUPPORTED)
            return 0;
        if (st != PL_OK)
            fail("write failed", data, size, &out);
        if (pl_smiles_parse(&again, out.data, out.n) != PL_OK)
            fail("the output does not parse", data, size, &out);
        if (pl_smiles_sanitize(&again, &c) != PL_OK)
            fail("a random order of a valid molecule is invalid", data, size, &out);
        if (pl_smiles_canon_key(&again, &c, &key2) != PL_OK || key2.n != key.n ||
            memcmp(key.data, key2.data, key.n) != 0)
            fail("a random order of a molecule has another key", data, size, &out);
    }
    return 0;
}
