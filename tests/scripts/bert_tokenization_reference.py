"""Google BERT's tokenization.py (as Megatron's bert_tokenization.py: BasicTokenizer
with lower case and accent stripping, WordpieceTokenizer with at most 200 characters a
word), transcribed for the fine-tuning oracles in tests/scripts. Independent of plait's
C tokenizer (src/data/tokenizer/bert_wordpiece.c); only the vocabulary file is shared."""
import collections
import unicodedata


def load_vocab(path):
    vocab = collections.OrderedDict()
    with open(path, encoding='utf-8') as f:
        for i, line in enumerate(f):
            vocab[line.strip()] = i
    return vocab


def whitespace_tokenize(text):
    text = text.strip()
    return text.split() if text else []


def _is_whitespace(c):
    if c in (' ', '\t', '\n', '\r'):
        return True
    return unicodedata.category(c) == 'Zs'


def _is_control(c):
    if c in ('\t', '\n', '\r'):
        return False
    return unicodedata.category(c).startswith('C')


def _is_punctuation(c):
    cp = ord(c)
    if (33 <= cp <= 47) or (58 <= cp <= 64) or (91 <= cp <= 96) or (123 <= cp <= 126):
        return True
    return unicodedata.category(c).startswith('P')


def _is_chinese_char(cp):
    return ((0x4E00 <= cp <= 0x9FFF) or (0x3400 <= cp <= 0x4DBF) or (0x20000 <= cp <= 0x2A6DF) or
            (0x2A700 <= cp <= 0x2B73F) or (0x2B740 <= cp <= 0x2B81F) or (0x2B820 <= cp <= 0x2CEAF) or
            (0xF900 <= cp <= 0xFAFF) or (0x2F800 <= cp <= 0x2FA1F))


class BasicTokenizer:
    def __init__(self, do_lower_case=True):
        self.do_lower_case = do_lower_case

    def tokenize(self, text):
        text = self._clean_text(text)
        text = self._tokenize_chinese_chars(text)
        split_tokens = []
        for token in whitespace_tokenize(text):
            if self.do_lower_case:
                token = token.lower()
                token = self._run_strip_accents(token)
            split_tokens.extend(self._run_split_on_punc(token))
        return whitespace_tokenize(' '.join(split_tokens))

    def _run_strip_accents(self, text):
        text = unicodedata.normalize('NFD', text)
        return ''.join(c for c in text if unicodedata.category(c) != 'Mn')

    def _run_split_on_punc(self, text):
        output, start_new = [], True
        for c in text:
            if _is_punctuation(c):
                output.append([c])
                start_new = True
            else:
                if start_new:
                    output.append([])
                start_new = False
                output[-1].append(c)
        return [''.join(x) for x in output]

    def _tokenize_chinese_chars(self, text):
        out = []
        for c in text:
            if _is_chinese_char(ord(c)):
                out += [' ', c, ' ']
            else:
                out.append(c)
        return ''.join(out)

    def _clean_text(self, text):
        out = []
        for c in text:
            cp = ord(c)
            if cp == 0 or cp == 0xFFFD or _is_control(c):
                continue
            out.append(' ' if _is_whitespace(c) else c)
        return ''.join(out)


class WordpieceTokenizer:
    def __init__(self, vocab, unk='[UNK]', max_chars=200):
        self.vocab, self.unk, self.max_chars = vocab, unk, max_chars

    def tokenize(self, text):
        output = []
        for token in whitespace_tokenize(text):
            chars = list(token)
            if len(chars) > self.max_chars:
                output.append(self.unk)
                continue
            is_bad, start, subs = False, 0, []
            while start < len(chars):
                end, cur = len(chars), None
                while start < end:
                    s = ''.join(chars[start:end])
                    if start > 0:
                        s = '##' + s
                    if s in self.vocab:
                        cur = s
                        break
                    end -= 1
                if cur is None:
                    is_bad = True
                    break
                subs.append(cur)
                start = end
            output.extend([self.unk] if is_bad else subs)
        return output


class FullTokenizer:
    def __init__(self, vocab_file):
        self.vocab = load_vocab(vocab_file)
        self.basic = BasicTokenizer(True)
        self.wordpiece = WordpieceTokenizer(self.vocab)

    def tokenize(self, text):
        return [s for t in self.basic.tokenize(text) for s in self.wordpiece.tokenize(t)]
