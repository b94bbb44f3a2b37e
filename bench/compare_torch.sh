#!/usr/bin/env bash
# plait vs PyTorch on the same GPT-2, same machine, same threads, in one run,
# alternating, each side with OPENBLAS_CORETYPE as set and unset.
#   bench/compare_torch.sh [CONFIG...]      configs: gpt2-124m small long tiny (default: all)
#   PRECISIONS="fp32 bf16"   fp32 against PyTorch fp32; bf16 = plait --bf16 against PyTorch
#                            with bf16 autocast
#   ENVS="set unset"         OPENBLAS_CORETYPE as the environment sets it, and unset
#   PLAIT_FLAGS="..."        extra flags for plait bench (e.g. --lm-head-logits keep)
#   STEPS=N                  measured steps per run (median taken), after 2 warm-up steps
# Prints one line per run pair, the ratios, and writes every JSON line to
# $OUT (default bench/results/compare_torch.jsonl) for plotting.
set -u
cd "$(dirname "$0")/.."
PLAIT=${PLAIT:-build/plait}
THREADS=${THREADS:-2}
STEPS=${STEPS:-10}
PRECISIONS=${PRECISIONS:-fp32 bf16}
ENVS=${ENVS:-set unset}
PLAIT_FLAGS=${PLAIT_FLAGS:-}
OUT=${OUT:-bench/results/compare_torch.jsonl}
CORETYPE=${OPENBLAS_CORETYPE:-Haswell}
mkdir -p "$(dirname "$OUT")"
configs=${*:-gpt2-124m small long tiny}

config() { # name -> L C NH V T B
    case $1 in
        gpt2-124m) echo 12 768 12 50257 256 4 ;;  # issue 5's reference shape
        small) echo 6 512 8 32768 512 4 ;;
        long) echo 12 768 12 50257 1024 1 ;;      # GPT-2 124M at T=1024, micro-batch 1
        tiny) echo 4 256 4 8192 128 8 ;;
        *) echo "unknown config $1 (gpt2-124m small long tiny)" >&2; exit 2 ;;
    esac
}

with_env() { # set|unset command...
    local e=$1; shift
    if [ "$e" = set ]; then env OPENBLAS_CORETYPE="$CORETYPE" OMP_NUM_THREADS="$THREADS" "$@"
    else env -u OPENBLAS_CORETYPE OMP_NUM_THREADS="$THREADS" "$@"; fi
}

json() { /usr/bin/python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(*(d.get(k, "nan") for k in sys.argv[2:]))' "$@"; }

for name in $configs; do
    read -r L C NH V T B <<<"$(config "$name")" || exit 2
    echo "== $name: layers $L hidden $C heads $NH vocab $V seq $T micro-batch $B, $THREADS threads"
    for prec in $PRECISIONS; do
        pflag=(); tflag=()
        [ "$prec" = bf16 ] && pflag=(--bf16) && tflag=(--bf16)
        for e in $ENVS; do
            p=$(with_env "$e" "$PLAIT" bench --vocab-size "$V" --num-layers "$L" --hidden-size "$C" \
                --num-attention-heads "$NH" --seq-length "$T" --micro-batch-size "$B" \
                --train-iters $((STEPS + 2)) --hidden-dropout 0 --attention-dropout 0 "${pflag[@]}" \
                $PLAIT_FLAGS 2>/dev/null | tail -n 1)
            t=$(with_env "$e" /usr/bin/python3 bench/torch_gpt2.py --layers "$L" --hidden "$C" \
                --heads "$NH" --vocab "$V" --seq "$T" --batch "$B" --steps "$STEPS" \
                --threads "$THREADS" "${tflag[@]}" 2>/dev/null | tail -n 1)
            case $p in "{"*) ;; *) echo "  plait bench failed ($name $prec $e)"; continue ;; esac
            case $t in "{"*) ;; *) echo "  PyTorch failed ($name $prec $e)"; continue ;; esac
            read -r ptok mfu prss <<<"$(json "$p" tokens_per_sec mfu peak_rss_bytes)"
            read -r ttok trss <<<"$(json "$t" tokens_per_sec peak_rss_bytes)"
            printf '  %-4s OPENBLAS_CORETYPE %-5s plait %8.1f tokens/s (MFU %4.1f%%, %5.0f MiB) | PyTorch %8.1f tokens/s (%5.0f MiB) | speed %.2fx, memory %.0f%%\n' \
                "$prec" "$e" "$ptok" "$(awk -v m="$mfu" 'BEGIN{print 100*m}')" \
                "$(awk -v b="$prss" 'BEGIN{print b/2^20}')" "$ttok" "$(awk -v b="$trss" 'BEGIN{print b/2^20}')" \
                "$(awk -v a="$ptok" -v b="$ttok" 'BEGIN{print a/b}')" \
                "$(awk -v a="$prss" -v b="$trss" 'BEGIN{print 100*a/b}')"
            printf '{"config": "%s", "precision": "%s", "openblas_coretype": "%s", "flags": "%s", "plait": %s, "pytorch": %s}\n' \
                "$name" "$prec" "$e" "$PLAIT_FLAGS" "$p" "$t" >>"$OUT"
        done
    done
done
