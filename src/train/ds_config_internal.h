/* The DeepSpeed config reader's shared parts (train/ds_config.c: values as DeepSpeed
 * reads them, batch, precision, ZeRO and the top level; train/ds_sched.c: the
 * optimizer and scheduler blocks). Not a public interface. */
#ifndef PL_TRAIN_DS_CONFIG_INTERNAL_H
#define PL_TRAIN_DS_CONFIG_INTERNAL_H

#include "train/args.h"

#include <cjson/cJSON.h>

typedef struct ds_ctx {
    pl_train_args *a;
    const char *cfg;
    int nvals;
    int lr_from_optimizer; /* --lr was set by optimizer.params.lr */
} ds_ctx;

/* What happens when a key's flag was also given with another value. */
typedef enum {
    DS_CONFLICT_ERROR, /* an error naming both */
    DS_FLAG_WINS,      /* the flag's value, with a note (Megatron's own settings) */
    DS_JSON_WINS,      /* the key's value, with a note (--deepspeed: the engine reads the JSON) */
} ds_policy;

/* Sets flag to value (from key of the config) as the policy says; pl_ds_set is
 * DS_CONFLICT_ERROR. */
pl_status pl_ds_set_policy(ds_ctx *c, const char *flag, double value, const char *key,
                           ds_policy policy);
pl_status pl_ds_set(ds_ctx *c, const char *flag, double value, const char *key);
/* One note "key: why". */
pl_status pl_ds_note(ds_ctx *c, const char *key, const char *why);
/* A switch read by get_scalar_param (Python truth; a note when not a JSON boolean). */
pl_status pl_ds_switch(ds_ctx *c, const cJSON *obj, const char *key, const char *path, int *on);
/* A JSON number DeepSpeed uses in arithmetic; *present 0 when absent or null. */
pl_status pl_ds_number(ds_ctx *c, const cJSON *obj, const char *key, const char *path, double *v,
                       int *present);
/* A positive integer key (1..2^31-1), left alone when absent. */
pl_status pl_ds_count(ds_ctx *c, const cJSON *obj, const char *key, const char *path,
                      int64_t *out);

/* The "optimizer" and "scheduler" blocks (ds_sched.c). */
pl_status pl_ds_optimizer(ds_ctx *c, const cJSON *opt);
pl_status pl_ds_scheduler(ds_ctx *c, const cJSON *sch);

#endif
