#!/usr/bin/env bash
# Tensor-parallel scaling on one machine: one rank x 2 threads against TP 2 x 1 thread
# (one core each) at the same global batch, with and without --sequence-parallel and
# --tp-comm-overlap, REPEAT rounds alternating the layouts (plait bench, synthetic
# tokens). Per layout: tokens/s, the efficiency against one rank, TP time inside the
# collectives and the part that ran beside the weight-gradient GEMMs (overlap), the
# planned activation memory and the peak resident memory of rank 0.
#   bench/tp_scaling.sh gpt2|llama        (default gpt2)
#   REPEAT=3 ITERS=8 bench/tp_scaling.sh llama
# Models: GPT-2 124M (12 x 768, 12 heads, T 256, micro-batch 4, global 8) and the
# Llama shape of docs/performance.md (12 x 768, 12 heads, 4 KV groups, SwiGLU 2048,
# vocabulary 32000, T 512, micro-batch 2, global 4). The vocabulary is padded alike in
# both layouts (--make-vocab-size-divisible-by 128/tp). The machine should be idle;
# the ratios within one run are what count. Results: bench/results/tp_scaling_*.jsonl.
set -u
cd "$(dirname "$0")/.."
PLAIT=${PLAIT:-build/plait}
REPEAT=${REPEAT:-2}
ITERS=${ITERS:-8}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1
unset OPENBLAS_L2_SIZE OPENBLAS_CORETYPE # benchmarks run without the test settings
PY=/usr/bin/python3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
which=${1:-gpt2}
case "$which" in
gpt2) MODEL=(--num-layers 12 --hidden-size 768 --num-attention-heads 12 --seq-length 256
             --vocab-size 50257 --micro-batch-size 4 --global-batch-size 8) ;;
llama) MODEL=(--model llama --num-layers 12 --hidden-size 768 --num-attention-heads 12
              --group-query-attention --num-query-groups 4 --ffn-hidden-size 2048
              --seq-length 512 --vocab-size 32000 --micro-batch-size 2 --global-batch-size 4) ;;
*) echo "usage: bench/tp_scaling.sh gpt2|llama" >&2; exit 2 ;;
esac
common=(bench "${MODEL[@]}" --train-iters "$ITERS" --hidden-dropout 0 --attention-dropout 0)
results=bench/results/tp_scaling_${which}_$(date +%Y%m%d_%H%M%S).jsonl
mkdir -p bench/results
echo "machine: $(nproc) cores, $(uptime | sed 's/.*load/load/'); model $which; $(git rev-parse --short HEAD)"

layouts=(one tp2 tp2_sp tp2_ov tp2_sp_ov)
run_layout() { # LAYOUT ROUND
    local l=$1 r=$2 flags=()
    case $l in
    one) OMP_NUM_THREADS=2 timeout 1800 "$PLAIT" "${common[@]}" --make-vocab-size-divisible-by 128 \
             >"$out/$l$r.json" 2>"$out/$l$r.log"; return ;;
    tp2_sp) flags=(--sequence-parallel) ;;
    tp2_ov) flags=(--tp-comm-overlap) ;;
    tp2_sp_ov) flags=(--sequence-parallel --tp-comm-overlap) ;;
    esac
    OMP_NUM_THREADS=1 timeout 1800 mpirun.openmpi -n 2 --bind-to core -x OMP_NUM_THREADS \
        "$PLAIT" "${common[@]}" --tensor-model-parallel-size 2 --make-vocab-size-divisible-by 64 \
        ${flags[@]+"${flags[@]}"} >"$out/$l$r.json" 2>"$out/$l$r.log"
}
for r in $(seq 1 "$REPEAT"); do
    for l in "${layouts[@]}"; do
        echo "== round $r: $l"
        run_layout "$l" "$r" || { echo "   failed:"; tail -n 5 "$out/$l$r.log"; continue; }
        grep -E "world|plait bench|TP |^  " "$out/$l$r.log" | grep -v "^  *$" | sed 's/^/   /'
        $PY - "$out/$l$r.json" "$l" "$r" "$which" >>"$results" <<'PYEOF'
import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
d.update(layout=sys.argv[2], round=int(sys.argv[3]), model=sys.argv[4])
print(json.dumps(d))
PYEOF
    done
done
echo
$PY - "$results" <<'PYEOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for d in rows:
    by.setdefault(d['layout'], []).append(d)
base = statistics.median(d['tokens_per_sec'] for d in by.get('one', [])) if 'one' in by else None
print(f"{'layout':<10} {'tokens/s':>9} {'efficiency':>10} {'MFU':>6} {'TP ms/step':>10} "
      f"{'hidden ms':>9} {'act MiB':>8} {'peak RSS MiB':>12}")
for l in ('one', 'tp2', 'tp2_sp', 'tp2_ov', 'tp2_sp_ov'):
    if l not in by:
        continue
    med = lambda k: statistics.median(d[k] for d in by[l])
    tps = med('tokens_per_sec')
    eff = f"{tps / base:.3f}" if base else '-'
    print(f"{l:<10} {tps:9.1f} {eff:>10} {100 * med('mfu'):5.1f}% {med('tp_comm_ms'):10.1f} "
          f"{med('tp_comm_hidden_ms'):9.1f} {med('act_bytes') / 2**20:8.1f} "
          f"{med('peak_rss_bytes') / 2**20:12.1f}")
print(f"(medians of {len(by.get('one', []))} rounds; records in {sys.argv[1]})")
PYEOF
