#!/usr/bin/python3
"""Writes Punkt parameters for plait's sentence splitter (src/data/punkt.h,
`plait preprocess --split-sentences --punkt-params FILE`), with NLTK.

  punkt_params.py --pickle english.pickle OUT
      the parameters of an NLTK Punkt pickle: what Megatron's preprocess_data.py
      loads (tokenizers/punkt/english.pickle from nltk_data, read by NLTK <= 3.8.1)
  punkt_params.py --train OUT FILE... [--all-collocs]
      parameters trained by NLTK's PunktTrainer on the text of FILEs

Format, one fact a line, tab-separated: abbrev TYPE / colloc TYPE TYPE /
starter TYPE / ortho TYPE FLAGS. Types holding a tab or a newline cannot be
written and are left out (counted on stderr).
"""
import pickle
import sys


def write(params, out):
    skipped = 0
    lines = []

    def ok(*types):
        nonlocal skipped
        if any("\t" in t or "\n" in t for t in types):
            skipped += 1
            return False
        return True

    lines += ["abbrev\t%s" % t for t in sorted(params.abbrev_types) if ok(t)]
    lines += ["colloc\t%s\t%s" % c for c in sorted(params.collocations) if ok(*c)]
    lines += ["starter\t%s" % t for t in sorted(params.sent_starters) if ok(t)]
    lines += ["ortho\t%s\t%d" % (t, f) for t, f in sorted(params.ortho_context.items())
              if f and ok(t)]
    with open(out, "w", encoding="utf-8") as f:
        f.write("# punkt parameters (scripts/punkt_params.py)\n" + "\n".join(lines) + "\n")
    print("%s: %d abbreviations, %d collocations, %d sentence starters, %d orthographic "
          "contexts; %d left out" % (out, len(params.abbrev_types), len(params.collocations),
                                     len(params.sent_starters), len(params.ortho_context),
                                     skipped), file=sys.stderr)


def main():
    args = sys.argv[1:]
    if len(args) == 3 and args[0] == "--pickle":
        with open(args[1], "rb") as f:
            tok = pickle.load(f)
        write(tok._params, args[2])
        return 0
    if len(args) >= 3 and args[0] == "--train":
        from nltk.tokenize.punkt import PunktTrainer
        trainer = PunktTrainer()
        files = [a for a in args[2:] if a != "--all-collocs"]
        trainer.INCLUDE_ALL_COLLOCS = "--all-collocs" in args
        for path in files:
            with open(path, encoding="utf-8") as f:
                trainer.train(f.read(), finalize=False)
        trainer.finalize_training()
        write(trainer.get_params(), args[1])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
