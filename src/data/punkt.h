/* Punkt sentence splitting as Megatron's preprocess_data.py --split-sentences
 * does it: NLTK's PunktSentenceTokenizer.tokenize(text) (realigned
 * boundaries) over chunks of 1,000,000 code points, with given parameters.
 *
 * The algorithm follows NLTK 3.8's nltk/tokenize/punkt.py (Debian's
 * python3-nltk 3.8; Megatron loads tokenizers/punkt/english.pickle, which
 * NLTK 3.8.1 and earlier read) step by step:
 *   candidate ends ........ period_context_re finditer ([.?!] followed by
 *                           punctuation or whitespace and a token), the word
 *                           before each (_match_potential_end_contexts)
 *   words ................. PunktLanguageVars.word_tokenize per line
 *   first pass ............ sentence-end characters, ellipses, abbreviations
 *   second pass ........... collocations, orthographic heuristic, frequent
 *                           sentence starters, initials and numbers
 *   slices ................ _slices_from_text, _realign_boundaries
 * The parameters (abbreviation types, collocations, sentence starters,
 * orthographic contexts) are what NLTK trains; NLTK's English model is not
 * in Debian, so plait reads them from a text file that
 * scripts/punkt_params.py writes from a pickle or trains with NLTK:
 *   abbrev<TAB>TYPE / colloc<TAB>TYPE<TAB>TYPE / starter<TAB>TYPE /
 *   ortho<TAB>TYPE<TAB>FLAGS   (lines starting with '#' are comments)
 *
 * Character classes are Python's: str.isspace, \w, \d, isupper/islower on
 * the first character, str.lower for types, from utf8proc's tables; they
 * differ from Python 3.11's only on code points its Unicode 14 leaves
 * unassigned (tests/scripts/punkt.sh checks every code point); a final
 * capital sigma lowers to U+03C3 in a type.
 *
 * Not here: training (NLTK's PunktTrainer), --keep-newlines (Megatron's
 * CustomLanguageVars), languages other than NLTK's default PunktLanguageVars. */
#ifndef PL_DATA_PUNKT_H
#define PL_DATA_PUNKT_H

#include "base/vec.h"

#include <stddef.h>
#include <stdint.h>

/* Megatron's Encoder.split: text[i:i+max_len] for max_len = 1000000. */
enum { PL_PUNKT_CHUNK = 1000000 };

typedef struct pl_punkt pl_punkt;

/* Reads a parameter file (format above). Errors name the file and line. */
pl_status pl_punkt_load(pl_punkt **out, const char *path);
void pl_punkt_free(pl_punkt *p);

/* Appends, for each sentence of text[0..len) (valid UTF-8, else an error),
 * its byte range as two entries start, end to spans. p is only read: threads
 * may share it. */
pl_status pl_punkt_split(const pl_punkt *p, const char *text, size_t len, pl_i64s *spans);

/* Python's classes of one code point as plait's Punkt sees them, for tests:
 * a mask of PL_PUNKT_SPACE (str.isspace), _WORD (re \w), _DIGIT (re \d),
 * _UPPER (str.isupper), _LOWER (str.islower). */
enum {
    PL_PUNKT_SPACE = 1,
    PL_PUNKT_WORD = 2,
    PL_PUNKT_DIGIT = 4,
    PL_PUNKT_UPPER = 8,
    PL_PUNKT_LOWER = 16,
};
int pl_punkt_char_classes(int32_t cp);

#endif
