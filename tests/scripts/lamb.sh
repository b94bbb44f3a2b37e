#!/usr/bin/env bash
# DeepSpeed's Lamb ("optimizer": {"type": "Lamb"} in a DeepSpeed config; optim/lamb.h):
# the steps against FusedLamb's formula recomputed in PyTorch (lamb_reference.py, from
# DeepSpeed's source) for four settings; the trust ratio of a tensor split over ranks
# (ZeRO-1, -2, -3, TP 2, PP 2 -- the tied copy -- and DP 2 under mpirun -n 2) equal to
# one process's; save/resume bit for bit; the checkpoint's optimizer type checked on
# load; DeepSpeed's refusals. ~35 s on an idle machine.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1
LS="$ROOT/build/testtools/lamb_steps"

# ---- the formula -------------------------------------------------------------------
i=0
for flags in "" "--eps-inside-sqrt" "--no-bias-correction --clip 1.0" \
             "--max-coeff 0.3 --min-coeff 0.05"; do
    i=$((i + 1))
    check "lamb_steps $flags: ZeRO-style split ranges give the whole range's bits" \
        "$LS" "$TMP/lamb$i.safetensors" $flags
done
/usr/bin/python3 "$ROOT/tests/scripts/lamb_reference.py" "$TMP"/lamb[1-4].safetensors | tee "$TMP/py.out"
read -r p f < <(sed -nE 's/^lamb_reference: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$TMP/py.out")
_pass=$((_pass + ${p:-0})); _fail=$((_fail + ${f:-1}))

# ---- training: layouts and resume ----------------------------------------------------
cat > "$TMP/lamb.json" <<'JSON'
{"optimizer": {"type": "Lamb", "params": {"lr": 2e-3, "weight_decay": 0.01, "betas": [0.9, 0.999],
  "eps": 1e-6, "max_coeff": 10.0, "min_coeff": 0.01}},
 "gradient_clipping": 1.0}
JSON
# Synthetic tokens over 4100 words (the trust ratios' equality over the layouts depends
# neither on the text nor on the vocabulary's size; GPT-2's 50257 words were most of each
# launch's work). Padded to 4224 rows alone and at TP 2 alike, as 50257 to 50304.
MODEL=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32
       --mock-data --vocab-size 4100 --micro-batch-size 2 --global-batch-size 8 --train-iters 10
       --log-interval 1 --eval-iters 0 --seed 3 --deepspeed_config "$TMP/lamb.json")
run() { # NAME NP FLAGS...
    local name=$1 np=$2; shift 2
    rm -rf "$TMP/$name" "$TMP/$name.jsonl"
    timeout -k 5 120 mpirun.openmpi -n "$np" "$PLAIT" train "${MODEL[@]}" "$@" \
        --save "$TMP/$name" --save-interval 5 --metrics-file "$TMP/$name.jsonl" \
        >"$TMP/$name.log" 2>&1 && grep -q "world $np = " "$TMP/$name.log"
}
# Losses agree to 2e-5 relative and parameters to 1e-5 + 1e-4 |p| (zero.sh argues the
# bounds for Adam; Lamb's step is lr x coeff x update with coeff a ratio of norms that
# rounding moves by ~1e-7 relative, so the same bounds hold). A tensor whose partial
# norms were not summed over the shards would take another coefficient -- up to 10x
# another step -- far outside.
same_losses() {
    paste <(losses "$TMP/$1.jsonl") <(losses "$TMP/$2.jsonl") | awk -v n=10 '
        { c++; d = $1 - $2; if (d < 0) d = -d; if (d > 2e-5 * $2) bad++ }
        END { exit !(c == n && !bad) }'
}
check "one process trains with Lamb" run single 1
check "one note says the trust ratio is each whole tensor's (not DeepSpeed's per slice)" \
    test "$(grep -c "^note: optimizer Lamb: each tensor's trust ratio is the whole tensor's" "$TMP/single.log")" = 1
check "the checkpoint records the optimizer type lamb" \
    grep -qE '"type":[[:space:]]*"lamb"' "$TMP/single/iter_0000010/manifest.json"
for v in "z1:--zero-stage 1" "z2:--zero-stage 2" "z3:--zero-stage 3" \
         "tp2:--tensor-model-parallel-size 2 --make-vocab-size-divisible-by 64" \
         "pp2:--pipeline-model-parallel-size 2" "dp2:"; do
    name=${v%%:*}; flags=${v#*:}
    check "$name, 2 ranks: runs (world size 2)" run "$name" 2 $flags
    check "$name: losses equal one process's" same_losses single "$name"
    check "$name: final parameters equal one process's" same_params single "$name"
done
for v in "single:1:" "z2:2:--zero-stage 2"; do
    IFS=: read -r name np flags <<<"$v"
    rm -rf "$TMP/r$name"; mkdir -p "$TMP/r$name"
    cp -r "$TMP/$name/iter_0000005" "$TMP/r$name/"
    echo 5 > "$TMP/r$name/latest_checkpointed_iteration.txt"
    check "$name: resumed from iteration 5" \
        timeout -k 5 120 mpirun.openmpi -n "$np" "$PLAIT" train "${MODEL[@]}" $flags \
        --load "$TMP/r$name" --save "$TMP/r$name" --metrics-file "$TMP/r$name.jsonl"
    check "$name: losses after resuming equal the uninterrupted run's, bit for bit" \
        diff <(losses "$TMP/$name.jsonl" | tail -n 5) <(losses "$TMP/r$name.jsonl")
    check "$name: the resumed run's final parameters equal the uninterrupted run's exactly" \
        $PY "$CK" same "$TMP/$name/iter_0000010" "$TMP/r$name/iter_0000010" 0 0
done

# ---- refusals ------------------------------------------------------------------------
NOJSON=("${MODEL[@]:0:${#MODEL[@]}-2}")
check_fails "Lamb's moments are not loaded into AdamW" "optimizer state is Lamb's but this run's optimizer is AdamW" \
    timeout 60 "$PLAIT" train "${NOJSON[@]}" --load "$TMP/single" --lr 2e-3 --train-iters 12
echo '{"optimizer": {"type": "Lamb", "params": {"lr": 1e-3, "adam_w_mode": true}}}' > "$TMP/bad.json"
check_fails "a key FusedLamb does not take is refused by name" "optimizer.params.adam_w_mode is not a parameter of DeepSpeed's Lamb" \
    timeout 60 "$PLAIT" train "${NOJSON[@]}" --deepspeed_config "$TMP/bad.json"
echo '{"optimizer": {"type": "Lamb"}, "fp16": {"enabled": true, "loss_scale": 128}}' > "$TMP/static.json"
check_fails "Lamb with a static fp16 loss scale is refused (DeepSpeed asserts dynamic)" "Lamb optimizer needs dynamic loss scaling" \
    timeout 60 "$PLAIT" train "${NOJSON[@]}" --deepspeed_config "$TMP/static.json"
summary lamb
