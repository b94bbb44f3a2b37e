#!/usr/bin/env bash
# The largest GPT that trains on this machine (issue 17): plait and PyTorch, each with
# what it has to save memory (bf16, activations recomputed), at growing depth, one
# process, 2 threads, the tuned environment of bench/compare_torch.sh. A size "trains"
# when STEPS steps after one warm-up finish; each run is capped at CAP_GIB of address
# space, so that a size that does not fit fails with an allocation error instead of
# waking the kernel's OOM killer.
#   bench/largest_gpt.sh [LAYERS...]     depths to try (default: 16 20 22 24 26)
#   HIDDEN=2048 HEADS=16 SEQ=1024 VOCAB=50257 STEPS=2 CAP_GIB=22
# Prints one line per (depth, side) and appends JSON lines to $OUT
# (default bench/results/largest_gpt.jsonl).
set -u
cd "$(dirname "$0")/.."
PLAIT=${PLAIT:-build/plait}
HIDDEN=${HIDDEN:-2048} HEADS=${HEADS:-16} SEQ=${SEQ:-1024} VOCAB=${VOCAB:-50257}
STEPS=${STEPS:-2} CAP_GIB=${CAP_GIB:-22}
OUT=${OUT:-bench/results/largest_gpt.jsonl}
mkdir -p "$(dirname "$OUT")"
layers=${*:-16 20 22 24 26}
tuned=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_THREAD_TIMEOUT=4
       OMP_WAIT_POLICY=PASSIVE MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=100000000000
       OMP_NUM_THREADS=2)
cap=$((CAP_GIB * 1024 * 1024)) # KiB, for ulimit -v
field() { /usr/bin/python3 -c 'import json,sys
try: d = json.loads(sys.argv[1]); print(*(d.get(k, "nan") for k in sys.argv[2:]))
except ValueError: print("nan " * (len(sys.argv) - 2))' "$@"; }
params() { # L -> parameters of the model (tied head, learned positions, biases)
    /usr/bin/python3 -c "L, C, V, T = $1, $HIDDEN, $VOCAB, $SEQ
Vp = (V + 127) // 128 * 128
print(L * (12 * C * C + 13 * C) + Vp * C + T * C + 2 * C)"
}
for L in $layers; do
    n=$(params "$L")
    p=$( (ulimit -v $cap; "${tuned[@]}" timeout 1800 "$PLAIT" bench --num-layers "$L" \
          --hidden-size "$HIDDEN" --num-attention-heads "$HEADS" --seq-length "$SEQ" \
          --vocab-size "$VOCAB" --micro-batch-size 1 --train-iters $((STEPS + 2)) --bf16 \
          --recompute-granularity full --recompute-method uniform --recompute-num-layers 1 \
          --hidden-dropout 0 --attention-dropout 0) 2>/tmp/largest_plait.err | tail -n 1)
    read -r ptok prss <<<"$(field "$p" tokens_per_sec peak_rss_bytes)"
    [ "$ptok" = nan ] && perr=$(grep -m1 -iE "error|cannot|memory" /tmp/largest_plait.err | cut -c1-160)
    t=$( (ulimit -v $cap; "${tuned[@]}" timeout 1800 /usr/bin/python3 bench/torch_gpt2.py \
          --layers "$L" --hidden "$HIDDEN" --heads "$HEADS" --vocab "$VOCAB" --seq "$SEQ" \
          --batch 1 --steps "$STEPS" --warmup 1 --bf16 --recompute) 2>/tmp/largest_torch.err | tail -n 1)
    read -r ttok trss <<<"$(field "$t" tokens_per_sec peak_rss_bytes)"
    [ "$ttok" = nan ] && terr=$(grep -m1 -iE "error|cannot|memory|killed" /tmp/largest_torch.err | cut -c1-160)
    /usr/bin/python3 -c 'import sys
L, n, pt, pr, pe, tt, tr, te = sys.argv[1:]
side = lambda t, r, e: (f"{float(t):.1f} tokens/s ({float(r) / 2**30:.2f} GiB)" if t != "nan"
                        else f"failed [{e}]")
print(f"L {L}, {int(n) / 1e9:.2f} B parameters: plait {side(pt, pr, pe)} | PyTorch {side(tt, tr, te)}")' \
        "$L" "$n" "$ptok" "$prss" "${perr:-}" "$ttok" "$trss" "${terr:-}"
    [ "${p:0:1}" = "{" ] || p=null
    [ "${t:0:1}" = "{" ] || t=null
    echo "{\"layers\": $L, \"hidden\": $HIDDEN, \"params\": $n, \"seq\": $SEQ, \"cap_gib\": $CAP_GIB, \"plait\": $p, \"pytorch\": $t}" >>"$OUT"
    unset perr terr
done
