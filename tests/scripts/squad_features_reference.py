#!/usr/bin/env python3
"""Oracle for src/finetune/squad.c and squad_decode.c: SQuAD v1.1 features and
n-best span decoding as Google BERT's run_squad.py computes them (the code
Megatron's, NeMo's and Hugging Face's SQuAD pipelines copy), transcribed here
with the BERT tokenizer it uses (tokenization.py: BasicTokenizer +
WordpieceTokenizer, as Megatron's bert_tokenization.py, max 200 characters a
word). Nothing is shared with plait's C but the vocabulary file.

  squad_features_reference.py TOOL VOCAB DATA.json SEQ STRIDE QLEN [N_BEST] [--tricky OUT.json] [--v2 THRESHOLD]
  squad_features_reference.py --run VOCAB DATA.json SEQ STRIDE QLEN N_BEST LOGITS NBEST.json PRED.json
                              [--v2 THRESHOLD NULL_ODDS.json]
Builds training features (read_squad_examples + convert_examples_to_features:
_improve_answer_span, doc spans, _check_is_max_context), draws seeded random
float32 start/end logits for every feature, decodes each question
(write_predictions: _get_best_indexes, the filters, the sorted prelim list,
get_final_text, the n-best list with its de-duplication, "empty" fallback and
_compute_softmax) and compares with `TOOL squad-dump ...`: every feature's ids,
token types, length, start/end positions and max-context positions, every
predicted text, and every n-best list (texts and order identical, logits
equal, probabilities within 1e-6). With --tricky, first writes a small SQuAD file of awkward
contexts (accents, curly quotes, runs of spaces, tabs, U+202F, hyphens,
numbers, unknown characters) to OUT.json and uses it as DATA.
With --v2 THRESHOLD, SQuAD v2.0 (version_2_with_negative, is_impossible
questions, null_score_diff_threshold): the null span in the n-best lists, the
predictions and score_diff (null_odds.json) compared too; --tricky then adds
an unanswerable question to each context. With --run, checks a fine-tuning run's own nbest_predictions.json and
predictions.json against this decoding of the logits it saved
(--save-qa-logits). Exits 1 on any difference."""
import collections
import json
import math
import subprocess
import sys
import tempfile

import numpy as np

from bert_tokenization_reference import BasicTokenizer, FullTokenizer, whitespace_tokenize


# ---- run_squad.py ----

def is_ws(c):
    return c == ' ' or c == '\t' or c == '\r' or c == '\n' or ord(c) == 0x202F


def read_examples(data):
    examples = []
    for entry in data['data']:
        for paragraph in entry['paragraphs']:
            text = paragraph['context']
            doc_tokens, char_to_word_offset, prev_ws = [], [], True
            for c in text:
                if is_ws(c):
                    prev_ws = True
                else:
                    if prev_ws:
                        doc_tokens.append(c)
                    else:
                        doc_tokens[-1] += c
                    prev_ws = False
                char_to_word_offset.append(len(doc_tokens) - 1)
            for qa in paragraph['qas']:
                if qa.get('is_impossible', False):  # version_2_with_negative: no answer
                    examples.append(dict(id=qa['id'], question=qa['question'], doc_tokens=doc_tokens,
                                         answer='', start=-1, end=-1, impossible=True))
                    continue
                ans = qa['answers'][0]
                start = char_to_word_offset[ans['answer_start']]
                end = char_to_word_offset[ans['answer_start'] + len(ans['text']) - 1]
                actual = ' '.join(doc_tokens[start:end + 1])
                cleaned = ' '.join(whitespace_tokenize(ans['text']))
                if actual.find(cleaned) == -1:
                    continue  # "Could not find answer": dropped from training
                examples.append(dict(id=qa['id'], question=qa['question'], doc_tokens=doc_tokens,
                                     answer=ans['text'], start=start, end=end, impossible=False))
    return examples


def improve_answer_span(doc_tokens, start, end, tokenizer, orig_answer_text):
    tok_answer_text = ' '.join(tokenizer.tokenize(orig_answer_text))
    for new_start in range(start, end + 1):
        for new_end in range(end, new_start - 1, -1):
            if ' '.join(doc_tokens[new_start:new_end + 1]) == tok_answer_text:
                return new_start, new_end
    return start, end


def check_is_max_context(doc_spans, cur, position):
    best_score, best_index = None, None
    for i, (s, n) in enumerate(doc_spans):
        end = s + n - 1
        if position < s or position > end:
            continue
        score = min(position - s, end - position) + 0.01 * n
        if best_score is None or score > best_score:
            best_score, best_index = score, i
    return cur == best_index


def convert(examples, tokenizer, seq, stride, qlen):
    features = []
    for ei, ex in enumerate(examples):
        query = tokenizer.tokenize(ex['question'])[:qlen]
        tok_to_orig, orig_to_tok, all_doc = [], [], []
        for i, token in enumerate(ex['doc_tokens']):
            orig_to_tok.append(len(all_doc))
            for sub in tokenizer.tokenize(token):
                tok_to_orig.append(i)
                all_doc.append(sub)
        if not ex['impossible']:
            ts = orig_to_tok[ex['start']]
            te = orig_to_tok[ex['end'] + 1] - 1 if ex['end'] < len(ex['doc_tokens']) - 1 else len(all_doc) - 1
            ts, te = improve_answer_span(all_doc, ts, te, tokenizer, ex['answer'])
        max_doc = seq - len(query) - 3
        spans, off = [], 0
        while off < len(all_doc):
            n = min(len(all_doc) - off, max_doc)
            spans.append((off, n))
            if off + n == len(all_doc):
                break
            off += min(n, stride)
        for si, (s, n) in enumerate(spans):
            tokens = ['[CLS]'] + query + ['[SEP]']
            types = [0] * len(tokens)
            t2o, maxctx = {}, []
            for i in range(n):
                p = s + i
                t2o[len(tokens)] = tok_to_orig[p]
                if check_is_max_context(spans, si, p):
                    maxctx.append(len(tokens))
                tokens.append(all_doc[p])
                types.append(1)
            tokens.append('[SEP]')
            types.append(1)
            if ex['impossible'] or not (ts >= s and te <= s + n - 1):
                start = end = 0
            else:
                off_q = len(query) + 2
                start, end = ts - s + off_q, te - s + off_q
            features.append(dict(ex=ei, tokens=tokens, ids=[tokenizer.vocab[t] for t in tokens], types=types,
                                 t2o=t2o, maxctx=maxctx, start=start, end=end))
    return features


def strip_spaces(text):
    ns, m = [], collections.OrderedDict()
    for i, c in enumerate(text):
        if c == ' ':
            continue
        m[len(ns)] = i
        ns.append(c)
    return ''.join(ns), m


def get_final_text(pred_text, orig_text):
    tok_text = ' '.join(BasicTokenizer(True).tokenize(orig_text))
    start_position = tok_text.find(pred_text)
    if start_position == -1:
        return orig_text
    end_position = start_position + len(pred_text) - 1
    orig_ns, orig_map = strip_spaces(orig_text)
    tok_ns, tok_map = strip_spaces(tok_text)
    if len(orig_ns) != len(tok_ns):
        return orig_text
    tok_s_to_ns = {v: k for k, v in tok_map.items()}
    orig_start = orig_map.get(tok_s_to_ns[start_position]) if start_position in tok_s_to_ns else None
    if orig_start is None:
        return orig_text
    orig_end = orig_map.get(tok_s_to_ns[end_position]) if end_position in tok_s_to_ns else None
    if orig_end is None:
        return orig_text
    return orig_text[orig_start:orig_end + 1]


def best_indexes(logits, n):
    return [i for i, _ in sorted(enumerate(logits), key=lambda x: x[1], reverse=True)[:n]]


def compute_softmax(scores):
    """run_squad.py's _compute_softmax."""
    if not scores:
        return []
    max_score = None
    for score in scores:
        if max_score is None or score > max_score:
            max_score = score
    exp_scores, total_sum = [], 0.0
    for score in scores:
        x = math.exp(score - max_score)
        exp_scores.append(x)
        total_sum += x
    return [x / total_sum for x in exp_scores]


def predict(examples, features, logits, n_best=20, max_len=30, v2=False, threshold=0.0):
    """write_predictions: per question (id, predicted text, n-best list of
    {"text", "probability", "start_logit", "end_logit"}, score_diff); v2 is
    version_2_with_negative with null_score_diff_threshold threshold."""
    by_ex = collections.defaultdict(list)
    for fi, f in enumerate(features):
        by_ex[f['ex']].append(fi)
    out = []
    for ei, ex in enumerate(examples):
        prelim = []
        score_null, min_null_fi, null_start, null_end = 1000000, 0, 0, 0
        for fi in by_ex[ei]:
            f = features[fi]
            sl, el = [float(x) for x in logits[fi, 0]], [float(x) for x in logits[fi, 1]]
            if v2:
                feature_null_score = sl[0] + el[0]
                if feature_null_score < score_null:
                    score_null, min_null_fi, null_start, null_end = feature_null_score, fi, sl[0], el[0]
            for s in best_indexes(sl, n_best):
                for e in best_indexes(el, n_best):
                    if s >= len(f['tokens']) or e >= len(f['tokens']):
                        continue
                    if s not in f['t2o'] or e not in f['t2o']:
                        continue
                    if s not in f['maxctx']:
                        continue
                    if e < s or e - s + 1 > max_len:
                        continue
                    prelim.append((fi, s, e, sl[s], el[e]))
        if v2:
            prelim.append((min_null_fi, 0, 0, null_start, null_end))
        prelim = sorted(prelim, key=lambda x: x[3] + x[4], reverse=True)
        seen, nbest = {}, []
        for fi, s, e, s_logit, e_logit in prelim:
            if len(nbest) >= n_best:
                break
            f = features[fi]
            if s > 0:
                tok_text = ' '.join(f['tokens'][s:e + 1]).replace(' ##', '').replace('##', '')
                tok_text = ' '.join(tok_text.strip().split())
                orig_text = ' '.join(ex['doc_tokens'][f['t2o'][s]:f['t2o'][e] + 1])
                final_text = get_final_text(tok_text, orig_text)
                if final_text in seen:
                    continue
                seen[final_text] = True
            else:
                final_text = ''
                seen[final_text] = True
            nbest.append((final_text, s_logit, e_logit))
        if v2 and '' not in seen:
            nbest.append(('', null_start, null_end))
        if not nbest:
            nbest.append(('empty', 0.0, 0.0))
        best_non_null = next((x for x in nbest if x[0]), None)
        probs = compute_softmax([a + b for _, a, b in nbest])
        nbest_json = [collections.OrderedDict(text=t, probability=p, start_logit=a, end_logit=b)
                      for (t, a, b), p in zip(nbest, probs)]
        if not v2:
            out.append((ex['id'], nbest_json[0]['text'], nbest_json, None))
            continue
        # run_squad.py fails where no span qualifies (best_non_null None); plait
        # then predicts "" with an infinite score_diff, and so does this
        score_diff = score_null - best_non_null[1] - best_non_null[2] if best_non_null else math.inf
        out.append((ex['id'], '' if score_diff > threshold else best_non_null[0], nbest_json, score_diff))
    return out


def nbest_equal(want, got):
    """Texts and order identical, logits equal (both are the float32 values),
    probabilities within 1e-6 (exp and the sum in double on both sides)."""
    return (len(want) == len(got) and
            all(w['text'] == g['text'] and w['start_logit'] == g['start_logit'] and
                w['end_logit'] == g['end_logit'] and abs(w['probability'] - g['probability']) <= 1e-6
                for w, g in zip(want, got)))


TRICKY = [
    ('Ünïcödé   café\tdéjà-vu costs $1,000.50 (approx.) at Zürich’s “Großmünster”.', 'Großmünster'),
    ('The state-of-the-art U.S.A. model—trained in 2019—scored 93.2% on S.Q.u.A.D.', 'U.S.A.'),
    ('Tab\tseparated\u202fnarrow nbsp\u00a0kept words, and ☃ snowmen ☃☃ melt.', 'snowmen'),
    ('A very long context ' + ' '.join(f'word{i}' for i in range(150)) + ' ends with the Eiffel Tower.',
     'Eiffel Tower'),
    ('Numbers like 24–10 and 3/4 and 1e-9 and ½ appear; also “quotes” and ‘single’ ones.', '24–10'),
]


def write_tricky(path, v2=False):
    paras = []
    for i, (ctx, ans) in enumerate(TRICKY):
        paras.append({'context': ctx, 'qas': [
            {'id': f't{i}', 'question': f'Which thing is {ans}?',
             'answers': [{'text': ans, 'answer_start': ctx.index(ans)}]},
            {'id': f't{i}b', 'question': 'What else is in the context, with punctuation “here”?',
             'answers': [{'text': ctx.split()[1], 'answer_start': ctx.index(ctx.split()[1])}]}]})
        if v2:  # SQuAD v2.0: an unanswerable question per context, its plausible answer aside
            paras[-1]['qas'].append({'id': f't{i}n', 'question': 'Which planet is named here?', 'answers': [],
                                     'plausible_answers': [{'text': ans, 'answer_start': ctx.index(ans)}],
                                     'is_impossible': True})
    with open(path, 'w', encoding='utf-8') as f:
        json.dump({'version': '1.1', 'data': [{'title': 'tricky', 'paragraphs': paras}]}, f, ensure_ascii=False)


def check_run(args):
    """--run VOCAB DATA.json SEQ STRIDE QLEN N_BEST LOGITS NBEST.json PRED.json: a
    fine-tuning run's own files. Decodes the run's logits (--save-qa-logits) with
    write_predictions here and compares with the run's nbest_predictions.json and
    predictions.json (the best text; none where the list is "empty"). With
    --v2 THRESHOLD NULL_ODDS.json after them: SQuAD v2.0, the predictions
    ("" for the null answer) and null_odds.json's score_diff compared too."""
    v2, threshold, odds_path = False, 0.0, None
    if '--v2' in args:
        k = args.index('--v2')
        v2, threshold, odds_path = True, float(args[k + 1]), args[k + 2]
        del args[k:k + 3]
    vocab, data_path = args[0], args[1]
    seq, stride, qlen, n_best = map(int, args[2:6])
    logits_path, nbest_path, pred_path = args[6:9]
    tokenizer = FullTokenizer(vocab)
    with open(data_path, encoding='utf-8') as f:
        examples = read_examples(json.load(f))
    features = convert(examples, tokenizer, seq, stride, qlen)
    logits = np.fromfile(logits_path, dtype=np.float32)
    if logits.size != len(features) * 2 * seq:
        print(f'{logits_path}: {logits.size} floats, python has {len(features)} features x 2 x {seq}')
        return 1
    full = predict(examples, features, logits.reshape(len(features), 2, seq), n_best, v2=v2, threshold=threshold)
    want = [w[:3] for w in full]
    odds = None
    if v2:
        with open(odds_path, encoding='utf-8') as f:
            odds = json.load(f)
    with open(nbest_path, encoding='utf-8') as f:
        got = json.load(f)
    with open(pred_path, encoding='utf-8') as f:
        pred = json.load(f)
    bad = 0
    if list(got) != [i for i, _, _ in want]:
        print(f'{nbest_path}: question ids {list(got)[:5]}..., python {[i for i, _, _ in want][:5]}...')
        return 1
    nulls = 0
    for (qid, best, wn), w in zip(want, full):
        want_pred = None if not v2 and wn[0]['text'] == 'empty' and wn[0]['start_logit'] == 0.0 else best
        nulls += v2 and best == ''
        odds_ok = not v2 or (qid in odds and (odds[qid] == w[3] or abs(odds[qid] - w[3]) <= 1e-9))
        if not nbest_equal(wn, got[qid]) or pred.get(qid) != want_pred or not odds_ok:
            bad += 1
            if bad <= 3:
                print(f'{qid}: python {json.dumps(wn)[:300]} best {want_pred!r}\n  plait {json.dumps(got[qid])[:300]} '
                      f'best {pred.get(qid)!r}')
    entries = sum(len(wn) for _, _, wn in want)
    print(f'run n-best lists: {len(want) - bad}/{len(want)} equal ({entries} entries, n-best {n_best}); '
          + (f'SQuAD v2.0 threshold {threshold}: predictions ({nulls} null) and null odds equal' if v2 else
             'predictions their first texts'))
    return 1 if bad else 0


def main():
    args = sys.argv[1:]
    if args and args[0] == '--run':
        return check_run(args[1:])
    v2, threshold = False, 0.0
    if '--v2' in args:
        k = args.index('--v2')
        v2, threshold = True, float(args[k + 1])
        del args[k:k + 2]
    if '--tricky' in args:
        k = args.index('--tricky')
        write_tricky(args[k + 1], v2)
        del args[k:k + 2]
    tool, vocab, data_path, seq, stride, qlen = args[0], args[1], args[2], *map(int, args[3:6])
    n_best = int(args[6]) if len(args) > 6 else 20
    tokenizer = FullTokenizer(vocab)
    with open(data_path, encoding='utf-8') as f:
        data = json.load(f)
    examples = read_examples(data)
    features = convert(examples, tokenizer, seq, stride, qlen)
    rng = np.random.default_rng(7)
    logits = rng.standard_normal((len(features), 2, seq)).astype(np.float32)
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        logits.tofile(d + '/logits.bin')
        out = subprocess.run([tool, 'squad-dump', vocab, data_path, str(seq), str(stride), str(qlen),
                              d + '/logits.bin', str(n_best)] + ([str(threshold)] if v2 else []),
                             capture_output=True, text=True)
        if out.returncode != 0:
            print(out.stderr)
            return 1
        lines = [json.loads(x) for x in out.stdout.splitlines()]
    got_f = [x for x in lines if 'q' in x]
    got_p = [(x['id'], x['text']) for x in lines if 'id' in x]
    got_nb = [next(iter(x['nbest'].items())) for x in lines if 'nbest' in x]
    got_v2 = [x for x in lines if 'v2' in x]
    if len(got_f) != len(features):
        print(f'features: python {len(features)}, plait {len(got_f)}')
        return 1
    fbad = 0
    for i, (w, g) in enumerate(zip(features, got_f)):
        same = (w['ids'] == g['ids'] and w['types'] == g['types'] and len(w['tokens']) == g['n'] and
                w['start'] == g['start'] and w['end'] == g['end'] and w['maxctx'] == g['maxctx'])
        if not same:
            fbad += 1
            if fbad <= 3:
                print(f'feature {i} (question {examples[w["ex"]]["id"]}): python start/end {w["start"]}/{w["end"]} '
                      f'n {len(w["tokens"])}, plait {g["start"]}/{g["end"]} n {g["n"]}; ids equal: {w["ids"] == g["ids"]}, '
                      f'maxctx equal: {w["maxctx"] == g["maxctx"]}')
    want = predict(examples, features, logits, n_best, v2=v2, threshold=threshold)
    # run_squad.py writes "empty" when no span qualifies; plait returns no text
    # (its n-best list does hold the "empty" entry).
    want_p = [(i, '' if t == 'empty' else t) for i, t, _, _ in want]
    nbad, null_answers = 0, 0
    if v2 and len(got_v2) != len(want):
        nbad += 1
    for k, ((wi, wt, wn, wd), (gi, gn)) in enumerate(zip(want, got_nb)):
        if v2 and k < len(got_v2):
            gd = got_v2[k]['score_diff']
            null_answers += wt == ''
            # score_diff: the same double arithmetic on the same float32 logits
            if not (gd == wd or abs(gd - wd) <= 1e-9):
                nbad += 1
                print(f'score_diff {wi}: python {wd!r}, plait {gd!r}')
        if wi != gi or not nbest_equal(wn, gn):
            nbad += 1
            if nbad <= 3:
                print(f'n-best {wi}: python {json.dumps(wn)[:400]}\n  plait {gi} {json.dumps(gn)[:400]}')
    if len(want) != len(got_nb):
        nbad += 1
    entries = sum(len(wn) for _, _, wn, _ in want)
    empty = sum(wn[0]['text'] == 'empty' and wn[0]['start_logit'] == 0.0 for _, _, wn, _ in want)
    pbad = 0
    for w, g in zip(want_p, got_p):
        if w != g:
            pbad += 1
            if pbad <= 5:
                print(f'prediction {w[0]}: python {w[1]!r}, plait {g[1]!r}')
    if len(want_p) != len(got_p):
        pbad += 1
    answered = sum(t != '' for _, t in want_p)
    print(f'squad features: {len(features) - fbad}/{len(features)} identical; predictions: '
          f'{len(want_p) - pbad}/{len(want_p)} identical ({answered} non-empty); n-best lists: '
          f'{len(want) - nbad}/{len(want)} equal ({entries} entries, {empty} "empty") '
          f'[{seq}/{stride}/{qlen}, n-best {n_best}]' +
          (f'; SQuAD v2.0 threshold {threshold}: {null_answers} null answers '
           f'({sum(w[3] == math.inf for w in want)} without any span), score_diff equal' if v2 else ''))
    return 1 if fbad or pbad or nbad else 0


if __name__ == '__main__':
    sys.exit(main())
