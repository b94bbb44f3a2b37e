#!/usr/bin/env bash
# Activation recomputation for the encoder-decoders (`plait train --model t5|bart`
# with --recompute-activations / --recompute-granularity full, uniform and block):
# each stack recomputes its own layers, the decoder's rerun cross-attention reading
# the encoder output again. Every mode trains to the losses and the final checkpoint
# (parameters and Adam state, every shard file) of keeping every activation, bit for
# bit, as recompute.sh asserts for the GPT: a rerun forward draws the same dropout
# masks and runs the same kernels on the same inputs, so nothing may differ. Under
# one process (also with --bf16), TP 2 (with and without sequence parallelism) and
# DP 2 with ZeRO 2 and 3 (whose fetch hooks gather each recomputed layer again),
# dropout on (Megatron's 0.1 defaults). Selective rebuilds both attentions' core, so
# its runs fail if the decoder's cross-attention output is not rebuilt. The planned
# activation bytes fall, the decoder's too (full uniform 2 saves in the decoder
# alone), and the memory plan names the mode and its saving. --recompute-num-layers 3
# recomputes both of the encoder's 2 layers (block b3), as Megatron's T5 does with one
# config for both stacks. Every MPI run asserts its world size. ~19 s.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1
"$ROOT/build/testtools/bert_samples" make "$PLAIT_DATA/bert/vocab.txt" "$PLAIT_DATA/kjv.txt" \
    "$TMP/kjv_sent" 3000 >/dev/null
# t5_train.sh's model (an encoder of 2 layers and a decoder of 3, so that block 2 and
# block 3 differ in the decoder alone), 6 iterations, no validation.
SMALL=(--hidden-size 64 --num-attention-heads 4 --micro-batch-size 2 --global-batch-size 8
       --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 2 --log-interval 1
       --eval-iters 0 --seed 7 --train-iters 6 --make-vocab-size-divisible-by 256
       --data-path "$TMP/kjv_sent" --vocab-file "$PLAIT_DATA/bert/vocab.txt" --split 90,10,0)
T5=(--model t5 --vocab-extra-ids 100 --encoder-num-layers 2 --decoder-num-layers 3
    --encoder-seq-length 32 --decoder-seq-length 16 "${SMALL[@]}")
BART=(--model bart --num-layers 2 --seq-length 32 "${SMALL[@]}")
full() { echo "--recompute-granularity full --recompute-method $1 --recompute-num-layers $2"; }
declare -A MODE=([none]="" [sel]="--recompute-activations" [u1]="$(full uniform 1)"
                 [u2]="$(full uniform 2)" [b2]="$(full block 2)" [b3]="$(full block 3)")

go() { # NAME NP MODEL MODE [FLAGS...]: trains; checkpoint in $TMP/NAME, metrics in NAME.jsonl
    local name=$1 np=$2 model=$3 mode=$4; shift 4
    local -n flags=$model
    rm -rf "${TMP:?}/$name" "$TMP/$name.jsonl"
    # shellcheck disable=SC2086
    timeout -k 5 120 mpirun.openmpi -n "$np" "$PLAIT" train "${flags[@]}" ${MODE[$mode]} "$@" \
        --save "$TMP/$name" --metrics-file "$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1
}
world() { grep -q "world $2 = tp $3 x dp $4 x pp 1" "$TMP/$1.log"; } # NAME NP TP DP
# The 6 losses as printed with 17 digits, and every tensors file of iteration 6.
same_bits() {
    local a=$TMP/$1/iter_0000006 b=$TMP/$2/iter_0000006 f n=0
    diff <(losses "$TMP/$1.jsonl") <(losses "$TMP/$2.jsonl") >/dev/null &&
        [ "$(losses "$TMP/$1.jsonl" | wc -l)" -eq 6 ] || return 1
    [ "$(cd "$a" && find . -name '*.safetensors' | wc -l)" = \
      "$(cd "$b" && find . -name '*.safetensors' | wc -l)" ] || return 1
    while read -r f; do
        cmp -s "$a/$f" "$b/$f" || { echo "$f differs"; return 1; }
        n=$((n + 1))
    done < <(cd "$a" && find . -name '*.safetensors')
    [ "$n" -ge 1 ]
}
act() { grep -o "\"$2\": [0-9]*" "$TMP/$1.jsonl" | head -n 1 | sed 's/.*: //'; } # NAME KEY
saved() { echo $(($(act "$1" act_bytes_kept) - $(act "$1" act_bytes))); }
# The plan without recompute is the none run's, and the mode's falls below it.
falls() { [ "$(act "$1" act_bytes_kept)" = "$(act "$2" act_bytes)" ] && [ "$(saved "$1")" -gt 0 ]; }

# ---- T5, one process -------------------------------------------------------------------
for mode in none sel u1 u2 b2 b3; do
    check "t5, one rank, recompute $mode: trains 6 iterations (world 1)" \
        eval "go t_$mode 1 T5 $mode && world t_$mode 1 1 1"
done
for mode in sel u1 u2 b2 b3; do
    check "t5, one rank: $mode gives the losses and final checkpoint of none, bit for bit" \
        same_bits t_none t_$mode
    check "t5, one rank: $mode plans fewer activation bytes than none" falls t_$mode t_none
done
check "t5: none plans no saving" [ "$(saved t_none)" = 0 ]
# Uniform 2 saves nothing in the encoder: its 2 layers are one group, whose rerun needs
# every buffer of both; the decoder's 3 are [0, 1] and [2], so only the decoder saves.
check "t5: full uniform 2's saving is the decoder's (the encoder is one group): above 0" \
    [ "$(saved t_u2)" -gt 0 ]
check "t5: full uniform 1 saves more than uniform 2" [ "$(saved t_u1)" -gt "$(saved t_u2)" ]
check "t5: the memory plan names full uniform 1 and a saving above 0.0 MiB" \
    grep -qE "recompute full, uniform, 1 layer\): .* so recompute saves (0\.[1-9]|[1-9])" \
    "$TMP/t_u1.log"
check "t5: the memory plan names selective" grep -q "recompute selective): " "$TMP/t_sel.log"
check_fails "t5: --recompute-num-layers above the larger stack's layers is refused" \
    "--recompute-num-layers \(got 4\): .*must be between 1 and num_layers_per_pipeline_rank: 3" \
    timeout 60 "$PLAIT" train "${T5[@]}" $(full block 4)

# --bf16: the self-attention's saved buffers in bf16 (a rerun rounds them again), the
# cross-attention's in fp32.
for mode in none u1 sel; do
    check "t5 --bf16, one rank, recompute $mode: trains (world 1)" \
        eval "go bf_$mode 1 T5 $mode --bf16 && world bf_$mode 1 1 1"
done
for mode in u1 sel; do
    check "t5 --bf16, one rank: $mode gives the losses and final checkpoint of none, bit for bit" \
        same_bits bf_none bf_$mode
done

# ---- T5, TP 2 (with sequence parallelism: the encoder output gathered) ----------------------
for run in "tp_none none" "tp_u1 u1" "tp_sel sel" "sp_none none --sequence-parallel" \
    "sp_b2 b2 --sequence-parallel"; do
    read -r name mode sp <<<"$run"
    check "t5, TP 2 ${sp:+(sp) }recompute $mode: trains (world 2 = tp 2)" \
        eval "go $name 2 T5 $mode --tensor-model-parallel-size 2 $sp && world $name 2 2 1"
done
check "t5, TP 2: full uniform 1 gives none's losses and shards, bit for bit" same_bits tp_none tp_u1
check "t5, TP 2: selective gives none's losses and shards, bit for bit" same_bits tp_none tp_sel
check "t5, TP 2 with sp: full block 2 gives none's losses and shards, bit for bit" \
    same_bits sp_none sp_b2
check "t5, TP 2: full uniform 1 plans fewer activation bytes per rank" falls tp_u1 tp_none

# ---- T5, DP 2 with ZeRO 3 and 2 ------------------------------------------------------------
for run in "z3_none none 3" "z3_u1 u1 3" "z3_b2 b2 3" "z2_none none 2" "z2_sel sel 2"; do
    read -r name mode z <<<"$run"
    check "t5, DP 2 ZeRO $z, recompute $mode: trains (world 2 = dp 2)" \
        eval "go $name 2 T5 $mode --zero-stage $z && world $name 2 1 2"
done
check "t5, ZeRO 3: full uniform 1 gives none's losses and shards, bit for bit" same_bits z3_none z3_u1
check "t5, ZeRO 3: full block 2 gives none's losses and shards, bit for bit" same_bits z3_none z3_b2
check "t5, ZeRO 2: selective gives none's losses and shards, bit for bit" same_bits z2_none z2_sel

# ---- BART (NeMo's): one process and TP 2 ---------------------------------------------------
for mode in none u1 sel; do
    check "bart, one rank, recompute $mode: trains (world 1)" \
        eval "go n_$mode 1 BART $mode && world n_$mode 1 1 1"
done
for mode in u1 sel; do
    check "bart, one rank: $mode gives the losses and final checkpoint of none, bit for bit" \
        same_bits n_none n_$mode
    check "bart, one rank: $mode plans fewer activation bytes than none" falls n_$mode n_none
done
for mode in none u1; do
    check "bart, TP 2 with sp, recompute $mode: trains (world 2 = tp 2)" \
        eval "go ntp_$mode 2 BART $mode --tensor-model-parallel-size 2 --sequence-parallel &&
              world ntp_$mode 2 2 1"
done
check "bart, TP 2 with sp: full uniform 1 gives none's losses and shards, bit for bit" \
    same_bits ntp_none ntp_u1
summary encdec_recompute
