/* One training sample of an encoder-decoder model (T5, BART, MegaMolBART), as
 * the datasets write it (data/t5_dataset.h, data/bart_dataset.h,
 * data/mmb_dataset.h) and the trainer feeds it to model/encdec.h. The caller
 * owns the arrays. */
#ifndef PL_DATA_ENCDEC_SAMPLE_H
#define PL_DATA_ENCDEC_SAMPLE_H

#include <stdint.h>

typedef struct pl_encdec_sample {
    int32_t *enc_tokens; /* (Te) the encoder input, padded */
    int64_t enc_length;  /* tokens before padding (the encoder's padding mask) */
    int32_t *dec_tokens; /* (Td) the decoder input, padded */
    int32_t *labels;     /* (Td) the decoder targets, -1 where no loss (padding) */
    int64_t dec_length;
} pl_encdec_sample;

#endif
