/* Tokenizer registry: Megatron's --tokenizer-type names to constructors, and the
 * files each one needs. */
#include "data/tokenizer/tokenizer.h"

#include "data/tokenizer/bert_wordpiece.h"

#include <string.h>

const char pl_tokenizer_types[] =
    "GPT2BPETokenizer|BertWordPieceLowerCase|BertWordPieceCase|SmilesTokenizer|"
    "HuggingFaceTokenizer|SentencePieceTokenizer|GPTSentencePieceTokenizer|Llama2Tokenizer|"
    "PretokenizedTokenizer";

enum { NEED_VOCAB = 1, NEED_MERGES = 2, NEED_MODEL = 4, TAKES_EXTRA_IDS = 8 };

typedef pl_status (*open_fn)(pl_tokenizer **out, const pl_tokenizer_spec *s);

static pl_status open_gpt2(pl_tokenizer **out, const pl_tokenizer_spec *s)
{
    return pl_gpt2_tokenizer_open(out, s->vocab_file, s->merge_file);
}

static pl_status open_bert_lower(pl_tokenizer **out, const pl_tokenizer_spec *s)
{
    return pl_bert_tokenizer_open_ex(out, s->vocab_file, 1, s->vocab_extra_ids);
}

static pl_status open_bert_cased(pl_tokenizer **out, const pl_tokenizer_spec *s)
{
    return pl_bert_tokenizer_open_ex(out, s->vocab_file, 0, s->vocab_extra_ids);
}

static pl_status open_smiles(pl_tokenizer **out, const pl_tokenizer_spec *s)
{
    return pl_smiles_tokenizer_open(out, s->vocab_file);
}

static pl_status open_hf(pl_tokenizer **out, const pl_tokenizer_spec *s)
{
    return pl_hf_tokenizer_open(out, s->tokenizer_model);
}

static pl_status open_sp(pl_tokenizer **out, const pl_tokenizer_spec *s)
{
    return pl_sp_tokenizer_open(out, s->type, s->tokenizer_model, s->legacy, s->vocab_extra_ids);
}

static pl_status open_pretok(pl_tokenizer **out, const pl_tokenizer_spec *s)
{
    return pl_pretok_tokenizer_open(out, s->vocab_file);
}

static const struct {
    const char *type;
    unsigned needs;
    open_fn open;
} registry[] = {
    {"GPT2BPETokenizer", NEED_VOCAB | NEED_MERGES, open_gpt2},
    {"BertWordPieceLowerCase", NEED_VOCAB | TAKES_EXTRA_IDS, open_bert_lower},
    {"BertWordPieceCase", NEED_VOCAB | TAKES_EXTRA_IDS, open_bert_cased},
    {"SmilesTokenizer", NEED_VOCAB, open_smiles},
    {"HuggingFaceTokenizer", NEED_MODEL, open_hf},
    {"SentencePieceTokenizer", NEED_MODEL | TAKES_EXTRA_IDS, open_sp},
    {"GPTSentencePieceTokenizer", NEED_MODEL, open_sp},
    {"Llama2Tokenizer", NEED_MODEL, open_sp},
    {"PretokenizedTokenizer", NEED_VOCAB, open_pretok},
};

pl_status pl_tokenizer_open(pl_tokenizer **out, const pl_tokenizer_spec *s)
{
    *out = NULL;
    if (!s->type)
        return pl_errorf(PL_ERR_ARG, "--tokenizer-type is required (one of %s)", pl_tokenizer_types);
    for (size_t i = 0; i < sizeof registry / sizeof *registry; i++) {
        if (strcmp(s->type, registry[i].type) != 0)
            continue;
        unsigned need = registry[i].needs;
        if ((need & NEED_VOCAB) && !s->vocab_file)
            return pl_errorf(PL_ERR_ARG, "--vocab-file is required for --tokenizer-type %s", s->type);
        if ((need & NEED_MERGES) && !s->merge_file)
            return pl_errorf(PL_ERR_ARG, "--merge-file is required for --tokenizer-type %s", s->type);
        if ((need & NEED_MODEL) && !s->tokenizer_model)
            return pl_errorf(PL_ERR_ARG, "--tokenizer-model is required for --tokenizer-type %s",
                             s->type);
        if (!(need & NEED_MODEL) && s->tokenizer_model)
            return pl_errorf(PL_ERR_ARG, "--tokenizer-model is not used by --tokenizer-type %s "
                             "(it takes --vocab-file%s)", s->type,
                             need & NEED_MERGES ? " and --merge-file" : "");
        if (s->vocab_extra_ids < 0 || (s->vocab_extra_ids && !(need & TAKES_EXTRA_IDS)))
            return pl_errorf(PL_ERR_ARG, "--vocab-extra-ids %lld: not supported by --tokenizer-type "
                             "%s (BERT and SentencePieceTokenizer take it)",
                             (long long)s->vocab_extra_ids, s->type);
        return registry[i].open(out, s);
    }
    return pl_errorf(PL_ERR_ARG, "--tokenizer-type: unknown tokenizer '%s' (expected one of %s)",
                     s->type, pl_tokenizer_types);
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
