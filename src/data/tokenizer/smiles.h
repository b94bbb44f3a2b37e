/* MegaMolBART's SMILES tokenizer (--tokenizer-type SmilesTokenizer) and a
 * builder of its vocabulary files.
 *
 * A vocabulary file holds one token a line, ids in file order (empty lines
 * are skipped, as MegaMolBART's from_vocab_file does): 0 <PAD>, 1 ? (unknown),
 * 2 ^ (begin), 3 & (end), 4 <MASK>, 5 <SEP>, then "extra tokens" up to
 * chem_tokens_start (matched literally before the SMILES regex), then the
 * chemical tokens. */
#ifndef PL_DATA_TOKENIZER_SMILES_H
#define PL_DATA_TOKENIZER_SMILES_H

#include "data/tokenizer/tokenizer.h"

enum {
    PL_SMILES_PAD = 0,
    PL_SMILES_UNK = 1,
    PL_SMILES_BEGIN = 2,
    PL_SMILES_END = 3, /* the tokenizer's eod */
    PL_SMILES_MASK = 4,
    PL_SMILES_SEP = 5,
    PL_SMILES_N_SPECIAL = 6,
    PL_SMILES_CHEM_TOKENS_START = 272, /* MegaMolBART's DEFAULT_CHEM_TOKEN_START */
};

/* Opens vocab_file with MegaMolBART's chem_tokens_start_idx (>= 6): tokens
 * [6, chem_tokens_start) are its extra tokens. chem_tokens_start < 0 picks
 * the default as pl_smiles_tokenizer_open() does: 272 when the file has at
 * least 272 tokens, else 6 (MegaMolBART's default 272 would fail on it).
 * Errors name the file and line. */
pl_status pl_smiles_tokenizer_open_ex(pl_tokenizer **out, const char *vocab_file,
                                      int64_t chem_tokens_start);

/* Called for each token, in order: its bytes and its id (unknown -> 1). */
typedef pl_status (*pl_smiles_token_fn)(void *ctx, const char *tok, size_t len, int32_t id);

/* Splits text[0..len) as MegaMolBART's re.findall does with t's regex and
 * calls fn on each token; stops at the first status fn returns other than
 * PL_OK and returns it. The tokens, concatenated, are the text without the
 * newlines that are not inside a bracket atom ([^\]] takes newlines).
 * Invalid UTF-8 bytes are one token each (Python's view of them when decoded
 * with surrogateescape). */
pl_status pl_smiles_tokenizer_each(const pl_tokenizer *t, const char *text, size_t len,
                                   pl_smiles_token_fn fn, void *ctx);

/* Vocabulary builder: counts the tokens of a corpus (the SMILES regex with
 * no extra tokens), then writes the six specials, <UNUSED_0> .. placeholders
 * up to chem_tokens_start, and the tokens seen at least min_count times, most
 * frequent first, ties by byte order. Tokens equal to a special or a
 * placeholder keep that id and are not repeated. */
typedef struct pl_smiles_vocab_builder pl_smiles_vocab_builder;

pl_status pl_smiles_vocab_builder_init(pl_smiles_vocab_builder **out);
void pl_smiles_vocab_builder_free(pl_smiles_vocab_builder *b);

/* Adds one SMILES string. PL_ERR_FORMAT for invalid UTF-8 or a token holding
 * a line break (it could not be written to a vocabulary file); nothing of the
 * string is counted then. */
pl_status pl_smiles_vocab_builder_add(pl_smiles_vocab_builder *b, const char *smiles, size_t len);

/* Distinct tokens seen so far. */
int64_t pl_smiles_vocab_builder_distinct(const pl_smiles_vocab_builder *b);

/* Writes the vocabulary to path atomically (temporary file, then rename).
 * chem_tokens_start in [6, 1000000], min_count >= 1. *n_tokens (may be NULL)
 * receives the number of lines written. */
pl_status pl_smiles_vocab_builder_write(const pl_smiles_vocab_builder *b, const char *path,
                                        int64_t chem_tokens_start, int64_t min_count,
                                        int64_t *n_tokens);

#endif
