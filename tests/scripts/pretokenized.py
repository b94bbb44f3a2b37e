"""Reference for tests/scripts/pretokenized.sh (PretokenizedTokenizer).

  corpus KJV N OUTDIR   a pre-tokenized corpus (KJV verses, words as tokens, some
                        separated by every character str.isspace() accepts) as
                        corpus.jsonl, and vocab.json (words seen twice or more, plus
                        <unk> and <|endoftext|>, ids in a shuffled order)
  check OUTDIR PREFIX   PREFIX.bin/.idx (Megatron's MMIDIDX) hold, per document,
                        [vocab.get(t, vocab["<unk>"]) for t in text.split()] + [eod]
"""
import collections, json, random, struct, sys

import numpy as np


def corpus(kjv, n, out):
    lines = [l.rstrip("\n") for l in open(kjv, encoding="utf-8")][:n]
    spaces = [chr(c) for c in range(0x110000) if chr(c).isspace()]
    rng = random.Random(7)
    docs = []
    for i, line in enumerate(lines):
        words = line.split()
        if i % 5 == 0:  # every Python whitespace character somewhere in the corpus
            text = "".join(w + rng.choice(spaces) * rng.randint(1, 2) for w in words)
        else:
            text = " ".join(words)
        docs.append(text)
    counts = collections.Counter(w for d in docs for w in d.split())
    words = sorted(w for w, c in counts.items() if c >= 2) + ["<unk>", "<|endoftext|>"]
    ids = list(range(len(words)))
    rng.shuffle(ids)
    vocab = dict(zip(words, ids))
    with open(out + "/vocab.json", "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(out + "/corpus.jsonl", "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({"text": d}) + "\n")
    unknown = sum(1 for d in docs for w in d.split() if w not in vocab)
    print(f"{len(docs)} documents, {len(vocab)} tokens in the vocabulary, {unknown} unknown tokens")


def check(out, prefix):
    vocab = json.load(open(out + "/vocab.json", encoding="utf-8"))
    unk, eod = vocab["<unk>"], vocab["<|endoftext|>"]
    want = [[vocab.get(t, unk) for t in json.loads(l)["text"].split()] + [eod]
            for l in open(out + "/corpus.jsonl", encoding="utf-8")]
    idx = open(prefix + ".idx", "rb").read()
    assert idx[:9] == b"MMIDIDX\x00\x00", "not an MMIDIDX index"
    version, code, n = struct.unpack("<QBQ", idx[9:26])
    dtype = {8: np.uint16, 4: np.int32}[code]
    sizes = np.frombuffer(idx, np.int32, n, 34)
    pointers = np.frombuffer(idx, np.int64, n, 34 + 4 * n)
    data = np.fromfile(prefix + ".bin", dtype)
    got = [data[p // np.dtype(dtype).itemsize:][:s].tolist() for p, s in zip(pointers, sizes)]
    assert len(got) == len(want), f"{len(got)} documents, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"document {i}: {g[:10]}... expected {w[:10]}..."
    print(f"{len(got)} documents, {sum(map(len, got))} ids equal to Python's")


if __name__ == "__main__":
    if sys.argv[1] == "corpus":
        corpus(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        check(sys.argv[2], sys.argv[3])
