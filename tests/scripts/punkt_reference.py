#!/usr/bin/python3
"""NLTK's Punkt (Debian's python3-nltk 3.8) as the reference for plait's
src/data/punkt.c, for tests/scripts/punkt.sh. Imports nothing of plait.

  docs OUT.hex FILE...      documents: the paragraphs (blank-line separated) of each
                            FILE, KJV verses joined 30 to a document (a file named
                            *kjv*), or the whole file (named *whole*), hex-encoded
                            one per line
  stress OUT SEED N         N paragraphs of English built to reach Punkt's cases:
                            abbreviations, initials, numbers, ellipses, quotes and
                            brackets after a period, ?! runs, dashes, non-ASCII
  random OUT SEED N         N documents of random words and punctuation (every character
                            Punkt's regular expressions treat specially, runs of them,
                            spaces, tabs, newlines, blank lines, non-ASCII letters)
  split PARAMS DOCS.hex     NLTK's spans for each document, in bytes, as Megatron's
                            Encoder.split calls it: splitter.tokenize(text[i:i+1000000])
  megatron_split PARAMS IN.jsonl OUT.jsonl
                            Megatron's Encoder.split pass (preprocess_data.py
                            --split-sentences): each "text" becomes the list of its
                            sentences, json.dumps'd
  classes CLASSES.txt       checks punkt_split --classes (space, \w, \d, upper, lower, and
                            the lower-case mapping, of every code point) against Python's: a difference is allowed
                            only where this Python's Unicode leaves the code point
                            unassigned (a newer Unicode in utf8proc)
  compare PLAIT.txt NLTK.txt DOCS.hex
                            agreement: documents and sentences split identically
The parameters are read from the file scripts/punkt_params.py writes, into a
PunktParameters, so NLTK and plait split with the same parameters.
"""
import json
import random
import sys

from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

MAX_LEN = 1000000


def load_params(path):
    p = PunktParameters()
    with open(path, encoding="utf-8") as f:
        for line in f.read().split("\n"):
            if not line or line.startswith("#"):
                continue
            f_ = line.split("\t")
            if f_[0] == "abbrev":
                p.abbrev_types.add(f_[1])
            elif f_[0] == "starter":
                p.sent_starters.add(f_[1])
            elif f_[0] == "colloc":
                p.collocations.add((f_[1], f_[2]))
            elif f_[0] == "ortho":
                p.ortho_context[f_[1]] |= int(f_[2])
            else:
                raise ValueError("bad line %r" % line)
    return p


def docs(out, files):
    n = 0
    with open(out, "w") as w:
        for path in files:
            with open(path, encoding="utf-8") as f:
                text = f.read()
            if "whole" in path:
                parts = [text]
            elif "kjv" in path:
                verses = text.split("\n")
                parts = [" ".join(verses[i:i + 30]) for i in range(0, len(verses), 30)]
            else:
                parts = [p for p in text.split("\n\n") if p.strip()]
            for p in parts:
                w.write(p.encode("utf-8").hex() + "\n")
                n += 1
    print("%d documents" % n)


ABBREVS = ["Mr.", "Mrs.", "Dr.", "Prof.", "St.", "Inc.", "Ltd.", "Co.", "Corp.", "e.g.",
           "i.e.", "etc.", "vs.", "U.S.", "a.m.", "p.m.", "Jan.", "Feb.", "No.", "Fig.",
           "approx.", "Gen.", "Sen.", "Rev.", "Jr.", "Sr.", "Ave.", "Dept.", "Univ.", "cf."]
NAMES = ["Smith", "Jones", "Müller", "García", "Ólafsson", "Brown", "Łukasz", "Zoë", "Øre"]
WORDS = ("the a report said that our team found results were clear and strong after "
         "review of data in model city river north house letter meeting plan budget "
         "night day year later early small large new old first last good bad").split()
STARTS = ["The", "However,", "In", "After", "This", "We", "They", "It", "Then", "But",
          "Über", "Élan", "\u201cWhy", "(See", "\"Yes", "'Well", "Meanwhile", "3", "iPhone"]
ENDS = [".", ".", ".", "?", "!", "!?", "...", ". . .", ".)", ".\"", ".'", ".\u201d", "?)",
        ".]", ".}", ".--", "!!!"]


def stress(out, seed, n):
    r = random.Random(seed)

    def words(k):
        return " ".join(r.choice(WORDS) for _ in range(k))

    def sentence():
        parts = [r.choice(STARTS), words(r.randint(1, 6))]
        k = r.random()
        if k < 0.25:
            parts.append("%s %s" % (r.choice(ABBREVS), r.choice(NAMES + WORDS)))
        elif k < 0.35:
            parts.append("%s. %s. %s" % (chr(65 + r.randint(0, 25)), chr(65 + r.randint(0, 25)),
                                         r.choice(NAMES)))
        elif k < 0.45:
            parts.append("%d.%d percent of %s,000" % (r.randint(0, 99), r.randint(0, 9),
                                                    r.randint(1, 999)))
        elif k < 0.5:
            parts.append("on %d. %s" % (r.randint(1, 31), r.choice(["May", "June", "march"])))
        elif k < 0.55:
            parts.append("-- %s --" % words(2))
        parts.append(words(r.randint(0, 5)))
        end = r.choice(ENDS)
        if r.random() < 0.15:
            end = " " + r.choice(ABBREVS)
        return " ".join(p for p in parts if p) + end

    with open(out, "w", encoding="utf-8") as w:
        for _ in range(n):
            sep = r.choice([" ", " ", "  ", "\n", " \n"])
            w.write(sep.join(sentence() for _ in range(r.randint(1, 8))) + "\n\n")


def random_docs(out, seed, n):
    r = random.Random(seed)
    letters = ["a", "b", "mr", "dr", "e.g", "u.s", "inc", "x", "The", "A", "Mr", "Jan", "iv",
               "Élan", "über", "Øre", "σ", "Σ", "İ", "ǅ", "Ⅻ", "ⓐ", "ʰ", "3", "12", "1,000",
               "-5", ".5", "3.14", "٣", "x_y", "é"]
    puncts = [".", ".", ".", "?", "!", ",", ";", ":", "'", '"', "(", ")", "[", "]", "{", "}",
              "-", "--", "---", "*", "@", "&", "#", "`", "..", "...", ". . .", ". . . .",
              ".)", '."', "?!", "!!", "\u201d", "\u2019"]
    spaces = [" ", " ", " ", "  ", "\t", "\n", "\n\n", " \n ", "\u00a0", "\u2003", "\x0b"]
    with open(out, "w", encoding="utf-8") as w:
        for _ in range(n):
            parts = []
            for _ in range(r.randint(1, 60)):
                k = r.random()
                if k < 0.45:
                    parts.append(r.choice(letters))
                elif k < 0.8:
                    parts.append(r.choice(puncts))
                else:
                    parts.append(r.choice(spaces))
                if r.random() < 0.5:
                    parts.append(" ")
            w.write("".join(parts).encode("utf-8").hex() + "\n")


def split(params, path):
    tok = PunktSentenceTokenizer(load_params(params))
    with open(path) as f:
        for line in f.read().split("\n")[:-1]:
            text = bytes.fromhex(line).decode("utf-8")
            spans = []
            for i in range(0, len(text), MAX_LEN):
                chunk = text[i:i + MAX_LEN]
                base = len(text[:i].encode("utf-8"))
                for s, e in tok.span_tokenize(chunk):
                    spans += [base + len(chunk[:s].encode("utf-8")),
                              base + len(chunk[:max(s, e)].encode("utf-8"))]
            print(" ".join(map(str, spans)))


def megatron_split(params, src, dst):
    splitter = PunktSentenceTokenizer(load_params(params))
    with open(src, encoding="utf-8") as fin, open(dst, "w") as fout:
        for json_line in fin:
            data = json.loads(json_line)
            output = {}
            for key in ["text"]:
                text = data[key]
                max_len = 1000000
                tokens_list = [splitter.tokenize(text[i:i + max_len])
                               for i in range(0, len(text), max_len)]
                output[key] = [tokens for partial in tokens_list for tokens in partial]
            fout.write(json.dumps(output) + "\n")


def classes(path):
    import re
    import unicodedata
    with open(path) as f:
        rows = [tuple(map(int, x.split())) for x in f.read().split("\n")[:-1]]
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    assert len(rows) == len(cps)
    word, digit = re.compile(r"\w"), re.compile(r"\d")
    names = ["isspace", "\\w", "\\d", "isupper", "islower", "lower"]
    newer = {n: 0 for n in names}
    wrong = []
    for c, (g, low) in zip(cps, rows):
        ch = chr(c)
        ref = [ch.isspace(), bool(word.match(ch)), bool(digit.match(ch)), ch.isupper(),
               ch.islower()]
        got = [bool(g >> k & 1) for k in range(5)]
        # str.lower(): one code point but for U+0130 (plait writes "i\u0307" itself)
        ref.append(ch.lower() if c != 0x130 else chr(c))
        got.append(chr(low) if c != 0x130 else chr(c))
        for k, n in enumerate(names):
            if got[k] != ref[k]:
                if unicodedata.category(ch) == "Cn":
                    newer[n] += 1
                else:
                    wrong.append("U+%04X %s" % (c, n))
    print("classes of %d code points: %d differ on assigned code points; on code points "
          "unassigned in Unicode %s: %s" % (len(cps), len(wrong), unicodedata.unidata_version,
                                             newer))
    for w in wrong[:10]:
        print("DIFFER " + w)
    return 1 if wrong else 0


def compare(plait, nltk, path):
    with open(plait) as f:
        a = f.read().split("\n")[:-1]
    with open(nltk) as f:
        b = f.read().split("\n")[:-1]
    with open(path) as f:
        texts = [bytes.fromhex(x) for x in f.read().split("\n")[:-1]]
    assert len(a) == len(b) == len(texts), (len(a), len(b), len(texts))
    docs_same = sent_same = sent_total = shown = 0
    for i, (x, y, t) in enumerate(zip(a, b, texts)):
        sx = list(zip(*[iter(map(int, x.split()))] * 2))
        sy = list(zip(*[iter(map(int, y.split()))] * 2))
        docs_same += sx == sy
        sent_total += len(sy)
        sent_same += len(set(sx) & set(sy))
        if sx != sy and shown < 3:
            shown += 1
            diff = sorted(set(sx) ^ set(sy))[:2]
            print("DIFFER document %d: %s" % (i, ["%s %r" % ("plait" if d in sx else "nltk",
                                                              t[d[0]:d[1]][:120].decode())
                                                   for d in diff]))
    print("agreement: %d of %d documents, %d of %d sentences identical (%.3f%%)" % (
        docs_same, len(b), sent_same, sent_total, 100.0 * sent_same / max(sent_total, 1)))
    return 0 if docs_same == len(b) else 1


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "docs":
        return docs(sys.argv[2], sys.argv[3:])
    if len(sys.argv) == 5 and sys.argv[1] == "stress":
        return stress(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    if len(sys.argv) == 5 and sys.argv[1] == "random":
        return random_docs(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    if len(sys.argv) == 4 and sys.argv[1] == "split":
        return split(sys.argv[2], sys.argv[3])
    if len(sys.argv) == 5 and sys.argv[1] == "megatron_split":
        return megatron_split(sys.argv[2], sys.argv[3], sys.argv[4])
    if len(sys.argv) == 3 and sys.argv[1] == "classes":
        return classes(sys.argv[2])
    if len(sys.argv) == 5 and sys.argv[1] == "compare":
        return compare(sys.argv[2], sys.argv[3], sys.argv[4])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
