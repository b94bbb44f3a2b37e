/* Vocabulary JSON objects (token -> id): GPT-2's encoder.json and the vocabulary of
 * PretokenizedTokenizer. */
#ifndef PL_DATA_TOKENIZER_VOCAB_JSON_H
#define PL_DATA_TOKENIZER_VOCAB_JSON_H

#include "base/status.h"

#include <cjson/cJSON.h>
#include <stdint.h>

/* The entries of root in id order: on success *by_id (free with pl_free) holds n entries,
 * (*by_id)[id] the one whose value is id. The ids must be the integers 0..n-1 each once,
 * n being the object's size (1..INT32_MAX); errors name path and the token. Spellings are
 * not checked here. */
pl_status pl_vocab_json_by_id(const cJSON *root, const char *path, const cJSON ***by_id,
                              int32_t *n);

#endif
