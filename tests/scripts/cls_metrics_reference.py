#!/usr/bin/env python3
"""Oracle for src/finetune/cls_metrics.c: scikit-learn's accuracy_score,
confusion_matrix and precision_recall_fscore_support (average=None and
"macro", labels=None, zero_division="warn" -> 0) transcribed in numpy from
sklearn/metrics/_classification.py (multilabel_confusion_matrix: tp_sum,
pred_sum, true_sum over unique_labels(y_true, y_pred); _prf_divide; F from
precision and recall). scikit-learn is not installable here.

  cls_metrics_reference.py TOOL
Random seeded cases (some classes never predicted, some never true, some
absent altogether) through `TOOL cls K FILE`; every figure is compared with
a relative tolerance of 1e-12 (sklearn computes F as 2PR/(P+R), plait as
2tp/(pred+true): equal up to rounding). Also sklearn's documented example:
f1_score([0,1,2,0,1,2], [0,2,1,0,0,1], average="macro") == 0.26666... Exits 1
on any difference."""
import subprocess
import sys
import tempfile

import numpy as np


def prfs(y_true, y_pred, k):
    labels = np.unique(np.concatenate([y_true, y_pred]))  # unique_labels
    tp = np.array([np.sum((y_true == c) & (y_pred == c)) for c in labels], dtype=np.float64)
    pred = np.array([np.sum(y_pred == c) for c in labels], dtype=np.float64)
    true = np.array([np.sum(y_true == c) for c in labels], dtype=np.float64)
    with np.errstate(divide='ignore', invalid='ignore'):
        p = np.where(pred > 0, tp / np.where(pred > 0, pred, 1), 0.0)
        r = np.where(true > 0, tp / np.where(true > 0, true, 1), 0.0)
        denom = p + r
        f = np.where(denom > 0, 2 * p * r / np.where(denom > 0, denom, 1), 0.0)
    full = {c: (p[i], r[i], f[i]) for i, c in enumerate(labels)}
    per = [full.get(c, (0.0, 0.0, 0.0)) for c in range(k)]
    cm = np.zeros((k, k), dtype=np.int64)
    for a, b in zip(y_true, y_pred):
        cm[a, b] += 1
    return {
        'accuracy': float(np.mean(y_true == y_pred)),
        'macro_precision': float(np.mean(p)),
        'macro_recall': float(np.mean(r)),
        'macro_f1': float(np.mean(f)),
    }, per, cm


def run(tool, y_true, y_pred, k, path):
    np.savetxt(path, np.stack([y_true, y_pred], axis=1), fmt='%d')
    out = subprocess.run([tool, 'cls', str(k), path], capture_output=True, text=True, check=True).stdout
    summary, per, rows = {}, [], []
    for line in out.splitlines():
        w = line.split()
        if w[0] == 'class':
            per.append(tuple(float(x) for x in w[2:5]))
        elif w[0] == 'row':
            rows.append([int(x) for x in w[1:]])
        else:
            summary[w[0]] = float(w[1])
    return summary, per, np.array(rows, dtype=np.int64)


def close(a, b):
    return abs(a - b) <= 1e-12 * max(1.0, abs(a), abs(b))


def main():
    tool = sys.argv[1]
    rng = np.random.default_rng(5)
    cases = [(np.array([0, 1, 2, 0, 1, 2]), np.array([0, 2, 1, 0, 0, 1]), 3)]
    for _ in range(200):
        k = int(rng.integers(2, 7))
        n = int(rng.integers(1, 60))
        used = rng.choice(k, size=int(rng.integers(1, k + 1)), replace=False)
        y_true = rng.choice(used, size=n)
        y_pred = np.where(rng.random(n) < 0.6, y_true, rng.integers(0, k, size=n))
        cases.append((y_true, y_pred, k))
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        for i, (yt, yp, k) in enumerate(cases):
            ws, wp, wc = prfs(yt, yp, k)
            gs, gp, gc = run(tool, yt, yp, k, d + '/c.txt')
            ok = all(close(ws[key], gs[key]) for key in ws) and len(gp) == k and \
                all(close(a, b) for x, y in zip(wp, gp) for a, b in zip(x, y)) and np.array_equal(wc, gc)
            if not ok:
                bad += 1
                if bad <= 3:
                    print(f'case {i}: k={k} true={yt.tolist()} pred={yp.tolist()}\n  python {ws} {wp}\n  plait {gs} {gp}')
        doc = run(tool, *cases[0], d + '/c.txt')[0]['macro_f1']
        if not close(doc, 0.26666666666666666):
            print(f'sklearn documented macro F1 0.2666..., plait {doc}')
            bad += 1
    print(f'classification metrics: {len(cases) - bad}/{len(cases)} cases agree')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
