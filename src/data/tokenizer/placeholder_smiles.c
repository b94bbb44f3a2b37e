/* PLACEHOLDER: removed when this tokenizer lands. */
#include "data/tokenizer/tokenizer.h"

pl_status pl_smiles_tokenizer_open(pl_tokenizer **out, const char *vocab_file)
{
    (void)vocab_file;
    *out = 0;
    return pl_errorf(PL_ERR_UNSUPPORTED, "SmilesTokenizer not built yet");
}
