#!/usr/bin/env bash
# Batched beam search (plait seq2seq --batch-size, model/beam.h's pl_beam_batch): the same
# sources decoded with --beam-size W and --batch-size 1, 4 and 16, alternated over ROUNDS so
# that a shared machine's load falls on each alike; the CPU seconds (user + system) and wall
# seconds of each (medians), the speed-up over --batch-size 1 in CPU seconds (on a shared
# machine the wall time mostly measures the other processes), and a check that every run
# wrote the same bytes. One thread (OMP_NUM_THREADS=1 unless set), so that CPU time is work.
#   bench/beam_batch.sh [ROUNDS]
#   OLD=PLAIT     also time a plait from before the batching (one beam a decoder step),
#                 which must write the same bytes too
#   W=4 N=32 MAX_NEW=16   beams, sources (KJV verses), tokens per hypothesis at most
# The model: a T5 (4 + 4 layers, hidden 256, 8 heads, BERT vocabulary, encoder 64 and
# decoder 32 positions) trained 2 iterations on KJV sentences (the weights' values do not
# change the cost). Not part of make test.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PLAIT=${PLAIT:-$ROOT/build/plait}
DATA=${PLAIT_DATA:-$ROOT/data}
ROUNDS=${1:-3}
W=${W:-4} N=${N:-32} MAX_NEW=${MAX_NEW:-16}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
"$ROOT/build/testtools/bert_samples" make "$DATA/bert/vocab.txt" "$DATA/kjv.txt" \
    "$TMP/kjv_sent" 2000 >/dev/null
"$PLAIT" train --model t5 --data-path "$TMP/kjv_sent" --vocab-file "$DATA/bert/vocab.txt" \
    --split 90,10,0 --vocab-extra-ids 100 --encoder-num-layers 4 --decoder-num-layers 4 \
    --hidden-size 256 --num-attention-heads 8 --encoder-seq-length 64 --decoder-seq-length 32 \
    --micro-batch-size 2 --global-batch-size 2 --lr 1e-4 --train-iters 2 --seed 3 \
    --save "$TMP/t5" >"$TMP/train.log" 2>&1
awk 'NR % 977 == 1 { sub(/\r$/, ""); print }' "$DATA/kjv.txt" | head -n "$N" >"$TMP/src.txt"
decode() { # BINARY OUT [FLAGS...]: prints "CPU WALL" seconds
    local bin=$1 out=$2; shift 2
    /usr/bin/python3 - "$bin" "$out" "$TMP" "$MAX_NEW" "$W" "$@" <<'PY'
import resource, subprocess, sys, time
b, out, tmp, max_new, w, *flags = sys.argv[1:]
t0 = time.time()
with open(out, "w") as f:
    subprocess.run([b, "seq2seq", "--load", tmp + "/t5", "--input", tmp + "/src.txt",
                    "--max-new-tokens", max_new, "--beam-size", w, "--num-return", w, *flags],
                   stdout=f, check=True)
wall = time.time() - t0
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{r.ru_utime + r.ru_stime:.3f} {wall:.3f}")
PY
}
names=(b1 b4 b16) flags=("--batch-size 1" "--batch-size 4" "--batch-size 16")
if [ -n "${OLD:-}" ]; then names+=(old); flags+=(""); fi
declare -A times walls
for r in $(seq "$ROUNDS"); do
    line="round $r (CPU / wall s):"
    for k in "${!names[@]}"; do
        bin=$PLAIT; [ "${names[$k]}" = old ] && bin=$OLD
        # shellcheck disable=SC2086
        read -r t wt < <(decode "$bin" "$TMP/${names[$k]}.txt" ${flags[$k]})
        times[${names[$k]}]+="$t " walls[${names[$k]}]+="$wt "
        line+=" ${names[$k]} $t / $wt"
        cmp -s "$TMP/${names[$k]}.txt" "$TMP/b1.txt" || { echo "${names[$k]}: output differs from --batch-size 1"; exit 1; }
    done
    echo "$line"
done
med() { printf '%s\n' $1 | sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
base=$(med "${times[b1]}")
for k in "${names[@]}"; do
    m=$(med "${times[$k]}") mw=$(med "${walls[$k]}")
    echo "$k: median CPU ${m}s (wall ${mw}s), $(awk -v n="$N" -v m="$m" 'BEGIN{printf "%.2f", n/m}') \
sources per CPU second, speed-up over --batch-size 1: $(awk -v a="$base" -v m="$m" 'BEGIN{printf "%.2f", a/m}')"
done
echo "every run wrote the same $(wc -l <"$TMP/b1.txt") hypotheses ($N sources x $W beams)"
