/* Molecule evaluation on a parsed SMILES graph (data/smiles_graph.h): is it a
 * molecule RDKit accepts (validity), and which molecule is it (identity), for
 * the figures chemists read from a SMILES model: validity, reconstruction
 * accuracy and uniqueness.
 *
 * pl_smiles_sanitize applies the checks of RDKit's default sanitisation
 * (MolOps::sanitizeMol, RDKit 2022.09 as Debian ships it) that can reject a
 * molecule parsed from SMILES, in its order:
 *   - cleanUp: a neutral N of valence 5 with a =O or #N (nitro, azide), a
 *     neutral P of valence 5 and degree 3 with =O and a =C/=N, and a neutral
 *     Cl/Br/I of valence 3, 5 or 7 bound to O only are charge-separated first,
 *     so CN(=O)=O is valid as RDKit has it;
 *   - valences (Atom::calcExplicitValence / calcImplicitValence, strict): bond
 *     orders (aromatic 1.5, RDKit's rounding and its aromatic allowance) plus
 *     bracket H against the element's valence list (atomic_data.cpp) shifted
 *     by the charge (reversed for elements left of carbon, for C+ too);
 *     organic-subset atoms get implicit H up to the next allowed valence,
 *     bracket atoms none;
 *   - aromaticity as written: an aromatic atom outside every ring is refused,
 *     and the aromatic ring bonds must kekulize: every aromatic atom that
 *     needs a double bond (Kekulize.cpp's markDbondCands) gets exactly one
 *     (a perfect matching, found by backtracking).
 * Not checked (RDKit's later steps do not reject SMILES the parser accepted, or
 * are rare): radicals, dummy atoms' permutations, non-ring aromatic bonds.
 *
 * pl_smiles_canon_key writes a canonical key of a sanitised molecule: atoms
 * in a canonical order (colour refinement on element, isotope, charge, H
 * count, degree and bond classes, ties broken one atom at a time),
 * their bonds, tetrahedral centres (@/@@ relative to the canonical order, the
 * RDKit reading of the tag kept), double-bond geometry (cis/trans of the
 * highest-ranked neighbours) and ring stereo (pairs of ring centres whose two
 * ring neighbours are alike, cis/trans-1,4-dimethylcyclohexane: one face or
 * opposite faces). Equal keys mean the same labelled graph, so two SMILES
 * with equal keys are one molecule; unequal keys mean different molecules
 * except for the cases docs/training.md lists. A centre with two neighbours of
 * one symmetry class and no ring partner loses its tag, as RDKit's. Kekulé and aromatic writings are
 * one molecule: the key sees the Kekulé structure (aromatic bonds made single
 * or double by the kekulization), and a ring bond between two ring atoms
 * whose one double bond each is a ring bond becomes "conjugated ring bond",
 * whichever of the alternating structures was written (c1ccccc1 =
 * C1=CC=CC=C1). Departure from RDKit: its non-aromatic alternating rings
 * (cyclooctatetraene's bond-shift isomers, say) are one molecule here.
 *
 * Reuse one pl_smiles_chem for many molecules: once grown, nothing is
 * allocated. Not thread-safe per object. */
#ifndef PL_DATA_SMILES_CHEM_H
#define PL_DATA_SMILES_CHEM_H

#include "base/vec.h"
#include "data/smiles_graph.h"

#include <stdint.h>

typedef struct pl_smiles_chem {
    /* Per atom, after pl_smiles_sanitize: atomic number (0 for *), charge
     * after cleanUp, total H (bracket + implicit), in a ring. */
    int32_t *z, *charge, *h;
    uint8_t *in_ring;
    /* A hydrogen atom RDKit's reader folds into its neighbour's H count. */
    uint8_t *hidden;
    /* Per bond: order x 2 (2 single, 3 aromatic, 4 double, 6 triple, 8
     * quadruple) after cleanUp; ring bond flag. */
    uint8_t *order2, *ring_bond;
    /* Per bond: order x 2 of one Kekulé structure (aromatic bonds made 2 or 4 by the
     * matching); the class the key uses (smiles_canon.c). */
    uint8_t *kek, *cls;
    /* Scratch (owned). */
    int32_t *work;
    int64_t cap_atoms, cap_bonds, cap_work;
} pl_smiles_chem;

/* PL_OK when RDKit's default sanitisation would accept m; else PL_ERR_FORMAT
 * with a message naming the atom (0-based, parse order) and the rule, as
 * RDKit's ("explicit valence for atom 3 C, 5, is greater than permitted",
 * "cannot kekulize: ...", "non-ring atom 0 marked aromatic"). PL_ERR_NOMEM. */
pl_status pl_smiles_sanitize(const pl_smiles_mol *m, pl_smiles_chem *c);

/* Replaces out's contents by the canonical key of m (sanitised into c just
 * before). */
pl_status pl_smiles_canon_key(const pl_smiles_mol *m, pl_smiles_chem *c, pl_bytes *out);

/* Parse, sanitise and key in one: PL_ERR_FORMAT (invalid SMILES or molecule,
 * the message says which) leaves out empty. */
pl_status pl_smiles_identify(pl_smiles_mol *m, pl_smiles_chem *c, const char *s, size_t len,
                             pl_bytes *out);

void pl_smiles_chem_free(pl_smiles_chem *c);

#endif
