#!/usr/bin/python3
"""Pull every shell command out of the fenced blocks of README.md and docs/*.md.

What counts as a command:
  - a block tagged sh, bash or shell: every line that is not blank or a comment
    (a trailing backslash joins the next line);
  - a block with lines starting "$ " (a transcript, tagged console or not): those lines
    and their continuations; the rest is output;
  - an untagged block: every line that reads as a command (COMMAND_RE: plait SUBCOMMAND,
    mpirun, srun, sbatch, make, a script under bench/ scripts/ examples/, ...), so a
    command pasted into an output block is not missed.
Blocks tagged anything else (c, json, text, python, ...) hold no commands.

Directives, HTML comments on the lines just above a block's opening fence (blank lines
between them allowed), invisible in the rendered page:
  <!-- doc-test: not-run REASON -->             no command of the block is run
  <!-- doc-test: not-run "REGEX" REASON -->     commands REGEX matches (re.search) are not run
  <!-- doc-test: sub "OLD" "NEW" -->            in this block's commands, OLD becomes NEW
                                                (fills an elision such as "..." with flags)
  <!-- doc-test: needs "PATH" -->               commands mentioning PATH are not run when
                                                PATH does not exist (e.g. build-mpich/plait)
  <!-- doc-test: slurm "REGEX" -->              commands REGEX matches submit with sbatch: the
                                                suite runs them in a throw-away one-node Slurm
                                                (tests/lib/slurm.sh), waits for each job and
                                                wants it COMPLETED with world = its tasks
  <!-- doc-test: output "REGEX" -->             in a transcript, the standard output of the
                                                commands REGEX matches must be the lines the
                                                block shows after them, exactly
A not-run command is still listed, with its reason: nothing is dropped silently.

Every command that is run gets the scaling substitutions of SCALE below (the docs' model
sizes and iteration counts are minutes; the test's are seconds), applied to what the docs
say, never written into them.

Output (stdout), one line per command, tab-separated:
  RUN   DOC:LINE  -       COMMAND-AS-RUN      [EXPECTED-STDOUT, base64]
  SKIP  DOC:LINE  REASON  COMMAND-AS-WRITTEN
  NEEDS DOC:LINE  PATH    COMMAND-AS-RUN      [EXPECTED-STDOUT, base64]
                                              (run only if PATH exists, relative to the root)
  SLURM DOC:LINE  -       COMMAND-AS-RUN      (run with sbatch inside a one-node Slurm)
With --scale, the substitution tables instead (SCALE_ENV: what the sbatch example script
reads from the environment, set for the Slurm commands).
"""
import base64
import glob
import os
import re
import sys

# (flag, value in the test, why): a flag given in the docs keeps its place, its value is
# replaced. Tiny model, 2 iterations, evaluation and saving inside those 2.
SCALE = [
    ("--num-layers", "2", "2 layers (a pipeline of 2 stages still fits)"),
    ("--hidden-size", "32", "hidden 32"),
    ("--ffn-hidden-size", "64", "hidden 32's FFN"),
    ("--num-attention-heads", "4", "4 heads of 8"),
    ("--seq-length", "32", "32 tokens"),
    ("--encoder-num-layers", "2", "T5: 2 encoder layers"),
    ("--decoder-num-layers", "2", "T5: 2 decoder layers"),
    ("--encoder-seq-length", "32", "T5: 32 encoder tokens"),
    ("--decoder-seq-length", "16", "T5: 16 decoder tokens"),
    ("--epochs", "1", "plait finetune: one epoch"),
    ("--max-position-embeddings", "32", "with --seq-length"),
    ("--micro-batch-size", "1", "1 sample per micro-batch"),
    ("--global-batch-size", "4", "4 samples per step (DP 1, 2 and 4 divide it)"),
    ("--train-iters", "2", "2 iterations"),
    ("--lr-warmup-iters", "1", "inside 2 iterations"),
    ("--lr-decay-iters", "2", "inside 2 iterations"),
    ("--eval-interval", "2", "one evaluation"),
    ("--eval-iters", "1", "one evaluation batch"),
    ("--save-interval", "2", "one save"),
    ("--log-interval", "1", "every iteration"),
    ("--max-new-tokens", "4", "4 generated tokens"),
    ("--workers", "2", "the test machine's cores"),
]

# examples/slurm/train_gpt.sbatch's settings, given to the jobs the Slurm commands submit.
SCALE_ENV = [
    ("NUM_LAYERS", "2"), ("HIDDEN_SIZE", "32"), ("NUM_ATTENTION_HEADS", "4"),
    ("SEQ_LENGTH", "32"), ("GLOBAL_BATCH_SIZE", "4"), ("TRAIN_ITERS", "2"),
    ("LR_WARMUP_ITERS", "1"), ("EVAL_INTERVAL", "2"), ("EVAL_ITERS", "1"), ("LOG_INTERVAL", "1"),
    ("SPLIT", "98,2,0"),  # 949,50,1 of the test corpus (200 verses) leaves its test split empty
]

COMMAND_RE = re.compile(
    r"^(\w+=\S*\s+)*"
    r"(plait\s+(-|[a-z])|build(-mpich)?/plait\s|mpirun(\.\w+)?\s|mpiexec(\.\w+)?\s|"
    r"srun\s|sbatch\s|salloc\s|make(\s|$)|bash\s|sh\s|env\s|python3?\s|/usr/bin/python3\s|"
    r"ip\s|timeout\s|torchrun\s|deepspeed\s|cat\s|(bench|scripts|examples|tools|tests)/\S+)")
SHELL_TAGS = {"sh", "bash", "shell", "console"}
DIRECTIVE_RE = re.compile(r"^<!--\s*doc-test:\s*(.*?)\s*-->$")
QUOTED_RE = re.compile(r'"((?:[^"\\]|\\.)*)"')


def parse_directive(text, where):
    m = re.match(r"(not-run|sub|needs|output|slurm)\b\s*(.*)$", text)
    if not m:
        sys.exit(f"{where}: unknown doc-test directive '{text}'")
    kind, rest = m.group(1), m.group(2)
    quoted = []
    while True:
        q = QUOTED_RE.match(rest)
        if not q:
            break
        quoted.append(q.group(1).replace('\\"', '"'))
        rest = rest[q.end():].lstrip()
    if kind == "not-run":
        if not rest:
            sys.exit(f"{where}: not-run needs a reason")
        return ("not-run", quoted[0] if quoted else "", rest)
    if kind == "sub" and len(quoted) == 2 and not rest:
        return ("sub", quoted[0], quoted[1])
    if kind in ("needs", "output", "slurm") and len(quoted) == 1 and not rest:
        return (kind, quoted[0], "")
    sys.exit(f"{where}: malformed doc-test directive '{text}'")


def logical_lines(body, first_line):
    """Join backslash continuations: [(line number, text)]."""
    out, cur, start = [], None, 0
    for k, line in enumerate(body):
        if cur is None:
            cur, start = line, first_line + k
        else:
            cur = cur[:-1] + " " + line.strip()
        if not cur.rstrip().endswith("\\"):
            out.append((start, cur.rstrip()))
            cur = None
        else:
            cur = cur.rstrip()
    if cur is not None:
        out.append((start, cur))
    return out


def block_commands(tag, body, first_line):
    """[(line number, command, the transcript's output lines after it or None)]."""
    if any(l.startswith("$ ") for l in body):
        cmds, k = [], 0
        while k < len(body):
            if body[k].startswith("$ "):
                start, text = first_line + k, body[k][2:]
                while text.rstrip().endswith("\\") and k + 1 < len(body):
                    k += 1
                    text = text.rstrip()[:-1] + " " + body[k].strip()
                cmds.append((start, text.rstrip(), []))
            elif cmds:
                cmds[-1][2].append(body[k])
            k += 1
        return cmds
    if tag in SHELL_TAGS:
        return [(n, t, None) for n, t in logical_lines(body, first_line)
                if t.strip() and not t.lstrip().startswith("#")]
    if tag == "":
        return [(n, t.strip(), None) for n, t in logical_lines(body, first_line)
                if COMMAND_RE.match(t.strip())]
    return []


def scale(cmd):
    for flag, value, _ in SCALE:
        cmd = re.sub(r"(\s%s[ =])[^\s'\"]+" % re.escape(flag), r"\g<1>" + value, cmd)
    return cmd


def extract(root):
    docs = ["README.md"] + sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "*.md")))
    rows = []
    for doc in docs:
        lines = open(os.path.join(root, doc), encoding="utf-8").read().split("\n")
        k = 0
        while k < len(lines):
            m = re.match(r"^\s*```\s*([\w+-]*)", lines[k])
            if not m:
                k += 1
                continue
            tag, fence = m.group(1).lower(), k
            end = k + 1
            while end < len(lines) and not lines[end].strip().startswith("```"):
                end += 1
            directives, j = [], fence - 1
            while j >= 0 and (not lines[j].strip() or DIRECTIVE_RE.match(lines[j].strip())):
                d = DIRECTIVE_RE.match(lines[j].strip())
                if d:
                    directives.insert(0, parse_directive(d.group(1), f"{doc}:{j + 1}"))
                j -= 1
            body = lines[fence + 1:end]
            cmds = block_commands(tag, body, fence + 2)
            if directives and not cmds:
                sys.exit(f"{doc}:{fence + 1}: doc-test directives above a block without commands")
            used = set()
            for line_no, cmd, shown in cmds:
                where = f"{doc}:{line_no}"
                skip = None
                for i, (kind, a, b) in enumerate(directives):
                    if kind == "not-run" and re.search(a, cmd):
                        skip, _ = b, used.add(i)
                        break
                if skip:
                    rows.append(("SKIP", where, skip, cmd))
                    continue
                run, need, expect, slurm = cmd, None, None, False
                for i, (kind, a, b) in enumerate(directives):
                    if kind == "sub" and a in run:
                        run, _ = run.replace(a, b), used.add(i)
                    elif kind == "needs" and a in cmd:
                        need, _ = a, used.add(i)
                    elif kind == "slurm" and re.search(a, cmd):
                        slurm, _ = True, used.add(i)
                    elif kind == "output" and re.search(a, cmd):
                        if shown is None:
                            sys.exit(f"{where}: an output directive outside a transcript")
                        expect, _ = "".join(l + "\n" for l in shown), used.add(i)
                run = scale(" " + run).strip()
                row = ("NEEDS", where, need, run) if need else \
                    ("SLURM", where, "-", run) if slurm else ("RUN", where, "-", run)
                if expect is not None:
                    row += (base64.b64encode(expect.encode()).decode(),)
                rows.append(row)
            for i, d in enumerate(directives):
                if i not in used:
                    sys.exit(f"{doc}:{fence + 1}: doc-test directive {d[0]} \"{d[1]}\" matches no command of the block")
            k = end + 1
    return rows


def main():
    root = os.path.abspath(sys.argv[sys.argv.index("--root") + 1]) if "--root" in sys.argv else \
        os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    if "--scale" in sys.argv:
        for flag, value, why in SCALE:
            print(f"{flag} -> {value}\t({why})")
        print("for the Slurm jobs: " + " ".join(f"{n}={v}" for n, v in SCALE_ENV))
        return
    if "--scale-env" in sys.argv:
        print(" ".join(f"{n}={v}" for n, v in SCALE_ENV))
        return
    for row in extract(root):
        if "\t" in "".join(row[1:]):
            sys.exit(f"{row[1]}: a tab in a command")
        print("\t".join(row))


if __name__ == "__main__":
    main()
