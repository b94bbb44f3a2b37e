#!/usr/bin/env python3
"""Oracle for src/finetune/reg_metrics.c: scikit-learn's mean_squared_error,
mean_absolute_error and r2_score (force_finite: a constant truth gives 1.0 for
exact predictions, else 0.0) and numpy's corrcoef (plait: 0 where numpy gives
nan), in numpy; Spearman's rho from scipy.stats.spearmanr (0 where it gives nan).
scikit-learn is not installable here.

  reg_metrics_reference.py TOOL
Seeded random cases (n from 1 to 500; constant truths and predictions
included) through `TOOL reg FILE`; relative tolerance 1e-10 (numpy sums
pairwise, plait in order: the two differ by rounding only, well under 1e-12
for these sizes, and R² of near-perfect fits amplifies it). Exits 1 on a
difference."""
import subprocess
import sys
import tempfile

import numpy as np
from scipy import stats


def metrics(t, p):
    mse = float(np.mean((t - p) ** 2))
    ss_res = float(np.sum((t - p) ** 2))
    ss_tot = float(np.sum((t - np.mean(t)) ** 2))
    r2 = 1 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)
    if np.std(t) > 0 and np.std(p) > 0:
        r = float(np.corrcoef(t, p)[0, 1])
    else:
        r = 0.0
    rho = float(stats.spearmanr(t, p).correlation) if len(t) > 1 else float('nan')
    rho = 0.0 if np.isnan(rho) else rho
    return {'mse': mse, 'rmse': float(np.sqrt(mse)), 'mae': float(np.mean(np.abs(t - p))), 'r2': r2, 'pearson': r,
            'spearman': rho}


def main():
    tool = sys.argv[1]
    rng = np.random.default_rng(11)
    cases = [(np.array([3, -0.5, 2, 7.0]), np.array([2.5, 0.0, 2, 8.0])),  # sklearn's docstring: r2 0.948...
             (np.array([1.0, 1, 1]), np.array([1.0, 1, 1])), (np.array([1.0, 1, 1]), np.array([1.0, 2, 1])),
             (np.array([5.0]), np.array([4.0]))]
    for _ in range(150):
        n = int(rng.integers(2, 500))
        t = rng.normal(50, 20, n)
        p = t * rng.uniform(0.5, 1.5) + rng.normal(0, rng.uniform(0.01, 30), n)
        cases.append((t, p))
    for _ in range(20):  # ties: Spearman's mean ranks
        n = int(rng.integers(2, 200))
        t = rng.integers(0, 6, n).astype(float)
        cases.append((t, np.round(t + rng.normal(0, 1.5, n))))
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        for i, (t, p) in enumerate(cases):
            np.savetxt(d + '/r.txt', np.stack([t, p], axis=1), fmt='%.17g')
            out = subprocess.run([tool, 'reg', d + '/r.txt'], capture_output=True, text=True, check=True).stdout
            got = {l.split()[0]: float(l.split()[1]) for l in out.splitlines()}
            want = metrics(t, p)
            if any(abs(got[k] - want[k]) > 1e-10 * max(1.0, abs(want[k])) for k in want):
                bad += 1
                if bad <= 3:
                    print(f'case {i}: python {want}\n  plait {got}')
    r2_doc = metrics(*cases[0])['r2']
    if abs(r2_doc - 0.9486081370449679) > 1e-15:
        print(f'oracle disagrees with sklearn docstring r2 0.948...: {r2_doc}')
        bad += 1
    print(f'regression metrics: {len(cases) - bad}/{len(cases)} cases agree')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
