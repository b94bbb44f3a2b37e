/* RDKit's default sanitisation checks on a parsed SMILES (see smiles_chem.h).
 * Sources: rdkit/rdkit Release_2022_09_2, Code/GraphMol/Atom.cpp
 * (calcExplicitValence, calcImplicitValence, isEarlyAtom), MolOps.cpp
 * (cleanUp), Kekulize.cpp (markDbondCands, the non-ring aromatic atom check),
 * atomic_data.cpp (valence lists; tests/scripts/smiles_chem.sh compares the
 * table below with RDKit's GetValenceList for every element). */
#include "data/smiles_chem.h"

#include "base/alloc.h"
#include "base/status.h"

#include <string.h>

#define RETURN_IF(expr)                                                                            \
    do {                                                                                           \
        pl_status st_ = (expr);                                                                    \
        if (st_ != PL_OK)                                                                          \
            return st_;                                                                            \
    } while (0)

static const char *const element_symbols[] = {
    "*",  "H",  "He", "Li", "Be", "B",  "C",  "N",  "O",  "F",  "Ne", "Na", "Mg", "Al", "Si",
    "P",  "S",  "Cl", "Ar", "K",  "Ca", "Sc", "Ti", "V",  "Cr", "Mn", "Fe", "Co", "Ni", "Cu",
    "Zn", "Ga", "Ge", "As", "Se", "Br", "Kr", "Rb", "Sr", "Y",  "Zr", "Nb", "Mo", "Tc", "Ru",
    "Rh", "Pd", "Ag", "Cd", "In", "Sn", "Sb", "Te", "I",  "Xe", "Cs", "Ba", "La", "Ce", "Pr",
    "Nd", "Pm", "Sm", "Eu", "Gd", "Tb", "Dy", "Ho", "Er", "Tm", "Yb", "Lu", "Hf", "Ta", "W",
    "Re", "Os", "Ir", "Pt", "Au", "Hg", "Tl", "Pb", "Bi", "Po", "At", "Rn", "Fr", "Ra", "Ac",
    "Th", "Pa", "U",  "Np", "Pu", "Am", "Cm", "Bk", "Cf", "Es", "Fm", "Md", "No", "Lr", "Rf",
    "Db", "Sg", "Bh", "Hs", "Mt", "Ds", "Rg", "Cn", "Nh", "Fl", "Mc", "Lv", "Ts", "Og",
};
enum { N_ELEMENTS = sizeof element_symbols / sizeof *element_symbols };

/* atomic_data.cpp's valence lists of the elements that have one; every other
 * element's is {-1} (any valence). A trailing -1 means "and anything above". */
static const struct valence_row {
    int z;
    int v[5];
    int n;
} valence_rows[] = {
    {1, {1}, 1},         {2, {0}, 1},         {3, {1}, 1},         {4, {2}, 1},
    {5, {3}, 1},         {6, {4}, 1},         {7, {3}, 1},         {8, {2}, 1},
    {9, {1}, 1},         {10, {0}, 1},        {11, {1}, 1},        {12, {2, -1}, 2},
    {13, {3, 6}, 2},     {14, {4, 6}, 2},     {15, {3, 5, 7}, 3},  {16, {2, 4, 6}, 3},
    {17, {1}, 1},        {18, {0}, 1},        {19, {1}, 1},        {20, {2, -1}, 2},
    {31, {3}, 1},        {32, {4}, 1},        {33, {3, 5, 7}, 3},  {34, {2, 4, 6}, 3},
    {35, {1}, 1},        {36, {0}, 1},        {37, {1}, 1},        {38, {2, -1}, 2},
    {49, {3}, 1},        {50, {2, 4}, 2},     {51, {3, 5, 7}, 3},  {52, {2, 4, 6}, 3},
    {53, {1, 3, 5}, 3},  {54, {0, 2, 4, 6}, 4}, {55, {1}, 1},      {56, {2, -1}, 2},
    {81, {3}, 1},        {82, {2, 4}, 2},     {83, {3, 5, 7}, 3},  {84, {2, 4, 6}, 3},
    {85, {1, 3, 5}, 3},  {86, {0}, 1},        {87, {1}, 1},        {88, {2, -1}, 2},
};
static const int any_valence[1] = {-1};

/* Atom.cpp's isEarlyAtom (left of carbon), for the elements with a valence list. */
static int early(int z)
{
    static const int e[] = {3, 4, 5, 11, 12, 13, 19, 20, 31, 32, 37, 38, 49, 50, 51,
                            55, 56, 81, 82, 83, 87, 88};
    for (size_t i = 0; i < sizeof e / sizeof *e; i++)
        if (e[i] == z)
            return 1;
    return 0;
}

static const int *valences(int z, int *n)
{
    for (size_t i = 0; i < sizeof valence_rows / sizeof *valence_rows; i++)
        if (valence_rows[i].z == z) {
            *n = valence_rows[i].n;
            return valence_rows[i].v;
        }
    *n = 1;
    return any_valence;
}

/* Outer-shell electrons (PeriodicTable::getNouterElecs) of the main-group
 * elements with a valence list; only ">= 4" matters here. */
static int outer_ge4(int z)
{
    static const int group[] = {0, 1, 2, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2};
    if (z <= 20)
        return group[z] >= 4;
    switch (z) {
    case 31: case 49: case 81: case 37: case 38: case 55: case 56: case 87: case 88:
        return 0;
    default:
        return 1; /* Ge..Kr, Sn..Xe, Pb..Rn; transition metals have valence -1 */
    }
}

static int atomic_number(const pl_smiles_atom *a)
{
    char s[4] = {0};
    memcpy(s, a->symbol, sizeof s - 1);
    if (a->aromatic && s[0] >= 'a' && s[0] <= 'z')
        s[0] = (char)(s[0] - 'a' + 'A');
    for (int z = 0; z < N_ELEMENTS; z++)
        if (strcmp(element_symbols[z], s) == 0)
            return z;
    return -1;
}

static pl_status grow(void **p, int64_t *cap, int64_t need, size_t elem)
{
    if (need <= *cap)
        return PL_OK;
    int64_t c = *cap < 64 ? 64 : *cap;
    while (c < need)
        c *= 2;
    size_t bytes;
    if (pl_mul_size((size_t)c, elem, &bytes))
        return pl_errorf(PL_ERR_NOMEM, "SMILES chemistry: %lld elements overflow", (long long)c);
    void *q = pl_realloc(*p, bytes);
    if (!q)
        return pl_errorf(PL_ERR_NOMEM, "SMILES chemistry: out of memory for %zu bytes", bytes);
    *p = q;
    *cap = c;
    return PL_OK;
}

static pl_status reserve(pl_smiles_chem *c, const pl_smiles_mol *m)
{
    int64_t na = m->n_atoms, nb = m->n_bonds;
    if (na > c->cap_atoms) {
        int64_t cap = c->cap_atoms;
        RETURN_IF(grow((void **)&c->z, &cap, na, sizeof *c->z));
        cap = c->cap_atoms;
        RETURN_IF(grow((void **)&c->charge, &cap, na, sizeof *c->charge));
        cap = c->cap_atoms;
        RETURN_IF(grow((void **)&c->h, &cap, na, sizeof *c->h));
        cap = c->cap_atoms;
        RETURN_IF(grow((void **)&c->in_ring, &cap, na, sizeof *c->in_ring));
        cap = c->cap_atoms;
        RETURN_IF(grow((void **)&c->hidden, &cap, na, sizeof *c->hidden));
        c->cap_atoms = cap;
    }
    if (nb > c->cap_bonds) {
        int64_t cap = c->cap_bonds;
        RETURN_IF(grow((void **)&c->order2, &cap, nb, 1));
        cap = c->cap_bonds;
        RETURN_IF(grow((void **)&c->ring_bond, &cap, nb, 1));
        cap = c->cap_bonds;
        RETURN_IF(grow((void **)&c->kek, &cap, nb, 1));
        cap = c->cap_bonds;
        RETURN_IF(grow((void **)&c->cls, &cap, nb, 1));
        c->cap_bonds = cap;
    }
    /* work: 12 ints per atom + 2 per bond, enough for every pass here and in smiles_canon.c */
    return grow((void **)&c->work, &c->cap_work, 12 * (na + 1) + 2 * nb + 16, sizeof *c->work);
}

static int32_t other(const pl_smiles_bond *b, int32_t a) { return b->a == a ? b->b : b->a; }

/* Ring bonds: a bond is in a ring when it is not a bridge (Tarjan's low-link,
 * iterative). */
static void find_rings(const pl_smiles_mol *m, pl_smiles_chem *c)
{
    int32_t n = m->n_atoms, *disc = c->work, *low = disc + n, *stack = low + n,
            *edge_pos = stack + n, *parent_bond = edge_pos + n;
    if (m->n_bonds > 0)
        memset(c->ring_bond, 1, (size_t)m->n_bonds);
    for (int32_t i = 0; i < n; i++)
        disc[i] = -1;
    int32_t t = 0;
    for (int32_t root = 0; root < n; root++) {
        if (disc[root] >= 0)
            continue;
        int32_t top = 0;
        stack[top++] = root;
        disc[root] = low[root] = t++;
        edge_pos[root] = m->adj_start[root];
        parent_bond[root] = -1;
        while (top) {
            int32_t u = stack[top - 1];
            if (edge_pos[u] < m->adj_start[u + 1]) {
                int32_t bi = m->adj[edge_pos[u]++];
                if (bi == parent_bond[u])
                    continue;
                int32_t v = other(&m->bonds[bi], u);
                if (disc[v] < 0) {
                    disc[v] = low[v] = t++;
                    edge_pos[v] = m->adj_start[v];
                    parent_bond[v] = bi;
                    stack[top++] = v;
                } else if (disc[v] < low[u]) {
                    low[u] = disc[v];
                }
            } else {
                top--;
                if (parent_bond[u] >= 0) {
                    int32_t p = other(&m->bonds[parent_bond[u]], u);
                    if (low[u] < low[p])
                        low[p] = low[u];
                    if (low[u] > disc[p])
                        c->ring_bond[parent_bond[u]] = 0;
                }
            }
        }
    }
    memset(c->in_ring, 0, (size_t)n);
    for (int32_t b = 0; b < m->n_bonds; b++)
        if (c->ring_bond[b])
            c->in_ring[m->bonds[b].a] = c->in_ring[m->bonds[b].b] = 1;
}

/* Bond order x 2 as RDKit's SMILES parser sets it: an implicit (or / \) bond
 * between two aromatic atoms in a ring is aromatic, else single. */
static uint8_t order2_of(const pl_smiles_mol *m, const pl_smiles_chem *c, int32_t bi)
{
    const pl_smiles_bond *b = &m->bonds[bi];
    switch (b->order) {
    case '=': return 4;
    case '#': return 6;
    case '$': return 8;
    case ':': return 3;
    case '-': return 2;
    default:
        return m->atoms[b->a].aromatic && m->atoms[b->b].aromatic && c->ring_bond[bi] ? 3 : 2;
    }
}

static int bracket_h(const pl_smiles_atom *a) { return a->bracket && a->hcount > 0 ? a->hcount : 0; }

/* Sum of bond orders x 2 plus 2 x bracket H. */
static int valence2(const pl_smiles_mol *m, const pl_smiles_chem *c, int32_t a)
{
    int v = 2 * bracket_h(&m->atoms[a]);
    for (int32_t i = m->adj_start[a]; i < m->adj_start[a + 1]; i++)
        v += c->order2[m->adj[i]];
    return v;
}

/* calcExplicitValence(false) without the aromatic allowance: round(x + 0.1). */
static int plain_explicit(int v2) { return (v2 + 1) / 2; }

/* MolOps::cleanUp: nitrogenCleanup, phosphorusCleanup, halogenCleanup. */
static void clean_up(const pl_smiles_mol *m, pl_smiles_chem *c)
{
    for (int32_t a = 0; a < m->n_atoms; a++) {
        const int z = c->z[a];
        if (c->charge[a] != 0 || (z != 7 && z != 15 && z != 17 && z != 35 && z != 53))
            continue;
        const int ev = plain_explicit(valence2(m, c, a));
        const int32_t lo = m->adj_start[a], hi = m->adj_start[a + 1];
        if (z == 7 && ev == 5) {
            for (int32_t i = lo; i < hi; i++) {
                int32_t bi = m->adj[i], nb = other(&m->bonds[bi], a);
                if (c->charge[nb] != 0)
                    continue;
                if ((c->z[nb] == 8 && c->order2[bi] == 4) || (c->z[nb] == 7 && c->order2[bi] == 6)) {
                    c->order2[bi] = (uint8_t)(c->order2[bi] - 2);
                    c->charge[a] = 1;
                    c->charge[nb] = -1;
                    break;
                }
            }
        } else if (z == 15 && ev == 5 && hi - lo == 3) {
            int32_t dbl_o = -1;
            int to_cn = 0;
            for (int32_t i = lo; i < hi; i++) {
                int32_t bi = m->adj[i], nb = other(&m->bonds[bi], a);
                if (c->z[nb] == 8 && c->charge[nb] == 0 && c->order2[bi] == 4)
                    dbl_o = bi;
                else if ((c->z[nb] == 6 || c->z[nb] == 7) && c->order2[bi] == 4 &&
                         m->adj_start[nb + 1] - m->adj_start[nb] >= 2)
                    to_cn = 1;
            }
            if (to_cn && dbl_o >= 0) {
                c->charge[other(&m->bonds[dbl_o], a)] = -1;
                c->order2[dbl_o] = 2;
                c->charge[a] = 1;
            }
        } else if (z != 7 && z != 15 && (ev == 7 || ev == 5 || ev == 3)) {
            int all_o = 1;
            for (int32_t i = lo; i < hi; i++)
                all_o &= c->z[other(&m->bonds[m->adj[i]], a)] == 8;
            if (!all_o)
                continue;
            int q = 0;
            for (int32_t i = lo; i < hi; i++)
                if (c->order2[m->adj[i]] == 4) {
                    c->order2[m->adj[i]] = 2;
                    c->charge[other(&m->bonds[m->adj[i]], a)] = -1;
                    q++;
                }
            c->charge[a] = q;
        }
    }
}

/* The charge shift of the valence list (Atom.cpp: reversed for early atoms and C+). */
static int shift(int z, int charge)
{
    int chr = early(z) ? -charge : charge;
    if (z == 6 && chr > 0)
        chr = -chr;
    return chr;
}

/* Atom.cpp's calcExplicitValence(strict) and calcImplicitValence(strict) for atom a.
 * Sets *ev and *iv (implicit H). */
static pl_status atom_valence(const pl_smiles_mol *m, const pl_smiles_chem *c, int32_t a, int *ev,
                              int *iv)
{
    const pl_smiles_atom *at = &m->atoms[a];
    const int z = c->z[a], q = c->charge[a];
    int nv;
    const int *vl = valences(z, &nv);
    const int dv = vl[0], chr = shift(z, q);
    const int v2 = valence2(m, c, a); /* accum x 2 */
    int accum2 = v2;
    if (z > 0 && at->aromatic && v2 > 2 * (dv + chr)) {
        int pval = dv + chr;
        for (int i = 0; i < nv && vl[i] != -1; i++) {
            int val = vl[i] + chr;
            if (2 * val > v2)
                break;
            pval = val;
        }
        if (v2 - 2 * pval <= 3)
            accum2 = 2 * pval;
    }
    int res = (accum2 + 1) / 2; /* round(accum + 0.1) */
    int effective = outer_ge4(z) ? res - q : res + q;
    int maxv = vl[nv - 1];
    if (z > 0 && maxv > 0 && effective > maxv)
        return pl_errorf(PL_ERR_FORMAT, "explicit valence for atom %d %s, %d, is greater than "
                         "permitted", (int)a, element_symbols[z], effective);
    *ev = res;
    *iv = 0;
    if (at->bracket || z == 0 || dv == -1)
        return PL_OK;
    if (at->aromatic) {
        if (res <= dv + chr) {
            *iv = dv + chr - res;
        } else {
            int ok = 0;
            for (int i = 0; i < nv && vl[i] > 0; i++)
                ok |= res == vl[i] + chr;
            if (!ok)
                return pl_errorf(PL_ERR_FORMAT, "explicit valence for aromatic atom %d %s, %d, is "
                                 "not equal to any accepted valence", (int)a, element_symbols[z], res);
        }
        return PL_OK;
    }
    for (int i = 0; i < nv && vl[i] >= 0; i++)
        if (res <= vl[i] + chr) {
            *iv = vl[i] + chr - res;
            return PL_OK;
        }
    return pl_errorf(PL_ERR_FORMAT, "explicit valence for atom %d %s greater than permitted",
                     (int)a, element_symbols[z]);
}

/* RDKit's SMILES reader removes a hydrogen atom ([H], [H+]...) bonded to one
 * heavy atom by a single bond, without isotope, before it sanitises (its
 * charge is dropped): such an atom is not checked. */
static int removable_h(const pl_smiles_mol *m, const pl_smiles_chem *c, int32_t a)
{
    if (c->z[a] != 1 || m->atoms[a].isotope >= 0 || m->adj_start[a + 1] - m->adj_start[a] != 1)
        return 0;
    int32_t bi = m->adj[m->adj_start[a]];
    return c->order2[bi] == 2 && c->z[other(&m->bonds[bi], a)] > 1;
}

/* Kekulize.cpp's markDbondCands for one aromatic atom: does it need one of
 * its aromatic ring bonds to be double? */
static int needs_double(const pl_smiles_mol *m, const pl_smiles_chem *c, int32_t a, int ev, int iv)
{
    const int z = c->z[a];
    int sbo = 0;
    for (int32_t i = m->adj_start[a]; i < m->adj_start[a + 1]; i++) {
        int32_t bi = m->adj[i];
        sbo += c->order2[bi] == 3 ? 1 : (c->order2[bi] + 1) / 2;
    }
    sbo += c->h[a];
    int nv;
    const int *vl = valences(z, &nv);
    const int chrg = shift(z, c->charge[a]);
    int dv = vl[0] + chrg;
    const int tbo = ev + iv;
    const int total_degree = (m->adj_start[a + 1] - m->adj_start[a]) + iv;
    for (int vi = 1; tbo > dv && vi < nv && vl[vi] > 0; vi++)
        dv = vl[vi] + chrg;
    if (tbo == 5 && sbo == 4 && dv == 3 && total_degree == 3 && chrg == 0 && c->h[a] == 0 &&
        (z == 7 || z == 15 || z == 33))
        dv = 5;
    if (total_degree >= dv)
        return 0;
    if (dv == sbo + 1)
        return 1;
    return m->atoms[a].bracket && dv == sbo + 2;
}

/* Candidates (mark 1) still free around a over aromatic ring bonds. */
static int free_partners(const pl_smiles_mol *m, const pl_smiles_chem *c, const int32_t *mark,
                         const int32_t *mate, int32_t a)
{
    int k = 0;
    for (int32_t i = m->adj_start[a]; i < m->adj_start[a + 1]; i++) {
        int32_t bi = m->adj[i], nb = other(&m->bonds[bi], a);
        k += c->order2[bi] == 3 && c->ring_bond[bi] && mark[nb] == 1 && mate[nb] < 0;
    }
    return k;
}

/* Backtracking perfect matching of the candidates (mark 1) over aromatic ring
 * bonds: mate[a] = the partner. Returns 1 when every candidate is matched.
 * The most constrained free candidate is matched next (a dead end, one with
 * no free partner, is seen at once), so chains and rings take linear time;
 * the search is bounded by a budget as RDKit's by maxBackTracks. Iterative
 * over a stack of (atom, next adjacency index). */
static int match_all(const pl_smiles_mol *m, const pl_smiles_chem *c, int32_t *mark, int32_t *mate,
                     int32_t *stack_a, int32_t *stack_i)
{
    const int32_t n = m->n_atoms;
    int64_t budget = 200000;
    int32_t top = 0;
    for (;;) {
        int32_t a = -1, best = 1 << 30;
        for (int32_t i = 0; i < n && best > 0; i++)
            if (mark[i] == 1 && mate[i] < 0) {
                int k = free_partners(m, c, mark, mate, i);
                if (k < best) {
                    best = k;
                    a = i;
                }
            }
        if (a < 0)
            return 1;
        if (best > 0) {
            stack_a[top] = a;
            stack_i[top] = m->adj_start[a];
            top++;
        }
        for (;;) { /* advance the top frame to its next partner, or pop */
            if (!top || --budget < 0)
                return 0;
            int32_t fa = stack_a[top - 1];
            if (mate[fa] >= 0) { /* undo the previous choice */
                mate[mate[fa]] = -1;
                mate[fa] = -1;
            }
            int found = 0;
            while (stack_i[top - 1] < m->adj_start[fa + 1]) {
                int32_t bi = m->adj[stack_i[top - 1]++];
                int32_t nb = other(&m->bonds[bi], fa);
                if (c->order2[bi] == 3 && c->ring_bond[bi] && mark[nb] == 1 && mate[nb] < 0) {
                    mate[fa] = nb;
                    mate[nb] = fa;
                    found = 1;
                    break;
                }
            }
            if (found)
                break;
            top--; /* no partner: the frame below must try its next one */
        }
    }
}

pl_status pl_smiles_sanitize(const pl_smiles_mol *m, pl_smiles_chem *c)
{
    RETURN_IF(reserve(c, m));
    const int32_t n = m->n_atoms;
    for (int32_t a = 0; a < n; a++) {
        c->z[a] = atomic_number(&m->atoms[a]);
        if (c->z[a] < 0)
            return pl_errorf(PL_ERR_FORMAT, "atom %d: unknown element '%s'", (int)a,
                             m->atoms[a].symbol);
        c->charge[a] = m->atoms[a].charge;
    }
    find_rings(m, c);
    for (int32_t b = 0; b < m->n_bonds; b++)
        c->order2[b] = order2_of(m, c, b);
    clean_up(m, c);
    int32_t *ev = c->work, *iv = ev + n, *mark = iv + n, *mate = mark + n, *sa = mate + n,
            *si = sa + n;
    int any_aromatic = 0;
    for (int32_t a = 0; a < n; a++) {
        int e = 0, i = 0;
        c->hidden[a] = (uint8_t)removable_h(m, c, a);
        if (!c->hidden[a])
            RETURN_IF(atom_valence(m, c, a, &e, &i));
        ev[a] = e;
        iv[a] = i;
        c->h[a] = bracket_h(&m->atoms[a]) + i;
        any_aromatic |= m->atoms[a].aromatic;
    }
    for (int32_t b = 0; b < m->n_bonds; b++)
        c->kek[b] = c->order2[b] == 3 ? 2 : c->order2[b];
    if (!any_aromatic)
        return PL_OK;
    for (int32_t a = 0; a < n; a++) {
        mate[a] = -1;
        mark[a] = 0;
        if (!m->atoms[a].aromatic || c->z[a] == 0)
            continue;
        if (!c->in_ring[a])
            return pl_errorf(PL_ERR_FORMAT, "non-ring atom %d marked aromatic", (int)a);
        mark[a] = needs_double(m, c, a, ev[a], iv[a]);
    }
    if (!match_all(m, c, mark, mate, sa, si)) {
        int32_t first = 0;
        while (first < n && !(mark[first] == 1 && mate[first] < 0))
            first++;
        return pl_errorf(PL_ERR_FORMAT, "cannot kekulize: no alternating double bonds for the "
                         "aromatic atoms (atom %d %s unmatched)", (int)(first < n ? first : 0),
                         element_symbols[c->z[first < n ? first : 0]]);
    }
    for (int32_t a = 0; a < n; a++) /* the matching's double bonds */
        if (mate[a] > a)
            for (int32_t i = m->adj_start[a]; i < m->adj_start[a + 1]; i++) {
                int32_t bi = m->adj[i];
                if (c->order2[bi] == 3 && other(&m->bonds[bi], a) == mate[a])
                    c->kek[bi] = 4;
            }
    return PL_OK;
}

void pl_smiles_chem_free(pl_smiles_chem *c)
{
    pl_free(c->z);
    pl_free(c->charge);
    pl_free(c->h);
    pl_free(c->in_ring);
    pl_free(c->hidden);
    pl_free(c->order2);
    pl_free(c->ring_bond);
    pl_free(c->kek);
    pl_free(c->cls);
    pl_free(c->work);
    memset(c, 0, sizeof *c);
}
