#!/usr/bin/env bash
# Pipeline bubble on one machine: P = 2 stages x 1 thread (one core each) under 1F1B,
# GPipe and ZB-H1, for m = 2, 4, 8 micro-batches per step, against one rank x 2 threads at the same
# global batch (plait bench, synthetic tokens). Per run: tokens/s, the efficiency against
# one rank, stage 0's time blocked on the other stage (receives and the final sends) as
# a fraction of the step, beside the schedule's idle fraction for balanced stages
# (1F1B and GPipe (P-1)/(m+P-1); interleaved with v chunks and ZB-H1 their formulas in
# docs/pipeline.md, under unit costs), the same schedule simulated with every stage's
# measured forward and backward (input and weight halves) times ("simulated":
# pl_pp_schedule_simulate, transfers free), and rank 0's peak memory.
#   bench/pp_bubble.sh [ITERS]     (default 6; the model is GPT-2 124M, T 256, micro-batch 2)
#   FIRST=9 bench/pp_bubble.sh     (--decoder-first-pipeline-num-layers 9: stage 0 takes 9
#                                   of the 12 layers, stage 1 three and the LM head)
#   VOCAB=2048 bench/pp_bubble.sh  (GPT-2 124M's layers with a small vocabulary: the LM head
#                                   is ~1% of the work, so even stages balance, interleaving
#                                   included)
# With the even split stage 1 also holds the LM head (a third of GPT-2 124M's
# multiply-adds), so the stages are not balanced: stage 0 waits for it, and its blocked
# time exceeds the formula by that imbalance; FIRST=9 balances them within 7%. The
# machine should be idle. Results: bench/results/pp_bubble_*.jsonl.
set -u
cd "$(dirname "$0")/.."
PLAIT=${PLAIT:-build/plait}
ITERS=${1:-6}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1
unset OPENBLAS_L2_SIZE OPENBLAS_CORETYPE # benchmarks run without the test settings
PY=/usr/bin/python3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
MODEL=(--num-layers 12 --hidden-size 768 --num-attention-heads 12 --seq-length 256
       --vocab-size "${VOCAB:-50257}" --micro-batch-size 2 --hidden-dropout 0
       --attention-dropout 0)
results=bench/results/pp_bubble${FIRST:+_first$FIRST}${VOCAB:+_vocab$VOCAB}_$(date +%Y%m%d_%H%M%S).jsonl
mkdir -p bench/results
echo "machine: $(nproc) cores, $(uptime | sed 's/.*load/load/'); $(git rev-parse --short HEAD)"
record() { # JSON LAYOUT M
    $PY - "$1" "$2" "$3" >>"$results" <<'PYEOF'
import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
d.update(layout=sys.argv[2], m=int(sys.argv[3]))
print(json.dumps(d))
PYEOF
}
for m in 2 4 8; do
    gbs=$((2 * m))
    echo "== m $m: 1 rank x 2 threads"
    OMP_NUM_THREADS=2 timeout 1800 "$PLAIT" bench "${MODEL[@]}" --global-batch-size $gbs \
        --train-iters "$ITERS" >"$out/one$m.json" 2>"$out/one$m.log" && record "$out/one$m.json" one $m
    grep "plait bench" "$out/one$m.log" | sed 's/^/   /'
    for s in 1f1b gpipe zb-h1 interleaved; do
        [ "$s" = interleaved ] && [ -n "${FIRST:-}" ] && continue # uneven stages: no chunks
        chunks=()
        [ "$s" = interleaved ] && chunks=(--num-layers-per-virtual-pipeline-stage 3)
        echo "== m $m: pp 2 x 1 thread, $s"
        OMP_NUM_THREADS=1 timeout 1800 mpirun.openmpi -n 2 --bind-to core -x OMP_NUM_THREADS \
            "$PLAIT" bench "${MODEL[@]}" --global-batch-size $gbs --train-iters "$ITERS" \
            --pipeline-model-parallel-size 2 --pipeline-schedule $s "${chunks[@]}" \
            ${FIRST:+--decoder-first-pipeline-num-layers $FIRST} >"$out/$s$m.json" \
            2>"$out/$s$m.log" && record "$out/$s$m.json" "pp2_$s" $m
        grep -E "plait bench|pipeline" "$out/$s$m.log" | sed 's/^/   /'
    done
done
echo
$PY - "$results" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
base = {d['m']: d['tokens_per_sec'] for d in rows if d['layout'] == 'one'}
# each schedule's idle share of the step under equal F, B (= 2F) and W (= F) costs:
# bubble b (of the ideal time, pl_pp_bubble_formula), idle b / (1 + b)
def bubble(layout, m, P, v=2):
    if layout.endswith('zb-h1'):
        return (P - 1 + max(0, P - m)) / (3 * m)
    if layout.endswith('interleaved'):
        return (P - 1) / (v * m)
    return (P - 1) / m
print(f"{'m':>3} {'layout':<16} {'tokens/s':>9} {'efficiency':>10} {'stage 0 blocked':>15} "
      f"{'formula':>8} {'simulated':>9} {'peak RSS MiB':>12}")
for d in rows:
    m, P = d['m'], d.get('pp', 1)
    blocked = d['pp_wait_ms'] / d['step_ms'] if P > 1 else 0.0
    b = bubble(d['layout'], m, P) if P > 1 else 0.0
    formula = b / (1 + b)
    eff = d['tokens_per_sec'] / base[m] if m in base else float('nan')
    sim = d.get('pp_sim_idle', 0.0)
    print(f"{m:3d} {d['layout']:<16} {d['tokens_per_sec']:9.1f} {eff:10.3f} {blocked:15.3f} "
          f"{formula:8.3f} {sim:9.3f} {d['peak_rss_bytes'] / 2**20:12.1f}")
print(f"(records in {sys.argv[1]})")
PYEOF
