#!/usr/bin/python3
"""Reference SMILES tokenization with Python's own re engine, as MegaMolBART's
MolEncTokenizer (nemo_chem/tokenizer/tokenizer.py) does it: the pattern is
"(" + extra tokens with ()[].| escaped, "|"-joined + "|" + REGEX + "|.)",
applied with findall; ids are vocab.get(token, unk); the vocabulary file is
read with read_text() and split on newlines, empty lines dropped.

    mmb_findall.py corpus DATA_DIR OUT_DIR
        writes OUT_DIR/data.hex (the first field of every line of the three
        RDKit SMILES files) and OUT_DIR/adversarial.hex, one hex string a line
    mmb_findall.py vocab DATA.hex CHEM_TOKENS_START MIN_COUNT OUT
        the vocabulary plait should build from those strings: 6 specials,
        <UNUSED_i> up to CHEM_TOKENS_START, then the tokens findall gives
        (no extra tokens), most frequent first, ties by UTF-8 bytes
    mmb_findall.py tokens VOCAB CHEM_TOKENS_START FILE.hex
        per line: tokens (bytes outside '!'..'~' and backslash as \\xHH),
        a tab, ids; strings are decoded with surrogateescape, so every byte
        that is not valid UTF-8 is one character, as in plait
"""
import collections
import csv
import os
import re
import sys

REGEX = r"""\[[^\]]+]|Br?|Cl?|N|O|S|P|F|I|b|c|n|o|s|p|\(|\)|\.|=|#|-|\+|\\\\|\/|:|~|@|\?|>|\*|\$|\%[0-9]{2}|[0-9]"""
SPECIALS = ["<PAD>", "?", "^", "&", "<MASK>", "<SEP>"]


def compiled(extra_tokens):
    # MolEncTokenizer._get_compiled_regex
    regex_string = r"("
    for token in extra_tokens:
        processed_token = token
        for special_character in "()[].|":
            processed_token = processed_token.replace(special_character, f"\\{special_character}")
        regex_string += processed_token + r"|"
    regex_string += REGEX + r"|"
    regex_string += r".)"
    return re.compile(regex_string)


def read_hex(path):
    with open(path) as f:
        return [bytes.fromhex(l.rstrip("\n")).decode("utf-8", "surrogateescape") for l in f]


def write_hex(path, strings):
    with open(path, "w") as f:
        for s in strings:
            f.write(s.encode("utf-8", "surrogateescape").hex() + "\n")


def esc(tok):
    out = []
    for b in tok.encode("utf-8", "surrogateescape"):
        out.append(chr(b) if 0x20 < b < 0x7F and b != 0x5C else "\\x%02x" % b)
    return "".join(out)


ADVERSARIAL = [
    "C1=CC=CC=C1", "CC(=O)Oc1ccccc1C(=O)O", "[nH+]", "[nH]1cccc1", "C[N+](=O)[O-]", "[Na+].[Cl-]",
    "%12", "C%123", "C%1", "%", "%a1", "%%12", "%1%23",
    "[", "[C", "[]", "[]]", "[[C]]", "C[", "C]", "][", "[C]]", "[ C H ]", "[C\nH]", "[C\tH]",
    "\\", "C\\C=C/C", "C\\\\C", "\\\\\\", "\\\\\\\\", "/\\/\\",
    "BrBBr", "Clc", "Cl", "CL", "Brr", "Bc", "B", "C", "cl", "br",
    "unknown XYZ chars !", "Hello, world", "C C", "C\tC", "C\rC", "C\nC", "\n", "\n\n", "",
    "é", "[é]", "Cé", "日本語", "🤗", "C🤗C", "\u00a0", "\u2028",
    "<UNUSED_0>", "<UNUSED_10>x<UNUSED_1>", "<UNUSED_265>", "<UNUSED_266>", "<PAD><MASK><SEP>",
    "^CC&", "?", "$*~@?>", ":~@", "#-+", "LogD_change_(-0.1, 0.1]", "Solubility_low->high",
    "Clint_no_changeCC", "LogD_change_(-0.1, 0.1]C", "(-0.1, 0.1]",
    "\udcff", "C\udcc3", "[\udce6\udc97]", "\udced\udca0\udc80", "\udcc0\udcaf", "\udcf4\udc90\udc80\udc80",
    "[\udcff]", "Br\udcff", "%1\udcff",
]


def main():
    cmd = sys.argv[1]
    if cmd == "corpus":
        data, out = sys.argv[2], sys.argv[3]
        smiles = []
        for name in ("first_5K.smi", "CHEMBL2321810.smi"):
            with open(os.path.join(data, name), encoding="utf-8", newline="") as f:
                for line in f.read().split("\n"):
                    line = line.rstrip("\r")
                    if line.split():
                        smiles.append(line.split()[0])
        with open(os.path.join(data, "wehi_mols.csv"), encoding="utf-8", newline="") as f:
            for row in csv.reader(f):
                if row:
                    smiles.append(row[0])
        write_hex(os.path.join(out, "data.hex"), smiles)
        write_hex(os.path.join(out, "adversarial.hex"), ADVERSARIAL)
        print(f"{len(smiles)} SMILES from the data files, {len(ADVERSARIAL)} adversarial strings")
    elif cmd == "vocab":
        strings, start, min_count, out = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
        prog = compiled([])
        counts = collections.Counter()
        for s in read_hex(strings):
            counts.update(prog.findall(s))
        head = SPECIALS + [f"<UNUSED_{i}>" for i in range(start - len(SPECIALS))]
        chem = sorted((t for t, c in counts.items() if c >= min_count and t not in head),
                      key=lambda t: (-counts[t], t.encode("utf-8")))
        with open(out, "w", encoding="utf-8", newline="") as f:
            f.write("".join(t + "\n" for t in head + chem))
        print(f"{len(counts)} distinct tokens, {len(chem)} chemical tokens kept")
    elif cmd == "tokens":
        vocab_path, start, strings = sys.argv[2], int(sys.argv[3]), sys.argv[4]
        with open(vocab_path, encoding="utf-8") as f:
            tokens = [t for t in f.read().split("\n") if t is not None and t != ""]
        if start < 0:
            start = 272 if len(tokens) >= 272 else 6
        vocab = {t: i for i, t in enumerate(tokens)}
        prog = compiled([tokens[i] for i in range(6, start)])
        unk = vocab[tokens[1]]
        out = []
        for s in read_hex(strings):
            toks = prog.findall(s)
            ids = [vocab.get(t, unk) for t in toks]
            out.append(" ".join(esc(t) for t in toks) + "\t" + " ".join(map(str, ids)))
        sys.stdout.write("".join(l + "\n" for l in out))
    else:
        sys.exit(f"unknown command {cmd}")


main()
