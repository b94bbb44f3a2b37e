/* PLACEHOLDER: removed as each tokenizer lands. */
#include "data/tokenizer/tokenizer.h"

pl_status pl_gpt2_tokenizer_open(pl_tokenizer **out, const char *vocab_file, const char *merge_file)
{
    (void)vocab_file, (void)merge_file;
    *out = 0;
    return pl_errorf(PL_ERR_UNSUPPORTED, "GPT2BPETokenizer not built yet");
}

pl_status pl_bert_tokenizer_open(pl_tokenizer **out, const char *vocab_file, int lower_case)
{
    (void)vocab_file, (void)lower_case;
    *out = 0;
    return pl_errorf(PL_ERR_UNSUPPORTED, "BertWordPiece not built yet");
}

pl_status pl_smiles_tokenizer_open(pl_tokenizer **out, const char *vocab_file)
{
    (void)vocab_file;
    *out = 0;
    return pl_errorf(PL_ERR_UNSUPPORTED, "SmilesTokenizer not built yet");
}
