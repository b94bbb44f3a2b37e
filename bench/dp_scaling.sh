#!/usr/bin/env bash
# Data-parallel scaling on one machine: 1 rank x 2 threads against 2 ranks x 1
# thread at the same global batch, with the communication time and how much of
# it ran beside backward (plait bench's breakdown).
#   bench/dp_scaling.sh [model flags...]   (default: a 6-layer, 512-hidden GPT)
set -u
cd "$(dirname "$0")/.."
PLAIT=${PLAIT:-build/plait}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1
MODEL=("$@")
[ ${#MODEL[@]} -gt 0 ] || MODEL=(--num-layers 6 --hidden-size 512 --num-attention-heads 8
                                 --seq-length 256 --vocab-size 32768)
common=(bench "${MODEL[@]}" --micro-batch-size 4 --global-batch-size 8 --train-iters 8)
echo "== 1 rank x 2 threads"
OMP_NUM_THREADS=2 "$PLAIT" "${common[@]}" 2>&1 | grep -E "plait bench|  " | tee /tmp/dp1.txt
one=$(tail -n 1 /tmp/dp1.txt)
echo "== 2 ranks x 1 thread (mpirun)"
OMP_NUM_THREADS=1 mpirun.openmpi -n 2 --bind-to core -x OMP_NUM_THREADS "$PLAIT" "${common[@]}" 2>&1 \
    | grep -E "plait bench|  |DP gradient" | tee /tmp/dp2.txt
one_tps=$("$PLAIT" 2>/dev/null; OMP_NUM_THREADS=2 "$PLAIT" "${common[@]}" 2>/dev/null | tail -n 1 |
          /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['tokens_per_sec'])")
two_tps=$(OMP_NUM_THREADS=1 mpirun.openmpi -n 2 --bind-to core -x OMP_NUM_THREADS "$PLAIT" "${common[@]}" 2>/dev/null |
          tail -n 1 | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['tokens_per_sec'])")
echo "tokens/s: 1x2 $one_tps, 2x1 $two_tps, efficiency $(/usr/bin/python3 -c "print(round($two_tps/$one_tps, 3))")"
