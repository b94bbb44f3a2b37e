"""Checks of a checkpoint loaded into another vocabulary padding (reshard.sh), on the
global tensors that ckpt_tensors.py assembles independently of plait.

    python3 reshard_check.py padded SRC_ITER DST_ITER
        DST was loaded from SRC and saved without training. Every tensor that is not
        vocabulary-split equals SRC's bit for bit; the vocabulary tensors' rows below
        both paddings equal SRC's bit for bit; DST's rows past SRC's padding are zero
        (and their Adam moments, DST being a stage-0 checkpoint).
    python3 reshard_check.py moments A_ITER B_ITER
        the Adam moments of two stage-0 checkpoints are bit-identical over the rows
        both hold (the vocabulary's padding may differ).
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ckpt_tensors as ct  # noqa: E402


def splits(idir):
    man = json.load(open(os.path.join(idir, 'manifest.json')))
    return {k: v['tp_split'] for k, v in man['tensors'].items()}


def common_rows(a, b):
    n = min(a.shape[0], b.shape[0])
    return a[:n], b[:n]


def padded(src, dst):
    a, _ = ct.whole(src, trim=False)
    b, _ = ct.whole(dst, trim=False)
    kinds = splits(dst)
    bad = []
    for k in a:
        if kinds[k] != 'vocab':
            if not np.array_equal(a[k], b[k]):
                bad.append(k)
            continue
        x, y = common_rows(a[k], b[k])
        if not np.array_equal(x, y):
            bad.append(k + ' (common rows)')
        if b[k].shape[0] > a[k].shape[0]:
            for pre in ('', 'optimizer.exp_avg.', 'optimizer.exp_avg_sq.'):
                t = ct.whole(dst, prefix=pre, trim=False)[0][k] if pre else b[k]
                if np.any(t[a[k].shape[0]:] != 0):
                    bad.append(pre + k + ' (rows past the saved padding not zero)')
    print(f'{len(a)} tensors; rows {a["embedding.word_embeddings.weight"].shape[0]} -> '
          f'{b["embedding.word_embeddings.weight"].shape[0]}; wrong: {bad}')
    return 0 if not bad else 1


def moments(pa, pb):
    bad = []
    for pre in ('optimizer.exp_avg.', 'optimizer.exp_avg_sq.'):
        a, _ = ct.whole(pa, prefix=pre, trim=False)
        b, _ = ct.whole(pb, prefix=pre, trim=False)
        for k in a:
            x, y = common_rows(a[k], b[k])
            if not np.array_equal(x, y):
                bad.append(pre + k)
    print(f'moments differing: {bad}')
    return 0 if not bad else 1


if __name__ == '__main__':
    if len(sys.argv) != 4 or sys.argv[1] not in ('padded', 'moments'):
        raise SystemExit(__doc__)
    sys.exit((padded if sys.argv[1] == 'padded' else moments)(sys.argv[2], sys.argv[3]))
