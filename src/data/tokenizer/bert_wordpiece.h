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

#endif
