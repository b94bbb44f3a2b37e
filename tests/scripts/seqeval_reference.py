#!/usr/bin/env python3
"""Oracle for src/finetune/seqeval.c: an independent Python transcription of
seqeval's default mode (chakki-works/seqeval, seqeval/metrics/sequence_labeling.py:
get_entities, end_of_chunk, start_of_chunk, and f1/precision/recall with
average="micro", which is also what its classification_report's per-type rows
count). seqeval itself is not installable here (no PyPI), so this file is the
reference; it is written from seqeval's source, not from plait's C.

  seqeval_reference.py TOOL [N_RANDOM]
Runs the tricky cases below and N_RANDOM seeded random ones through
`TOOL seqeval FILE` (build/testtools/ft_metrics) and compares every count and
score exactly. Exits 1 on any difference."""
import random
import subprocess
import sys
import tempfile
from collections import defaultdict


def get_entities(seq):
    # for nested list
    if any(isinstance(s, list) for s in seq):
        seq = [item for sublist in seq for item in sublist + ['O']]
    prev_tag = 'O'
    prev_type = ''
    begin_offset = 0
    chunks = []
    for i, chunk in enumerate(seq + ['O']):
        tag = chunk[0]
        type_ = chunk[1:].split('-', maxsplit=1)[-1] or '_'
        if end_of_chunk(prev_tag, tag, prev_type, type_):
            chunks.append((prev_type, begin_offset, i - 1))
        if start_of_chunk(prev_tag, tag, prev_type, type_):
            begin_offset = i
        prev_tag = tag
        prev_type = type_
    return chunks


def end_of_chunk(prev_tag, tag, prev_type, type_):
    chunk_end = False
    if prev_tag == 'E':
        chunk_end = True
    if prev_tag == 'S':
        chunk_end = True
    if prev_tag == 'B' and tag == 'B':
        chunk_end = True
    if prev_tag == 'B' and tag == 'S':
        chunk_end = True
    if prev_tag == 'B' and tag == 'O':
        chunk_end = True
    if prev_tag == 'I' and tag == 'B':
        chunk_end = True
    if prev_tag == 'I' and tag == 'S':
        chunk_end = True
    if prev_tag == 'I' and tag == 'O':
        chunk_end = True
    if prev_tag != 'O' and prev_tag != '.' and prev_type != type_:
        chunk_end = True
    return chunk_end


def start_of_chunk(prev_tag, tag, prev_type, type_):
    chunk_start = False
    if tag == 'B':
        chunk_start = True
    if tag == 'S':
        chunk_start = True
    if prev_tag == 'E' and tag == 'E':
        chunk_start = True
    if prev_tag == 'E' and tag == 'I':
        chunk_start = True
    if prev_tag == 'S' and tag == 'E':
        chunk_start = True
    if prev_tag == 'S' and tag == 'I':
        chunk_start = True
    if prev_tag == 'O' and tag == 'E':
        chunk_start = True
    if prev_tag == 'O' and tag == 'I':
        chunk_start = True
    if tag != 'O' and tag != '.' and prev_type != type_:
        chunk_start = True
    return chunk_start


def score(y_true, y_pred):
    """seqeval 1.x extract_tp_actual_correct + micro average."""
    et, ep = defaultdict(set), defaultdict(set)
    for t, s, e in get_entities(y_true):
        et[t].add((s, e))
    for t, s, e in get_entities(y_pred):
        ep[t].add((s, e))
    types = sorted(set(et) | set(ep))
    per = [(t, len(et[t] & ep[t]), len(ep[t]), len(et[t])) for t in types]
    tp = sum(x[1] for x in per)
    npred = sum(x[2] for x in per)
    ntrue = sum(x[3] for x in per)
    p = tp / npred if npred > 0 else 0
    r = tp / ntrue if ntrue > 0 else 0
    f = 2 * p * r / (p + r) if p + r > 0 else 0
    return (tp, npred, ntrue, float(p), float(r), float(f)), per


# Hand-picked cases: each is (true sentences, predicted sentences).
TRICKY = [
    # seqeval's docstring example: F1 0.50
    ([['O', 'O', 'O', 'B-MISC', 'I-MISC', 'I-MISC', 'O'], ['B-PER', 'I-PER', 'O']],
     [['O', 'O', 'B-MISC', 'I-MISC', 'I-MISC', 'I-MISC', 'O'], ['B-PER', 'I-PER', 'O']]),
    # I- without B- starts an entity (conlleval); the prediction with B- matches it
    ([['I-PER', 'I-PER', 'O']], [['B-PER', 'I-PER', 'O']]),
    # type change inside a chunk splits it
    ([['B-PER', 'I-LOC', 'I-LOC']], [['B-PER', 'B-LOC', 'I-LOC']]),
    # entities at sentence ends, and a sentence starting with I- after one ending in B-
    ([['O', 'B-ORG'], ['I-ORG', 'O']], [['O', 'B-ORG'], ['B-ORG', 'O']]),
    # IOBES tags and '.'
    ([['S-PER', 'B-LOC', 'E-LOC', '.', 'I-LOC']], [['S-PER', 'B-LOC', 'I-LOC', 'E-LOC', 'O']]),
    # bare letters and odd tags: "B" and "I" (type _), "X-FOO", "B-" (type _)
    ([['B', 'I', 'O', 'X-FOO', 'B-']], [['B', 'O', 'O', 'X-FOO', 'B-_']]),
    # nothing predicted, nothing true
    ([['O', 'O']], [['O', 'O']]),
    ([['B-A', 'I-A']], [['O', 'O']]),
    # multi-dash types: type is everything after the first dash
    ([['B-ORG-X', 'I-ORG-X']], [['B-ORG-X', 'I-ORG']]),
]

TAGS = ['O', 'O', 'O', 'B-PER', 'I-PER', 'B-LOC', 'I-LOC', 'B-ORG', 'I-ORG', 'E-PER', 'S-LOC',
        '.', 'B', 'I', 'I-', 'B-MISC', 'I-MISC', 'Z-PER']


def run_tool(tool, true, pred, tmp):
    with open(tmp, 'w') as f:
        for ts, ps in zip(true, pred):
            for a, b in zip(ts, ps):
                f.write(f'{a} {b}\n')
            f.write('\n')
    out = subprocess.run([tool, 'seqeval', tmp], capture_output=True, text=True, check=True).stdout.split('\n')
    head = out[0].split()
    got = tuple(int(x) for x in head[:3]) + tuple(float(x) for x in head[3:6])
    per = [tuple([l.split()[0]] + [int(x) for x in l.split()[1:]]) for l in out[1:] if l]
    return got, per


def main():
    tool = sys.argv[1]
    n_random = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    rng = random.Random(13)
    cases = list(TRICKY)
    for _ in range(n_random):
        n_sent = rng.randint(1, 6)
        true, pred = [], []
        for _ in range(n_sent):
            m = rng.randint(1, 12)
            t = [rng.choice(TAGS) for _ in range(m)]
            # predictions: mostly the truth, sometimes perturbed
            p = [x if rng.random() < 0.7 else rng.choice(TAGS) for x in t]
            true.append(t)
            pred.append(p)
        cases.append((true, pred))
    bad = 0
    ents = 0
    with tempfile.TemporaryDirectory() as d:
        for i, (true, pred) in enumerate(cases):
            want, want_per = score(true, pred)
            got, got_per = run_tool(sys.argv[1], true, pred, d + '/case.txt')
            ents += want[2]
            if got != want or got_per != want_per:
                bad += 1
                if bad <= 5:
                    print(f'case {i}: true {true} pred {pred}\n  python {want} {want_per}\n  plait  {got} {got_per}')
    # the docstring value, stated by seqeval itself
    if abs(score(*TRICKY[0])[0][5] - 0.5) > 1e-12:
        print('oracle disagrees with seqeval docstring (0.50)')
        bad += 1
    print(f'seqeval: {len(cases) - bad}/{len(cases)} cases identical ({len(TRICKY)} hand-picked, {ents} true entities)')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
