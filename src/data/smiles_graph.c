/* SMILES parser: text to pl_smiles_mol (see smiles_graph.h). The writer is
 * smiles_write.c. */
#include "data/smiles_graph.h"

#include "base/alloc.h"
#include "base/status.h"

#include <string.h>

static const char *const elements[] = {
    "H",  "He", "Li", "Be", "B",  "C",  "N",  "O",  "F",  "Ne", "Na", "Mg", "Al", "Si", "P",
    "S",  "Cl", "Ar", "K",  "Ca", "Sc", "Ti", "V",  "Cr", "Mn", "Fe", "Co", "Ni", "Cu", "Zn",
    "Ga", "Ge", "As", "Se", "Br", "Kr", "Rb", "Sr", "Y",  "Zr", "Nb", "Mo", "Tc", "Ru", "Rh",
    "Pd", "Ag", "Cd", "In", "Sn", "Sb", "Te", "I",  "Xe", "Cs", "Ba", "La", "Ce", "Pr", "Nd",
    "Pm", "Sm", "Eu", "Gd", "Tb", "Dy", "Ho", "Er", "Tm", "Yb", "Lu", "Hf", "Ta", "W",  "Re",
    "Os", "Ir", "Pt", "Au", "Hg", "Tl", "Pb", "Bi", "Po", "At", "Rn", "Fr", "Ra", "Ac", "Th",
    "Pa", "U",  "Np", "Pu", "Am", "Cm", "Bk", "Cf", "Es", "Fm", "Md", "No", "Lr", "Rf", "Db",
    "Sg", "Bh", "Hs", "Mt", "Ds", "Rg", "Cn", "Nh", "Fl", "Mc", "Lv", "Ts", "Og",
};
/* Aromatic symbols allowed in brackets, two-letter ones first. */
static const char *const aromatic_bracket[] = {"se", "as", "te", "b", "c", "n", "o", "p", "s"};

/* One end of a bond as SMILES lists it: key orders an atom's neighbours
 * (-1 = the atom it is reached from, else the position of the neighbour's
 * atom or ring digit in the string). */
typedef struct incidence {
    int32_t atom, bond;
    int64_t key;
} incidence;

typedef struct ring_slot {
    int32_t atom; /* -1: free */
    char order, dir;
    size_t pos; /* of the digit */
} ring_slot;

typedef struct parse_state {
    pl_smiles_mol *m;
    const char *s;
    size_t len, pos;
    incidence *inc;
    int64_t n_inc, cap_inc;
    int32_t *stack; /* branch points */
    int64_t depth, cap_stack;
    ring_slot ring[100];
} parse_state;

static int is_element(const char *sym, size_t n)
{
    for (size_t i = 0; i < sizeof elements / sizeof *elements; i++)
        if (strlen(elements[i]) == n && memcmp(elements[i], sym, n) == 0)
            return 1;
    return 0;
}

static pl_status grow(void **p, int64_t *cap, int64_t need, size_t elem)
{
    if (need <= *cap)
        return PL_OK;
    int64_t c = *cap < 16 ? 16 : *cap;
    while (c < need)
        c *= 2;
    size_t bytes;
    if (pl_mul_size((size_t)c, elem, &bytes))
        return pl_errorf(PL_ERR_NOMEM, "SMILES graph: %lld elements overflow", (long long)c);
    void *q = pl_realloc(*p, bytes);
    if (!q)
        return pl_errorf(PL_ERR_NOMEM, "SMILES graph: out of memory for %zu bytes", bytes);
    *p = q;
    *cap = c;
    return PL_OK;
}

static pl_status add_atom(parse_state *ps, const pl_smiles_atom *a, int32_t *idx)
{
    pl_smiles_mol *m = ps->m;
    int64_t cap = m->cap_atoms;
    pl_status st = grow((void **)&m->atoms, &cap, (int64_t)m->n_atoms + 1, sizeof *m->atoms);
    if (st != PL_OK)
        return st;
    if (cap > INT32_MAX)
        return pl_errorf(PL_ERR_FORMAT, "SMILES: more than %d atoms", INT32_MAX);
    m->cap_atoms = (int32_t)cap;
    *idx = m->n_atoms++;
    m->atoms[*idx] = *a;
    return PL_OK;
}

static pl_status add_incidence(parse_state *ps, int32_t atom, int32_t bond, int64_t key)
{
    pl_status st = grow((void **)&ps->inc, &ps->cap_inc, ps->n_inc + 1, sizeof *ps->inc);
    if (st != PL_OK)
        return st;
    ps->inc[ps->n_inc++] = (incidence){atom, bond, key};
    return PL_OK;
}

/* Bond a-b; key_a / key_b place it among each atom's neighbours. */
static pl_status add_bond(parse_state *ps, int32_t a, int32_t b, char order, char dir,
                          int32_t dir_from, int ring, int64_t key_a, int64_t key_b)
{
    pl_smiles_mol *m = ps->m;
    int64_t cap = m->cap_bonds;
    pl_status st = grow((void **)&m->bonds, &cap, (int64_t)m->n_bonds + 1, sizeof *m->bonds);
    if (st != PL_OK)
        return st;
    if (cap > INT32_MAX)
        return pl_errorf(PL_ERR_FORMAT, "SMILES: more than %d bonds", INT32_MAX);
    m->cap_bonds = (int32_t)cap;
    int32_t id = m->n_bonds++;
    m->bonds[id] =
        (pl_smiles_bond){a < b ? a : b, a < b ? b : a, order, dir, (uint8_t)ring, dir_from};
    if ((st = add_incidence(ps, a, id, key_a)) != PL_OK)
        return st;
    return add_incidence(ps, b, id, key_b);
}

static int is_bond_char(char c)
{
    return c == '-' || c == '=' || c == '#' || c == '$' || c == ':' || c == '/' || c == '\\';
}

static pl_status fail_at(const parse_state *ps, size_t pos, const char *what)
{
    if (pos < ps->len)
        return pl_errorf(PL_ERR_FORMAT, "SMILES character %zu ('%c'): %s", pos + 1,
                         ps->s[pos] >= 32 && ps->s[pos] < 127 ? ps->s[pos] : '?', what);
    return pl_errorf(PL_ERR_FORMAT, "SMILES ends at character %zu: %s", ps->len, what);
}

/* Reads a decimal number of at most 9 digits at ps->pos; -1 when none. */
static int32_t read_number(parse_state *ps)
{
    int32_t v = -1;
    for (int k = 0; k < 9 && ps->pos < ps->len && ps->s[ps->pos] >= '0' && ps->s[ps->pos] <= '9';
         k++)
        v = (v < 0 ? 0 : v * 10) + (ps->s[ps->pos++] - '0');
    return v;
}

/* [isotope? symbol chirality? hcount? charge? class?] starting at '['. */
static pl_status parse_bracket(parse_state *ps, pl_smiles_atom *a)
{
    const char *s = ps->s;
    ps->pos++; /* '[' */
    memset(a, 0, sizeof *a);
    a->bracket = 1;
    a->hcount = 0;
    a->atom_class = -1;
    a->isotope = read_number(ps);
    if (ps->pos < ps->len && s[ps->pos] >= '0' && s[ps->pos] <= '9')
        return fail_at(ps, ps->pos, "isotope has more than 9 digits");
    size_t p = ps->pos, left = ps->len - p;
    size_t n = 0;
    if (left >= 1 && s[p] == '*') {
        n = 1;
    } else if (left >= 1 && s[p] >= 'A' && s[p] <= 'Z') {
        if (left >= 2 && s[p + 1] >= 'a' && s[p + 1] <= 'z' && is_element(s + p, 2))
            n = 2;
        else if (is_element(s + p, 1))
            n = 1;
    } else {
        for (size_t i = 0; i < sizeof aromatic_bracket / sizeof *aromatic_bracket; i++) {
            size_t k = strlen(aromatic_bracket[i]);
            if (left >= k && memcmp(s + p, aromatic_bracket[i], k) == 0) {
                n = k;
                a->aromatic = 1;
                break;
            }
        }
    }
    if (n == 0)
        return fail_at(ps, p, "expected an element symbol in the bracket atom");
    memcpy(a->symbol, s + p, n);
    ps->pos += n;
    if (ps->pos < ps->len && s[ps->pos] == '@') {
        ps->pos++;
        a->chiral = PL_SMILES_CHIRAL_CCW;
        if (ps->pos < ps->len && s[ps->pos] == '@') {
            ps->pos++;
            a->chiral = PL_SMILES_CHIRAL_CW;
        } else if (ps->len - ps->pos >= 3 && memcmp(s + ps->pos, "TH", 2) == 0 &&
                   (s[ps->pos + 2] == '1' || s[ps->pos + 2] == '2')) {
            a->chiral = s[ps->pos + 2] == '1' ? PL_SMILES_CHIRAL_CCW : PL_SMILES_CHIRAL_CW;
            ps->pos += 3;
        } else if (ps->len - ps->pos >= 2 &&
                   (memcmp(s + ps->pos, "AL", 2) == 0 || memcmp(s + ps->pos, "SP", 2) == 0 ||
                    memcmp(s + ps->pos, "TB", 2) == 0 || memcmp(s + ps->pos, "OH", 2) == 0)) {
            return pl_errorf(PL_ERR_UNSUPPORTED,
                             "SMILES character %zu: @%.2s chirality is not supported (only @, "
                             "@@, @TH1, @TH2)",
                             ps->pos + 1, s + ps->pos);
        }
    }
    if (ps->pos < ps->len && s[ps->pos] == 'H') {
        ps->pos++;
        int32_t h = read_number(ps);
        a->hcount = h < 0 ? 1 : h;
    }
    if (ps->pos < ps->len && (s[ps->pos] == '+' || s[ps->pos] == '-')) {
        char sign = s[ps->pos++];
        int32_t q = read_number(ps);
        if (q < 0) {
            q = 1;
            while (ps->pos < ps->len && s[ps->pos] == sign && q < 15) {
                ps->pos++;
                q++;
            }
        }
        if (q > 15)
            return fail_at(ps, ps->pos - 1, "charge outside -15..15");
        a->charge = sign == '+' ? q : -q;
    }
    if (ps->pos < ps->len && s[ps->pos] == ':') {
        ps->pos++;
        a->atom_class = read_number(ps);
        if (a->atom_class < 0)
            return fail_at(ps, ps->pos, "expected digits of the atom class after ':'");
    }
    if (ps->pos >= ps->len || s[ps->pos] != ']')
        return fail_at(ps, ps->pos,
                       "expected ']' closing the bracket atom (after symbol, "
                       "chirality, H count, charge, class)");
    ps->pos++;
    return PL_OK;
}

/* Organic-subset atom or '*' at ps->pos; n = 0 when there is none. */
static size_t organic_atom(const parse_state *ps, pl_smiles_atom *a)
{
    const char *s = ps->s + ps->pos;
    size_t left = ps->len - ps->pos;
    size_t n = 0;
    if (left >= 2 && ((s[0] == 'C' && s[1] == 'l') || (s[0] == 'B' && s[1] == 'r')))
        n = 2;
    else if (strchr("BCNOPSFI*bcnops", s[0]) && s[0] != '\0')
        n = 1;
    if (n == 0)
        return 0;
    memset(a, 0, sizeof *a);
    memcpy(a->symbol, s, n);
    a->aromatic = s[0] >= 'a' && s[0] <= 'z';
    a->isotope = -1;
    a->hcount = -1;
    a->atom_class = -1;
    return n;
}

static int32_t find_bond(const pl_smiles_mol *m, int32_t a, int32_t b)
{
    int32_t lo = a < b ? a : b, hi = a < b ? b : a;
    for (int32_t i = 0; i < m->n_bonds; i++)
        if (m->bonds[i].a == lo && m->bonds[i].b == hi)
            return i;
    return -1;
}

/* A ring digit (or %nn) at ps->pos on atom prev, with bond symbol bond_c
 * (0 when none) before it. */
static pl_status ring_digit(parse_state *ps, int32_t prev, char bond_c)
{
    size_t at = ps->pos;
    int rn;
    if (ps->s[at] == '%') {
        if (ps->len - at < 3 || ps->s[at + 1] < '0' || ps->s[at + 1] > '9' || ps->s[at + 2] < '0' ||
            ps->s[at + 2] > '9')
            return fail_at(ps, at, "expected two digits after '%'");
        rn = (ps->s[at + 1] - '0') * 10 + (ps->s[at + 2] - '0');
        ps->pos += 3;
    } else {
        rn = ps->s[at] - '0';
        ps->pos++;
    }
    if (prev < 0)
        return fail_at(ps, at, "ring-closure digit with no atom before it");
    char order = 0, dir = 0;
    if (bond_c == '/' || bond_c == '\\')
        dir = bond_c;
    else
        order = bond_c;
    ring_slot *r = &ps->ring[rn];
    if (r->atom < 0) {
        *r = (ring_slot){prev, order, dir, at};
        return PL_OK;
    }
    if (r->atom == prev)
        return fail_at(ps, at, "ring bond closes on the atom that opened it");
    if (find_bond(ps->m, r->atom, prev) >= 0)
        return fail_at(ps, at, "ring bond duplicates a bond between the same two atoms");
    /* Two symbols for one ring bond, as RDKit reads them: an order written
     * where the ring opened wins (a / or \\ mark gives no order); a mark on
     * either end reads from the atom carrying it to its partner, the closing
     * one winning; a mark on a bond that ends up double or more is dropped. */
    char o = r->order ? r->order : order;
    char d = dir ? dir : r->dir;
    int32_t from = dir ? prev : r->atom;
    if (o && o != '-')
        d = 0;
    int32_t opener = r->atom;
    r->atom = -1;
    return add_bond(ps, opener, prev, o, d, from, 1, (int64_t)r->pos, (int64_t)at);
}

/* Sorts the incidences into m->adj (per atom, by key) and fills has_from. */
static pl_status build_adjacency(parse_state *ps)
{
    pl_smiles_mol *m = ps->m;
    int64_t n = ps->n_inc;
    pl_status st;
    if ((st = grow((void **)&m->adj_start, &m->cap_adj, (int64_t)m->n_atoms + 1 + n,
                   sizeof *m->adj_start)) != PL_OK ||
        (st = grow((void **)&m->keys, &m->cap_keys, n + 1, sizeof *m->keys)) != PL_OK ||
        (st = grow((void **)&ps->stack, &ps->cap_stack, (int64_t)m->n_atoms + 1,
                   sizeof *ps->stack)) != PL_OK)
        return st;
    m->adj = m->adj_start + m->n_atoms + 1;
    int64_t *keys = m->keys;
    int32_t *cursor = ps->stack;
    memset(m->adj_start, 0, ((size_t)m->n_atoms + 1) * sizeof *m->adj_start);
    for (int64_t i = 0; i < n; i++)
        m->adj_start[ps->inc[i].atom + 1]++;
    for (int32_t a = 0; a < m->n_atoms; a++) {
        m->adj_start[a + 1] += m->adj_start[a];
        cursor[a] = m->adj_start[a];
        m->atoms[a].has_from = 0;
    }
    for (int64_t i = 0; i < n; i++) {
        int32_t at = cursor[ps->inc[i].atom]++;
        m->adj[at] = ps->inc[i].bond;
        keys[at] = ps->inc[i].key;
        if (ps->inc[i].key < 0)
            m->atoms[ps->inc[i].atom].has_from = 1;
    }
    /* Insertion sort by key within each atom: the ends come nearly sorted
     * (only ring openings arrive late). */
    for (int32_t a = 0; a < m->n_atoms; a++) {
        for (int32_t i = m->adj_start[a] + 1; i < m->adj_start[a + 1]; i++) {
            int64_t k = keys[i];
            int32_t b = m->adj[i];
            int32_t j = i;
            for (; j > m->adj_start[a] && keys[j - 1] > k; j--) {
                keys[j] = keys[j - 1];
                m->adj[j] = m->adj[j - 1];
            }
            keys[j] = k;
            m->adj[j] = b;
        }
    }
    /* Fragments: connected components (a ring bond may join two '.' parts). */
    int32_t *root = cursor;
    for (int32_t a = 0; a < m->n_atoms; a++)
        root[a] = a;
    m->n_frags = m->n_atoms;
    for (int32_t i = 0; i < m->n_bonds; i++) {
        int32_t x = m->bonds[i].a, y = m->bonds[i].b;
        while (root[x] != x)
            x = root[x] = root[root[x]];
        while (root[y] != y)
            y = root[y] = root[root[y]];
        if (x != y) {
            root[x < y ? y : x] = x < y ? x : y;
            m->n_frags--;
        }
    }
    return PL_OK;
}

static pl_status parse(parse_state *ps)
{
    const char *s = ps->s;
    int32_t prev = -1;
    char bond_c = 0;
    size_t bond_pos = 0;
    int after_open = 0; /* the last token was '(' */
    int after_dot = 0;  /* the last token was '.' */
    size_t dot_pos = 0;
    pl_status st;
    if (ps->len == 0)
        return pl_errorf(PL_ERR_FORMAT, "SMILES is empty");
    while (ps->pos < ps->len) {
        size_t at = ps->pos;
        char c = s[at];
        pl_smiles_atom atom;
        size_t n = 0;
        if (c == '[' || (n = organic_atom(ps, &atom)) > 0) {
            if (c == '[') {
                if ((st = parse_bracket(ps, &atom)) != PL_OK)
                    return st;
            } else {
                ps->pos += n;
            }
            int32_t idx = -1;
            if ((st = add_atom(ps, &atom, &idx)) != PL_OK)
                return st;
            if (prev >= 0) {
                char order = 0, dir = 0;
                if (bond_c == '/' || bond_c == '\\')
                    dir = bond_c;
                else
                    order = bond_c;
                if ((st = add_bond(ps, prev, idx, order, dir, prev, 0, (int64_t)at, -1)) != PL_OK)
                    return st;
            }
            prev = idx;
            bond_c = 0;
            after_open = after_dot = 0;
        } else if (is_bond_char(c)) {
            if (bond_c)
                return fail_at(ps, at, "two bond symbols in a row");
            if (prev < 0)
                return fail_at(ps, at, "bond with no atom before it");
            bond_c = c;
            bond_pos = at;
            after_open = 0;
            ps->pos++;
        } else if (c == '(') {
            if (prev < 0 || after_open)
                return fail_at(ps, at, "branch with no atom before it");
            if (bond_c)
                return fail_at(ps, at, "expected an atom after the bond symbol, not a branch");
            if ((st = grow((void **)&ps->stack, &ps->cap_stack, ps->depth + 1,
                           sizeof *ps->stack)) != PL_OK)
                return st;
            ps->stack[ps->depth++] = prev;
            after_open = 1;
            ps->pos++;
        } else if (c == ')') {
            if (ps->depth == 0)
                return fail_at(ps, at, "')' without a matching '('");
            if (after_open)
                return fail_at(ps, at, "empty branch '()'");
            if (bond_c)
                return fail_at(ps, bond_pos, "bond with no atom after it");
            if (after_dot)
                return fail_at(ps, dot_pos, "'.' with no atom after it");
            prev = ps->stack[--ps->depth];
            ps->pos++;
        } else if ((c >= '0' && c <= '9') || c == '%') {
            if (after_open)
                return fail_at(ps, at, "ring-closure digit right after '('");
            if ((st = ring_digit(ps, prev, bond_c)) != PL_OK)
                return st;
            bond_c = 0;
        } else if (c == '.') {
            if (bond_c)
                return fail_at(ps, bond_pos, "bond with no atom after it");
            if (prev < 0)
                return fail_at(ps, at, "'.' with no atom before it");
            prev = -1;
            after_dot = 1;
            dot_pos = at;
            ps->pos++;
        } else {
            return fail_at(ps, at,
                           "unexpected character (expected an atom, bond, branch, "
                           "ring-closure digit or '.')");
        }
    }
    if (bond_c)
        return fail_at(ps, bond_pos, "bond with no atom after it");
    if (after_dot)
        return fail_at(ps, dot_pos, "'.' with no atom after it");
    if (ps->depth > 0)
        return fail_at(ps, ps->len, "unclosed '(' (branch never closed)");
    for (int r = 0; r < 100; r++)
        if (ps->ring[r].atom >= 0) {
            char msg[64];
            snprintf(msg, sizeof msg, "ring bond %d opened here is never closed", r);
            return fail_at(ps, ps->ring[r].pos, msg);
        }
    return build_adjacency(ps);
}

pl_status pl_smiles_parse(pl_smiles_mol *m, const char *s, size_t len)
{
    parse_state ps;
    memset(&ps, 0, sizeof ps);
    ps.m = m;
    ps.s = s;
    ps.len = len;
    ps.inc = m->inc;
    ps.cap_inc = m->cap_inc;
    ps.stack = m->stack;
    ps.cap_stack = m->cap_stack;
    for (int r = 0; r < 100; r++)
        ps.ring[r].atom = -1;
    m->n_atoms = m->n_bonds = m->n_frags = 0;
    pl_status st = parse(&ps);
    m->inc = ps.inc; /* keep the grown scratch for the next string */
    m->cap_inc = ps.cap_inc;
    m->stack = ps.stack;
    m->cap_stack = ps.cap_stack;
    if (st != PL_OK)
        m->n_atoms = m->n_bonds = m->n_frags = 0;
    return st;
}

void pl_smiles_mol_free(pl_smiles_mol *m)
{
    if (!m)
        return;
    pl_free(m->atoms);
    pl_free(m->bonds);
    pl_free(m->adj_start);
    pl_free(m->inc);
    pl_free(m->keys);
    pl_free(m->stack);
    pl_free(m->work);
    memset(m, 0, sizeof *m);
}
