#!/usr/bin/env python3
"""Derives three labelled fine-tuning tasks from the King James Bible text in
data/kjv.txt (one verse a line, 31,102 lines, Genesis 1:1 to Revelation 22:21).
No package reachable here ships labelled sentiment / NER / QA data small and
free enough to pin (docs/finetune.md lists what was looked at), so the labels
below are DERIVED by fixed rules from real text. They are stand-ins for
GLUE / CoNLL-2003 / SQuAD: good for checking that fine-tuning learns and that
every format and metric works end to end, not benchmarks of language skill.

Rules (deterministic: same input, same bytes out):
  split     verse line numbers (1-based) divisible by 10 go to dev, the others
            to train.
  testament text classification: label "OT" for lines 1..23145 (Genesis 1:1 ..
            Malachi 4:6), "NT" for lines 23146..31102 (Matthew 1:1 ..).
            The script checks line 23146 begins "The book of the generation".
  names     token classification (CoNLL, BIO): a verse is split into words and
            punctuation marks; a word form is a NAME when, among its
            occurrences that are not verse- or clause-initial (not first, not
            after . ? ! : ; or an opening bracket), at least 90% are
            capitalised and there are at least 2 of them; "I" and "O" are
            never names. A capitalised token whose form is a name is tagged
            B-NAME, or I-NAME right after another name token ("Jesus Christ");
            everything else is O.
  cloze     extractive QA (SQuAD v1.1 JSON): for every verse with a NAME, the
            context is the previous, this and the next verse joined by a space;
            the question is this verse with its first name (all its tokens)
            replaced by "what"; the answer is that name at its offset in the
            context (code points, as SQuAD counts).
Output (in OUT_DIR): kjv-testament.{train,dev}.tsv (header "sentence\tlabel"),
kjv-names.{train,dev}.conll ("word tag"), kjv-cloze.{train,dev}.json, and
counts on stdout as JSON.

  derive_kjv_tasks.py KJV.txt OUT_DIR [--limit N]   (--limit: first N verses)
"""
import json
import re
import sys
from collections import Counter

OT_VERSES = 23145
TOKEN = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*|[0-9]+|[^\sA-Za-z0-9]")
OPENERS = {'.', '?', '!', ':', ';', '(', '['}


def tokens(verse):
    return [(m.group(0), m.start()) for m in TOKEN.finditer(verse)]


def name_forms(verses):
    cap, total = Counter(), Counter()
    for v in verses:
        toks = tokens(v)
        for i, (w, _) in enumerate(toks):
            if not w[0].isalpha() or i == 0 or toks[i - 1][0] in OPENERS:
                continue
            total[w.lower()] += 1
            cap[w.lower()] += w[0].isupper()
    return {f for f, n in total.items() if n >= 2 and cap[f] >= 0.9 * n and f not in ('i', 'o')}


def tag_verse(verse, names):
    toks = tokens(verse)
    tags = []
    for i, (w, _) in enumerate(toks):
        if w[0].isalpha() and w[0].isupper() and w.lower() in names:
            tags.append('I-NAME' if i > 0 and tags[-1] != 'O' else 'B-NAME')
        else:
            tags.append('O')
    return toks, tags


def main():
    args = sys.argv[1:]
    limit = None
    if '--limit' in args:
        k = args.index('--limit')
        limit = int(args[k + 1])
        del args[k:k + 2]
    src, out = args
    with open(src, encoding='utf-8') as f:
        verses = f.read().split('\n')
    if verses and verses[-1] == '':
        verses.pop()
    if len(verses) != 31102 or not verses[OT_VERSES].startswith('The book of the generation'):
        sys.exit(f'{src}: expected the 31,102-verse KJV with Matthew 1:1 on line {OT_VERSES + 1}')
    names = name_forms(verses)
    if limit:
        verses = verses[:limit]
    counts = Counter()
    files = {}
    for split in ('train', 'dev'):
        files[split] = {
            'tsv': open(f'{out}/kjv-testament.{split}.tsv', 'w', encoding='utf-8'),
            'conll': open(f'{out}/kjv-names.{split}.conll', 'w', encoding='utf-8'),
        }
        files[split]['tsv'].write('sentence\tlabel\n')
    squad = {s: {'version': '1.1', 'data': [{'title': 'KJV cloze (derived)', 'paragraphs': []}]} for s in files}
    for i, v in enumerate(verses):
        line = i + 1
        split = 'dev' if line % 10 == 0 else 'train'
        label = 'OT' if line <= OT_VERSES else 'NT'
        files[split]['tsv'].write(f'{v}\t{label}\n')
        counts[f'testament.{split}.{label}'] += 1
        toks, tags = tag_verse(v, names)
        for (w, _), t in zip(toks, tags):
            files[split]['conll'].write(f'{w} {t}\n')
        files[split]['conll'].write('\n')
        counts[f'names.{split}.sentences'] += 1
        counts[f'names.{split}.entities'] += sum(t == 'B-NAME' for t in tags)
        if 'B-NAME' in tags:
            b = tags.index('B-NAME')
            e = b + 1
            while e < len(tags) and tags[e] == 'I-NAME':
                e += 1
            start = toks[b][1]
            end = toks[e - 1][1] + len(toks[e - 1][0])
            prev = verses[i - 1] + ' ' if i > 0 else ''
            nxt = ' ' + verses[i + 1] if i + 1 < len(verses) else ''
            context = prev + v + nxt
            answer = v[start:end]
            question = v[:start] + 'what' + v[end:]
            off = len(prev) + start
            assert context[off:off + len(answer)] == answer
            squad[split]['data'][0]['paragraphs'].append({
                'context': context,
                'qas': [{'id': f'kjv-{line}', 'question': question,
                         'answers': [{'text': answer, 'answer_start': off}]}]})
            counts[f'cloze.{split}.questions'] += 1
    for split in files:
        for f in files[split].values():
            f.close()
        with open(f'{out}/kjv-cloze.{split}.json', 'w', encoding='utf-8') as f:
            json.dump(squad[split], f, ensure_ascii=False)
    counts['name_forms'] = len(names)
    print(json.dumps(dict(sorted(counts.items()))))


if __name__ == '__main__':
    main()
