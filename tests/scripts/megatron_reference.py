#!/usr/bin/python3
"""An independent reference for `plait preprocess`, `--merge` and `data inspect`.

Written from the documented MMIDIDX format (megatron-facts.md 1.1) and the
semantics of Megatron-LM's tools/preprocess_data.py, merge_datasets.py and
megatron/core/datasets/indexed_dataset.py, with numpy arrays and tobytes(),
sharing no code with plait. Used by tests/scripts/preprocess.sh.

  preprocess --input F --format {jsonl,text,csv,smi} --keys K.. --output-prefix P
             [--append-eod] [--vocab-size N] [--eod ID] [--column C] [--header]
             [--skip-bad] [--one-document] [--ids-file IDS]
      Reads F as Megatron would (json.loads per line; text lines with universal
      newlines; Python's csv module; whitespace-split .smi), tokenizes each text
      with the byte rule list(text.encode("utf-8")) or takes the ids of
      IDS (one JSON object per input line: {key: [[ids of text 0], ...]}, e.g.
      from gpt-3-encoder under node) and writes P_K_document.bin/.idx.
  merge --output-prefix P PREFIX..         IndexedDatasetBuilder.add_index, in order.
  check-inspect PREFIX < inspect-output    Compares `plait data inspect` with numpy.
  doc-ids PREFIX K                          Prints document K's ids, one sequence a line.
"""
import argparse
import csv
import io
import json
import struct
import sys

import numpy as np

MAGIC = b"MMIDIDX\x00\x00"
CODES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64,
         7: np.float32, 8: np.uint16}
CODE_OF = {np.dtype(v).name: k for k, v in CODES.items()}


def optimal_dtype(vocab_size):
    return np.uint16 if vocab_size < 65500 else np.int32


class Builder:
    """Megatron's IndexedDatasetBuilder, in memory."""

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)
        self.data = []
        self.sequence_lengths = []
        self.document_indices = [0]

    def add_document(self, tokens, lengths):
        self.data.append(np.array(tokens, dtype=self.dtype).tobytes(order="C"))
        self.sequence_lengths.extend(lengths)
        self.document_indices.append(len(self.sequence_lengths))

    def add_item(self, tokens):
        self.data.append(np.array(tokens, dtype=self.dtype).tobytes(order="C"))
        self.sequence_lengths.append(len(tokens))

    def end_document(self):
        self.document_indices.append(len(self.sequence_lengths))

    def add_index(self, prefix):
        index = read_index(prefix)
        assert index["dtype"] == self.dtype, f"{prefix}: dtype {index['dtype']} != {self.dtype}"
        offset = len(self.sequence_lengths)
        self.sequence_lengths.extend(index["lengths"].tolist())
        self.document_indices.extend((offset + index["docs"])[1:].tolist())
        with open(prefix + ".bin", "rb") as f:
            self.data.append(f.read())

    def finalize(self, prefix):
        with open(prefix + ".bin", "wb") as f:
            for chunk in self.data:
                f.write(chunk)
        itemsize = self.dtype.itemsize
        pointers, ptr = [], 0
        for length in self.sequence_lengths:
            pointers.append(ptr)
            ptr += length * itemsize
        with open(prefix + ".idx", "wb") as f:
            f.write(MAGIC)
            f.write(struct.pack("<Q", 1))
            f.write(struct.pack("<B", CODE_OF[self.dtype.name]))
            f.write(struct.pack("<Q", len(self.sequence_lengths)))
            f.write(struct.pack("<Q", len(self.document_indices)))
            f.write(np.array(self.sequence_lengths, dtype=np.int32).tobytes(order="C"))
            f.write(np.array(pointers, dtype=np.int64).tobytes(order="C"))
            f.write(np.array(self.document_indices, dtype=np.int64).tobytes(order="C"))


def read_index(prefix):
    """Megatron's _IndexReader."""
    with open(prefix + ".idx", "rb") as f:
        buf = f.read()
    assert buf[:9] == MAGIC, f"{prefix}.idx: bad magic"
    assert struct.unpack("<Q", buf[9:17])[0] == 1
    dtype = np.dtype(CODES[buf[17]])
    s, d = struct.unpack("<QQ", buf[18:34])
    lengths = np.frombuffer(buf, dtype=np.int32, count=s, offset=34)
    pointers = np.frombuffer(buf, dtype=np.int64, count=s, offset=34 + 4 * s)
    docs = np.frombuffer(buf, dtype=np.int64, count=d, offset=34 + 12 * s)
    assert lengths.shape[0] == docs[-1] == s
    return {"dtype": dtype, "lengths": lengths, "pointers": pointers, "docs": docs}


def read_sequence(prefix, index, i):
    bin_data = np.memmap(prefix + ".bin", dtype=np.uint8, mode="r")
    return np.frombuffer(bin_data, dtype=index["dtype"], count=int(index["lengths"][i]),
                         offset=int(index["pointers"][i]))


# ---- input formats ---------------------------------------------------------------------

def records(args):
    """(line_text_or_row, texts per key) for each record, as Megatron/Python read them."""
    if args.format == "jsonl":
        with open(args.input, "r", encoding="utf-8") as fin:
            for line in fin:
                try:
                    data = json.loads(line)
                    out = {}
                    for key in args.keys:
                        text = data[key]
                        sentences = text if isinstance(text, list) else [text]
                        if not all(isinstance(t, str) for t in sentences):
                            raise TypeError("not a string")
                        out[key] = sentences
                except (ValueError, KeyError, TypeError):
                    if args.skip_bad:
                        continue
                    raise
                yield out
    elif args.format == "text":
        with open(args.input, "r", encoding="utf-8") as fin:  # universal newlines
            for line in fin:
                yield {args.keys[0]: [line[:-1] if line.endswith("\n") else line]}
    elif args.format == "csv":
        with open(args.input, "r", encoding="utf-8", newline="") as fin:
            reader = csv.reader(fin, delimiter="\t" if args.input.endswith(".tsv") else ",")
            column = args.column
            for n, row in enumerate(reader):
                if n == 0 and args.header:
                    if not column.isdigit():
                        column = str(row.index(column))
                    continue
                if not row:
                    continue  # a blank row (pandas skips them)
                yield {args.keys[0]: [row[int(column)]]}
    elif args.format == "smi":
        with open(args.input, "r", encoding="utf-8") as fin:
            for line in fin:
                fields = line.split()
                if not fields:
                    continue
                yield {args.keys[0]: [fields[int(args.column)]]}


def cmd_preprocess(args):
    dtype = optimal_dtype(args.vocab_size)
    builders = {key: Builder(dtype) for key in args.keys}
    ids_file = open(args.ids_file, "r", encoding="utf-8") if args.ids_file else None
    for record in records(args):
        given = json.loads(ids_file.readline()) if ids_file else None
        for key in args.keys:
            doc_ids, sentence_lens = [], []
            for n, sentence in enumerate(record[key]):
                sentence_ids = given[key][n] if given else list(sentence.encode("utf-8"))
                if len(sentence_ids) > 0:
                    doc_ids.extend(sentence_ids)
                    sentence_lens.append(len(sentence_ids))
            if len(doc_ids) > 0 and args.append_eod:
                doc_ids.append(args.eod)
                sentence_lens[-1] += 1
            if args.one_document:  # MegaMolBART csv_to_binary.py: add_item per text
                start = 0
                for n in sentence_lens:
                    builders[key].add_item(doc_ids[start:start + n])
                    start += n
            else:
                builders[key].add_document(doc_ids, sentence_lens)
    for key in args.keys:
        if args.one_document:
            builders[key].end_document()
        builders[key].finalize(f"{args.output_prefix}_{key}_document")


def cmd_merge(args):
    builder = None
    for prefix in args.prefixes:
        if builder is None:
            builder = Builder(read_index(prefix)["dtype"])
        builder.add_index(prefix)
    builder.finalize(args.output_prefix)


def cmd_check_inspect(args):
    """Reads `plait data inspect PREFIX` from stdin and checks every number with numpy."""
    index = read_index(args.prefix)
    lengths = index["lengths"].astype(np.int64)
    docs = index["docs"]
    doc_tokens = np.array([lengths[docs[k]:docs[k + 1]].sum() for k in range(len(docs) - 1)],
                          dtype=np.int64)
    got = {}
    for line in sys.stdin.read().splitlines():
        if ": " in line and not line.startswith(" "):
            name, value = line.split(": ", 1)
            got[name] = value
    failures = []

    def expect(name, want):
        if got.get(name) != want:
            failures.append(f"{name}: got {got.get(name)!r}, numpy says {want!r}")

    expect("dtype", f"{index['dtype'].name} (code {CODE_OF[index['dtype'].name]}, "
                    f"{index['dtype'].itemsize} bytes)")
    expect("sequences", str(len(lengths)))
    expect("documents", str(len(doc_tokens)))
    expect("tokens", str(int(lengths.sum())))
    expect("empty documents", str(int((doc_tokens == 0).sum())))
    for name, v in (("document tokens", doc_tokens), ("sequence tokens", lengths)):
        if len(v) == 0:
            expect(name, "none")
            continue
        want = {"min": v.min(), "mean": v.mean(), "median": np.median(v),
                "p90": np.percentile(v, 90), "max": v.max()}
        parts = dict(p.split(" ") for p in got.get(name, "").split(", ") if " " in p)
        for stat, value in want.items():
            if stat not in parts or not np.isclose(float(parts[stat]), float(value), rtol=1e-5):
                failures.append(f"{name} {stat}: got {parts.get(stat)}, numpy says {value}")
    for f in failures:
        print(f, file=sys.stderr)
    return 1 if failures else 0


def cmd_doc_ids(args):
    index = read_index(args.prefix)
    docs = index["docs"]
    for i in range(docs[args.doc], docs[args.doc + 1]):
        print(" ".join(str(int(t)) for t in read_sequence(args.prefix, index, i)))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("preprocess")
    a.add_argument("--input", required=True)
    a.add_argument("--format", required=True, choices=["jsonl", "text", "csv", "smi"])
    a.add_argument("--keys", nargs="+", default=["text"])
    a.add_argument("--output-prefix", required=True)
    a.add_argument("--append-eod", action="store_true")
    a.add_argument("--vocab-size", type=int, default=257)
    a.add_argument("--eod", type=int, default=256)
    a.add_argument("--column", default="0")
    a.add_argument("--header", action="store_true")
    a.add_argument("--skip-bad", action="store_true")
    a.add_argument("--one-document", action="store_true")
    a.add_argument("--ids-file")
    m = sub.add_parser("merge")
    m.add_argument("--output-prefix", required=True)
    m.add_argument("prefixes", nargs="+")
    c = sub.add_parser("check-inspect")
    c.add_argument("prefix")
    d = sub.add_parser("doc-ids")
    d.add_argument("prefix")
    d.add_argument("doc", type=int)
    args = p.parse_args()
    handler = {"preprocess": cmd_preprocess, "merge": cmd_merge,
               "check-inspect": cmd_check_inspect, "doc-ids": cmd_doc_ids}[args.cmd]
    sys.exit(handler(args) or 0)


if __name__ == "__main__":
    main()
