#!/usr/bin/env bash
# Data-parallel scaling on one machine: 1 rank x 2 threads against 2 ranks x 1
# thread at the same global batch, with the communication time and how much of
# it ran beside backward (plait bench's breakdown).
#   bench/dp_scaling.sh [model flags...]   (default: a 6-layer, 512-hidden GPT)
set -u
cd "$(dirname "$0")/.."
PLAIT=${PLAIT:-build/plait}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1
out=$(mktemp -d)
MODEL=("$@")
[ ${#MODEL[@]} -gt 0 ] || MODEL=(--num-layers 6 --hidden-size 512 --num-attention-heads 8
                                 --seq-length 256 --vocab-size 32768)
common=(bench "${MODEL[@]}" --micro-batch-size 4 --global-batch-size 8 --train-iters 8)
echo "== 1 rank x 2 threads"
OMP_NUM_THREADS=2 "$PLAIT" "${common[@]}" >"$out/one.json" 2>"$out/one.log"
grep -E "plait bench|^  " "$out/one.log"
echo "== 2 ranks x 1 thread (mpirun, one core each)"
OMP_NUM_THREADS=1 mpirun.openmpi -n 2 --bind-to core -x OMP_NUM_THREADS "$PLAIT" "${common[@]}" \
    >"$out/two.json" 2>"$out/two.log"
grep -E "plait bench|^  " "$out/two.log"
tps() { tail -n 1 "$1" | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['tokens_per_sec'])"; }
a=$(tps "$out/one.json"); b=$(tps "$out/two.json")
echo "tokens/s: 1 rank x 2 threads $a, 2 ranks x 1 thread $b, efficiency $(/usr/bin/python3 -c "print(round($b / $a, 3))")"
rm -rf "$out"
