#!/usr/bin/env python3
"""Oracle for src/finetune/squad_eval.c: the official SQuAD v1.1 evaluation
(evaluate-v1.1.py: normalize_answer, f1_score, exact_match_score,
metric_max_over_ground_truths, evaluate), transcribed here because the script
is not shipped by any package reachable from this machine.

  squad_eval_reference.py TOOL
Builds a SQuAD file and predictions (multiple ground truths, articles,
ASCII and Unicode punctuation, Unicode case and whitespace, unanswered
questions, empty answers) plus seeded random ones, and compares
  - normalize_answer() on every string, through `TOOL normalize FILE`,
  - the final {"exact_match", "f1"}, through `TOOL squad DATA PRED`,
exactly (the C and Python sums run in the same order). Exits 1 on any
difference."""
import json
import random
import re
import string
import subprocess
import sys
import tempfile
from collections import Counter


def normalize_answer(s):
    """Lower text and remove punctuation, articles and extra whitespace."""
    def remove_articles(text):
        return re.sub(r'\b(a|an|the)\b', ' ', text)

    def white_space_fix(text):
        return ' '.join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return ''.join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def f1_score(prediction, ground_truth):
    prediction_tokens = normalize_answer(prediction).split()
    ground_truth_tokens = normalize_answer(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1


def exact_match_score(prediction, ground_truth):
    return (normalize_answer(prediction) == normalize_answer(ground_truth))


def metric_max_over_ground_truths(metric_fn, prediction, ground_truths):
    scores_for_ground_truths = []
    for ground_truth in ground_truths:
        score = metric_fn(prediction, ground_truth)
        scores_for_ground_truths.append(score)
    return max(scores_for_ground_truths)


def evaluate(dataset, predictions):
    f1 = exact_match = total = 0
    for article in dataset:
        for paragraph in article['paragraphs']:
            for qa in paragraph['qas']:
                total += 1
                if qa['id'] not in predictions:
                    continue
                ground_truths = list(map(lambda x: x['text'], qa['answers']))
                prediction = predictions[qa['id']]
                exact_match += metric_max_over_ground_truths(exact_match_score, prediction, ground_truths)
                f1 += metric_max_over_ground_truths(f1_score, prediction, ground_truths)
    exact_match = 100.0 * exact_match / total
    f1 = 100.0 * f1 / total
    return {'exact_match': exact_match, 'f1': f1}


# (prediction, [ground truths]) pairs chosen to exercise each rule.
CASES = [
    ('Denver Broncos', ['Denver Broncos', 'The Denver Broncos', 'Broncos']),
    ('the Denver Broncos!', ['Denver Broncos']),
    ('Broncos', ['Denver Broncos']),
    ('an apple a day', ['apple day']),
    ('Theatre of the absurd', ['theatre absurd']),          # "the" inside a word stays
    ('“Saint Bernadette Soubirous”', ['Saint Bernadette Soubirous']),  # curly quotes are not string.punctuation
    ('Saint—Bernadette', ['Saint Bernadette']),             # em dash stays, hyphen would go
    ('Saint-Bernadette', ['SaintBernadette']),
    ('İstanbul', ['i̇stanbul']),                             # U+0130 lowercases to i + U+0307
    ('ΟΔΥΣΣΕΥΣ', ['οδυσσευς']),                             # final sigma
    ('Ünïcödé ÅNGSTRÖM', ['ünïcödé ångström']),
    ('the\u00a0cat\u2003sat', ['cat sat']),                  # Unicode whitespace splits
    ('cat\u200bsat', ['cat sat']),                           # zero-width space does not
    ('a', ['the']),                                          # both empty: EM 1, F1 0
    ('', ['something']),
    ('the the the cat', ['cat cat']),                        # Counter intersection
    ('l\'amour', ['lamour']),
    ('the_cat', ['thecat']),                                 # '_' is punctuation
    ('a1 the2 an', ['a1 the2']),
    ('日本の首都', ['日本の首都']),
    ('1,000 people', ['1000 people']),
    ('(the) answer', ['answer']),
    ('An ánt', ['ánt']),
]


def random_text(rng):
    alphabet = ('abc theanAT.,!?-\'"“”—…_ ÉéİıΣσ' + '\u00a0\u2003\t' + 'ßØø日本') 
    words = ['the', 'a', 'an', 'The', 'AN', 'cat', 'Cat', 'sat', 'mat', 'on']
    parts = []
    for _ in range(rng.randint(0, 8)):
        if rng.random() < 0.6:
            parts.append(rng.choice(words))
        else:
            parts.append(''.join(rng.choice(alphabet) for _ in range(rng.randint(1, 5))))
    return rng.choice([' ', '  ', ', ']).join(parts)


def main():
    tool = sys.argv[1]
    rng = random.Random(1)
    cases = list(CASES)
    for _ in range(300):
        truths = [random_text(rng) for _ in range(rng.randint(1, 3))]
        pred = rng.choice(truths) if rng.random() < 0.3 else random_text(rng)
        if rng.random() < 0.5:
            pred = pred.upper() if rng.random() < 0.5 else '  ' + pred + ' .'
        cases.append((pred, truths))
    data = {'version': '1.1', 'data': [{'title': 't', 'paragraphs': []}]}
    preds = {}
    for i, (p, truths) in enumerate(cases):
        data['data'][0]['paragraphs'].append({
            'context': 'context ' + ' '.join(truths),
            'qas': [{'id': f'q{i}', 'question': 'What?', 'answers': [{'text': t, 'answer_start': 0} for t in truths]}]})
        if i % 17 != 5:  # some questions stay unanswered: they count, with 0
            preds[f'q{i}'] = p
    preds['not-a-question'] = 'ignored'
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        strings = sorted({s for p, ts in cases for s in [p] + ts})
        with open(d + '/norm.txt', 'w') as f:
            for s in strings:
                f.write(json.dumps(s) + '\n')
        out = subprocess.run([tool, 'normalize', d + '/norm.txt'], capture_output=True, text=True, check=True).stdout
        got = [json.loads(x) for x in out.splitlines()]
        same = 0
        for s, g in zip(strings, got):
            w = normalize_answer(s)
            if w == g:
                same += 1
            elif bad < 5:
                bad += 1
                print(f'normalize_answer({s!r}): python {w!r}, plait {g!r}')
        if same != len(strings) or len(got) != len(strings):
            bad += 1
        print(f'normalize_answer: {same}/{len(strings)} strings identical')
        with open(d + '/data.json', 'w') as f:
            json.dump(data, f, ensure_ascii=False)
        with open(d + '/pred.json', 'w') as f:
            json.dump(preds, f, ensure_ascii=False)
        want = evaluate(data['data'], preds)
        out = subprocess.run([tool, 'squad', d + '/data.json', d + '/pred.json'], capture_output=True, text=True,
                             check=True).stdout
        got = json.loads(out)
        print(f'evaluate: python {want}, plait {got} ({len(cases)} questions, {len(preds) - 1} answered)')
        if got != want:
            bad += 1
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
