/* `plait train --config FILE`: a JSON object of flag -> value (Megatron's flag names, `-`
 * or `_`), applied to the flags the command line did not give. */
#include "train/args.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/json.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Applies the preset's entries to flags not given on the command line. */
pl_status pl_train_args_apply_preset(pl_train_args *a, unsigned char *cli_given)
{
    char *text = NULL;
    pl_status st = pl_file_read_all(a->config, &text, NULL);
    if (st)
        return pl_error_wrap(st, "--config");
    pl_json_init();
    pl_json_oom_take();
    cJSON *root = cJSON_Parse(text);
    pl_free(text);
    if (!root && pl_json_oom_take())
        return pl_errorf(PL_ERR_NOMEM, "--config %s: out of memory parsing it", a->config);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return pl_errorf(PL_ERR_FORMAT, "--config %s: not a JSON object", a->config);
    }
    a->preset = root;
    for (cJSON *e = root->child; e; e = e->next) {
        char name[96];
        snprintf(name, sizeof name, "--%s", e->string);
        for (char *c = name + 2; *c; c++)
            if (*c == '_')
                *c = '-';
        int idx = pl_options_index(&pl_train_cmd, name);
        if (idx < 0 || strcmp(name, "--config") == 0)
            return pl_errorf(PL_ERR_ARG, "--config %s: unknown key \"%s\" (no flag %s)", a->config,
                             e->string, name);
        if (cli_given[idx])
            continue; /* the command line wins */
        const char *vals[64];
        int n = 0;
        if (cJSON_IsBool(e)) {
            if (cJSON_IsFalse(e))
                continue;
        } else if (cJSON_IsNumber(e) || cJSON_IsString(e)) {
            if (cJSON_IsNumber(e)) { /* re-print as text for the one parser */
                char buf[64];
                if (e->valuedouble == (double)(int64_t)e->valuedouble && fabs(e->valuedouble) < 9e15)
                    snprintf(buf, sizeof buf, "%lld", (long long)e->valuedouble);
                else
                    snprintf(buf, sizeof buf, "%.17g", e->valuedouble);
                cJSON *s = cJSON_CreateString(buf);
                if (!s)
                    return pl_errorf(PL_ERR_NOMEM, "out of memory");
                cJSON_ReplaceItemViaPointer(root, e, s);
                e = s;
            }
            vals[n++] = e->valuestring;
        } else if (cJSON_IsArray(e)) {
            for (cJSON *x = e->child; x; x = x->next) {
                if (!cJSON_IsString(x) || n == 64)
                    return pl_errorf(PL_ERR_ARG, "--config %s: \"%s\" must be a list of strings",
                                     a->config, e->string);
                vals[n++] = x->valuestring;
            }
        } else {
            return pl_errorf(PL_ERR_ARG, "--config %s: \"%s\" has an unsupported value type",
                             a->config, e->string);
        }
        st = pl_options_set(&pl_train_cmd, a, name, vals, n, a->given);
        if (st)
            return pl_error_wrap(st, "--config %s", a->config);
    }
    return PL_OK;
}
