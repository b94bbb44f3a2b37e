/* SMILES as a molecule graph, and SMILES augmentation: the same molecule
 * written from a random atom order.
 *
 * pl_smiles_parse reads one SMILES (OpenSMILES as RDKit reads it) into a
 * graph: organic-subset atoms (B C N O P S F Cl Br I, aromatic b c n o p s,
 * *), bracket atoms [isotope symbol chirality hcount charge :class] (every
 * element, aromatic b c n o p s se as te), chirality @ @@ @TH1 @TH2, bonds
 * - = # $ : / \ and implicit, branches, ring closures 0-9 and %nn with a bond
 * symbol on either end, and fragments separated by '.'. It checks syntax, not
 * chemistry: valences and aromaticity are not perceived (a SMILES RDKit
 * refuses to sanitise, such as C(C)(C)(C)(C)C, parses here). Rejected with
 * PL_ERR_FORMAT and a message naming the character position (1-based) and what
 * was expected: an unknown character or element, a bad bracket atom, a bond
 * with no atom on one side, an empty or unbalanced branch, a ring bond never
 * closed, closed on its own atom or doubling a bond. @AL, @SP, @TB and @OH
 * chirality are PL_ERR_UNSUPPORTED. A ring bond with symbols on both ends is
 * read as RDKit reads it: the order given at the opening wins (/ and \ give
 * none), a / or \ mark at the closing end wins over one at the opening.
 *
 * pl_smiles_write writes the graph back as SMILES by a depth-first walk in a
 * given atom order (rank): each fragment starts at its lowest-ranked atom,
 * fragments come in the order of those roots, and each atom visits its
 * neighbours in rank order (the last unvisited one continues the chain, the
 * others become branches; an edge back to an atom on the walk becomes a ring
 * closure, digits 1-9 then %10-%99, lowest free first, reused once closed).
 * What the output keeps, for any rank:
 *   - every atom as written (bracket or not, isotope, H count, charge, class);
 *   - every bond's order as written, implicit bonds implicit (an implicit
 *     bond means the same thing between the same two atoms, aromatic or single);
 *   - tetrahedral chirality: @/@@ is flipped when the new neighbour order is an
 *     odd permutation of the old one. The order is RDKit's: the atom it is
 *     reached from, then its implicit H (first when the atom starts a
 *     fragment), then ring closures at the position of their digits, then
 *     branches and the chain; a three-neighbour centre without H is the parity
 *     of its three neighbours, flipped once more when it is saturated and
 *     carries exactly one ring-closure digit (RDKit's
 *     Canon::chiralAtomNeedsTagInversion, applied by its reader and writer
 *     alike, so it is part of what RDKit means by such a SMILES);
 *   - cis/trans: each / or \ bond keeps its direction in space. A bond written
 *     in the opposite order gets the opposite mark, and a ring-closure bond's
 *     mark reads from the atom carrying it to its partner, as RDKit reads it.
 *     So every double bond keeps the geometry its marks gave it, whatever
 *     RDKit decides is a stereo bond; marks are neither added nor dropped.
 * tests/scripts/smiles_augment.sh checks that RDKit's canonical SMILES of
 * every output equals that of the input (docs/data.md has the figures).
 *
 * Not here: valence and aromaticity perception, kekulisation, H removal,
 * RDKit's canonical order, allene/atropisomer and non-tetrahedral stereo.
 *
 * Reuse one pl_smiles_mol for many strings: once its arrays have grown to the
 * largest molecule, parse and write allocate nothing. Not thread-safe per
 * object. */
#ifndef PL_DATA_SMILES_GRAPH_H
#define PL_DATA_SMILES_GRAPH_H

#include "base/vec.h"
#include "data/numpy_rng.h"

#include <stddef.h>
#include <stdint.h>

enum {
    PL_SMILES_CHIRAL_NONE = 0,
    PL_SMILES_CHIRAL_CCW = 1 /* @ */,
    PL_SMILES_CHIRAL_CW = 2 /* @@ */
};

typedef struct pl_smiles_atom {
    char symbol[4];   /* "C", "Cl", "c", "se", "*" ... */
    uint8_t bracket;  /* written in [] */
    uint8_t aromatic; /* lower-case symbol */
    uint8_t chiral;   /* PL_SMILES_CHIRAL_* */
    uint8_t has_from; /* bonded to an atom written before it (not by a ring closure) */
    int32_t isotope;  /* -1: none */
    int32_t hcount;   /* bracket H count; -1 outside brackets */
    int32_t charge;
    int32_t atom_class; /* -1: none */
} pl_smiles_atom;

typedef struct pl_smiles_bond {
    int32_t a, b; /* atom indices, a < b in parse order */
    char order;   /* 0 implicit, or one of - = # $ : */
    char dir;     /* 0, '/' or '\\', read from atom dir_from to the other */
    uint8_t ring; /* written as a ring closure (digits) */
    int32_t dir_from;
} pl_smiles_bond;

typedef struct pl_smiles_mol {
    pl_smiles_atom *atoms;
    pl_smiles_bond *bonds;
    int32_t n_atoms, n_bonds;
    int32_t n_frags; /* connected components ("C1.C1" is one) */
    /* Atom i's bonds in the order SMILES lists its neighbours (the chirality
     * order): adj[adj_start[i] .. adj_start[i + 1]). */
    int32_t *adj_start, *adj;
    /* Capacities and scratch buffers, owned here (see pl_smiles_mol_free). */
    int32_t cap_atoms, cap_bonds;
    int64_t cap_adj;
    void *inc;      /* parser: bond ends before sorting */
    int64_t *keys;  /* parser: sort keys */
    int32_t *stack; /* parser: branch points */
    int64_t cap_inc, cap_keys, cap_stack;
    int32_t *work; /* writer: rank, walk and ring state */
    int64_t cap_work;
} pl_smiles_mol;

/* Parses s[0..len) into m (its previous contents are replaced). On error m
 * holds no molecule (n_atoms 0) and the message names the position. */
pl_status pl_smiles_parse(pl_smiles_mol *m, const char *s, size_t len);

/* Appends m as SMILES to out (not clearing it). rank: n_atoms distinct
 * integers, lower is visited first; NULL = parse order. PL_ERR_UNSUPPORTED
 * when more than 99 ring bonds would be open at once. */
pl_status pl_smiles_write(pl_smiles_mol *m, const int32_t *rank, pl_bytes *out);

/* Draws a rank as MegaMolBART does (numpy.random.shuffle of the atom indices,
 * atom order[i] gets rank i) and writes m with it. */
pl_status pl_smiles_write_random(pl_smiles_mol *m, pl_np_rng *rng, pl_bytes *out);

void pl_smiles_mol_free(pl_smiles_mol *m);

#endif
