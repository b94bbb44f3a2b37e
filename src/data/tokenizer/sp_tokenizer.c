#include "data/tokenizer/tokenizer.h"
pl_status pl_sp_tokenizer_open(pl_tokenizer **out, const char *type, const char *model_file,
                               int legacy, int64_t vocab_extra_ids)
{
    (void)out; (void)type; (void)model_file; (void)legacy; (void)vocab_extra_ids;
    return pl_errorf(PL_ERR_UNSUPPORTED, "not yet");
}
