#!/usr/bin/env bash
# Two plait binaries on the same model, alternated in one run (A B A B ...), so that
# a shared machine's load falls on both alike: tokens/s of each run, the medians and
# their ratio. For "this change costs nothing" claims (docs/performance.md).
#   bench/ab_binaries.sh OLD_PLAIT NEW_PLAIT [ROUNDS]
#   FLAGS="..."   the model (default: GPT-2 124M at T 256, micro-batch 4, no dropout)
#   STEPS=N       measured steps per run, after plait bench's 2 warm-up steps
set -u
A=${1:?old plait}; B=${2:?new plait}; ROUNDS=${3:-3}
STEPS=${STEPS:-5}
FLAGS=${FLAGS:---vocab-size 50257 --num-layers 12 --hidden-size 768 --num-attention-heads 12 --seq-length 256 --micro-batch-size 4 --hidden-dropout 0 --attention-dropout 0}
tok() { env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=2 "$1" bench $FLAGS \
            --train-iters $((STEPS + 2)) 2>/dev/null | tail -n 1 |
        /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["tokens_per_sec"])'; }
a=(); b=()
for r in $(seq "$ROUNDS"); do
    x=$(tok "$A"); y=$(tok "$B")
    a+=("$x"); b+=("$y")
    echo "round $r: A $x tokens/s, B $y tokens/s"
done
med() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
ma=$(med "${a[@]}"); mb=$(med "${b[@]}")
echo "median A $ma tokens/s, B $mb tokens/s, B/A $(awk -v a="$ma" -v b="$mb" 'BEGIN{printf "%.3f", b/a}')"
