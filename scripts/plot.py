#!/usr/bin/python3
"""Plots of plait's results (Debian's python3-matplotlib, installed by setup.sh).

  scripts/plot.py loss METRICS.jsonl [...] -o loss.png
      training loss (and validation loss, when logged) against iteration, one
      line per metrics file (plait train --metrics-file), labelled by file name.
  scripts/plot.py compare compare_torch.jsonl -o compare.png
      tokens/s of plait and PyTorch for each configuration and precision of a
      bench/compare_torch.sh run (the last record of each kind), with the ratio
      written above each pair.
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip().startswith("{")]


def plot_loss(files, out):
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for path in files:
        rows = read_jsonl(path)
        label = os.path.splitext(os.path.basename(path))[0]
        train = [(r["iteration"], r["lm_loss"]) for r in rows
                 if "lm_loss" in r and not r.get("skipped") and r["lm_loss"] >= 0]
        valid = [(r["iteration"], r["valid_lm_loss"]) for r in rows if "valid_lm_loss" in r]
        if not train and not valid:
            sys.exit(f"plot: {path} has no lm_loss or valid_lm_loss records")
        if train:
            line, = ax.plot(*zip(*train), label=f"{label} train", lw=1.2)
            color = line.get_color()
        else:
            color = None
        if valid:
            ax.plot(*zip(*valid), "o--", color=color, label=f"{label} validation", ms=4)
    ax.set_xlabel("iteration")
    ax.set_ylabel("loss (nats per token)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def plot_compare(path, out, only_env=None):
    last = {}
    for r in read_jsonl(path):
        # older records name the environment by OPENBLAS_CORETYPE (set / unset)
        env = r.get("env") or "OPENBLAS_CORETYPE " + r.get("openblas_coretype", "?")
        if only_env is None or env == only_env:
            last[(r["config"], r["precision"], env)] = r
    if not last:
        sys.exit(f"plot: {path} has no records")
    keys = sorted(last, key=lambda k: (k[0], k[1], k[2]))
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(keys)), 4.5))
    xs = range(len(keys))
    p = [last[k]["plait"]["tokens_per_sec"] for k in keys]
    t = [last[k]["pytorch"]["tokens_per_sec"] for k in keys]
    ax.bar([x - 0.2 for x in xs], p, 0.4, label="plait")
    ax.bar([x + 0.2 for x in xs], t, 0.4, label="PyTorch 1.13")
    for x, a, b in zip(xs, p, t):
        ax.annotate(f"{a / b:.2f}x", (x, max(a, b)), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([f"{c}\n{pr}\n{e}" for c, pr, e in keys], fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("tokens/s (log scale)")
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kind", choices=["loss", "compare"])
    ap.add_argument("files", nargs="+")
    ap.add_argument("-o", "--output", required=True, help="the PNG to write")
    ap.add_argument("--env", help="compare: only the runs in this environment (e.g. tuned)")
    a = ap.parse_args()
    if a.kind == "loss":
        plot_loss(a.files, a.output)
    else:
        if len(a.files) != 1:
            sys.exit("plot: compare takes one compare_torch.jsonl")
        plot_compare(a.files[0], a.output, a.env)
    print(f"wrote {a.output}")


if __name__ == "__main__":
    main()
