/* SMILES writer: a pl_smiles_mol back to text from a given atom order (see
 * smiles_graph.h for what the output keeps). Two passes over a depth-first
 * walk: the first finds the tree edges (chain and branches) and the ring
 * closures, the second writes, so a ring digit is written on the atom that
 * opens it before the walk reaches the atom that closes it. Both passes use an
 * explicit stack: a chain of 100,000 atoms does not recurse. */
#include "data/smiles_graph.h"

#include "base/alloc.h"
#include "base/status.h"

#include <stdio.h>
#include <string.h>

enum { ENT_CLOSE = 0, ENT_OPEN = 1, ENT_CHILD = 2 };

typedef struct walk {
    const pl_smiles_mol *m;
    int32_t *rank, *order;       /* n: rank of each atom, atoms by rank */
    int32_t *nbr;                /* adj-sized: bonds of each atom by the rank of the other end */
    int32_t *state;              /* n: 0 unvisited, 1 on the walk, 2 done */
    int32_t *parent;             /* n: the bond an atom is reached by, -1 for a root */
    int32_t *ent, *ent_type;     /* adj-sized: what each atom writes after itself */
    int32_t *ent_n;              /* n */
    int32_t *st_atom, *st_i;     /* n: the walk's stack */
    int32_t *digit;              /* m: ring digit of a ring bond while open */
    int32_t *in_list, *out_list; /* adj + 2: neighbour orders of one atom */
    uint8_t used[100];
} walk;

static int32_t other(const pl_smiles_bond *b, int32_t a)
{
    return b->a == a ? b->b : b->a;
}

static pl_status take_work(pl_smiles_mol *m, walk *w)
{
    int64_t n = m->n_atoms, nb = m->n_bonds, na = m->adj_start[m->n_atoms];
    int64_t need = 8 * n + 4 * na + nb + 8;
    if (need > m->cap_work) {
        size_t bytes;
        if (pl_mul_size((size_t)need, sizeof(int32_t), &bytes))
            return pl_errorf(PL_ERR_NOMEM, "SMILES writer: %lld atoms overflow", (long long)n);
        int32_t *p = pl_realloc(m->work, bytes);
        if (!p)
            return pl_errorf(PL_ERR_NOMEM, "SMILES writer: out of memory for %zu bytes", bytes);
        m->work = p;
        m->cap_work = need;
    }
    int32_t *p = m->work;
    memset(w, 0, sizeof *w);
    w->m = m;
    w->rank = p, p += n;
    w->order = p, p += n;
    w->state = p, p += n;
    w->parent = p, p += n;
    w->ent_n = p, p += n;
    w->st_atom = p, p += n;
    w->st_i = p, p += n;
    w->nbr = p, p += na;
    w->ent = p, p += na;
    w->ent_type = p, p += na;
    w->digit = p, p += nb;
    w->in_list = p, p += na / 2 + 2;
    w->out_list = p;
    return PL_OK;
}

/* Each atom's bonds sorted by the rank of the atom at the other end. */
static void sort_neighbours(walk *w)
{
    const pl_smiles_mol *m = w->m;
    memcpy(w->nbr, m->adj, (size_t)m->adj_start[m->n_atoms] * sizeof *w->nbr);
    for (int32_t a = 0; a < m->n_atoms; a++) {
        int32_t lo = m->adj_start[a], hi = m->adj_start[a + 1];
        for (int32_t i = lo + 1; i < hi; i++) {
            int32_t b = w->nbr[i];
            int32_t r = w->rank[other(&m->bonds[b], a)];
            int32_t j = i;
            for (; j > lo && w->rank[other(&m->bonds[w->nbr[j - 1]], a)] > r; j--)
                w->nbr[j] = w->nbr[j - 1];
            w->nbr[j] = b;
        }
    }
}

static void add_entry(walk *w, int32_t a, int32_t bond, int32_t type)
{
    int32_t at = w->m->adj_start[a] + w->ent_n[a]++;
    w->ent[at] = bond;
    w->ent_type[at] = type;
}

/* Pass 1: the walk from root; tree edges become CHILD entries of the parent,
 * edges back to an atom still on the walk a CLOSE on the current atom and an
 * OPEN on that ancestor. */
static void find_tree(walk *w, int32_t root)
{
    const pl_smiles_mol *m = w->m;
    int32_t sp = 0;
    w->state[root] = 1;
    w->parent[root] = -1;
    w->st_atom[sp] = root;
    w->st_i[sp++] = m->adj_start[root];
    while (sp > 0) {
        int32_t v = w->st_atom[sp - 1];
        if (w->st_i[sp - 1] == m->adj_start[v + 1]) {
            w->state[v] = 2;
            sp--;
            continue;
        }
        int32_t b = w->nbr[w->st_i[sp - 1]++];
        if (b == w->parent[v])
            continue;
        int32_t u = other(&m->bonds[b], v);
        if (w->state[u] == 0) {
            add_entry(w, v, b, ENT_CHILD);
            w->state[u] = 1;
            w->parent[u] = b;
            w->st_atom[sp] = u;
            w->st_i[sp++] = m->adj_start[u];
        } else if (w->state[u] == 1) {
            add_entry(w, v, b, ENT_CLOSE);
            add_entry(w, u, b, ENT_OPEN);
        }
    }
}

static char bond_symbol(const pl_smiles_bond *b, int32_t from)
{
    if (b->dir)
        return b->dir_from == from ? b->dir : (b->dir == '/' ? '\\' : '/');
    return b->order;
}

/* RDKit's extra swap for a three-neighbour centre without H that is
 * saturated and carries exactly one ring-closure digit
 * (Canon::chiralAtomNeedsTagInversion: its SMILES reader and writer both
 * apply it, so it is part of what a tag means to RDKit). Bonds of order > 1
 * make an atom unsaturated, an implicit bond between two aromatic atoms
 * (aromatic for RDKit) included. */
static int rdkit_extra_swap(const pl_smiles_mol *m, int32_t a, int32_t n_ring_digits)
{
    const pl_smiles_atom *at = &m->atoms[a];
    int32_t lo = m->adj_start[a], deg = m->adj_start[a + 1] - lo;
    if (deg != 3 || n_ring_digits != 1 || (at->bracket && at->hcount == 1))
        return 0;
    for (int32_t i = lo; i < lo + deg; i++) {
        const pl_smiles_bond *b = &m->bonds[m->adj[i]];
        if (b->order == '=' || b->order == '#' || b->order == '$' || b->order == ':')
            return 0;
        if (!b->order && !b->dir && m->atoms[b->a].aromatic && m->atoms[b->b].aromatic)
            return 0;
    }
    return 1;
}

/* The chirality tag atom a gets when written with neighbour order out_list
 * (n_out bonds, n_ring_out of them by ring-closure digits): flipped if that
 * order is an odd permutation of the parsed one, RDKit's extra swap counted
 * on both sides. */
static uint8_t chirality(walk *w, int32_t a, int32_t n_out, int32_t n_ring_out, int is_root)
{
    const pl_smiles_mol *m = w->m;
    const pl_smiles_atom *at = &m->atoms[a];
    if (at->chiral == PL_SMILES_CHIRAL_NONE)
        return at->chiral;
    int32_t lo = m->adj_start[a], deg = m->adj_start[a + 1] - lo;
    int32_t *in = w->in_list, *out = w->out_list;
    int32_t n_in = 0;
    int implicit_h = at->bracket && at->hcount == 1;
    for (int32_t i = 0; i < deg; i++) {
        if (implicit_h && n_in == (at->has_from ? 1 : 0))
            in[n_in++] = -1;
        in[n_in++] = m->adj[lo + i];
    }
    if (implicit_h && n_in == (at->has_from ? 1 : 0))
        in[n_in++] = -1;
    /* out_list holds the written order without the H; insert it in place. */
    int h_at = is_root ? 0 : 1;
    if (implicit_h) {
        for (int32_t i = n_out; i > h_at; i--)
            out[i] = out[i - 1];
        out[h_at < n_out ? h_at : n_out] = -1;
        n_out++;
    }
    PL_ASSERT(n_out == n_in);
    /* Parity: inversions of the positions, in the parsed order, of the written neighbours. */
    int64_t inv = 0;
    for (int32_t i = 0; i < n_out; i++) {
        int32_t pi = 0;
        while (in[pi] != out[i])
            pi++;
        out[i] = pi; /* out now holds positions; earlier entries already converted */
        for (int32_t j = 0; j < i; j++)
            inv += out[j] > pi;
    }
    int32_t n_ring_in = 0;
    for (int32_t i = 0; i < deg; i++)
        n_ring_in += m->bonds[m->adj[lo + i]].ring;
    inv += rdkit_extra_swap(m, a, n_ring_in) != rdkit_extra_swap(m, a, n_ring_out);
    if (inv % 2 == 0)
        return at->chiral;
    return at->chiral == PL_SMILES_CHIRAL_CCW ? PL_SMILES_CHIRAL_CW : PL_SMILES_CHIRAL_CCW;
}

static pl_status put_atom(pl_bytes *out, const pl_smiles_atom *a, uint8_t chiral)
{
    if (!a->bracket)
        return pl_bytes_append(out, a->symbol, strlen(a->symbol));
    char buf[80];
    int k = 0;
    buf[k++] = '[';
    if (a->isotope >= 0)
        k += snprintf(buf + k, sizeof buf - (size_t)k, "%d", a->isotope);
    k += snprintf(buf + k, sizeof buf - (size_t)k, "%s%s", a->symbol,
                  chiral == PL_SMILES_CHIRAL_CCW  ? "@"
                  : chiral == PL_SMILES_CHIRAL_CW ? "@@"
                                                  : "");
    if (a->hcount == 1)
        buf[k++] = 'H';
    else if (a->hcount > 1)
        k += snprintf(buf + k, sizeof buf - (size_t)k, "H%d", a->hcount);
    if (a->charge == 1 || a->charge == -1)
        buf[k++] = a->charge > 0 ? '+' : '-';
    else if (a->charge != 0)
        k += snprintf(buf + k, sizeof buf - (size_t)k, "%+d", a->charge);
    if (a->atom_class >= 0)
        k += snprintf(buf + k, sizeof buf - (size_t)k, ":%d", a->atom_class);
    buf[k++] = ']';
    return pl_bytes_append(out, buf, (size_t)k);
}

static pl_status put_digit(pl_bytes *out, int32_t d, char bond)
{
    char buf[8];
    int k = 0;
    if (bond)
        buf[k++] = bond;
    if (d < 10)
        buf[k++] = (char)('0' + d);
    else
        k += snprintf(buf + k, sizeof buf - (size_t)k, "%%%02d", d);
    return pl_bytes_append(out, buf, (size_t)k);
}

/* Writes atom a (with the bond it is reached by, if any) and its ring
 * digits; its neighbour order as written (parent, ring closures, branches and
 * chain) goes to out_list to fix its chirality tag. */
static pl_status emit_atom(walk *w, int32_t a, pl_bytes *out)
{
    const pl_smiles_mol *m = w->m;
    int32_t pb = w->parent[a], lo = m->adj_start[a], n_ent = w->ent_n[a];
    int32_t n_out = 0;
    pl_status st;
    if (pb >= 0) {
        char c = bond_symbol(&m->bonds[pb], other(&m->bonds[pb], a));
        if (c && (st = pl_bytes_append(out, &c, 1)) != PL_OK)
            return st;
        w->out_list[n_out++] = pb;
    }
    int32_t n_ring = 0;
    for (int type = ENT_CLOSE; type <= ENT_CHILD; type++)
        for (int32_t i = 0; i < n_ent; i++)
            if (w->ent_type[lo + i] == type) {
                w->out_list[n_out++] = w->ent[lo + i];
                n_ring += type != ENT_CHILD;
            }
    uint8_t chiral = chirality(w, a, n_out, n_ring, pb < 0);
    if ((st = put_atom(out, &m->atoms[a], chiral)) != PL_OK)
        return st;
    for (int32_t i = 0; i < n_ent; i++) /* closings first: their digits are reused */
        if (w->ent_type[lo + i] == ENT_CLOSE) {
            int32_t b = w->ent[lo + i];
            if ((st = put_digit(out, w->digit[b], 0)) != PL_OK)
                return st;
            w->used[w->digit[b]] = 0;
        }
    for (int32_t i = 0; i < n_ent; i++)
        if (w->ent_type[lo + i] == ENT_OPEN) {
            int32_t b = w->ent[lo + i], d = 1;
            while (d < 100 && w->used[d])
                d++;
            if (d == 100)
                return pl_errorf(PL_ERR_UNSUPPORTED,
                                 "SMILES writer: more than 99 ring bonds open at once");
            w->used[d] = 1;
            w->digit[b] = d;
            if ((st = put_digit(out, d, bond_symbol(&m->bonds[b], a))) != PL_OK)
                return st;
        }
    return PL_OK;
}

/* Pass 2: writes the fragment rooted at root. st_i holds, per frame, the
 * index of the next entry to look at for children. */
static pl_status write_tree(walk *w, int32_t root, pl_bytes *out)
{
    const pl_smiles_mol *m = w->m;
    pl_status st;
    int32_t sp = 0;
    if ((st = emit_atom(w, root, out)) != PL_OK)
        return st;
    w->st_atom[sp] = root;
    w->st_i[sp++] = 0;
    while (sp > 0) {
        int32_t a = w->st_atom[sp - 1], lo = m->adj_start[a];
        int32_t *i = &w->st_i[sp - 1];
        while (*i < w->ent_n[a] && w->ent_type[lo + *i] != ENT_CHILD)
            (*i)++;
        if (*i == w->ent_n[a]) {
            sp--;
            /* a finished branch (not its parent's last child) closes */
            if (sp > 0) {
                int32_t p = w->st_atom[sp - 1], plo = m->adj_start[p];
                int32_t j = w->st_i[sp - 1];
                while (j < w->ent_n[p] && w->ent_type[plo + j] != ENT_CHILD)
                    j++;
                if (j < w->ent_n[p] && (st = pl_bytes_append(out, ")", 1)) != PL_OK)
                    return st;
            }
            continue;
        }
        int32_t b = w->ent[lo + (*i)++];
        int32_t j = *i;
        while (j < w->ent_n[a] && w->ent_type[lo + j] != ENT_CHILD)
            j++;
        if (j < w->ent_n[a] && (st = pl_bytes_append(out, "(", 1)) != PL_OK)
            return st;
        int32_t c = other(&m->bonds[b], a);
        if ((st = emit_atom(w, c, out)) != PL_OK)
            return st;
        w->st_atom[sp] = c;
        w->st_i[sp++] = 0;
    }
    return PL_OK;
}

pl_status pl_smiles_write(pl_smiles_mol *m, const int32_t *rank, pl_bytes *out)
{
    if (m->n_atoms == 0)
        return pl_errorf(PL_ERR_ARG, "SMILES writer: the molecule has no atoms");
    walk w;
    pl_status st = take_work(m, &w);
    if (st != PL_OK)
        return st;
    int32_t n = m->n_atoms;
    for (int32_t a = 0; a < n; a++) {
        w.rank[a] = rank ? rank[a] : a;
        w.order[a] = -1;
        w.state[a] = 0;
        w.ent_n[a] = 0;
    }
    for (int32_t a = 0; a < n; a++) {
        int32_t r = w.rank[a];
        if (r < 0 || r >= n)
            return pl_errorf(PL_ERR_ARG, "SMILES writer: rank of atom %d is %d, expected 0..%d", a,
                             r, n - 1);
        if (w.order[r] >= 0)
            return pl_errorf(PL_ERR_ARG,
                             "SMILES writer: rank is not a permutation of 0..%d "
                             "(atoms %d and %d both have rank %d)",
                             n - 1, w.order[r], a, r);
        w.order[r] = a;
    }
    sort_neighbours(&w);
    size_t start = out->n;
    for (int32_t i = 0; i < n; i++) {
        int32_t root = w.order[i];
        if (w.state[root] != 0)
            continue;
        find_tree(&w, root);
        if (start != out->n && (st = pl_bytes_append(out, ".", 1)) != PL_OK)
            return st;
        if ((st = write_tree(&w, root, out)) != PL_OK)
            return st;
    }
    return PL_OK;
}

pl_status pl_smiles_write_random(pl_smiles_mol *m, pl_np_rng *rng, pl_bytes *out)
{
    if (m->n_atoms == 0)
        return pl_errorf(PL_ERR_ARG, "SMILES writer: the molecule has no atoms");
    walk w;
    pl_status st = take_work(m, &w);
    if (st != PL_OK)
        return st;
    /* The rank is built in the work area's rank slot, which pl_smiles_write
     * then reads in place. */
    int32_t n = m->n_atoms;
    int32_t *order = w.order, *rank = w.rank;
    for (int32_t i = 0; i < n; i++)
        order[i] = i;
    pl_np_rng_shuffle_i32(rng, order, n);
    for (int32_t i = 0; i < n; i++)
        rank[order[i]] = i;
    return pl_smiles_write(m, rank, out);
}
