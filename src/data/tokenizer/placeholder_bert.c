/* PLACEHOLDER: removed when this tokenizer lands. */
#include "data/tokenizer/tokenizer.h"

pl_status pl_bert_tokenizer_open(pl_tokenizer **out, const char *vocab_file, int lower_case)
{
    (void)vocab_file, (void)lower_case;
    *out = 0;
    return pl_errorf(PL_ERR_UNSUPPORTED, "BertWordPiece not built yet");
}
