#!/usr/bin/env python3
"""Oracle for the BERT inputs of src/finetune/textcls.c and conll.c, written from
the references' published source, with the tokenizer of
bert_tokenization_reference.py (not plait's):
  - text classification as Google BERT's run_classifier.py convert_single_example
    (and Hugging Face / NeMo's GLUE dataset): _truncate_seq_pair (pop from the
    longer, b on ties) to seq - 3 for pairs, a cut to seq - 2 for single texts,
    [CLS] a [SEP] (b [SEP]), segment ids 0 / 1, input mask, zero padding with
    [PAD]; labels = sorted distinct label strings;
  - token classification as NeMo / Hugging Face align labels (label on the
    first sub-token, -100 elsewhere; tag map "O" first, the others sorted),
    plus plait's documented split of long sentences (greedy windows of whole
    words fitting in seq - 2 sub-tokens; a longer word keeps its first ones).

  finetune_encoding_reference.py TOOL VOCAB textcls FILE.tsv SEQ COL_B
  finetune_encoding_reference.py TOOL VOCAB tokcls FILE.conll SEQ
Compares every row with `TOOL textcls-dump` / `TOOL tokcls-dump`. Exits 1 on
any difference."""
import subprocess
import sys

from bert_tokenization_reference import FullTokenizer


def truncate_seq_pair(a, b, max_length):
    while True:
        if len(a) + len(b) <= max_length:
            break
        if len(a) > len(b):
            a.pop()
        else:
            b.pop()


def textcls(tok, path, seq, col_b):
    with open(path, encoding='utf-8') as f:
        lines = f.read().split('\n')[1:]
    rows = [l.split('\t') for l in lines if l.strip()]
    labels = sorted({r[-1] for r in rows})
    out = []
    for r in rows:
        a = tok.tokenize(r[0])
        b = tok.tokenize(r[col_b]) if col_b >= 0 else None
        if b is not None:
            truncate_seq_pair(a, b, seq - 3)
        elif len(a) > seq - 2:
            a = a[:seq - 2]
        tokens = ['[CLS]'] + a + ['[SEP]']
        types = [0] * len(tokens)
        if b is not None:
            tokens += b + ['[SEP]']
            types += [1] * (len(b) + 1)
        ids = [tok.vocab[t] for t in tokens]
        mask = [1] * len(ids)
        while len(ids) < seq:
            ids.append(tok.vocab['[PAD]'])
            types.append(0)
            mask.append(0)
        out.append(f"{labels.index(r[-1])}|{' '.join(map(str, ids))}|{' '.join(map(str, types))}|"
                   f"{' '.join(map(str, mask))}")
    return out


def tokcls(tok, path, seq):
    sents, cur = [], []
    with open(path, encoding='utf-8') as f:
        for line in f:
            cols = line.split()
            if not cols or cols[0] == '-DOCSTART-':
                if cur:
                    sents.append(cur)
                cur = []
                continue
            cur.append((cols[0], cols[-1]))
    if cur:
        sents.append(cur)
    tags = sorted({t for s in sents for _, t in s} - {'O'})
    label_ids = {'O': 0, **{t: i + 1 for i, t in enumerate(tags)}}
    out, word_base = [], 0
    unk, cls, sep, pad = (tok.vocab[x] for x in ('[UNK]', '[CLS]', '[SEP]', '[PAD]'))
    for si, s in enumerate(sents):
        pieces = [[tok.vocab[p] for p in tok.tokenize(w)] or [unk] for w, _ in s]
        w0 = 0
        while w0 < len(s):
            w1, used = w0 + 1, len(pieces[w0])
            while w1 < len(s) and used + len(pieces[w1]) <= seq - 2:
                used += len(pieces[w1])
                w1 += 1
            ids, labels, wpos = [cls], [-100], [-1]
            for w in range(w0, w1):
                p = pieces[w][:seq - 2 - (len(ids) - 1)]
                for k, x in enumerate(p):
                    ids.append(x)
                    labels.append(label_ids[s[w][1]] if k == 0 else -100)
                    wpos.append(word_base + w if k == 0 else -1)
            ids.append(sep)
            labels.append(-100)
            wpos.append(-1)
            while len(ids) < seq:
                ids.append(pad)
                labels.append(-100)
                wpos.append(-1)
            out.append(f"{si}|{' '.join(map(str, ids))}|{' '.join(map(str, labels))}|{' '.join(map(str, wpos))}")
            w0 = w1
        word_base += len(s)
    return out


def main():
    tool, vocab, kind, path, seq = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    tok = FullTokenizer(vocab)
    if kind == 'textcls':
        col_b = int(sys.argv[6])
        want = textcls(tok, path, seq, col_b)
        cmd = [tool, 'textcls-dump', vocab, path, str(seq), str(col_b)]
    else:
        want = tokcls(tok, path, seq)
        cmd = [tool, 'tokcls-dump', vocab, path, str(seq)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        print(res.stderr)
        return 1
    got = res.stdout.splitlines()
    bad = sum(w != g for w, g in zip(want, got)) + abs(len(want) - len(got))
    for i, (w, g) in enumerate(zip(want, got)):
        if w != g:
            print(f'row {i}:\n  python {w}\n  plait  {g}')
            break
    print(f'{kind} encoding: {len(want) - bad}/{len(want)} rows identical (plait: {res.stderr.strip()})')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
