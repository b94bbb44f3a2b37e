/* BERT WordPiece tokenizers (Megatron's BertWordPieceLowerCase / BertWordPieceCase).
 *
 * pl_bert_tokenizer_open() in tokenizer.h is this with vocab_extra_ids = 0;
 * the extended constructor adds Megatron's --vocab-extra-ids sentinels
 * (<extra_id_0> .. <extra_id_{n-1}>, used by T5). */
#ifndef PL_DATA_TOKENIZER_BERT_WORDPIECE_H
#define PL_DATA_TOKENIZER_BERT_WORDPIECE_H

#include "data/tokenizer/tokenizer.h"

/* Longest word (in code points, after basic tokenization) that WordPiece
 * splits; longer words become [UNK]. Megatron's bert_tokenization.py keeps
 * Google's 200 (Hugging Face's BertTokenizer uses 100). */
#define PL_BERT_MAX_WORD_CHARS 200

/* Opens vocab_file (one token a line, ids = line numbers) as Megatron's
 * _BertWordPieceTokenizer does: appends [BOS], [EOS] and then vocab_extra_ids
 * <extra_id_i> tokens unless the file already has them. vocab_size counts
 * them; eod is the [EOS] id. Errors name the file and line. */
pl_status pl_bert_tokenizer_open_ex(pl_tokenizer **out, const char *vocab_file, int lower_case,
                                    int64_t vocab_extra_ids);

/* The special ids Megatron's BERT and T5 datasets use (tokenizer.cls, .sep,
 * .mask, .pad, .bos, .eos: the ids of [CLS], [SEP], [MASK], [PAD], [BOS],
 * [EOS]; additional_special_tokens_ids: the ids of <extra_id_0> ..
 * <extra_id_{n_extra-1}>, in that order, borrowed from the tokenizer). */
typedef struct pl_bert_specials {
    int32_t cls, sep, mask, pad, bos, eos;
    const int32_t *extra;
    int64_t n_extra;
} pl_bert_specials;

/* Fills *out from t, which must be a BERT WordPiece tokenizer (PL_ERR_ARG
 * naming t->type otherwise). */
pl_status pl_bert_tokenizer_specials(const pl_tokenizer *t, pl_bert_specials *out);

/* The vocabulary's spelling of id (tokenizer.inv_vocab[id], "##" kept), or
 * NULL when id is out of range or t is not a BERT WordPiece tokenizer;
 * *len receives its length in bytes. */
const char *pl_bert_tokenizer_piece(const pl_tokenizer *t, int32_t id, size_t *len);

#endif
