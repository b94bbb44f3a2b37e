/* Canonical key of a sanitised SMILES graph (see smiles_chem.h): colour
 * refinement to symmetry classes, ties broken one atom at a time, then the
 * graph and its stereo written in that order. */
#include "data/smiles_chem.h"

#include "base/status.h"

#include <string.h>

#define RETURN_IF(expr)                                                                            \
    do {                                                                                           \
        pl_status st_ = (expr);                                                                    \
        if (st_ != PL_OK)                                                                          \
            return st_;                                                                            \
    } while (0)

static int32_t other(const pl_smiles_bond *b, int32_t a) { return b->a == a ? b->b : b->a; }

static uint64_t mix(uint64_t h, uint64_t x)
{
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

/* rank[a] = the number of atoms whose (key) is smaller: tied atoms share a
 * rank. O(n^2), molecules are small. Returns the number of classes. */
static int32_t ranks_from_keys(int32_t n, const uint64_t *key, int32_t *rank)
{
    int32_t classes = 0;
    for (int32_t a = 0; a < n; a++) {
        int32_t r = 0, first = 1;
        for (int32_t b = 0; b < n; b++) {
            r += key[b] < key[a];
            if (key[b] == key[a] && b < a)
                first = 0;
        }
        rank[a] = r;
        classes += first;
    }
    return classes;
}

/* Refines rank until the number of classes stops growing. key: scratch. */
static int32_t refine(const pl_smiles_mol *m, const pl_smiles_chem *c, int32_t *rank, uint64_t *key,
                      int32_t classes)
{
    const int32_t n = m->n_atoms;
    for (;;) {
        for (int32_t a = 0; a < n; a++) {
            /* the neighbours' (rank, order) as a sorted multiset: sum and sum of squares of
             * mixed terms are order-free and collide only by accident of 64-bit hashing */
            uint64_t s1 = 0, s2 = 0;
            for (int32_t i = m->adj_start[a]; i < m->adj_start[a + 1]; i++) {
                int32_t bi = m->adj[i];
                if (c->hidden[a] || c->hidden[other(&m->bonds[bi], a)])
                    continue;
                uint64_t t = mix((uint64_t)rank[other(&m->bonds[bi], a)] + 1, c->cls[bi]);
                s1 += t;
                s2 += t * t;
            }
            /* rank in the high bits keeps the old order: refinement only splits classes */
            key[a] = ((uint64_t)rank[a] << 40) | (mix(s1, s2) >> 24);
        }
        int32_t now = ranks_from_keys(n, key, rank);
        if (now <= classes)
            return now;
        classes = now;
    }
}

static int bracket_h(const pl_smiles_atom *a) { return a->bracket && a->hcount > 0 ? a->hcount : 0; }

/* Same as smiles_write.c's: RDKit's extra swap of a saturated three-neighbour
 * centre without H carrying exactly one ring-closure digit. */
static int rdkit_extra_swap(const pl_smiles_mol *m, int32_t a)
{
    const pl_smiles_atom *at = &m->atoms[a];
    int32_t lo = m->adj_start[a], deg = m->adj_start[a + 1] - lo, digits = 0;
    if (deg != 3 || (at->bracket && at->hcount == 1))
        return 0;
    for (int32_t i = lo; i < lo + deg; i++) {
        const pl_smiles_bond *b = &m->bonds[m->adj[i]];
        if (b->order == '=' || b->order == '#' || b->order == '$' || b->order == ':')
            return 0;
        if (!b->order && !b->dir && m->atoms[b->a].aromatic && m->atoms[b->b].aromatic)
            return 0;
        digits += b->ring;
    }
    return digits == 1;
}

static int bonded(const pl_smiles_mol *m, int32_t x, int32_t y)
{
    for (int32_t i = m->adj_start[x]; i < m->adj_start[x + 1]; i++)
        if (other(&m->bonds[m->adj[i]], x) == y)
            return 1;
    return 0;
}

/* RDKit's isAtomPotentialChiralCenter (Chirality.cpp, 2022.09) before its
 * neighbour-rank test: nz heavy neighbours, h hydrogens. Bridgehead N (an
 * RDKit extension) is not recognised. */
static int legal_centre(const pl_smiles_mol *m, const pl_smiles_chem *c, int32_t a, int nz, int h)
{
    const int z = c->z[a];
    if (nz + h > 4 || nz + h < 3)
        return 0;
    if (nz < 3 && z != 15 && z != 33)
        return 0;
    if (nz == 3 && h != 1) {
        if (z == 15 || z == 33)
            return 1;
        if (z == 16 || z == 34) {
            int v2 = 0;
            for (int32_t i = m->adj_start[a]; i < m->adj_start[a + 1]; i++)
                v2 += c->kek[m->adj[i]];
            const int ev = (v2 + 1) / 2 + bracket_h(&m->atoms[a]);
            return ev == 4 || (ev == 3 && c->charge[a] == 1);
        }
        if (z == 7) { /* in a three-membered ring */
            int32_t lo = m->adj_start[a], hi = m->adj_start[a + 1];
            for (int32_t i = lo; i < hi; i++)
                for (int32_t j = lo; j < i; j++)
                    if (bonded(m, other(&m->bonds[m->adj[i]], a), other(&m->bonds[m->adj[j]], a)))
                        return 1;
        }
        return 0;
    }
    return 1;
}

/* The canonical tetrahedral tag of a (1 @, 2 @@, 0 none): the parsed tag
 * relative to the neighbours sorted by canonical rank (an implicit H first).
 * Hidden H atoms have rank -1. */
static int tetra_tag(const pl_smiles_mol *m, const pl_smiles_chem *c, const int32_t *rank,
                     const int32_t *sym, int32_t a)
{
    const pl_smiles_atom *at = &m->atoms[a];
    if (at->chiral == PL_SMILES_CHIRAL_NONE || bracket_h(at) > 1)
        return 0;
    int32_t lo = m->adj_start[a], deg = m->adj_start[a + 1] - lo;
    const int h = bracket_h(at);
    int all_h = h; /* with H atoms written as neighbours */
    for (int32_t i = 0; i < deg; i++)
        all_h += c->hidden[other(&m->bonds[m->adj[lo + i]], a)];
    if (deg + h > 4 || !legal_centre(m, c, a, deg + h - all_h, all_h))
        return 0;
    int32_t in[5], n_in = 0;
    for (int32_t i = 0; i < deg; i++) {
        if (h && n_in == (at->has_from ? 1 : 0))
            in[n_in++] = -1;
        in[n_in++] = rank[other(&m->bonds[m->adj[lo + i]], a)];
    }
    if (h && n_in == (at->has_from ? 1 : 0))
        in[n_in++] = -1;
    for (int32_t i = 0; i < deg; i++) /* two neighbours alike: not a stereocentre */
        for (int32_t j = 0; j < i; j++)
            if (sym[other(&m->bonds[m->adj[lo + i]], a)] == sym[other(&m->bonds[m->adj[lo + j]], a)])
                return 0;
    int inv = rdkit_extra_swap(m, a);
    for (int32_t i = 0; i < n_in; i++) /* parity of sorting in[] ascending */
        for (int32_t j = i + 1; j < n_in; j++)
            inv += in[i] > in[j];
    return inv % 2 ? 3 - at->chiral : at->chiral;
}

/* Ring stereo, as RDKit keeps it (cis/trans-1,4-dimethylcyclohexane): a
 * tagged ring atom with four neighbours (H included) two of which, ring
 * neighbours, are alike (so tetra_tag drops its tag), paired with another such
 * atom of its ring system. The pair's label says whether their top
 * substituents lie on one face of the ring: both orientations are read along
 * one walk round the ring (a -> t1 ... A1 -> b -> A2 ... t2 -> a), so the
 * label is the same from either end and for every writing. */
typedef struct ring_centre {
    int32_t t1, t2; /* the two alike ring neighbours */
    int32_t x, y;   /* the other two, x the higher symmetry class (-2: the implicit H) */
} ring_centre;

/* Is a a ring-stereo centre; its neighbours into *rc. */
static int ring_centre_of(const pl_smiles_mol *m, const pl_smiles_chem *c, const int32_t *sym,
                          int32_t a, ring_centre *rc)
{
    const pl_smiles_atom *at = &m->atoms[a];
    int32_t lo = m->adj_start[a], deg = m->adj_start[a + 1] - lo;
    const int h = bracket_h(at);
    if (at->chiral == PL_SMILES_CHIRAL_NONE || c->hidden[a] || !c->in_ring[a] || deg + h != 4)
        return 0;
    int all_h = h;
    for (int32_t i = 0; i < deg; i++)
        all_h += c->hidden[other(&m->bonds[m->adj[lo + i]], a)];
    if (all_h > 1 || !legal_centre(m, c, a, 4 - all_h, all_h))
        return 0;
    int pairs = 0;
    rc->t1 = rc->t2 = -1;
    for (int32_t i = 0; i < deg; i++)
        for (int32_t j = 0; j < i; j++) {
            int32_t bi = m->adj[lo + i], bj = m->adj[lo + j];
            int32_t u = other(&m->bonds[bi], a), v = other(&m->bonds[bj], a);
            if (sym[u] == sym[v]) {
                pairs++;
                if (c->ring_bond[bi] && c->ring_bond[bj] && !c->hidden[u]) {
                    rc->t1 = v;
                    rc->t2 = u;
                }
            }
        }
    if (pairs != 1 || rc->t1 < 0)
        return 0;
    rc->x = rc->y = -2;
    for (int32_t i = 0; i < deg; i++) {
        int32_t u = other(&m->bonds[m->adj[lo + i]], a);
        if (u == rc->t1 || u == rc->t2)
            continue;
        if (rc->x == -2)
            rc->x = u;
        else
            rc->y = u;
    }
    int32_t sx = rc->x >= 0 ? sym[rc->x] : -1, sy = rc->y >= 0 ? sym[rc->y] : -1;
    if (sy > sx) {
        int32_t t = rc->x;
        rc->x = rc->y;
        rc->y = t;
    }
    return 1;
}

/* The orientation (0 or 1) of a's neighbours in the order (p, q, r, s), atom
 * ids, -2 the implicit H: the parsed tag corrected by the permutation's parity. */
static int orientation(const pl_smiles_mol *m, int32_t a, int32_t p, int32_t q, int32_t r, int32_t s)
{
    const pl_smiles_atom *at = &m->atoms[a];
    int32_t lo = m->adj_start[a], deg = m->adj_start[a + 1] - lo;
    const int h = bracket_h(at);
    int32_t in[5], n_in = 0;
    for (int32_t i = 0; i < deg; i++) {
        if (h && n_in == (at->has_from ? 1 : 0))
            in[n_in++] = -2;
        in[n_in++] = other(&m->bonds[m->adj[lo + i]], a);
    }
    if (h && n_in == (at->has_from ? 1 : 0))
        in[n_in++] = -2;
    const int32_t want[4] = {p, q, r, s};
    int32_t posn[4];
    for (int k = 0; k < 4; k++) {
        posn[k] = 0;
        while (posn[k] < n_in && in[posn[k]] != want[k])
            posn[k]++;
    }
    int inv = rdkit_extra_swap(m, a);
    for (int i = 0; i < 4; i++)
        for (int j = i + 1; j < 4; j++)
            inv += posn[i] > posn[j];
    return (at->chiral == PL_SMILES_CHIRAL_CCW) ^ (inv & 1);
}

/* Which of b's alike neighbours (u1, u2) the ring walk from t (a's
 * neighbour), avoiding a and b, reaches first: 1 or 2; 0 if neither or both at
 * once. dist, queue: n ints of scratch. */
static int arrival(const pl_smiles_mol *m, const pl_smiles_chem *c, int32_t a, int32_t b,
                   int32_t t, int32_t u1, int32_t u2, int32_t *dist, int32_t *queue)
{
    for (int32_t i = 0; i < m->n_atoms; i++)
        dist[i] = -1;
    int32_t head = 0, tail = 0;
    dist[t] = 0;
    queue[tail++] = t;
    while (head < tail) {
        int32_t u = queue[head++];
        for (int32_t i = m->adj_start[u]; i < m->adj_start[u + 1]; i++) {
            int32_t bi = m->adj[i], v = other(&m->bonds[bi], u);
            if (!c->ring_bond[bi] || v == a || v == b || dist[v] >= 0)
                continue;
            dist[v] = dist[u] + 1;
            queue[tail++] = v;
        }
    }
    if (dist[u1] >= 0 && (dist[u2] < 0 || dist[u1] < dist[u2]))
        return 1;
    if (dist[u2] >= 0 && (dist[u1] < 0 || dist[u2] < dist[u1]))
        return 2;
    return 0;
}

/* The label of the ring-stereo pair (a, b): 1 one face, 2 opposite faces, 0 none. */
static int ring_pair_label(const pl_smiles_mol *m, const pl_smiles_chem *c, const ring_centre *ra,
                           const ring_centre *rb, int32_t a, int32_t b, int32_t *dist, int32_t *queue)
{
    int e1 = arrival(m, c, a, b, ra->t1, rb->t1, rb->t2, dist, queue);
    int e2 = arrival(m, c, a, b, ra->t2, rb->t1, rb->t2, dist, queue);
    if (!e1 || !e2 || e1 == e2)
        return 0;
    const int32_t a1 = e1 == 1 ? rb->t1 : rb->t2, a2 = e1 == 1 ? rb->t2 : rb->t1;
    int oa = orientation(m, a, ra->x, ra->t2, ra->t1, ra->y);
    int ob = orientation(m, b, rb->x, a1, a2, rb->y);
    return oa == ob ? 1 : 2;
}

/* The / or \ of bond bi read from atom u to its other end. */
static char dir_from(const pl_smiles_bond *b, int32_t u)
{
    if (b->dir_from == u)
        return b->dir;
    return b->dir == '/' ? '\\' : '/';
}

/* One end u (the other end v) of a double bond: the marked neighbour's mark
 * read from u, flipped when the highest-ranked neighbour is another one.
 * 0: no usable mark. */
static char end_mark(const pl_smiles_mol *m, const int32_t *rank, const int32_t *sym, int32_t u,
                     int32_t v)
{
    int32_t marked = -1, best = -1, n_other = 0, nb[3];
    char mark = 0;
    for (int32_t i = m->adj_start[u]; i < m->adj_start[u + 1]; i++) {
        const pl_smiles_bond *b = &m->bonds[m->adj[i]];
        int32_t x = other(b, u);
        if (x == v)
            continue;
        if (n_other < 3)
            nb[n_other] = x;
        n_other++;
        if (b->dir && (marked < 0 || rank[x] > rank[marked])) { /* two marks (they may
                                                      conflict): the higher-ranked one's */
            marked = x;
            mark = dir_from(b, u);
        }
        if (best < 0 || rank[x] > rank[best])
            best = x;
    }
    if (marked < 0 || n_other > 2 || (n_other == 2 && sym[nb[0]] == sym[nb[1]]))
        return 0;
    if (marked != best)
        mark = mark == '/' ? '\\' : '/';
    return mark;
}

/* H count with the hidden H atoms bound to a; degree without them. */
static int total_h(const pl_smiles_mol *m, const pl_smiles_chem *c, int32_t a)
{
    int h = c->h[a];
    for (int32_t i = m->adj_start[a]; i < m->adj_start[a + 1]; i++)
        h += c->hidden[other(&m->bonds[m->adj[i]], a)];
    return h;
}

static int heavy_degree(const pl_smiles_mol *m, const pl_smiles_chem *c, int32_t a)
{
    return m->adj_start[a + 1] - m->adj_start[a] - (total_h(m, c, a) - c->h[a]);
}

/* A ring atom with exactly one double bond (Kekulé structure), a ring bond:
 * its ring bonds to other such atoms alternate. Every kekulization of an
 * aromatic writing gives each atom that needs a double bond exactly one, in a
 * ring, so the set of such atoms (and the key) does not depend on which
 * matching was found. */
static int conj_atom(const pl_smiles_mol *m, const pl_smiles_chem *c, int32_t a)
{
    int dbl = 0, ring_dbl = 0;
    for (int32_t i = m->adj_start[a]; i < m->adj_start[a + 1]; i++) {
        int32_t bi = m->adj[i];
        if (c->kek[bi] == 4) {
            dbl++;
            ring_dbl += c->ring_bond[bi];
        }
    }
    return dbl == 1 && ring_dbl == 1;
}

/* The stereo label of the double bond bi (order2 4): 0 none, 1 Z, 2 E, read
 * with the symmetry classes (so it is the same for every writing). */
static int bond_label(const pl_smiles_mol *m, const pl_smiles_chem *c, const int32_t *sym, int32_t bi)
{
    if (c->cls[bi] != 4)
        return 0;
    const pl_smiles_bond *b = &m->bonds[bi];
    char mu = end_mark(m, sym, sym, b->a, b->b), mv = end_mark(m, sym, sym, b->b, b->a);
    return mu && mv ? (mu == mv ? 1 : 2) : 0;
}

pl_status pl_smiles_canon_key(const pl_smiles_mol *m, pl_smiles_chem *c, pl_bytes *out)
{
    const int32_t n = m->n_atoms;
    /* work (12n + 2nb + 16 ints, smiles_sanitize.c): rank, sym, pos, tag (n each), key
     * (n uint64, 8-aligned), ring_info, dist, queue (n each) */
    int32_t *rank = c->work, *sym = rank + n, *pos = sym + n, *tag = pos + n;
    uint64_t *key = (uint64_t *)(void *)(tag + n); /* 4n ints in: 8-aligned */
    int32_t *ring_info = tag + 3 * n, *dist = ring_info + n, *queue = dist + n; /* up to 9n */
    uint64_t *base = key; /* the atom invariants, kept in key until the first refinement */
    for (int32_t bi = 0; bi < m->n_bonds; bi++) {
        const pl_smiles_bond *b = &m->bonds[bi];
        c->cls[bi] = c->ring_bond[bi] && (c->kek[bi] == 2 || c->kek[bi] == 4) &&
                             conj_atom(m, c, b->a) && conj_atom(m, c, b->b)
                         ? 3
                         : c->kek[bi];
    }
    /* Fragment sizes (pos: BFS queue, tag: fragment id, rank: size per fragment id), an
     * invariant refinement cannot see: C1CCCC1.C1CC1's atoms all look alike to it. */
    for (int32_t a = 0; a < n; a++)
        tag[a] = -1;
    for (int32_t root = 0, nf = 0; root < n; root++) {
        if (tag[root] >= 0)
            continue;
        int32_t head = 0, tail = 0;
        pos[tail++] = root;
        tag[root] = nf;
        while (head < tail) {
            int32_t u = pos[head++];
            for (int32_t i = m->adj_start[u]; i < m->adj_start[u + 1]; i++) {
                int32_t v = other(&m->bonds[m->adj[i]], u);
                if (tag[v] < 0) {
                    tag[v] = nf;
                    pos[tail++] = v;
                }
            }
        }
        rank[nf++] = tail;
    }
    for (int32_t a = 0; a < n; a++) {
        const pl_smiles_atom *at = &m->atoms[a];
        uint64_t k = (uint64_t)c->z[a];
        k = k << 11 | (uint64_t)(at->isotope + 1);
        k = k << 8 | (uint64_t)(c->charge[a] + 128);
        k = k << 5 | (uint64_t)total_h(m, c, a);
        k = k << 1 | (uint64_t)conj_atom(m, c, a);
        k = k << 5 | (uint64_t)heavy_degree(m, c, a);
        k = k << 1 | c->in_ring[a];
        base[a] = mix(mix(k, (uint64_t)(at->atom_class + 1)), (uint64_t)rank[tag[a]]);
        if (c->hidden[a]) /* last, out of the key */
            base[a] = UINT64_MAX;
    }
    refine(m, c, sym, key, ranks_from_keys(n, key, sym));
    int32_t n_hidden = 0;
    for (int32_t a = 0; a < n; a++)
        if (c->hidden[a]) {
            sym[a] = -1; /* read as an implicit H by the stereo below */
            n_hidden++;
        }
    /* Stereo read with the symmetry classes, then refined in: mirror-image halves of a
     * molecule get different ranks, and the labels do not depend on tie-breaking. */
    int any = 0;
    for (int32_t a = 0; a < n; a++) {
        tag[a] = tetra_tag(m, c, sym, sym, a);
        any |= tag[a];
    }
    for (int32_t bi = 0; bi < m->n_bonds && !any; bi++)
        any |= bond_label(m, c, sym, bi);
    /* Ring-stereo pairs: each centre's counts of same-face and opposite-face partners */
    int n_ring = 0;
    for (int32_t a = 0; a < n; a++) {
        ring_centre ra, rb;
        ring_info[a] = 0;
        if (!ring_centre_of(m, c, sym, a, &ra))
            continue;
        for (int32_t b = 0; b < n; b++) {
            if (b == a || !ring_centre_of(m, c, sym, b, &rb))
                continue;
            int l = ring_pair_label(m, c, &ra, &rb, a, b, dist, queue);
            ring_info[a] += l == 1 ? 256 : l == 2 ? 1 : 0;
        }
        n_ring += ring_info[a] != 0;
    }
    int32_t classes = 0;
    for (int32_t a = 0; a < n; a++) {
        uint64_t k = c->hidden[a] ? UINT64_MAX
                                  : (uint64_t)sym[a] << 32 | (uint64_t)ring_info[a] << 16 |
                                        (uint64_t)tag[a] << 12;
        if (any && !c->hidden[a])
            for (int32_t i = m->adj_start[a]; i < m->adj_start[a + 1]; i++)
                k += mix((uint64_t)bond_label(m, c, sym, m->adj[i]), 77) & 0xf;
        key[a] = k;
    }
    classes = refine(m, c, rank, key, ranks_from_keys(n, key, rank));
    while (classes < n) { /* break the lowest tie at its first atom, refine again */
        int32_t r = n, pick = -1;
        for (int32_t a = 0; a < n; a++)
            for (int32_t b = 0; b < n; b++)
                if (b != a && rank[b] == rank[a] && rank[a] < r) {
                    r = rank[a];
                    pick = a < b ? a : b;
                }
        for (int32_t a = 0; a < n; a++)
            key[a] = 2 * (uint64_t)rank[a] + (rank[a] == r && a != pick);
        classes = refine(m, c, rank, key, ranks_from_keys(n, key, rank));
    }
    for (int32_t a = 0; a < n; a++)
        pos[rank[a]] = a;
    out->n = 0;
    const int32_t shown = n - n_hidden; /* hidden atoms rank last */
    RETURN_IF(pl_bytes_printf(out, "%d;", (int)shown));
    for (int32_t r = 0; r < shown; r++) {
        int32_t a = pos[r];
        const pl_smiles_atom *at = &m->atoms[a];
        RETURN_IF(pl_bytes_printf(out, "%d.%d.%d.%d.%d.%d.%d|", (int)c->z[a], (int)at->isotope,
                                  (int)c->charge[a], total_h(m, c, a), (int)conj_atom(m, c, a), (int)tag[a],
                                  (int)at->atom_class));
    }
    for (int32_t r = 0; r < shown; r++) { /* bonds to higher-ranked atoms, in rank order */
        int32_t a = pos[r];
        for (int32_t s = r + 1; s < shown; s++)
            for (int32_t i = m->adj_start[a]; i < m->adj_start[a + 1]; i++) {
                int32_t bi = m->adj[i];
                if (other(&m->bonds[bi], a) != pos[s])
                    continue;
                RETURN_IF(pl_bytes_printf(out, "%d-%d:%d%s,", (int)r, (int)s, (int)c->cls[bi],
                                          (const char *[]){"", "Z", "E"}[bond_label(m, c, sym, bi)]));
            }
    }
    for (int32_t r = 0; r < shown && n_ring; r++) { /* ring-stereo pairs, in rank order */
        ring_centre ra, rb;
        if (!ring_info[pos[r]] || !ring_centre_of(m, c, sym, pos[r], &ra))
            continue;
        for (int32_t s = r + 1; s < shown; s++) {
            if (!ring_info[pos[s]] || !ring_centre_of(m, c, sym, pos[s], &rb))
                continue;
            int l = ring_pair_label(m, c, &ra, &rb, pos[r], pos[s], dist, queue);
            if (l)
                RETURN_IF(pl_bytes_printf(out, "R%d-%d:%s,", (int)r, (int)s,
                                          l == 1 ? "cis" : "trans"));
        }
    }
    return PL_OK;
}

pl_status pl_smiles_identify(pl_smiles_mol *m, pl_smiles_chem *c, const char *s, size_t len,
                             pl_bytes *out)
{
    out->n = 0;
    if (out->data)
        out->data[0] = 0;
    RETURN_IF(pl_smiles_parse(m, s, len));
    RETURN_IF(pl_smiles_sanitize(m, c));
    return pl_smiles_canon_key(m, c, out);
}
