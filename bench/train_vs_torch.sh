#!/usr/bin/env bash
# plait vs PyTorch on the same GPT-2, same machine, same threads, in one run,
# alternating, each side with OPENBLAS_CORETYPE as set and unset.
#   bench/train_vs_torch.sh [gpt2-124m|tiny|all]   (default all)
# Prints tokens/s, MFU (plait's, against its measured GEMM peak) and peak RSS.
set -u
cd "$(dirname "$0")/.."
PLAIT=${PLAIT:-build/plait}
THREADS=${THREADS:-2}
STEPS=${STEPS:-10}
which=${1:-all}
out=$(mktemp -d)

config() { # name -> L C NH V T B
    case $1 in
        gpt2-124m) echo 12 768 12 50257 256 4 ;;
        tiny) echo 4 256 4 8192 128 8 ;;
    esac
}

plait_run() { # L C NH V T B -> the JSON line of plait bench
    local L=$1 C=$2 NH=$3 V=$4 T=$5 B=$6
    "$PLAIT" bench --vocab-size "$V" --num-layers "$L" --hidden-size "$C" --num-attention-heads "$NH" \
        --seq-length "$T" --micro-batch-size "$B" --train-iters $((STEPS + 2)) 2>/dev/null | tail -n 1
}

torch_run() {
    local L=$1 C=$2 NH=$3 V=$4 T=$5 B=$6
    /usr/bin/python3 bench/torch_gpt2.py --layers "$L" --hidden "$C" --heads "$NH" --vocab "$V" \
        --seq "$T" --batch "$B" --steps "$STEPS" --threads "$THREADS"
}

field() { /usr/bin/python3 -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }

for name in gpt2-124m tiny; do
    [ "$which" = all ] || [ "$which" = "$name" ] || continue
    set -- $(config "$name")
    echo "== $name: layers $1 hidden $2 heads $3 vocab $4 seq $5 micro-batch $6, $THREADS threads"
    for env in set unset; do
        if [ $env = set ]; then E=(env OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}); else E=(env -u OPENBLAS_CORETYPE); fi
        p=$(OMP_NUM_THREADS=$THREADS "${E[@]}" bash -c "$(declare -f plait_run); PLAIT=$PLAIT STEPS=$STEPS out=$out plait_run $*")
        t=$(OMP_NUM_THREADS=$THREADS "${E[@]}" bash -c "$(declare -f torch_run); STEPS=$STEPS THREADS=$THREADS torch_run $*")
        pt=$(field "$p" tokens_per_sec); tt=$(field "$t" tokens_per_sec)
        printf '  OPENBLAS_CORETYPE %-6s plait %8.1f tokens/s (MFU %4.1f%%, RSS %6.0f MiB) | PyTorch %8.1f tokens/s (RSS %6.0f MiB) | ratio %.2fx\n' \
            $env "$pt" "$(/usr/bin/python3 -c "print(100*$(field "$p" mfu))")" \
            "$(/usr/bin/python3 -c "print($(field "$p" peak_rss_bytes)/2**20)")" "$tt" \
            "$(/usr/bin/python3 -c "print($(field "$t" peak_rss_bytes)/2**20)")" \
            "$(/usr/bin/python3 -c "print($pt/$tt)")"
    done
done
rm -rf "$out"
