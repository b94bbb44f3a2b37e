#include "data/tokenizer/vocab_json.h"

#include "base/alloc.h"

pl_status pl_vocab_json_by_id(const cJSON *root, const char *path, const cJSON ***by_id,
                              int32_t *n_out)
{
    *by_id = NULL;
    *n_out = 0;
    int64_t n = cJSON_IsObject(root) ? cJSON_GetArraySize(root) : 0;
    if (n <= 0 || n > INT32_MAX)
        return pl_errorf(PL_ERR_FORMAT, "%s: expected an object of token -> id, got %lld entries",
                         path, (long long)n);
    const cJSON **order = pl_calloc((size_t)n, sizeof *order);
    if (!order)
        return pl_errorf(PL_ERR_NOMEM, "%s: out of memory for %lld tokens", path, (long long)n);
    const cJSON *it;
    cJSON_ArrayForEach(it, root) {
        double d = it->valuedouble;
        if (!cJSON_IsNumber(it) || !(d >= 0 && d < (double)n) || d != (double)(int32_t)d) {
            pl_status st = pl_errorf(PL_ERR_FORMAT,
                                     "%s: token \"%.200s\": id must be an integer in 0..%lld",
                                     path, it->string, (long long)n - 1);
            pl_free(order);
            return st;
        }
        int32_t id = (int32_t)d;
        if (order[id]) {
            pl_status st = pl_errorf(PL_ERR_FORMAT,
                                     "%s: tokens \"%.200s\" and \"%.200s\" both have id %d", path,
                                     order[id]->string, it->string, id);
            pl_free(order);
            return st;
        }
        order[id] = it;
    }
    *by_id = order;
    *n_out = (int32_t)n;
    return PL_OK;
}
