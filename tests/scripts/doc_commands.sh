#!/usr/bin/env bash
# Every command of the docs' fenced shell blocks, run (README.md, docs/*.md).
# tests/scripts/doc_commands.py extracts them and applies the scaling table (printed
# below: tiny model, 2 iterations) and the blocks' own doc-test directives (fills for
# "...", commands not run with their reason). Each doc's commands run in order in a
# scratch directory of their own holding the files the docs name (corpus.jsonl,
# kjv.txt, data/gpt2, ... scaled down to a few hundred verses), with `plait` on the PATH
# as `make install` puts it, each under a timeout; a launch of N ranks must show world N
# in plait's banner. Commands not run are listed with their reason and counted; a new
# command in the docs is run unless a directive says why not, so none is skipped silently.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
source "$ROOT/tests/lib/slurm.sh"
on_exit slurm_down
export OMP_NUM_THREADS=1
export PATH="$ROOT/build:$PATH"
PY=/usr/bin/python3
EXTRACT="$ROOT/tests/scripts/doc_commands.py"

check "the extractor reads every block" $PY "$EXTRACT" --root "$ROOT"
# The extractor on docs of its own: a command in an untagged (output) block is found and
# run, a directive matching no command or unknown is an error, not a silent skip.
mkdir -p "$TMP/fake/docs"
printf 'x\n```\nplait 0.1.0 | world 1\nplait frobnicate --x 1\n```\n' >"$TMP/fake/README.md"
check "a command pasted into an untagged block is run" \
    sh -c "$PY '$EXTRACT' --root '$TMP/fake' | grep -qx 'RUN	README.md:4	-	plait frobnicate --x 1'"
check "an output line is not a command" \
    sh -c "[ \"\$($PY '$EXTRACT' --root '$TMP/fake' | wc -l)\" = 1 ]"
printf '<!-- doc-test: not-run "nothing" reason -->\n```sh\nplait train\n```\n' >"$TMP/fake/docs/a.md"
check_fails "a directive that matches no command is an error" "matches no command" \
    $PY "$EXTRACT" --root "$TMP/fake"
printf '<!-- doc-test: skip reason -->\n```sh\nplait train\n```\n' >"$TMP/fake/docs/a.md"
check_fails "an unknown directive is an error" "unknown doc-test directive" \
    $PY "$EXTRACT" --root "$TMP/fake"
$PY "$EXTRACT" --root "$ROOT" >"$TMP/commands.tsv" 2>/dev/null || exit 1
echo "scaling applied to the commands run (the docs keep their sizes):"
$PY "$EXTRACT" --scale | sed 's/^/    /'

# The files the docs name, small. data/ holds the shared tokenizer directories as links
# (outputs such as data/my-gpt2 land beside them, not in the shared data).
F="$TMP/fixtures"
mkdir -p "$F/data" "$F/shards"
for d in gpt2 bert llama2 llama3 sentencepiece smiles; do ln -s "$PLAIT_DATA/$d" "$F/data/$d"; done
for d in build build-mpich examples bench scripts; do ln -s "$ROOT/$d" "$F/$d"; done
head -n 200 "$PLAIT_DATA/kjv.txt" >"$F/kjv.txt"
xz -k "$F/kjv.txt"
$PY - "$F" <<'EOF'
import json, sys
d = sys.argv[1]
verses = [l.rstrip("\n") for l in open(d + "/kjv.txt", encoding="utf-8")]
with open(d + "/corpus.jsonl", "w") as c, open(d + "/kjv.jsonl", "w") as k, open(d + "/wiki.jsonl", "w") as w:
    for i, v in enumerate(verses):
        c.write(json.dumps({"text": v}) + "\n")
        k.write(json.dumps({"text": v}) + "\n")
        w.write(json.dumps({"text": v, "title": "Genesis %d" % (i + 1)}) + "\n")
# seed 003's layout: whitespace-separated tokens, a vocabulary JSON with <unk> and <|endoftext|>
words = sorted({t for v in verses for t in v.split()})
vocab = {"<unk>": 0, "<|endoftext|>": 1}
for t in words:
    vocab[t] = len(vocab)
json.dump(vocab, open(d + "/vocab.json", "w"))
smiles = [l.split()[0] for l in open(d + "/data/smiles/first_5K.smi")][:200]
with open(d + "/first_5K.smi", "w") as s, open(d + "/x000.csv", "w") as x:
    x.write("zinc_id,smiles\n")
    for i, m in enumerate(smiles):
        s.write("%s\t%d\n" % (m, i + 1))
        x.write("ZINC%06d,%s\n" % (i, m))
open(d + "/ex.smi", "w").write("F[C@@H](Cl)Br\nF/C=C/C=C/C=C\\Cl\n")
json.dump({"train_batch_size": 4, "train_micro_batch_size_per_gpu": 1,
           "bf16": {"enabled": True}}, open(d + "/ds.json", "w"))
open(d + "/hosts", "w").write("node1 slots=2\nnode2 slots=2\n")
# docs/finetune.md's text classification files: SST-2's layout (sentence, label; a header),
# labelled by a rule (does the verse name God?), train / dev / test in turn
for name, part in (("train", 0), ("dev", 1), ("test", 2)):
    with open("%s/%s.tsv" % (d, name), "w") as f:
        f.write("sentence\tlabel\n")
        for v in verses[part::3]:
            f.write("%s\t%d\n" % (v.replace("\t", " "), int("God" in v)))
EOF
zstd -q "$F/corpus.jsonl" -o "$F/corpus.jsonl.zst"
gpt2_prep() { plait preprocess --input "$F/$1" "${GPT2[@]}" --append-eod --output-prefix "$2" >/dev/null 2>&1; }
check "fixture: corpus_text_document" gpt2_prep corpus.jsonl "$F/corpus"
check "fixture: shards/ and a, b" sh -c "head -n 50 '$F/corpus.jsonl' >'$F/a.jsonl' && tail -n 50 '$F/corpus.jsonl' >'$F/b.jsonl'"
gpt2_prep a.jsonl "$F/a"; gpt2_prep b.jsonl "$F/b"
cp "$F"/a_text_document.* "$F"/b_text_document.* "$F/shards/"
cp "$F/corpus_text_document.bin" "$F/data/my-gpt2_text_document.bin"  # as data.md's first
cp "$F/corpus_text_document.idx" "$F/data/my-gpt2_text_document.idx"  # command makes it
check "fixture: megamolbart.vocab" plait data build-vocab --tokenizer-type SmilesTokenizer \
    --input "$F/first_5K.smi" --output "$F/megamolbart.vocab"
rm -f "$PLAIT_PEAK_CACHE"

# The fills the docs' directives use for "..." (relative to a doc's scratch directory).
export DOC_TOK="--tokenizer-type GPT2BPETokenizer --vocab-file data/gpt2/encoder.json --merge-file data/gpt2/vocab.bpe"
export DOC_MODEL="--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 --micro-batch-size 1 --global-batch-size 4 --train-iters 2 --lr 1e-3 --lr-warmup-iters 1 --split 98,2,0 --eval-iters 1 --eval-interval 2"
export DOC_TRAIN="$DOC_MODEL --data-path corpus_text_document $DOC_TOK"

# The Slurm commands: a one-node Slurm, started at the first of them; `sbatch` there is
# a shim that submits, waits for the job's end, prints its output, and succeeds only for a
# job COMPLETED with exit 0:0 whose banner shows world = its task count.
mkdir -p "$TMP/shim"
cat >"$TMP/shim/sbatch" <<EOF
#!/usr/bin/env bash
source "$ROOT/tests/lib/slurm.sh"
_SLURM_HOSTS=0
export PATH=\${PATH#$TMP/shim:}
state=\$(mktemp -p "$TMP")
slurm_job "\$state" 120 "\$@" >&2 || exit 1
out=\$(grep -oE 'StdOut=[^ ]+' "\$state"); out=\${out#StdOut=}
tasks=\$(grep -oE 'NumTasks=[0-9]+' "\$state"); tasks=\${tasks#NumTasks=}
cat "\$out"
grep -q 'JobState=COMPLETED ' "\$state" && grep -q ' ExitCode=0:0 ' "\$state" ||
    { cat "\$state"; exit 1; }
grep -q "world \$tasks = " "\$out" || { echo "the job's banner does not show world \$tasks"; exit 1; }
EOF
chmod +x "$TMP/shim/sbatch"
slurm_started=
start_slurm() {
    local v
    for v in $(compgen -e | grep -E '^SLURM_' | grep -v '^SLURM_CONF$'); do unset "$v"; done
    check "slurm starts for the Slurm commands" slurm_up "$TMP/slurm" 8 && slurm_started=1
}
export TMP

ran=0 skipped=0
while IFS=$'\t' read -r kind where why cmd expect; do
    doc=${where%%:*}; dir="$TMP/run/${doc//\//_}"
    if [ ! -d "$dir" ]; then mkdir -p "$(dirname "$dir")"; cp -a "$F" "$dir"; fi
    if [ "$kind" = NEEDS ] && [ ! -e "$ROOT/$why" ]; then kind=SKIP why="$why does not exist here"; fi
    if [ "$kind" = SKIP ]; then
        skipped=$((skipped + 1)); echo "not run $where: $why"; echo "    $cmd"; continue
    fi
    ran=$((ran + 1)); log="$TMP/run/$((ran)).log"
    envs=()
    if [ "$kind" = SLURM ]; then
        [ -n "$slurm_started" ] || start_slurm || { _fail=$((_fail + 1)); echo "not ok $where: no Slurm"; continue; }
        read -r -a envs < <($PY "$EXTRACT" --scale-env)
        envs+=("PATH=$TMP/shim:$PATH")
    fi
    t0=$(date +%s.%N)
    (cd "$dir" && env "${envs[@]}" timeout -k 5 150 bash -c "$cmd") >"$log.out" 2>"$log" </dev/null
    rc=$?; t=$(echo "$(date +%s.%N) - $t0" | bc)
    np=$(echo "$cmd" | grep -oE '(mpirun[.a-z]*|mpiexec[.a-z]*) +-n +[0-9]+|--nproc_per_node +[0-9]+' | grep -oE '[0-9]+$')
    cat "$log.out" >>"$log"
    if [ "$rc" -ne 0 ]; then
        _fail=$((_fail + 1)); echo "not ok $where (exit $rc, $(printf %.1f "$t") s): $cmd"; tail -n 15 "$log" | sed 's/^/    /'
    elif [ -n "$expect" ] && ! cmp -s <(echo "$expect" | base64 -d) "$log.out"; then
        _fail=$((_fail + 1)); echo "not ok $where: its output is not the one the docs show: $cmd"
        diff <(echo "$expect" | base64 -d) "$log.out" | head -n 10 | sed 's/^/    /'
    elif [ -n "$np" ] && ! echo "$cmd" | grep -q -- --dry-run && ! grep -q "world $np = " "$log"; then
        _fail=$((_fail + 1)); echo "not ok $where: launched $np ranks but the banner says otherwise: $cmd"
        grep -m1 'world' "$log" | sed 's/^/    /'
    else
        _pass=$((_pass + 1)); echo "ok $where ($(printf %.1f "$t") s${expect:+, output as shown}): $cmd"
    fi
done <"$TMP/commands.tsv"
echo "doc commands: $ran run, $skipped not run (each with its reason above)"
check "some doc commands ran" test "$ran" -gt 0
summary doc_commands
