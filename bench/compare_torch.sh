#!/usr/bin/env bash
# plait vs PyTorch on the same GPT-2 or Llama, same machine, same threads, in one run,
# alternating, both sides in the same environment: first the one a PyTorch user on this
# machine would tune (issue 17), then the default one.
#   bench/compare_torch.sh [CONFIG...]      configs: gpt2-124m small long tiny (default: all),
#                            llama llama-mha (plait --model llama against bench/torch_llama.py)
#   PRECISIONS="fp32 bf16"   fp32 against PyTorch fp32; bf16 = plait --bf16 against PyTorch
#                            with bf16 autocast
#   ENVS="tuned default"     tuned: OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset,
#                            OPENBLAS_THREAD_TIMEOUT=4, OMP_WAIT_POLICY=PASSIVE, MALLOC_MMAP_MAX_=0,
#                            MALLOC_TRIM_THRESHOLD_=100000000000 (glibc then keeps freed large
#                            tensors mapped instead of faulting fresh pages in each step);
#                            default: OPENBLAS_CORETYPE as this machine sets it (Haswell), glibc's
#                            malloc defaults. (set / unset: the older rows, OPENBLAS_CORETYPE
#                            set or unset, malloc defaults.)
#   PLAIT_FLAGS="..."        extra flags for plait bench (e.g. --lm-head-logits keep)
#   STEPS=N                  measured steps per run (median taken), after 2 warm-up steps
#   EXTRA_ENV="VAR=value ..."  more environment for both sides (e.g. OMP_WAIT_POLICY=PASSIVE
#                            on a machine shared with other jobs), recorded with each run
# Prints one line per run pair, the ratios, and writes every JSON line to
# $OUT (default bench/results/compare_torch.jsonl) for plotting.
set -u
cd "$(dirname "$0")/.."
PLAIT=${PLAIT:-build/plait}
THREADS=${THREADS:-2}
STEPS=${STEPS:-10}
PRECISIONS=${PRECISIONS:-fp32 bf16}
ENVS=${ENVS:-tuned default}
PLAIT_FLAGS=${PLAIT_FLAGS:-}
EXTRA_ENV=${EXTRA_ENV:-}
OUT=${OUT:-bench/results/compare_torch.jsonl}
CORETYPE=${OPENBLAS_CORETYPE:-Haswell}
mkdir -p "$(dirname "$OUT")"
configs=${*:-gpt2-124m small long tiny}

config() { # name -> MODEL L C NH V T B G F (llama: G query groups, SwiGLU width F; gpt: 0 0)
    case $1 in
        gpt2-124m) echo gpt 12 768 12 50257 256 4 0 0 ;;  # issue 5's reference shape
        small) echo gpt 6 512 8 32768 512 4 0 0 ;;
        long) echo gpt 12 768 12 50257 1024 1 0 0 ;;      # GPT-2 124M at T=1024, micro-batch 1
        tiny) echo gpt 4 256 4 8192 128 8 0 0 ;;
        llama) echo llama 12 768 12 32000 512 2 4 2048 ;;  # 134M parameters, 4 KV groups of 3 heads
        llama-mha) echo llama 12 768 12 32000 512 2 12 2048 ;;  # the same with one KV head per head
        *) echo "unknown config $1 (gpt2-124m small long tiny llama llama-mha)" >&2; exit 2 ;;
    esac
}

with_env() { # tuned|default|set|unset command...
    local e=$1; shift
    # shellcheck disable=SC2086  # EXTRA_ENV is a list of VAR=value words
    case $e in
        tuned) env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_THREAD_TIMEOUT=4 \
                   OMP_WAIT_POLICY=PASSIVE MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=100000000000 \
                   OMP_NUM_THREADS="$THREADS" $EXTRA_ENV "$@" ;;
        default | set) env OPENBLAS_CORETYPE="$CORETYPE" OMP_NUM_THREADS="$THREADS" $EXTRA_ENV "$@" ;;
        unset) env -u OPENBLAS_CORETYPE OMP_NUM_THREADS="$THREADS" $EXTRA_ENV "$@" ;;
        *) echo "unknown environment $e (tuned default set unset)" >&2; exit 2 ;;
    esac
}

json() { /usr/bin/python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(*(d.get(k, "nan") for k in sys.argv[2:]))' "$@"; }

for name in $configs; do
    read -r MODEL L C NH V T B G F <<<"$(config "$name")" || exit 2
    if [ "$MODEL" = llama ]; then
        echo "== $name: llama, layers $L hidden $C heads $NH query groups $G ffn $F vocab $V seq $T micro-batch $B, $THREADS threads${EXTRA_ENV:+, $EXTRA_ENV}"
        pmodel=(--model llama --group-query-attention --num-query-groups "$G" --ffn-hidden-size "$F")
        torch=(bench/torch_llama.py --kv-heads "$G" --ffn "$F")
    else
        echo "== $name: layers $L hidden $C heads $NH vocab $V seq $T micro-batch $B, $THREADS threads${EXTRA_ENV:+, $EXTRA_ENV}"
        pmodel=()
        torch=(bench/torch_gpt2.py)
    fi
    for prec in $PRECISIONS; do
        pflag=(); tflag=()
        [ "$prec" = bf16 ] && pflag=(--bf16) && tflag=(--bf16)
        for e in $ENVS; do
            p=$(with_env "$e" "$PLAIT" bench "${pmodel[@]}" --vocab-size "$V" --num-layers "$L" --hidden-size "$C" \
                --num-attention-heads "$NH" --seq-length "$T" --micro-batch-size "$B" \
                --train-iters $((STEPS + 2)) --hidden-dropout 0 --attention-dropout 0 "${pflag[@]}" \
                $PLAIT_FLAGS 2>/dev/null | tail -n 1)
            t=$(with_env "$e" /usr/bin/python3 "${torch[@]}" --layers "$L" --hidden "$C" \
                --heads "$NH" --vocab "$V" --seq "$T" --batch "$B" --steps "$STEPS" \
                --threads "$THREADS" "${tflag[@]}" 2>/dev/null | tail -n 1)
            case $p in "{"*) ;; *) echo "  plait bench failed ($name $prec $e)"; continue ;; esac
            case $t in "{"*) ;; *) echo "  PyTorch failed ($name $prec $e)"; continue ;; esac
            read -r ptok mfu prss <<<"$(json "$p" tokens_per_sec mfu peak_rss_bytes)"
            read -r ttok trss <<<"$(json "$t" tokens_per_sec peak_rss_bytes)"
            printf '  %-4s %-7s plait %8.1f tokens/s (MFU %4.1f%%, %5.0f MiB) | PyTorch %8.1f tokens/s (%5.0f MiB) | speed %.2fx, memory %.0f%%\n' \
                "$prec" "$e" "$ptok" "$(awk -v m="$mfu" 'BEGIN{print 100*m}')" \
                "$(awk -v b="$prss" 'BEGIN{print b/2^20}')" "$ttok" "$(awk -v b="$trss" 'BEGIN{print b/2^20}')" \
                "$(awk -v a="$ptok" -v b="$ttok" 'BEGIN{print a/b}')" \
                "$(awk -v a="$prss" -v b="$trss" 'BEGIN{print 100*a/b}')"
            printf '{"config": "%s", "precision": "%s", "env": "%s", "flags": "%s", "extra_env": "%s", "plait": %s, "pytorch": %s}\n' \
                "$name" "$prec" "$e" "$PLAIT_FLAGS" "$EXTRA_ENV" "$p" "$t" >>"$OUT"
        done
    done
done
