/* Tokenizer registry: Megatron's --tokenizer-type names to constructors. */
#include "data/tokenizer/tokenizer.h"

#include <string.h>

const char pl_tokenizer_types[] =
    "GPT2BPETokenizer|BertWordPieceLowerCase|BertWordPieceCase|SmilesTokenizer";

pl_status pl_tokenizer_open(pl_tokenizer **out, const char *type, const char *vocab_file,
                            const char *merge_file)
{
    *out = NULL;
    if (!type)
        return pl_errorf(PL_ERR_ARG, "--tokenizer-type is required (one of %s)", pl_tokenizer_types);
    if (!vocab_file)
        return pl_errorf(PL_ERR_ARG, "--vocab-file is required for --tokenizer-type %s", type);
    if (strcmp(type, "GPT2BPETokenizer") == 0) {
        if (!merge_file)
            return pl_errorf(PL_ERR_ARG, "--merge-file is required for --tokenizer-type %s", type);
        return pl_gpt2_tokenizer_open(out, vocab_file, merge_file);
    }
    if (strcmp(type, "BertWordPieceLowerCase") == 0)
        return pl_bert_tokenizer_open(out, vocab_file, 1);
    if (strcmp(type, "BertWordPieceCase") == 0)
        return pl_bert_tokenizer_open(out, vocab_file, 0);
    if (strcmp(type, "SmilesTokenizer") == 0)
        return pl_smiles_tokenizer_open(out, vocab_file);
    return pl_errorf(PL_ERR_ARG, "--tokenizer-type: unknown tokenizer '%s' (expected one of %s)",
                     type, pl_tokenizer_types);
}

void pl_tokenizer_free(pl_tokenizer *t)
{
    if (t)
        t->ops->free(t);
}

pl_status pl_tokenizer_encode(pl_tokenizer *t, const char *text, size_t len, pl_ids *out)
{
    return t->ops->encode(t, text, len, out);
}

pl_status pl_tokenizer_decode(const pl_tokenizer *t, const int32_t *ids, int64_t n, pl_bytes *out)
{
    return t->ops->decode(t, ids, n, out);
}

int32_t pl_tokenizer_token_id(const pl_tokenizer *t, const char *tok)
{
    return t->ops->token_id(t, tok, strlen(tok));
}

pl_status pl_tokenizer_fork(const pl_tokenizer *t, pl_tokenizer **out)
{
    return t->ops->fork(t, out);
}
