#!/usr/bin/python3
"""An independent numpy reference for `plait data index` (tests/scripts/gpt_index_vs_numpy.sh).

It re-implements, in Python with numpy's own RandomState, what Megatron-LM's
megatron/core/datasets/ code does for GPT data (blended_megatron_dataset_config.py,
blended_megatron_dataset_builder.py, gpt_dataset.py, helpers.cpp, blended_dataset.py,
utils.py, megatron_dataset.py, megatron/training/training.py and
megatron/training/datasets/data_samplers.py), then runs plait and compares plait's
cache files (loaded with numpy.load) and printed token windows element for element.

  gpt_index_reference.py corpus PREFIX KIND SEED      write an MMIDIDX corpus
  gpt_index_reference.py threshold PREFIX SPLIT S     train samples either side of the 0.80 rule
  gpt_index_reference.py check PLAIT_ARGS...          run `plait data index` and compare

check options come first: --plait PATH, --expect-separate {yes,no,any},
--expect-reuse; everything after `--` is passed to plait.
Exit status 0 when everything matches; the last line is "compared N elements".
"""
import hashlib
import json
import math
import os
import re
import struct
import subprocess
import sys
from collections import OrderedDict

import numpy

DTYPE_CODES = {1: numpy.uint8, 2: numpy.int8, 3: numpy.int16, 4: numpy.int32, 5: numpy.int64,
               6: numpy.float64, 7: numpy.float32, 8: numpy.uint16}
SPLITS = ["train", "valid", "test"]


# ---- corpora ------------------------------------------------------------------------------

def write_mmidx(prefix, docs, dtype):
    """Megatron's _IndexWriter layout (indexed_dataset.py), one sequence per document."""
    code = {v: k for k, v in DTYPE_CODES.items()}[dtype]
    itemsize = numpy.dtype(dtype).itemsize
    lengths = numpy.array([len(d) for d in docs], dtype=numpy.int32)
    pointers = numpy.zeros(len(docs), dtype=numpy.int64)
    if len(docs) > 1:
        pointers[1:] = numpy.cumsum(lengths[:-1].astype(numpy.int64) * itemsize)
    document_indices = numpy.arange(len(docs) + 1, dtype=numpy.int64)
    with open(prefix + ".bin", "wb") as f:
        for d in docs:
            f.write(numpy.asarray(d, dtype=dtype).tobytes(order="C"))
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00")
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", code))
        f.write(struct.pack("<Q", len(docs)))
        f.write(struct.pack("<Q", len(docs) + 1))
        f.write(lengths.tobytes(order="C"))
        f.write(pointers.tobytes(order="C"))
        f.write(document_indices.tobytes(order="C"))


def make_corpus(prefix, kind, seed):
    rs = numpy.random.RandomState(seed)
    if kind == "random":      # lengths 0..300, about 5% empty documents
        n, dtype, vocab = 3000, numpy.uint16, 50257
        lens = rs.randint(1, 301, size=n)
        lens[rs.rand(n) < 0.05] = 0
    elif kind == "short":     # very short documents: many epochs, separate last epoch
        n, dtype, vocab = 400, numpy.uint16, 1000
        lens = rs.randint(0, 7, size=n)
    elif kind == "longtail":  # mostly short, a few very long documents, int32 tokens
        n, dtype, vocab = 600, numpy.int32, 128256
        lens = numpy.minimum(rs.pareto(1.2, size=n) * 40, 30000).astype(numpy.int64)
        lens[rs.rand(n) < 0.03] = 0
        lens[:3] = [25000, 0, 18000]
    elif kind == "small":     # a second corpus for blends
        n, dtype, vocab = 800, numpy.uint16, 32000
        lens = rs.randint(0, 120, size=n)
    else:
        raise SystemExit("unknown corpus kind " + kind)
    docs = [rs.randint(0, vocab, size=int(k)) for k in lens]
    write_mmidx(prefix, docs, dtype)


class Indexed:
    """A reader of the .idx/.bin pair (independent of plait's)."""

    def __init__(self, prefix):
        with open(prefix + ".idx", "rb") as f:
            buf = f.read()
        assert buf[:9] == b"MMIDIDX\x00\x00"
        dtype = DTYPE_CODES[buf[17]]
        s, _d = struct.unpack("<QQ", buf[18:34])
        self.lengths = numpy.frombuffer(buf, dtype=numpy.int32, count=s, offset=34)
        self.pointers = numpy.frombuffer(buf, dtype=numpy.int64, count=s, offset=34 + 4 * s)
        self.bin = numpy.memmap(prefix + ".bin", dtype=dtype, mode="r")
        self.itemsize = numpy.dtype(dtype).itemsize

    def get(self, i, offset=0, length=None):
        if length is None:
            length = int(self.lengths[i]) - offset
        start = int(self.pointers[i]) // self.itemsize + offset
        return numpy.array(self.bin[start:start + length], dtype=numpy.int64)


# ---- Megatron's algorithm, re-implemented ----------------------------------------------

def normalize(weights):
    w = numpy.array(weights, dtype=numpy.float64)
    return (w / numpy.sum(w)).tolist()


def split_matrix(split):
    vec = [float(x) for x in re.findall(r"[.0-9]+", split)]
    vec = normalize(vec + [0.0] * (3 - len(vec)))
    expansion = [0]
    for v in vec:
        expansion.append(expansion[-1] + v)
    matrix = []
    for lo, hi in zip(expansion[:-1], expansion[1:]):
        matrix.append(None if hi <= lo else (lo, hi))
    return matrix


def num_samples(a):
    gbs = a["global_batch_size"]
    if a["train_samples"]:
        train, iters = a["train_samples"], a["train_samples"] // gbs
    else:
        iters = a["train_iters"]
        train = iters * gbs
    valid = (iters // a["eval_interval"] + 1) * a["eval_iters"] * gbs
    return [train, valid, a["eval_iters"] * gbs]


def build_sample_idx(lengths, document_index, S, epochs, tokens_per_epoch, x=1):
    n = (epochs * tokens_per_epoch - x) // S
    out = numpy.zeros((n + 1, 2), dtype=numpy.int64)
    di, off = 0, 0
    lens = lengths.tolist()
    doc = document_index.tolist()
    for k in range(1, n + 1):
        remaining = S + x
        while remaining != 0:
            dlen = lens[doc[di]] - off
            remaining -= dlen
            if remaining <= 0:
                off += remaining + dlen - x
                remaining = 0
            else:
                di += 1
                off = 0
        out[k] = (di, off)
    dtype = numpy.int32 if max(len(doc), int(lengths.max())) <= numpy.iinfo(numpy.int32).max \
        else numpy.int64
    return out.astype(dtype)


class GPT:
    def __init__(self, low, path, beg, end, n, split_name, cfg):
        self.low, self.path, self.n, self.split = low, path, n, split_name
        S, x, seed = cfg["seq_length"], 1, cfg["seed"]
        ids = OrderedDict()
        ids["class"] = "GPTDataset"
        ids["dataset_path"] = path
        ids["num_samples"] = n
        ids["index_split"] = split_name
        ids["random_seed"] = seed
        ids["sequence_length"] = S
        ids["split"] = cfg["split"]
        ids["split_matrix"] = cfg["split_matrix"]
        ids["tokenizer"] = cfg["tokenizer"]
        self.ids = ids
        self.description = json.dumps(ids, indent=4)
        self.hash = hashlib.md5(self.description.encode("utf-8")).hexdigest()

        T = int(numpy.sum(low.lengths[beg:end]))
        epochs = 1
        if n is not None:
            tokens = T
            while tokens < n * S + x:
                epochs += 1
                tokens += T
        separate = False
        if epochs > 1:
            sans = ((epochs - 1) * T - x) // S
            per_epoch = (T - x) // S
            separate = (n - sans) < int(0.80 * per_epoch)
        self.T, self.epochs, self.separate = T, epochs, separate

        rs = numpy.random.RandomState(seed)
        documents = numpy.arange(beg, end, dtype=numpy.int32)

        def doc_index(e):
            d = numpy.mgrid[0:e, 0:len(documents)][1]
            d[:] = documents
            d = d.reshape(-1).astype(numpy.int32)
            rs.shuffle(d)
            return d

        if separate:
            self.document_index = numpy.concatenate((doc_index(epochs - 1), doc_index(1)))
        else:
            self.document_index = doc_index(epochs)
        self.sample_index = build_sample_idx(low.lengths, self.document_index, S, epochs, T, x)
        total = self.sample_index.shape[0] - 1
        dtype = numpy.uint32 if total < numpy.iinfo(numpy.uint32).max - 1 else numpy.int64
        first = ((epochs - 1) * T - x) // S if separate else total
        a = numpy.arange(0, first, dtype=dtype)
        rs.shuffle(a)
        if first != total:
            b = numpy.arange(first, total, dtype=dtype)
            rs.shuffle(b)
            a = numpy.concatenate((a, b))
        self.shuffle_index = a
        self.S, self.x = S, x

    def __len__(self):
        return self.sample_index.shape[0] - 1

    def get(self, idx):
        j = self.shuffle_index[idx]
        db, ob = (int(v) for v in self.sample_index[j])
        de, oe = (int(v) for v in self.sample_index[j + 1])
        if db == de:
            return self.low.get(int(self.document_index[db]), ob, oe - ob + self.x)
        parts = []
        for i in range(db, de + 1):
            off = 0 if i > db else ob
            length = None if i < de else oe + self.x
            parts.append(self.low.get(int(self.document_index[i]), off, length))
        return numpy.concatenate(parts)


def build_blending_indices(weights, size):
    n = len(weights)
    dataset_index = numpy.zeros(size, dtype=numpy.int16)
    dataset_sample_index = numpy.zeros(size, dtype=numpy.int64)
    counts = [0] * n
    for i in range(size):
        s = max(float(i), 1.0)
        best, best_err = 0, weights[0] * s - counts[0]
        for d in range(1, n):
            err = weights[d] * s - counts[d]
            if err > best_err:
                best, best_err = d, err
        dataset_index[i] = best
        dataset_sample_index[i] = counts[best]
        counts[best] += 1
    return dataset_index, dataset_sample_index


class Blend:
    def __init__(self, members, weights, size, split_name):
        self.members, self.size = members, size
        self.weights = normalize(weights)
        ids = OrderedDict()
        ids["class"] = "BlendedDataset"
        ids["datasets"] = [m.ids for m in members]
        ids["split"] = split_name
        ids["weights"] = self.weights
        ids["size"] = size
        self.description = json.dumps(ids, indent=4)
        self.hash = hashlib.md5(self.description.encode("utf-8")).hexdigest()
        self.dataset_index, self.dataset_sample_index = build_blending_indices(self.weights, size)

    def get(self, idx):
        d = int(self.dataset_index[idx])
        return d, int(self.dataset_sample_index[idx]), self.members[d].get(
            int(self.dataset_sample_index[idx]))


def build_all(a):
    """BlendedMegatronDatasetBuilder._build_blended_dataset_splits for GPTDataset."""
    items = a["data_path"]
    weights = None
    if len(items) % 2 == 0:
        try:
            weights = [float(items[i]) for i in range(0, len(items), 2)]
            prefixes = [items[i + 1].strip() for i in range(0, len(items), 2)]
        except ValueError:
            weights = None
    if weights is None:
        prefixes = [p.strip() for p in items]
    sizes = num_samples(a)
    matrix = split_matrix(a["split"])
    cfg = {"seq_length": a["seq_length"], "seed": a["seed"], "split": a["split"],
           "split_matrix": matrix, "tokenizer": a["tokenizer"]}
    lows = [Indexed(p) for p in prefixes]

    def mids(requests):
        out = [[None] * 3 for _ in prefixes]
        for d, p in enumerate(prefixes):
            n = len(lows[d].lengths)
            for s in range(3):
                if matrix[s] is None:
                    continue
                beg = int(round(matrix[s][0] * float(n)))
                end = int(round(matrix[s][1] * float(n)))
                out[d][s] = GPT(lows[d], p, beg, end, requests[d][s], SPLITS[s], cfg)
        return out

    if len(prefixes) == 1 and weights is None:
        m = mids([sizes])
        return sizes, m, [m[0][s] for s in range(3)], None
    if weights is not None:
        w = normalize(weights)
        target = [[int(math.ceil(math.ceil(t * wi) * (1 + 0.0))) for t in sizes] for wi in w]
        surplus = a["surplus"]
        buffer = [[int(math.ceil(math.ceil(t * wi) * (1 + surplus))) for t in sizes] for wi in w]
        m = mids(buffer)
    else:
        m = mids([[None] * 3 for _ in prefixes])
    tops = [None] * 3
    for s in range(3):
        if matrix[s] is None:
            continue
        members = [m[d][s] for d in range(len(prefixes))]
        if weights is not None:
            tops[s] = Blend(members, w, sum(target[d][s] for d in range(len(prefixes))), SPLITS[s])
        else:
            lens = [len(x) for x in members]
            tops[s] = Blend(members, lens, min(sizes[s], sum(lens)), SPLITS[s])
        for d, count in zip(*numpy.unique(tops[s].dataset_index, return_counts=True)):
            assert len(members[d]) >= count, "reference blend oversamples"
    return sizes, m, tops, weights


# ---- comparison ----------------------------------------------------------------------------

class Checker:
    def __init__(self):
        self.failures = 0
        self.elements = 0

    def fail(self, msg):
        self.failures += 1
        print("MISMATCH " + msg)

    def array(self, path, want):
        if not os.path.isfile(path):
            return self.fail("missing cache file " + path)
        got = numpy.load(path, allow_pickle=False)
        if got.dtype != want.dtype or got.shape != want.shape:
            return self.fail("%s: %s %s, expected %s %s" % (path, got.dtype, got.shape,
                                                             want.dtype, want.shape))
        bad = numpy.flatnonzero(got.reshape(-1) != want.reshape(-1))
        self.elements += want.size
        if bad.size:
            k = int(bad[0])
            return self.fail("%s: %d of %d elements differ, first at flat %d: %s vs %s" % (
                path, bad.size, want.size, k, got.reshape(-1)[k], want.reshape(-1)[k]))
        with open(path, "rb") as f:       # numpy.save's own bytes, header included
            import io
            buf = io.BytesIO()
            numpy.save(buf, want)
            if f.read() != buf.getvalue():
                self.fail("%s: equal values but not the bytes numpy.save writes" % path)

    def text(self, path, want):
        if not os.path.isfile(path):
            return self.fail("missing cache file " + path)
        with open(path) as f:
            got = f.read()
        if got != want:
            self.fail("%s: description differs:\n%s\n--- expected ---\n%s" % (path, got, want))


def parse_plait_args(argv):
    a = {"data_path": [], "split": "969, 30, 1", "seq_length": None, "train_iters": 0,
         "train_samples": 0, "global_batch_size": None, "micro_batch_size": 1,
         "eval_interval": 1000, "eval_iters": 100, "seed": 1234, "data_cache_path": None,
         "surplus": 0.005, "tokenizer": None, "data_parallel_size": 1, "consumed_samples": 0,
         "print_samples": 0, "print_split": "train"}
    vocab = merge = None
    i = 0
    while i < len(argv):
        flag = argv[i]
        vals = []
        i += 1
        while i < len(argv) and not argv[i].startswith("--"):
            vals.append(argv[i])
            i += 1
        key = flag[2:].replace("-", "_")
        if key == "data_path":
            a[key] = vals
        elif key in ("split", "data_cache_path", "print_split"):
            a[key] = vals[0]
        elif key == "mid_level_dataset_surplus":
            a["surplus"] = float(vals[0])
        elif key == "tokenizer_type":
            a["tokenizer_type"] = vals[0]
        elif key == "vocab_file":
            vocab = vals[0]
        elif key == "merge_file":
            merge = vals[0]
        elif key in a or key == "print_tokens":
            a[key] = int(vals[0])
    if vocab is not None:
        a["tokenizer"] = OrderedDict([("class", "_GPT2BPETokenizer"),
                                      ("tokenizer_path", [vocab, merge])])
    if a["global_batch_size"] is None:
        a["global_batch_size"] = a["micro_batch_size"] * a["data_parallel_size"]
    return a


def check(argv):
    plait, expect_sep, expect_reuse = None, "any", False
    while argv and argv[0] != "--":
        opt = argv.pop(0)
        if opt == "--plait":
            plait = argv.pop(0)
        elif opt == "--expect-separate":
            expect_sep = argv.pop(0)
        elif opt == "--expect-reuse":
            expect_reuse = True
    plait_args = argv[1:]
    a = parse_plait_args(plait_args)
    run = subprocess.run([plait, "data", "index", "--print-tokens", "-1"] + plait_args,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    if run.returncode != 0:
        print(run.stdout)
        print("plait failed with status %d" % run.returncode)
        return 1
    out = run.stdout
    sizes, mids, tops, weights = build_all(a)
    c = Checker()
    blended = not (len(mids) == 1 and weights is None)
    for d, row in enumerate(mids):
        for s, g in enumerate(row):
            if g is None:
                continue
            cache = a["data_cache_path"] or os.path.join(g.path, "cache", "GPTDataset_indices")
            base = os.path.join(cache, "%s-GPTDataset-%s-" % (g.hash, SPLITS[s]))
            c.text(base + "description.txt", g.description)
            c.array(base + "document_index.npy", g.document_index)
            c.array(base + "sample_index.npy", g.sample_index)
            c.array(base + "shuffle_index.npy", g.shuffle_index)
            if s == 0 and expect_sep != "any" and (expect_sep == "yes") != g.separate:
                c.fail("%s train: separate last epoch is %s, the configuration meant %s" % (
                    g.path, g.separate, expect_sep))
    if blended and a["data_cache_path"]:
        for s, b in enumerate(tops):
            if b is None:
                continue
            base = os.path.join(a["data_cache_path"], "%s-BlendedDataset-%s-" % (b.hash, SPLITS[s]))
            c.text(base + "description.txt", b.description)
            c.array(base + "dataset_index.npy", b.dataset_index)
            c.array(base + "dataset_sample_index.npy", b.dataset_sample_index)
    reused = out.count("cache reused")
    built = out.count("cache built")
    if expect_reuse and built:
        c.fail("second run built %d caches instead of reusing them" % built)
    # The printed samples: the DP sampler from consumed_samples, then __getitem__.
    s = SPLITS.index(a["print_split"])
    top = tops[s]
    printed = {}
    for line in out.splitlines():
        m = re.match(r"rank (\d+) sample (\d+): dataset (\d+) sample (\d+) tokens (.*)$", line)
        if m:
            printed.setdefault(int(m.group(1)), []).append(
                (int(m.group(2)), int(m.group(3)), int(m.group(4)),
                 [int(t) for t in m.group(5).split()]))
    if a["print_samples"]:
        mbs, dp = a["micro_batch_size"], a["data_parallel_size"]
        total = top.size if blended else len(top)
        for r in range(dp):
            want = []
            batch = []
            for idx in range(a["consumed_samples"], total):   # MegatronPretrainingSampler
                batch.append(idx)
                if len(batch) == mbs * dp:
                    want.extend(batch[r * mbs:(r + 1) * mbs])
                    batch = []
                if len(want) >= a["print_samples"]:
                    break
            want = want[:a["print_samples"]]
            got = printed.get(r, [])
            if [g[0] for g in got] != want:
                c.fail("rank %d sample indices %s, expected %s" % (r, [g[0] for g in got], want))
                continue
            for (idx, ds, dsample, tokens) in got:
                if blended:
                    wd, wj, wtok = top.get(idx)
                else:
                    wd, wj, wtok = 0, idx, top.get(idx)
                c.elements += len(wtok) + 2
                if (ds, dsample) != (wd, wj) or tokens != wtok.tolist():
                    c.fail("rank %d sample %d: dataset %d sample %d tokens %s, expected %d %d %s" % (
                        r, idx, ds, dsample, tokens[:8], wd, wj, wtok[:8].tolist()))
    seps = [g.separate for row in mids for g in row if g is not None]
    print("configuration: %d dataset(s)%s, sizes %s, epochs %s, separate %s, caches built %d "
          "reused %d" % (len(mids), " blended" if blended else "", sizes,
                         [g.epochs for row in mids for g in row if g is not None], seps, built,
                         reused))
    print("compared %d elements" % c.elements)
    if c.failures:
        print(out)
    return 1 if c.failures else 0


def threshold(prefix, split, S):
    """--train-samples values one below and at the 0.80 line of a 3-epoch train split."""
    low = Indexed(prefix)
    lo, hi = split_matrix(split)[0]
    n = len(low.lengths)
    T = int(numpy.sum(low.lengths[int(round(lo * float(n))):int(round(hi * float(n)))]))
    sans = (2 * T - 1) // S
    line = int(0.80 * ((T - 1) // S))
    print(sans + line - 1, sans + line)
    return 0


def main():
    if len(sys.argv) >= 5 and sys.argv[1] == "threshold":
        return threshold(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    if len(sys.argv) >= 5 and sys.argv[1] == "corpus":
        make_corpus(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return 0
    if len(sys.argv) >= 2 and sys.argv[1] == "check":
        return check(sys.argv[2:])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
