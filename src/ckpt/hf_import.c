/* Hugging Face directory -> plait release checkpoint (ckpt/hf.h). */
#include "ckpt/hf.h"

pl_status pl_hf_import(const char *in, const char *out, const pl_hf_import_opts *o)
{
    (void)out;
    (void)o;
    return pl_errorf(PL_ERR_ARG, "%s: the Hugging Face import is not written yet", in);
}
