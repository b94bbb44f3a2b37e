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
  - the same questions as SQuAD v2.0 (a third unanswerable, some predictions
    "") through evaluate-v2.0.py's exact / f1 / HasAns / NoAns (transcribed
    below), through `TOOL squad2 DATA PRED`,
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


# ---- evaluate-v2.0.py (its normalize_answer is v1.1's) ----

def get_tokens(s):
    if not s:
        return []
    return normalize_answer(s).split()


def compute_exact(a_gold, a_pred):
    return int(normalize_answer(a_gold) == normalize_answer(a_pred))


def compute_f1(a_gold, a_pred):
    gold_toks = get_tokens(a_gold)
    pred_toks = get_tokens(a_pred)
    common = Counter(gold_toks) & Counter(pred_toks)
    num_same = sum(common.values())
    if len(gold_toks) == 0 or len(pred_toks) == 0:
        # If either is no-answer, then F1 is 1 if they agree, 0 otherwise
        return int(gold_toks == pred_toks)
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(pred_toks)
    recall = 1.0 * num_same / len(gold_toks)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1


def get_raw_scores(dataset, preds):
    exact_scores = {}
    f1_scores = {}
    for article in dataset:
        for p in article['paragraphs']:
            for qa in p['qas']:
                qid = qa['id']
                gold_answers = [a['text'] for a in qa['answers'] if normalize_answer(a['text'])]
                if not gold_answers:
                    # For unanswerable questions, only correct answer is empty string
                    gold_answers = ['']
                if qid not in preds:
                    print('Missing prediction for %s' % qid)
                    continue
                a_pred = preds[qid]
                # Take max over all gold answers
                exact_scores[qid] = max(compute_exact(a, a_pred) for a in gold_answers)
                f1_scores[qid] = max(compute_f1(a, a_pred) for a in gold_answers)
    return exact_scores, f1_scores


def make_eval_dict(exact_scores, f1_scores, qid_list=None):
    if not qid_list:
        total = len(exact_scores)
        return {'exact': 100.0 * sum(exact_scores.values()) / total,
                'f1': 100.0 * sum(f1_scores.values()) / total, 'total': total}
    total = len(qid_list)
    return {'exact': 100.0 * sum(exact_scores[k] for k in qid_list) / total,
            'f1': 100.0 * sum(f1_scores[k] for k in qid_list) / total, 'total': total}


def make_qid_to_has_ans(dataset):
    qid_to_has_ans = {}
    for article in dataset:
        for p in article['paragraphs']:
            for qa in p['qas']:
                qid_to_has_ans[qa['id']] = bool(qa['answers'])
    return qid_to_has_ans


def apply_no_ans_threshold(scores, na_probs, qid_to_has_ans, na_prob_thresh):
    new_scores = {}
    for qid, s in scores.items():
        pred_na = na_probs[qid] > na_prob_thresh
        if pred_na:
            new_scores[qid] = float(not qid_to_has_ans[qid])
        else:
            new_scores[qid] = s
    return new_scores


def merge_eval(main_eval, new_eval, prefix):
    for k in new_eval:
        main_eval['%s_%s' % (prefix, k)] = new_eval[k]


def find_best_thresh(preds, scores, na_probs, qid_to_has_ans):
    num_no_ans = sum(1 for k in qid_to_has_ans if not qid_to_has_ans[k])
    cur_score = num_no_ans
    best_score = cur_score
    best_thresh = 0.0
    qid_list = sorted(na_probs, key=lambda k: na_probs[k])
    for i, qid in enumerate(qid_list):
        if qid not in scores:
            continue
        if qid_to_has_ans[qid]:
            diff = scores[qid]
        else:
            if preds[qid]:
                diff = -1
            else:
                diff = 0
        cur_score += diff
        if cur_score > best_score:
            best_score = cur_score
            best_thresh = na_probs[qid]
    return 100.0 * best_score / len(scores), best_thresh


def find_all_best_thresh(main_eval, preds, exact_raw, f1_raw, na_probs, qid_to_has_ans):
    best_exact, exact_thresh = find_best_thresh(preds, exact_raw, na_probs, qid_to_has_ans)
    best_f1, f1_thresh = find_best_thresh(preds, f1_raw, na_probs, qid_to_has_ans)
    main_eval['best_exact'] = best_exact
    main_eval['best_exact_thresh'] = exact_thresh
    main_eval['best_f1'] = best_f1
    main_eval['best_f1_thresh'] = f1_thresh


def evaluate_v2(dataset, preds, na_probs=None, na_prob_thresh=1.0):
    """evaluate-v2.0.py's main: without na_probs (no --na-prob-file) every question's
    na_prob is 0.0, so apply_no_ans_threshold at --na-prob-thresh 1.0 changes nothing
    and there is no threshold search; with na_probs (the file's {id: value}, in its
    order) the thresholded figures and find_all_best_thresh's four."""
    na_file = na_probs is not None
    if not na_file:
        na_probs = {k: 0.0 for k in preds}
    qid_to_has_ans = make_qid_to_has_ans(dataset)
    has_ans_qids = [k for k, v in qid_to_has_ans.items() if v]
    no_ans_qids = [k for k, v in qid_to_has_ans.items() if not v]
    exact_raw, f1_raw = get_raw_scores(dataset, preds)
    exact_thresh = apply_no_ans_threshold(exact_raw, na_probs, qid_to_has_ans, na_prob_thresh)
    f1_thresh = apply_no_ans_threshold(f1_raw, na_probs, qid_to_has_ans, na_prob_thresh)
    out_eval = make_eval_dict(exact_thresh, f1_thresh)
    if has_ans_qids:
        merge_eval(out_eval, make_eval_dict(exact_thresh, f1_thresh, qid_list=has_ans_qids), 'HasAns')
    if no_ans_qids:
        merge_eval(out_eval, make_eval_dict(exact_thresh, f1_thresh, qid_list=no_ans_qids), 'NoAns')
    if na_file:
        find_all_best_thresh(out_eval, preds, exact_raw, f1_raw, na_probs, qid_to_has_ans)
    return out_eval


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
        # SQuAD v2.0: every third question unanswerable (answers [], is_impossible), its
        # prediction "" or not; answered ones predicted "" sometimes; a gold answer that
        # normalizes to nothing ("the") dropped; every question predicted, as the script needs
        preds2 = {}
        for i, para in enumerate(data['data'][0]['paragraphs']):
            qa = para['qas'][0]
            if i % 3 == 0:
                qa['answers'], qa['is_impossible'] = [], True
            elif i % 11 == 1:
                qa['answers'].insert(0, {'text': 'The', 'answer_start': 0})
            preds2[qa['id']] = '' if rng.random() < 0.3 else preds.get(qa['id'], cases[i][0])
        with open(d + '/data2.json', 'w') as f:
            json.dump(data, f, ensure_ascii=False)
        with open(d + '/pred2.json', 'w') as f:
            json.dump(preds2, f, ensure_ascii=False)
        want2 = evaluate_v2(data['data'], preds2)
        got2 = json.loads(subprocess.run([tool, 'squad2', d + '/data2.json', d + '/pred2.json'], capture_output=True,
                                         text=True, check=True).stdout)
        print(f'evaluate-v2.0: python {want2}, plait {got2}')
        if got2 != want2:
            bad += 1
        # --na-prob-file and --na-prob-thresh: values with ties (the file's order breaks
        # them), the file's ids shuffled, an id the data lacks; thresholds on a tie, between
        # values, below and above all of them
        na = {qa['id']: rng.choice([-2.5, -1.0, 0.0, 0.5, 1.0, 1.0, 2.25]) if rng.random() < 0.6
              else round(rng.gauss(0.5, 1.5), 3)
              for para in data['data'][0]['paragraphs'] for qa in para['qas']}
        ids = list(na)
        rng.shuffle(ids)
        na = {k: na[k] for k in ids}
        na['not-a-question'] = -9.0
        with open(d + '/na.json', 'w') as f:
            json.dump(na, f)
        for thresh in (1.0, 0.25, -10.0, 10.0):
            want3 = evaluate_v2(data['data'], preds2, na, thresh)
            got3 = json.loads(subprocess.run([tool, 'squad2', d + '/data2.json', d + '/pred2.json', d + '/na.json',
                                              repr(thresh)], capture_output=True, text=True, check=True).stdout)
            print(f'evaluate-v2.0 --na-prob-thresh {thresh}: python {want3}, plait {got3}')
            if got3 != want3 or 'best_f1_thresh' not in want3:
                bad += 1
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
