/* The GEMM peak MFU is taken against: stable, so that MFU never reads above 100%.
 *
 * A peak measured afresh at each start reads low on a loaded machine (and MFU
 * high: 110% was seen). Here the peak is the best 1024^3 GEMM rate ever measured
 * on this CPU model at this thread count per rank and precision, kept in a cache
 * file (JSON, key "CPU model | N threads | precision", value FLOP/s):
 * $PLAIT_PEAK_CACHE, else $XDG_CACHE_HOME/plait/gemm_peak.json, else
 * ~/.cache/plait/gemm_peak.json. Rank 0 reads it at start, takes the larger of it
 * and this start's measurement, and writes the larger back. If a window's model
 * FLOP/s per rank ever exceeds the peak, the peak was wrong: it is raised to that
 * rate (and cached) with a warning, and MFU reads 100%. A cache that cannot be
 * read or written costs a warning, never the run. */
#include "train/trainer_internal.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/json.h"
#include "base/log.h"

#include <cjson/cJSON.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void cpu_model(char *out, size_t n)
{
    snprintf(out, n, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0)
            continue;
        const char *v = strchr(line, ':');
        if (v) {
            v++;
            while (*v == ' ' || *v == '\t')
                v++;
            snprintf(out, n, "%.*s", (int)strcspn(v, "\n"), v);
        }
        break;
    }
    fclose(f);
}

static int cache_path(char *out, size_t n)
{
    const char *env = getenv("PLAIT_PEAK_CACHE"), *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (env && *env)
        return snprintf(out, n, "%s", env) < (int)n;
    if (xdg && *xdg)
        return snprintf(out, n, "%s/plait/gemm_peak.json", xdg) < (int)n;
    if (home && *home)
        return snprintf(out, n, "%s/.cache/plait/gemm_peak.json", home) < (int)n;
    return 0;
}

/* The cached value of the key into *peak, 0 when none (no file, or one that
 * says nothing usable: a cache). Running out of memory is an error. */
static pl_status cache_read(const char *path, const char *key, double *peak)
{
    char *text = NULL;
    size_t len;
    *peak = 0;
    pl_json_init();
    pl_status st = pl_file_read_all(path, &text, &len);
    if (st == PL_ERR_NOMEM)
        return st;
    if (st) {
        pl_error_clear();
        return PL_OK;
    }
    cJSON *root = cJSON_Parse(text);
    pl_free(text);
    if (!root && pl_json_oom_take())
        return pl_errorf(PL_ERR_NOMEM, "out of memory reading the GEMM peak cache %s", path);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    *peak = cJSON_IsNumber(v) && v->valuedouble > 0 ? v->valuedouble : 0;
    cJSON_Delete(root);
    return PL_OK;
}

/* Sets key to peak in the cache file, keeping its other keys. A file that
 * cannot be written is a warning (a cache); running out of memory an error. */
static pl_status cache_write(const char *path, const char *key, double peak)
{
    char *text = NULL, dir[1024];
    size_t len;
    cJSON *root = NULL;
    pl_json_init();
    pl_status st = pl_file_read_all(path, &text, &len);
    if (st == PL_ERR_NOMEM)
        return st;
    if (!st)
        root = cJSON_Parse(text);
    else
        pl_error_clear();
    pl_free(text);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        root = cJSON_CreateObject();
    }
    cJSON_DeleteItemFromObjectCaseSensitive(root, key);
    char *out = NULL;
    if (root && cJSON_AddNumberToObject(root, key, peak))
        out = cJSON_Print(root);
    cJSON_Delete(root);
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    if (!out)
        return pl_errorf(PL_ERR_NOMEM, "out of memory writing the GEMM peak cache %s", path);
    if (slash && dir[0])
        st = pl_mkdirs(dir);
    if (!st)
        st = pl_file_write_atomic(path, out, strlen(out));
    cJSON_free(out); /* cJSON's allocator: the hooks of base/json.h */
    if (st == PL_ERR_NOMEM)
        return st;
    if (st) {
        pl_log_warn("the GEMM peak cache %s could not be written (%s); MFU uses the peak of this "
                    "run only", path, pl_error_msg());
        pl_error_clear();
    }
    return PL_OK;
}

/* The test suites launch plait hundreds of times, each a few iterations of a tiny model:
 * the start's >= 0.3 s of 1024^3 GEMMs per rank (over a second with 8 ranks on 2 cores)
 * was much of each launch. PLAIT_TEST_GEMM_PEAK=FLOPS takes its place (the cache logic
 * is unchanged); tests/scripts/progress.sh, which checks the measured peak, unsets it. */
int pl_train_peak_preset(double *measured)
{
    const char *v = getenv("PLAIT_TEST_GEMM_PEAK");
    char *end;
    if (!v || !*v)
        return 0;
    double x = strtod(v, &end);
    if (*end || !(x > 0))
        return 0;
    *measured = x;
    return 1;
}

pl_status pl_train_peak_init(pl_trainer *t, double measured)
{
    t->peak.measured = measured;
    t->gemm_peak = measured;
    if (!pl_train_is_root(t))
        return PL_OK;
    char cpu[160];
    cpu_model(cpu, sizeof cpu);
    snprintf(t->peak.key, sizeof t->peak.key, "%s | %d threads | %s", cpu, omp_get_max_threads(),
             pl_gemm_precision_name(pl_gemm_get_precision(t->gemm)));
    if (!cache_path(t->peak.path, sizeof t->peak.path)) {
        t->peak.path[0] = 0;
        return PL_OK;
    }
    const char *fault = getenv("PLAIT_FAULT_PEAK"); /* tests: a peak that is too low */
    double cached;
    pl_status st = cache_read(t->peak.path, t->peak.key, &cached);
    if (st || fault) {
        t->gemm_peak = fault ? atof(fault) : t->gemm_peak;
        return st;
    }
    if (cached > t->gemm_peak)
        t->gemm_peak = cached;
    else
        st = cache_write(t->peak.path, t->peak.key, t->gemm_peak);
    return st;
}

double pl_train_peak_mfu(pl_trainer *t, double flops_per_rank)
{
    if (!(t->gemm_peak > 0) || !(flops_per_rank > 0))
        return 0;
    if (flops_per_rank > t->gemm_peak && pl_train_is_root(t)) {
        pl_log_warn("model FLOP/s per rank %.1f GFLOP/s exceeds the GEMM peak %.1f GFLOP/s, which "
                    "was therefore wrong: the peak is now %.1f GFLOP/s%s%s", flops_per_rank / 1e9,
                    t->gemm_peak / 1e9, flops_per_rank / 1e9, t->peak.path[0] ? ", cached in " : "",
                    t->peak.path);
        t->gemm_peak = flops_per_rank;
        if (t->peak.path[0] && cache_write(t->peak.path, t->peak.key, t->gemm_peak)) {
            /* out of memory mid-run: the report goes on with the raised peak */
            pl_log_warn("the GEMM peak cache %s was not updated: %s", t->peak.path,
                        pl_error_msg());
            pl_error_clear();
        }
    }
    return flops_per_rank / t->gemm_peak;
}
