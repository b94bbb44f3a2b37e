/* cJSON through the allocation hook.
 *
 * pl_json_init() routes cJSON's allocations through pl_malloc/pl_free, once
 * per process; every module calls it before its first cJSON call, so trees
 * are always allocated and freed by the same functions and fault injection
 * reaches JSON parsing. pl_json_oom_take() tells whether an allocation failed
 * on this thread since the last call (cJSON returns NULL for both bad input
 * and exhausted memory). */
#ifndef PL_BASE_JSON_H
#define PL_BASE_JSON_H

void pl_json_init(void);
int pl_json_oom_take(void);

#endif
