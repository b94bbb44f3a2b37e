/* libFuzzer target: base/zread on arbitrary bytes, read as a plain file and as
 * .gz, .xz and .zst (by name; the content picks the decoder). Invariants: every
 * read returns PL_OK or an error with a message, never crashes, and a stream
 * that reads to its end gives at most 64 MiB (then the target stops reading). */
#include "base/zread.h"

#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const names[] = {"fuzz.jsonl", "fuzz.jsonl.gz", "fuzz.jsonl.xz",
                                        "fuzz.jsonl.zst"};
    static char buf[1 << 16];
    for (size_t k = 0; k < 4; k++) {
        FILE *fp = fmemopen((void *)data, size ? size : 1, "rb");
        if (!fp)
            return 0;
        pl_zread *z = NULL;
        pl_status st = size ? pl_zread_open(&z, fp, names[k]) : PL_ERR_FORMAT;
        size_t total = 0;
        while (st == PL_OK && total < (64u << 20)) {
            size_t got = 0;
            st = pl_zread_read(z, buf, sizeof buf, &got);
            if (got == 0)
                break;
            total += got;
        }
        if (st != PL_OK && size && !*pl_error_msg()) {
            fprintf(stderr, "%s: an error without a message\n", names[k]);
            abort();
        }
        pl_zread_close(z);
        fclose(fp);
    }
    return 0;
}
