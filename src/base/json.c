/* cJSON allocation hooks (installed once, process-wide). */
#include "base/json.h"

#include "base/alloc.h"

#include <cjson/cJSON.h>
#include <pthread.h>

static _Thread_local int oom;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void *json_malloc(size_t size)
{
    void *p = pl_malloc(size);
    if (!p)
        oom = 1;
    return p;
}

static void install(void)
{
    cJSON_Hooks hooks = {json_malloc, pl_free};
    cJSON_InitHooks(&hooks);
}

void pl_json_init(void) { pthread_once(&once, install); }

int pl_json_oom_take(void)
{
    int v = oom;
    oom = 0;
    return v;
}
