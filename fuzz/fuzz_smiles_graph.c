/* libFuzzer target: the SMILES parser and writer (src/data/smiles_graph.h) on
 * arbitrary bytes. Invariants: parsing never crashes; an error is
 * PL_ERR_FORMAT or PL_ERR_UNSUPPORTED with a message; whatever parses is
 * written in parse order and in two random orders (seeded by the input), and
 * every output parses again into a graph with the same atoms (symbols, H
 * counts, charges, in some order), bonds and fragments. The writer may refuse
 * only with PL_ERR_UNSUPPORTED (more than 99 ring bonds open at once). */
#include "base/vec.h"
#include "data/smiles_graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An order-independent summary of the atoms. */
static uint64_t atoms_digest(const pl_smiles_mol *m)
{
    uint64_t sum = 0;
    for (int32_t i = 0; i < m->n_atoms; i++) {
        const pl_smiles_atom *a = &m->atoms[i];
        uint64_t h = 1469598103934665603ull;
        for (const char *p = a->symbol; *p; p++)
            h = (h ^ (uint8_t)*p) * 1099511628211ull;
        h = (h ^ (uint64_t)(a->hcount + 2)) * 1099511628211ull;
        h = (h ^ (uint64_t)(a->charge + 16)) * 1099511628211ull;
        h = (h ^ (uint64_t)(a->isotope + 1)) * 1099511628211ull;
        h = (h ^ (uint64_t)(a->chiral != 0)) * 1099511628211ull;
        sum += h;
    }
    return sum;
}

static void fail(const char *what, const uint8_t *data, size_t size, const pl_bytes *out)
{
    fprintf(stderr, "fuzz_smiles_graph: %s: %s\n  input  %.*s\n  output %s\n", what, pl_error_msg(),
            (int)size, (const char *)data, out && out->data ? out->data : "");
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static pl_smiles_mol m, again;
    static pl_bytes out;
    pl_status st = pl_smiles_parse(&m, (const char *)data, size);
    if (st != PL_OK) {
        if ((st != PL_ERR_FORMAT && st != PL_ERR_UNSUPPORTED) || pl_error_msg()[0] == '\0')
            fail("parse error without a format status and message", data, size, NULL);
        return 0;
    }
    uint64_t digest = atoms_digest(&m);
    uint32_t seed = 2166136261u;
    for (size_t i = 0; i < size; i++)
        seed = (seed ^ data[i]) * 16777619u;
    pl_np_rng rng;
    pl_np_rng_seed(&rng, seed);
    for (int k = 0; k < 3; k++) {
        out.n = 0;
        st = k == 0 ? pl_smiles_write(&m, NULL, &out) : pl_smiles_write_random(&m, &rng, &out);
        if (st == PL_ERR_UNSUPPORTED)
            return 0;
        if (st != PL_OK)
            fail("write failed", data, size, &out);
        if (pl_smiles_parse(&again, out.data, out.n) != PL_OK)
            fail("the output does not parse", data, size, &out);
        if (again.n_atoms != m.n_atoms || again.n_bonds != m.n_bonds ||
            again.n_frags != m.n_frags || atoms_digest(&again) != digest)
            fail("the output is another graph", data, size, &out);
    }
    return 0;
}
