/* libFuzzer target: DeepSpeed hostfiles and --include/--exclude strings
 * (parallel/launch_hosts.c) on arbitrary bytes. The input is hostfile text, then
 * optionally a NUL and a filter string (even first byte: --include, odd: --exclude).
 * Invariants: parsing and filtering return PL_OK or an error with a message, never
 * crash; after success every host has 1..nslots ranks and a non-empty name. */
#include "parallel/launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    size_t n = strlen(text);
    const char *filter = n < size ? text + n + 1 : NULL;
    pl_launch_hosts h;
    if (pl_launch_hosts_parse(text, "fuzz", &h) == PL_OK) {
        int inc = filter && (filter[0] & 1) == 0;
        pl_status st = pl_launch_hosts_filter(&h, inc ? filter : NULL, inc ? NULL : filter, "fuzz");
        if (st != PL_OK && !*pl_error_msg()) {
            fprintf(stderr, "an error without a message\n");
            abort();
        }
        for (int i = 0; st == PL_OK && i < h.n; i++)
            if (!h.h[i].name[0] || h.h[i].nranks < 1 || h.h[i].nranks > h.h[i].nslots) {
                fprintf(stderr, "host %d: '%s' %d of %d slots\n", i, h.h[i].name, h.h[i].nranks,
                        h.h[i].nslots);
                abort();
            }
        pl_launch_hosts_free(&h);
    }
    free(text);
    return 0;
}
