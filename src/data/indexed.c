/* Megatron's MMIDIDX indexed dataset: validating reader and atomic builder.
 * Format and semantics: megatron-facts.md 1.1 (Megatron-LM
 * megatron/core/datasets/indexed_dataset.py, _IndexWriter/_IndexReader). */
#include "data/indexed.h"

#include "base/alloc.h"
#include "base/vec.h"

#include <string.h>
#include <unistd.h>

static const uint8_t MAGIC[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
enum { HEADER_SIZE = 34 };

int pl_indexed_dtype_size(int code)
{
    static const int sizes[] = {0, 1, 1, 2, 4, 8, 8, 4, 2};
    return code >= 1 && code <= 8 ? sizes[code] : 0;
}

const char *pl_indexed_dtype_name(int code)
{
    static const char *names[] = {"?",     "uint8",   "int8",    "int16", "int32",
                                  "int64", "float64", "float32", "uint16"};
    return code >= 1 && code <= 8 ? names[code] : "unknown";
}

int pl_indexed_best_dtype(int64_t vocab_size)
{
    return vocab_size < 65500 ? PL_DT_UINT16 : PL_DT_INT32;
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

int32_t pl_indexed_length(const pl_indexed_header *h, int64_t i)
{
    const uint8_t *p = h->lengths + 4 * i;
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

int64_t pl_indexed_pointer(const pl_indexed_header *h, int64_t i)
{
    return (int64_t)get_u64(h->pointers + 8 * i);
}

int64_t pl_indexed_doc(const pl_indexed_header *h, int64_t k)
{
    return (int64_t)get_u64(h->docs + 8 * k);
}

pl_status pl_indexed_parse(const uint8_t *idx, size_t idx_size, uint64_t bin_size,
                           const char *name, pl_indexed_header *out)
{
    memset(out, 0, sizeof *out);
    if (idx_size < HEADER_SIZE)
        return pl_errorf(PL_ERR_FORMAT, "%s: %zu bytes, shorter than the %d-byte header", name,
                         idx_size, HEADER_SIZE);
    if (memcmp(idx, MAGIC, sizeof MAGIC) != 0)
        return pl_errorf(PL_ERR_FORMAT, "%s: field magic: not an MMIDIDX index (bad magic bytes)",
                         name);
    uint64_t version = get_u64(idx + 9);
    if (version != 1)
        return pl_errorf(PL_ERR_FORMAT, "%s: field version: %llu, expected 1", name,
                         (unsigned long long)version);
    int dtype = idx[17];
    if (!pl_indexed_dtype_size(dtype))
        return pl_errorf(PL_ERR_FORMAT, "%s: field dtype: unknown code %d (expected 1..8)", name,
                         dtype);
    uint64_t s = get_u64(idx + 18), d = get_u64(idx + 26);
    if (d < 1)
        return pl_errorf(PL_ERR_FORMAT, "%s: field document_count: 0, expected at least 1", name);
    /* 34 + 12 S + 8 D bytes, optionally + S bytes of sequence modes. */
    const uint64_t limit = (uint64_t)1 << 60;
    if (s > limit / 16 || d > limit / 16)
        return pl_errorf(PL_ERR_FORMAT,
                         "%s: fields sequence_count %llu / document_count %llu are impossibly large",
                         name, (unsigned long long)s, (unsigned long long)d);
    uint64_t need = HEADER_SIZE + 12 * s + 8 * d;
    if (idx_size != need && idx_size != need + s)
        return pl_errorf(PL_ERR_FORMAT,
                         "%s: %zu bytes, but sequence_count %llu and document_count %llu need "
                         "%llu (truncated or corrupt)",
                         name, idx_size, (unsigned long long)s, (unsigned long long)d,
                         (unsigned long long)need);
    out->dtype = dtype;
    out->item_size = pl_indexed_dtype_size(dtype);
    out->n_sequences = (int64_t)s;
    out->n_documents = (int64_t)d - 1;
    out->lengths = idx + HEADER_SIZE;
    out->pointers = out->lengths + 4 * s;
    out->docs = out->pointers + 8 * s;
    /* Every writer (Megatron's _IndexWriter, legacy MMapIndexedDataset, ours)
     * stores the exclusive prefix sum of the byte sizes; anything else is
     * corruption that would otherwise read the wrong tokens silently. */
    uint64_t sum = 0;
    for (int64_t i = 0; i < out->n_sequences; i++) {
        int32_t len = pl_indexed_length(out, i);
        int64_t ptr = pl_indexed_pointer(out, i);
        if (len < 0)
            return pl_errorf(PL_ERR_FORMAT, "%s: field sequence_lengths[%lld] = %d is negative",
                             name, (long long)i, len);
        if (ptr < 0 || (uint64_t)ptr != sum)
            return pl_errorf(PL_ERR_FORMAT,
                             "%s: field sequence_pointers[%lld] = %lld, expected %llu (the sum of "
                             "the byte sizes of the sequences before it)",
                             name, (long long)i, (long long)ptr, (unsigned long long)sum);
        /* sum == ptr < 2^63 and len * item_size < 2^34: cannot wrap. */
        sum += (uint64_t)len * (uint64_t)out->item_size;
        if (bin_size != UINT64_MAX && sum > bin_size)
            return pl_errorf(PL_ERR_FORMAT,
                             "%s: field sequence_pointers[%lld] = %lld with length %d runs past "
                             "the end of the .bin (%llu bytes; truncated?)",
                             name, (long long)i, (long long)ptr, len,
                             (unsigned long long)bin_size);
    }
    out->data_bytes = sum;
    int64_t prev = 0;
    for (int64_t k = 0; k <= out->n_documents; k++) {
        int64_t v = pl_indexed_doc(out, k);
        if ((k == 0 && v != 0) || v < prev || v > out->n_sequences)
            return pl_errorf(PL_ERR_FORMAT,
                             "%s: field document_indices[%lld] = %lld (must start at 0, never "
                             "decrease and stay within sequence_count %lld)",
                             name, (long long)k, (long long)v, (long long)out->n_sequences);
        prev = v;
    }
    if (prev != out->n_sequences)
        return pl_errorf(PL_ERR_FORMAT,
                         "%s: field document_indices: last entry %lld != sequence_count %lld",
                         name, (long long)prev, (long long)out->n_sequences);
    return PL_OK;
}

/* "PREFIX" + ext, pl_malloc'd. */
static char *path_with(const char *prefix, const char *ext)
{
    size_t n = strlen(prefix) + strlen(ext) + 1;
    char *p = pl_malloc(n);
    if (p)
        snprintf(p, n, "%s%s", prefix, ext);
    return p;
}

pl_status pl_indexed_open(pl_indexed *ds, const char *prefix)
{
    pl_status st = PL_OK;
    memset(ds, 0, sizeof *ds);
    char *idx_path = path_with(prefix, ".idx"), *bin_path = path_with(prefix, ".bin");
    ds->prefix = pl_strdup(prefix);
    if (!idx_path || !bin_path || !ds->prefix) {
        st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory", prefix);
        goto fail;
    }
    PL_TRY(pl_mmap_open(&ds->idx_map, idx_path));
    PL_TRY(pl_mmap_open(&ds->bin_map, bin_path));
    PL_TRY(pl_indexed_parse(ds->idx_map.data, ds->idx_map.size, UINT64_MAX, idx_path, &ds->h));
    if (ds->h.data_bytes > ds->bin_map.size) {
        st = pl_errorf(PL_ERR_FORMAT,
                       "%s: %zu bytes, but %s indexes %llu bytes of tokens (truncated .bin?)",
                       bin_path, ds->bin_map.size, idx_path,
                       (unsigned long long)ds->h.data_bytes);
        goto fail;
    }
    pl_free(idx_path);
    pl_free(bin_path);
    return PL_OK;
fail:
    pl_free(idx_path);
    pl_free(bin_path);
    pl_indexed_close(ds);
    return st;
}

void pl_indexed_close(pl_indexed *ds)
{
    pl_mmap_close(&ds->idx_map);
    pl_mmap_close(&ds->bin_map);
    pl_free(ds->prefix);
    memset(ds, 0, sizeof *ds);
}

/* Element i of a little-endian array of dtype, widened to int64. */
static int64_t load_elem(const uint8_t *p, int dtype)
{
    switch (dtype) {
    case PL_DT_UINT8: return p[0];
    case PL_DT_INT8: return (int8_t)p[0];
    case PL_DT_INT16: return (int16_t)(uint16_t)(p[0] | p[1] << 8);
    case PL_DT_UINT16: return (uint16_t)(p[0] | p[1] << 8);
    case PL_DT_INT32:
        return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                         (uint32_t)p[3] << 24);
    case PL_DT_INT64: return (int64_t)get_u64(p);
    }
    return INT64_MIN;
}

pl_status pl_indexed_read(const pl_indexed *ds, int64_t i, int64_t offset, int64_t n, int32_t *out)
{
    const pl_indexed_header *h = &ds->h;
    if (i < 0 || i >= h->n_sequences)
        return pl_errorf(PL_ERR_ARG, "%s: sequence %lld out of range [0, %lld)", ds->prefix,
                         (long long)i, (long long)h->n_sequences);
    int32_t len = pl_indexed_length(h, i);
    if (offset < 0 || n < 0 || offset > len || n > len - offset)
        return pl_errorf(PL_ERR_ARG, "%s: %lld tokens from offset %lld of sequence %lld (length %d)",
                         ds->prefix, (long long)n, (long long)offset, (long long)i, len);
    if (h->dtype == PL_DT_FLOAT32 || h->dtype == PL_DT_FLOAT64)
        return pl_errorf(PL_ERR_FORMAT, "%s.bin: dtype %s holds no token ids", ds->prefix,
                         pl_indexed_dtype_name(h->dtype));
    if (n == 0)
        return PL_OK; /* an empty .bin maps to NULL */
    const uint8_t *p = ds->bin_map.data + pl_indexed_pointer(h, i) + offset * h->item_size;
    for (int64_t k = 0; k < n; k++) {
        int64_t v = load_elem(p + k * h->item_size, h->dtype);
        if (v < INT32_MIN || v > INT32_MAX)
            return pl_errorf(PL_ERR_FORMAT, "%s.bin: token %lld of sequence %lld = %lld exceeds int32",
                             ds->prefix, (long long)(offset + k), (long long)i, (long long)v);
        out[k] = (int32_t)v;
    }
    return PL_OK;
}

/* ---- builder ------------------------------------------------------------ */

struct pl_indexed_builder {
    char *prefix;
    int dtype, item_size;
    int failed; /* a call failed half-way: only abort() is valid now */
    pl_wfile bin;
    pl_ids lengths;
    pl_i64s docs;   /* document_indices, starts with 0 */
    uint64_t bin_bytes;
    uint8_t buf[8192];
};

pl_status pl_indexed_builder_open(pl_indexed_builder **out, const char *prefix, int dtype)
{
    pl_status st = PL_OK;
    char *bin_path = NULL;
    *out = NULL;
    if (!pl_indexed_dtype_size(dtype) || dtype == PL_DT_FLOAT32 || dtype == PL_DT_FLOAT64)
        return pl_errorf(PL_ERR_ARG, "%s: dtype code %d cannot hold token ids", prefix, dtype);
    pl_indexed_builder *b = pl_calloc(1, sizeof *b);
    if (!b)
        return pl_errorf(PL_ERR_NOMEM, "%s: out of memory", prefix);
    b->dtype = dtype;
    b->item_size = pl_indexed_dtype_size(dtype);
    b->prefix = pl_strdup(prefix);
    bin_path = path_with(prefix, ".bin");
    if (!b->prefix || !bin_path) {
        st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory", prefix);
        goto fail;
    }
    PL_TRY(pl_i64s_push(&b->docs, 0));
    PL_TRY(pl_wfile_open(&b->bin, bin_path));
    pl_free(bin_path);
    *out = b;
    return PL_OK;
fail:
    pl_free(bin_path);
    pl_indexed_builder_abort(b);
    return st;
}

static int fits(int64_t v, int dtype)
{
    switch (dtype) {
    case PL_DT_UINT8: return v >= 0 && v <= UINT8_MAX;
    case PL_DT_INT8: return v >= INT8_MIN && v <= INT8_MAX;
    case PL_DT_INT16: return v >= INT16_MIN && v <= INT16_MAX;
    case PL_DT_UINT16: return v >= 0 && v <= UINT16_MAX;
    default: return 1;
    }
}

/* A rejected item (bad length, token out of range, no memory for its length)
 * leaves the builder as it was; a failed write poisons it. */
pl_status pl_indexed_builder_add_item(pl_indexed_builder *b, const int32_t *tokens, int64_t n)
{
    if (n < 0 || n > INT32_MAX)
        return pl_errorf(PL_ERR_ARG, "%s: item of %lld tokens does not fit the int32 length field",
                         b->prefix, (long long)n);
    for (int64_t k = 0; k < n; k++)
        if (!fits(tokens[k], b->dtype))
            return pl_errorf(PL_ERR_ARG, "%s: token id %lld (position %lld) does not fit dtype %s",
                             b->prefix, (long long)tokens[k], (long long)k,
                             pl_indexed_dtype_name(b->dtype));
    pl_status st = pl_ids_reserve(&b->lengths, b->lengths.n + 1);
    if (st)
        return st;
    int sz = b->item_size;
    int64_t per = (int64_t)(sizeof b->buf) / sz;
    for (int64_t k0 = 0; k0 < n; k0 += per) {
        int64_t m = n - k0 < per ? n - k0 : per;
        for (int64_t k = 0; k < m; k++) {
            uint64_t v = (uint64_t)(int64_t)tokens[k0 + k];
            uint8_t *p = b->buf + k * sz;
            for (int byte = 0; byte < sz; byte++)
                p[byte] = (uint8_t)(v >> (8 * byte));
        }
        st = pl_wfile_write(&b->bin, b->buf, (size_t)(m * sz));
        if (st) {
            b->failed = 1;
            return st;
        }
    }
    b->bin_bytes += (uint64_t)n * (uint64_t)sz;
    b->lengths.data[b->lengths.n++] = (int32_t)n;
    return PL_OK;
}

pl_status pl_indexed_builder_end_document(pl_indexed_builder *b)
{
    return pl_i64s_push(&b->docs, b->lengths.n);
}

pl_status pl_indexed_builder_add_index(pl_indexed_builder *b, const char *prefix)
{
    pl_indexed other;
    pl_status st = pl_indexed_open(&other, prefix);
    if (st)
        return st;
    if (other.h.dtype != b->dtype) {
        st = pl_errorf(PL_ERR_ARG, "%s: dtype %s differs from the merged dataset's %s", prefix,
                       pl_indexed_dtype_name(other.h.dtype), pl_indexed_dtype_name(b->dtype));
        goto fail;
    }
    int64_t base = b->lengths.n;
    b->failed = 1; /* until the whole dataset is in */
    for (int64_t i = 0; i < other.h.n_sequences; i++)
        PL_TRY(pl_ids_push(&b->lengths, pl_indexed_length(&other.h, i)));
    for (int64_t k = 1; k <= other.h.n_documents; k++)
        PL_TRY(pl_i64s_push(&b->docs, base + pl_indexed_doc(&other.h, k)));
    /* The items' bytes, in index order (contiguous in files Megatron writes). */
    for (int64_t i = 0; i < other.h.n_sequences; i++) {
        size_t nb = (size_t)pl_indexed_length(&other.h, i) * (size_t)other.h.item_size;
        if (nb == 0)
            continue; /* an empty .bin maps to NULL */
        PL_TRY(pl_wfile_write(&b->bin, other.bin_map.data + pl_indexed_pointer(&other.h, i), nb));
        b->bin_bytes += nb;
    }
    b->failed = 0;
    pl_indexed_close(&other);
    return PL_OK;
fail:
    pl_indexed_close(&other);
    return st;
}

pl_status pl_indexed_builder_finish(pl_indexed_builder *b)
{
    pl_status st = PL_OK;
    pl_wfile idx = {0};
    char *idx_path = NULL, *bin_path = NULL;
    if (b->failed) {
        st = pl_errorf(PL_ERR_INTERNAL, "%s: finish() after a failed add; nothing written",
                       b->prefix);
        goto fail;
    }
    if (b->docs.data[b->docs.n - 1] != b->lengths.n) {
        /* Megatron would write it, and its own reader would then refuse the file. */
        st = pl_errorf(PL_ERR_ARG,
                       "%s: %lld items after the last end_document(); nothing written",
                       b->prefix, (long long)(b->lengths.n - b->docs.data[b->docs.n - 1]));
        goto fail;
    }
    idx_path = path_with(b->prefix, ".idx");
    bin_path = pl_strdup(b->bin.path);
    if (!idx_path || !bin_path) {
        st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory", b->prefix);
        goto fail;
    }
    uint8_t head[HEADER_SIZE];
    memcpy(head, MAGIC, sizeof MAGIC);
    put_u64(head + 9, 1);
    head[17] = (uint8_t)b->dtype;
    put_u64(head + 18, (uint64_t)b->lengths.n);
    put_u64(head + 26, (uint64_t)b->docs.n);
    PL_TRY(pl_wfile_open(&idx, idx_path));
    PL_TRY(pl_wfile_write(&idx, head, sizeof head));
    uint8_t chunk[4096];
    size_t used = 0;
    for (int64_t i = 0; i < b->lengths.n; i++) { /* int32 lengths, little-endian */
        uint32_t v = (uint32_t)b->lengths.data[i];
        for (int k = 0; k < 4; k++)
            chunk[used++] = (uint8_t)(v >> (8 * k));
        if (used == sizeof chunk) {
            PL_TRY(pl_wfile_write(&idx, chunk, used));
            used = 0;
        }
    }
    uint64_t ptr = 0;
    for (int64_t i = 0; i < b->lengths.n; i++) { /* exclusive prefix sum of byte sizes */
        if (used + 8 > sizeof chunk) {
            PL_TRY(pl_wfile_write(&idx, chunk, used));
            used = 0;
        }
        put_u64(chunk + used, ptr);
        used += 8;
        ptr += (uint64_t)b->lengths.data[i] * (uint64_t)b->item_size;
    }
    for (int64_t k = 0; k < b->docs.n; k++) {
        if (used + 8 > sizeof chunk) {
            PL_TRY(pl_wfile_write(&idx, chunk, used));
            used = 0;
        }
        put_u64(chunk + used, (uint64_t)b->docs.data[k]);
        used += 8;
    }
    PL_TRY(pl_wfile_write(&idx, chunk, used));
    /* .bin first: a reader finding the new .idx always finds its .bin. */
    PL_TRY(pl_wfile_commit(&b->bin));
    st = pl_wfile_commit(&idx);
    if (st) {
        unlink(bin_path); /* no .bin under the final name without its .idx */
        goto fail;
    }
    pl_free(idx_path);
    pl_free(bin_path);
    pl_indexed_builder_abort(b); /* releases the builder; both files are committed */
    return PL_OK;
fail:
    pl_wfile_abort(&idx);
    pl_free(idx_path);
    pl_free(bin_path);
    pl_indexed_builder_abort(b);
    return st;
}

void pl_indexed_builder_abort(pl_indexed_builder *b)
{
    if (!b)
        return;
    pl_wfile_abort(&b->bin);
    pl_ids_free(&b->lengths);
    pl_i64s_free(&b->docs);
    pl_free(b->prefix);
    pl_free(b);
}
