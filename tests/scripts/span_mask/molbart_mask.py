"""MolBART's span masking as the oracle of tests/scripts/span_mask.sh.

mask_span is MolEncTokenizer._mask_span (MolBART megatron_molbart/tokenizer.py)
with its two random sources passed in, so it can run on plait's draws
(`replay`) or on MolBART's own: random.choices for the positions and
torch.poisson for the lengths (`stats`).

  molbart_mask.py replay PLAIT.tsv
      Each line (tests/tools/span_mask): input, position draws, Poisson
      lengths, plait's output. MolBART's loop on the same draws must give the
      same output, and use exactly the lengths listed.
  molbart_mask.py stats PLAIT.tsv MASK_PROB LAMBDA SEED
      MolBART's own code with its own RNGs on the same inputs (same count,
      same lengths): the mean output length, the mean number of <MASK>
      tokens and the fraction of input tokens kept must agree with plait's
      within 5 standard errors (sequence by sequence, the output length minus
      the input length).
"""
import math
import random
import sys

MASK = 4


def mask_span(ts, sampled, poisson):
    """MolBART's loop: sampled[i] says whether position i starts a mask,
    poisson() draws a span length."""
    curr, masked, token_mask = 0, [], []
    while curr < len(ts):
        if sampled[curr]:
            masked.append(MASK)
            token_mask.append(True)
            curr += poisson()
        else:
            masked.append(ts[curr])
            token_mask.append(False)
            curr += 1
    return masked, token_mask


def read(path):
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        ids = [int(x) for x in f[0].split()]
        flags = [c == "1" for c in f[1]]
        lens = [int(x) for x in f[2].split()]
        out = [int(x) for x in f[3].split()]
        yield ids, flags, lens, out


def replay(path):
    n = bad = zero = 0
    for ids, flags, lens, out in read(path):
        n += 1
        it = iter(lens)
        used = []

        def poisson():
            used.append(next(it))
            return used[-1]

        got, _ = mask_span(ids, flags, poisson)
        zero += sum(1 for x in lens if x == 0)
        if got != out or used != lens:
            bad += 1
            if bad <= 5:
                print(f"  differs: input {ids}\n    plait  {out}\n    molbart {got}")
    print(f"replay: {n} sequences, {bad} differ from MolBART's loop on the same draws "
          f"({zero} zero-length spans among them)")
    return 0 if bad == 0 and n > 0 else 1


def summary(rows):
    k = len(rows)
    out = [r[0] for r in rows]
    masks = [r[1] for r in rows]
    kept = [r[2] for r in rows]

    def mean_se(xs):
        m = sum(xs) / len(xs)
        v = sum((x - m) ** 2 for x in xs) / (len(xs) - 1)
        return m, math.sqrt(v / len(xs))
    return mean_se(out), mean_se(masks), mean_se(kept), k


def stats(path, mask_prob, lam, seed):
    import torch
    random.seed(seed)
    torch.manual_seed(seed)
    ours, theirs = [], []
    for ids, flags, lens, out in read(path):
        ours.append((len(out) - len(ids), out.count(MASK),
                     sum(1 for x in out if x != MASK) / len(ids)))
        sampled = random.choices([True, False], weights=[mask_prob, 1 - mask_prob], k=len(ids))
        got, _ = mask_span(ids, sampled,
                           lambda: torch.poisson(torch.tensor(lam)).long().item())
        theirs.append((len(got) - len(ids), got.count(MASK),
                       sum(1 for x in got if x != MASK) / len(ids)))
    a, b = summary(ours), summary(theirs)
    print(f"stats: {a[3]} sequences, mask probability {mask_prob}, lambda {lam}")
    ok = True
    for name, (ma, sa), (mb, sb) in zip(("output minus input length", "<MASK> tokens", "input kept"),
                                        a[:3], b[:3]):
        z = abs(ma - mb) / math.sqrt(sa * sa + sb * sb)
        ok &= z < 5
        print(f"stats: {name}: plait {ma:.4f} +- {sa:.4f}, MolBART {mb:.4f} +- {sb:.4f} "
              f"({z:.1f} standard errors)")
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1] == "replay":
        sys.exit(replay(sys.argv[2]))
    sys.exit(stats(sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])))
