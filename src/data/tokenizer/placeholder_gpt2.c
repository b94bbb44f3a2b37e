/* PLACEHOLDER: removed when this tokenizer lands. */
#include "data/tokenizer/tokenizer.h"

pl_status pl_gpt2_tokenizer_open(pl_tokenizer **out, const char *vocab_file, const char *merge_file)
{
    (void)vocab_file, (void)merge_file;
    *out = 0;
    return pl_errorf(PL_ERR_UNSUPPORTED, "GPT2BPETokenizer not built yet");
}
