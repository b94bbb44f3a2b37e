/* libFuzzer target: pl_indexed_parse on arbitrary bytes, then, when the index
 * is accepted, every sequence read and every document walked.
 *
 * Input layout: u16 little-endian n, then n bytes of .idx (clamped to what is
 * there), then the rest as the .bin. The parser must reject or accept without
 * reading out of bounds; once it accepts with the .bin's size, every read
 * must stay inside the .bin (ASan checks) and succeed.
 * Seeds (fuzz/seeds/fuzz_idx/) are small valid datasets in this layout. */
#include "data/indexed.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t n = (size_t)data[0] | (size_t)data[1] << 8;
    if (n > size - 2)
        n = size - 2;
    const uint8_t *idx = data + 2, *bin = data + 2 + n;
    size_t bin_size = size - 2 - n;

    pl_indexed_header h;
    /* Without a .bin size, only the index itself is checked. */
    (void)pl_indexed_parse(idx, n, UINT64_MAX, "fuzz.idx", &h);
    if (pl_indexed_parse(idx, n, bin_size, "fuzz.idx", &h) != PL_OK)
        return 0;
    if (h.data_bytes > bin_size)
        abort(); /* accepted an index that runs past the .bin */

    pl_indexed ds;
    memset(&ds, 0, sizeof ds);
    ds.bin_map.data = bin;
    ds.bin_map.size = bin_size;
    ds.h = h;
    ds.prefix = (char *)"fuzz";
    int32_t buf[256];
    int64_t total = 0;
    for (int64_t i = 0; i < h.n_sequences; i++) {
        int64_t len = pl_indexed_length(&h, i);
        total += len;
        for (int64_t off = 0; off < len; off += 256) {
            int64_t m = len - off < 256 ? len - off : 256;
            pl_status st = pl_indexed_read(&ds, i, off, m, buf);
            /* Float datasets hold no ids; int64 values beyond int32 are refused. */
            if (st != PL_OK && h.dtype != PL_DT_FLOAT32 && h.dtype != PL_DT_FLOAT64 &&
                h.dtype != PL_DT_INT64)
                abort();
        }
    }
    if ((uint64_t)total * (uint64_t)h.item_size != h.data_bytes)
        abort();
    for (int64_t k = 0; k < h.n_documents; k++)
        if (pl_indexed_doc(&h, k) > pl_indexed_doc(&h, k + 1))
            abort();
    return 0;
}
