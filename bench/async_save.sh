#!/usr/bin/env bash
# Checkpoint save time and the training stall it causes, synchronous against --async-save,
# alternating in one run, on one process (issue 15).
#   bench/async_save.sh              GPT-2 124M shape (T 256, micro-batch 4), 12 iterations,
#                                    a save every 3 (3 saves after the first step)
#   LAYERS, HIDDEN, HEADS, VOCAB, SEQ, MBS, ITERS, EVERY, ROUNDS   override the shape / run
#   SAVE_DIR=DIR                     where the checkpoints go (default: a directory under /tmp;
#                                    put it on the disk you train to)
# For each run it prints the median step time of the steps without a save, the wall time of
# the run, and what the saves cost: synchronous, the "saved checkpoint ... (N s)" times;
# async, the files' write time, the time to publication and the training stall plait logs.
# JSON lines go to $OUT (default bench/results/async_save.jsonl).
set -u
cd "$(dirname "$0")/.."
PLAIT=${PLAIT:-build/plait}
LAYERS=${LAYERS:-12} HIDDEN=${HIDDEN:-768} HEADS=${HEADS:-12} VOCAB=${VOCAB:-50257}
SEQ=${SEQ:-256} MBS=${MBS:-4} ITERS=${ITERS:-12} EVERY=${EVERY:-3} ROUNDS=${ROUNDS:-2}
OUT=${OUT:-bench/results/async_save.jsonl}
dir=${SAVE_DIR:-$(mktemp -d /tmp/plait-async-bench.XXXXXX)}
mkdir -p "$(dirname "$OUT")" "$dir"
if [ -z "${SAVE_DIR:-}" ]; then trap 'rm -rf "$dir"' EXIT; else trap 'rm -rf "$dir/run"' EXIT; fi

one() { # sync|async
    rm -rf "$dir/run"
    local flags=() t0 t1
    [ "$1" = async ] && flags=(--async-save)
    t0=$(date +%s.%N)
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=2 "$PLAIT" train \
        --num-layers "$LAYERS" --hidden-size "$HIDDEN" --num-attention-heads "$HEADS" \
        --vocab-size "$VOCAB" --seq-length "$SEQ" --micro-batch-size "$MBS" \
        --global-batch-size "$MBS" --train-iters "$ITERS" --lr 1e-4 --mock-data --log-interval 1 \
        --eval-iters 0 --save "$dir/run" --save-interval "$EVERY" "${flags[@]}" \
        --metrics-file "$dir/metrics.jsonl" >"$dir/log" 2>&1 || { echo "plait failed:"; tail "$dir/log"; exit 1; }
    t1=$(date +%s.%N)
    /usr/bin/python3 - "$1" "$dir/log" "$t0" "$t1" "$ITERS" "$EVERY" "$LAYERS" "$HIDDEN" "$OUT" <<'EOF'
import json, re, statistics, sys
mode, log, t0, t1, iters, every, layers, hidden, out = sys.argv[1:]
text = open(log).read()
steps = [float(x) for x in re.findall(r"elapsed time per iteration \(ms\): ([0-9.]+)", text)]
it = [int(x) for x in re.findall(r"iteration +([0-9]+)/", text)]
# a step right after a save pays for it (sync: the save; async: the snapshot, polls)
free = [s for i, s in zip(it, steps) if (i - 1) % int(every) != 0 or i == 1]
med = statistics.median(free) / 1e3
wall = float(t1) - float(t0)
rec = {"mode": mode, "layers": int(layers), "hidden": int(hidden), "iters": int(iters),
       "save_every": int(every), "median_step_s": med, "wall_s": wall}
if mode == "sync":
    rec["save_s"] = [float(x) for x in re.findall(r"saved checkpoint at iteration \d+ to \S+ \(([0-9.]+) s\)", text)]
else:
    a = re.findall(r"async: files written in ([0-9.]+) s, published after ([0-9.]+) s; training stalled ([0-9.]+) s", text)
    rec["write_s"] = [float(x[0]) for x in a]
    rec["publish_s"] = [float(x[1]) for x in a]
    rec["stall_s"] = [float(x[2]) for x in a]
print(json.dumps(rec))
with open(out, "a") as f:
    f.write(json.dumps(rec) + "\n")
EOF
}

echo "== $LAYERS layers, hidden $HIDDEN, vocab $VOCAB, T $SEQ, micro-batch $MBS, $ITERS iterations, save every $EVERY, in $dir"
for ((r = 0; r < ROUNDS; r++)); do
    one sync
    one async
done
