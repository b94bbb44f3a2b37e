#!/usr/bin/env bash
# Data-parallel scaling on one machine, and ZeRO's memory per rank.
#
# 1. Scaling: 1 rank x 2 threads against 2 ranks x 1 thread at the same global batch
#    (plait bench, synthetic tokens), REPEAT times each, alternating: tokens/s, the
#    efficiency (2 ranks / 1 rank), and where the DP gradient all-reduce ran: time inside
#    the collectives, the part that ran before backward ended (beside it, on the
#    communication thread), and the time the compute thread waited after backward.
# 2. Memory: peak resident memory (VmHWM, largest rank) of `plait train --mock-data` on a
#    model whose layers dominate, for ZeRO stages 0-3 at DP 2 and 4, beside the planned
#    model state + ZeRO working buffers.
#   bench/dp_scaling.sh [model flags...]   (default: a 6-layer, 512-hidden GPT)
#   REPEAT=3 MEMORY=0 SCALING=1 EXTRA="--ddp-bucket-size 0" bench/dp_scaling.sh
# The machine should be idle: timings on a shared machine say little (see uptime below).
set -u
cd "$(dirname "$0")/.."
PLAIT=${PLAIT:-build/plait}
REPEAT=${REPEAT:-1}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1
PY=/usr/bin/python3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
MODEL=("$@")
[ ${#MODEL[@]} -gt 0 ] || MODEL=(--num-layers 6 --hidden-size 512 --num-attention-heads 8
                                 --seq-length 256 --vocab-size 32768)
read -r -a EXTRA <<<"${EXTRA:-}"
common=(bench "${MODEL[@]}" --micro-batch-size 4 --global-batch-size 8 --train-iters 8
        ${EXTRA[@]+"${EXTRA[@]}"})
echo "machine: $(nproc) cores, $(uptime | sed 's/.*load/load/')"

field() { tail -n 1 "$1" | $PY -c "import json,sys; print(json.load(sys.stdin)['$2'])"; }
if [ "${SCALING:-1}" = 1 ]; then
    for r in $(seq 1 "$REPEAT"); do
        echo "== run $r: 1 rank x 2 threads"
        OMP_NUM_THREADS=2 timeout 900 "$PLAIT" "${common[@]}" >"$out/one$r.json" 2>"$out/one$r.log"
        grep -E "plait bench|^  " "$out/one$r.log"
        echo "== run $r: 2 ranks x 1 thread (mpirun, one core each)"
        OMP_NUM_THREADS=1 timeout 900 mpirun.openmpi -n 2 --bind-to core -x OMP_NUM_THREADS \
            ${PLAIT_COMM_THREAD+-x PLAIT_COMM_THREAD} "$PLAIT" "${common[@]}" \
            >"$out/two$r.json" 2>"$out/two$r.log"
        grep -E "world|plait bench|^  " "$out/two$r.log" | grep -v "^  *$"
    done
    echo
    printf '%-4s %14s %14s %10s %12s %14s %12s\n' run "1x2 tokens/s" "2x1 tokens/s" efficiency \
        "comm ms" "beside bwd ms" "waited ms"
    for r in $(seq 1 "$REPEAT"); do
        a=$(field "$out/one$r.json" tokens_per_sec); b=$(field "$out/two$r.json" tokens_per_sec)
        printf '%-4s %14s %14s %10s %12s %14s %12s\n' "$r" "$a" "$b" \
            "$($PY -c "print(round($b / $a, 3))")" "$(field "$out/two$r.json" dp_comm_busy_ms)" \
            "$(field "$out/two$r.json" dp_comm_before_backward_end_ms)" \
            "$(field "$out/two$r.json" dp_comm_wait_ms)"
    done
fi

if [ "${MEMORY:-1}" = 1 ]; then
    # 8 layers of hidden 512, vocabulary 128: 25.3M parameters, 386 MiB of model state
    # per rank at stage 0; activations stay small (micro-batch 1 x 64 tokens).
    MEM=(--num-layers 8 --hidden-size 512 --num-attention-heads 8 --seq-length 64 --mock-data
         --vocab-size 128 --micro-batch-size 1 --train-iters 2 --lr 1e-4 --log-interval 1
         --eval-iters 0)
    echo
    printf '%-6s %-4s %16s %22s\n' stage dp "peak RSS MiB" "planned state+work MiB"
    for n in 2 4; do
        for stage in 0 1 2 3; do
            OMP_NUM_THREADS=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1 \
                timeout 600 mpirun.openmpi -n $n "$PLAIT" train "${MEM[@]}" --zero-stage $stage \
                --metrics-file "$out/mem.jsonl" >"$out/mem.log" 2>&1 || { echo "stage $stage dp $n failed"; continue; }
            grep -q "world $n = tp 1 x dp $n x pp 1" "$out/mem.log" || echo "stage $stage dp $n: wrong world size"
            $PY - "$out/mem.jsonl" $stage $n <<'PYEOF'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if 'vmhwm_kib_max' in l][-1]
print(f"{sys.argv[2]:<6} {sys.argv[3]:<4} {r['vmhwm_kib_max'] / 1024:16.1f} "
      f"{(r['state_bytes'] + r['work_bytes']) / 2**20:22.1f}")
PYEOF
            rm -f "$out/mem.jsonl"
        done
    done
fi
