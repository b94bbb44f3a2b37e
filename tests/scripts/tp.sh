#!/usr/bin/env bash
# Tensor and sequence parallelism in `plait train`: TP 1, 2, 4 and 8, with and without
# --sequence-parallel, times DP 1/2 and ZeRO 0-3, with dropout on, for GPT and Llama,
# give one process's losses over 10 iterations and its final parameters (assembled
# from the mp_rank_XX shards by tests/scripts/ckpt_tensors.py, not by plait); tensors
# replicated over TP stay bit-identical on every TP rank; the TP bytes and calls of
# each step equal the count of Megatron's communication points; sequence parallelism
# takes the planned activation memory down by the residual stream's (N - N/tp) rows;
# resume is bit-exact; impossible layouts are refused by name. Every run asserts its
# world size and layout from plait's banner, and runs under a timeout.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1 # up to 8 ranks share 2 cores
kjv_dataset 2000 "$TMP/kjv"
# N = micro-batch 2 x 32 = 64 rows, divisible by TP 8 (sequence parallelism); 8 heads.
BASE=(--num-layers 2 --hidden-size 64 --num-attention-heads 8 --max-position-embeddings 32
      --micro-batch-size 2 --global-batch-size 8 --lr 1e-3 --min-lr 1e-4
      --lr-decay-style cosine --lr-warmup-iters 2 --log-interval 1 --eval-iters 0
      --data-path "$TMP/kjv_text_document" --split 98,2,0 "${GPT2[@]}" --seed 7)
COMMON=("${BASE[@]}" --seq-length 32 --train-iters 10)
GPT=(--hidden-dropout 0.1 --attention-dropout 0.1)
LLAMA=(--model llama --group-query-attention --num-query-groups 4 --hidden-dropout 0.1
       --attention-dropout 0.1)

# The padded vocabulary enters the softmax, and Megatron pads to a multiple of
# divisible-by x TP: 512 / TP keeps it 50688 rows in every layout, so that the
# layouts train the same model.
run() { # NAME LAUNCHER NP TP FLAGS...: checkpoint at 5 and 10 in $TMP/NAME
    local name=$1 launcher=$2 np=$3 tp=$4; shift 4
    rm -rf "$TMP/$name" "$TMP/$name.jsonl"
    timeout -k 5 300 "$launcher" -n "$np" "$PLAIT" train "${COMMON[@]}" "$@" \
        --tensor-model-parallel-size "$tp" --make-vocab-size-divisible-by $((512 / tp)) \
        --save "$TMP/$name" --save-interval 5 --metrics-file "$TMP/$name.jsonl" \
        >"$TMP/$name.log" 2>&1
}
layout_is() { grep -q "world $2 = tp $3 x dp $4 x pp 1$5 |" "$TMP/$1.log"; }

# Losses agree to 2e-5 relative (train_dp.sh's bound): the layouts sum the same
# products in another order (the row-parallel GEMM's partial sums, the vocabulary's
# softmax pieces, the norms' weight gradients under sp), ~1e-7 per addition in fp32,
# and Adam carries that for 10 steps. One wrong mask, head or shard moves the first
# loss by 1e-3 or more.
same_losses() { # A B [TOL]
    paste <(losses "$TMP/$1.jsonl") <(losses "$TMP/$2.jsonl") | awk -v n=10 -v tol="${3:-2e-5}" '
        { c++; d = $1 - $2; if (d < 0) d = -d; if (d > tol * $2) bad++ }
        END { exit !(c == n && !bad) }'
}
# Final parameters within 1e-5 + 1e-4 |p| (zero.sh's bound and argument: ten Adam
# steps of lr 1e-3 move a parameter at most ~1e-2; rounding changes a step by a
# relative ~1e-4; a wrong shard is off by a whole step or more).

# TP bytes and calls of the last step, from rank 0's counters, against the count of
# Megatron's communication points (parallel/tp/layers.h) for m micro-batches of
# N = 64 rows of C = 64 floats, L = 2 layers, t TP ranks, payload P = 4 N C bytes:
#   without sp, all-reduce: forward 1 (embedding) + 2L (row-parallel outputs) of P,
#     and the vocab-parallel cross-entropy's max (4N) and sums (8N); backward 2L
#     (column-parallel input gradients) + 1 (the LM head's) of P
#   with sp, the same P-sized points become reduce-scatters (forward 1 + 2L, backward
#     2L + 1) and all-gathers (forward 2L + 1 norm outputs; backward 2L branch
#     gradients, 2L norm outputs rebuilt, 1 for the embeddings' gradient); the
#     all-reduces left are the cross-entropy's and the norms' weight gradients (2L + 1
#     norms of 2C floats for LayerNorm with bias, C for RMSNorm)
#   per step: the squared gradient norm (8 bytes), once more at ZeRO stages >= 1
# Wire bytes are the ring's: 2 (t-1)/t P per all-reduce, (t-1)/t P otherwise.
tp_bytes_match() { # NAME TP SP MICRO_BATCHES ZERO NORM_FLOATS
    $PY - "$TMP/$1.jsonl" "$2" "$3" "$4" "$5" "$6" <<'PYEOF'
import json, sys
path, t, sp, m, zero, nf = sys.argv[1], *map(int, sys.argv[2:])
last = [json.loads(l) for l in open(path) if '"iteration": 10,' in l and 'tp_calls' in l][-1]
N, C, L = 64, 64, 2
P = 4 * N * C
f = (t - 1) / t
scal = 8 * (1 + (zero > 0))
if not sp:
    calls = {'all-reduce': m * (1 + 2 * L + 2 + 2 * L + 1) + 1 + (zero > 0),
             'reduce-scatter': 0, 'all-gather': 0}
    payload = {'all-reduce': m * ((2 + 4 * L) * P + 12 * N) + scal}
else:
    calls = {'all-reduce': m * (2 + 2 * L + 1) + 1 + (zero > 0),
             'reduce-scatter': m * (2 + 4 * L), 'all-gather': m * (2 + 6 * L)}
    payload = {'all-reduce': m * (12 * N + (2 * L + 1) * 4 * nf) + scal,
               'reduce-scatter': calls['reduce-scatter'] * P,
               'all-gather': calls['all-gather'] * P}
wire = {k: v * (2 * f if k == 'all-reduce' else f) for k, v in payload.items()}
ok = True
for k in ('all-reduce', 'reduce-scatter', 'all-gather'):
    got_c, got_b = last['tp_calls'][k], last['tp_wire_bytes'][k]
    want_b = wire.get(k, 0)
    print(f'{k}: calls {got_c} (theory {calls[k]}), wire bytes {got_b} (theory {want_b:.0f})')
    ok &= got_c == calls[k] and abs(got_b - want_b) < 0.5
sys.exit(0 if ok else 1)
PYEOF
}

# ---- GPT: every layout against one process ------------------------------------------
check "gpt: one process trains 10 iterations" run g_single mpirun.openmpi 1 1 "${GPT[@]}"
check "gpt: one process reports tp 1 x dp 1" layout_is g_single 1 1 1 ""
# layout_checks FAMILY SINGLE NAME "NP TP DP ZERO [sp]" FLAGS...: one layout against one process.
layout_checks() {
    local family=$1 single=$2 name=$3 np tp dp zero sp flags label=""; shift 3
    read -r np tp dp zero sp <<<"$1"; shift
    flags=(--zero-stage "$zero")
    if [ -n "${sp:-}" ]; then flags+=(--sequence-parallel); label=" (sequence parallel)"; fi
    local what="$family: tp $tp x dp $dp, ZeRO $zero${sp:+, sequence parallel}"
    check "$what runs" run "$name" mpirun.openmpi "$np" "$tp" "$@" "${flags[@]}"
    check "$what asserts its layout" layout_is "$name" "$np" "$tp" "$dp" "$label"
    check "$what: losses equal one process's" same_losses "$single" "$name"
    ckpt_both "$name" "$single"
    check "$what: final parameters equal one process's" ckpt_passed "$name" same
    check "$what: replicated tensors identical on every TP rank" ckpt_passed "$name" replicas
}
layout_checks gpt g_single g_tp2 "2 2 1 0" "${GPT[@]}"
layout_checks gpt g_single g_tp2_sp "2 2 1 0 sp" "${GPT[@]}"
layout_checks gpt g_single g_tp4 "4 4 1 0" "${GPT[@]}"
layout_checks gpt g_single g_tp4_sp "4 4 1 0 sp" "${GPT[@]}"
layout_checks gpt g_single g_tp8_sp "8 8 1 0 sp" "${GPT[@]}"
layout_checks gpt g_single g_tp2_dp2_z0 "4 2 2 0" "${GPT[@]}"
layout_checks gpt g_single g_tp2_dp2_z1_sp "4 2 2 1 sp" "${GPT[@]}"
layout_checks gpt g_single g_tp2_dp2_z2 "4 2 2 2" "${GPT[@]}"
layout_checks gpt g_single g_tp2_dp2_z3_sp "4 2 2 3 sp" "${GPT[@]}"
check "gpt: tp 2: TP bytes and calls per step equal the theory" tp_bytes_match g_tp2 2 0 4 0 128
check "gpt: tp 2, sp: TP bytes and calls per step equal the theory" tp_bytes_match g_tp2_sp 2 1 4 0 128
check "gpt: tp 4, sp: TP bytes and calls per step equal the theory" tp_bytes_match g_tp4_sp 4 1 4 0 128
check "gpt: tp 2 x dp 2, ZeRO 3, sp: TP bytes and calls equal the theory" \
    tp_bytes_match g_tp2_dp2_z3_sp 2 1 2 3 128
tp_bytes_match g_tp2_sp 2 1 4 0 128 | sed 's/^/    /'

# --tp-comm-overlap: the input-gradient reductions run on a communication thread (a
# second queue beside ZeRO-2's) while the weight-gradient GEMMs compute; same sums.
check "gpt: tp 2, sp, --tp-comm-overlap runs" run g_tp2_sp_ov mpirun.openmpi 2 2 "${GPT[@]}" \
    --sequence-parallel --tp-comm-overlap
check "gpt: tp 2, sp, --tp-comm-overlap: losses equal one process's" same_losses g_single g_tp2_sp_ov
check "gpt: tp 2, sp, --tp-comm-overlap: TP bytes and calls equal the theory" \
    tp_bytes_match g_tp2_sp_ov 2 1 4 0 128
check "gpt: tp 2 x dp 2, ZeRO 2, --tp-comm-overlap runs" run g_tp2_dp2_z2_ov mpirun.openmpi 4 2 \
    "${GPT[@]}" --zero-stage 2 --tp-comm-overlap
check "gpt: tp 2 x dp 2, ZeRO 2, --tp-comm-overlap: final parameters equal one process's" \
    same_params g_tp2_dp2_z2_ov g_single

# Recomputation reruns the layers' communication too; the losses do not move.
check "gpt: tp 2, sp, full recompute runs" run g_tp2_sp_full mpirun.openmpi 2 2 "${GPT[@]}" \
    --sequence-parallel --recompute-granularity full --recompute-method uniform \
    --recompute-num-layers 1
check "gpt: tp 2, sp, full recompute: losses equal one process's" same_losses g_single g_tp2_sp_full
check "gpt: tp 2, selective recompute runs" run g_tp2_sel mpirun.openmpi 2 2 "${GPT[@]}" \
    --recompute-activations
check "gpt: tp 2, selective recompute: losses equal one process's" same_losses g_single g_tp2_sel

# bf16 (train_dp.sh's bound and argument: 5e-5 over 10 iterations).
check "gpt bf16: one process runs" run g_single_bf16 mpirun.openmpi 1 1 "${GPT[@]}" --bf16
check "gpt bf16: tp 2, sp runs" run g_tp2_sp_bf16 mpirun.openmpi 2 2 "${GPT[@]}" --bf16 \
    --sequence-parallel
check "gpt bf16: tp 2, sp: losses within 5e-5 of one process's" \
    same_losses g_single_bf16 g_tp2_sp_bf16 5e-5

if [ -x "$ROOT/build-mpich/plait" ]; then
    check "gpt: MPICH tp 2, sp runs" env PLAIT="$ROOT/build-mpich/plait" \
        bash -c "$(declare -f run); $(declare -p COMMON GPT TMP); PLAIT=$ROOT/build-mpich/plait; \
                 run g_mpich mpirun.mpich 2 2 ${GPT[*]} --sequence-parallel"
    check "gpt: MPICH tp 2, sp asserts its layout" layout_is g_mpich 2 2 1 " (sequence parallel)"
    check "gpt: MPICH tp 2, sp: losses equal one process's" same_losses g_single g_mpich
fi

# ---- Llama (RMSNorm, rope, SwiGLU halves split per rank, GQA 4 groups) ----------------
check "llama: one process trains 10 iterations" run l_single mpirun.openmpi 1 1 "${LLAMA[@]}"
layout_checks llama l_single l_tp2_sp "2 2 1 0 sp" "${LLAMA[@]}"
layout_checks llama l_single l_tp4 "4 4 1 1" "${LLAMA[@]}"
layout_checks llama l_single l_tp2_dp2_z3_sp "4 2 2 3 sp" "${LLAMA[@]}"
check "llama: tp 2, sp: TP bytes and calls per step equal the theory (RMSNorm: C floats)" \
    tp_bytes_match l_tp2_sp 2 1 4 0 64
# Fewer query groups than TP ranks (2 groups at TP 4, and MQA: 1 group at TP 2): each
# rank holds its query heads and their group's k, v, shared by tp/G ranks that sum the
# shared rows' gradients. Megatron refuses these layouts (attention.py divides
# num_query_groups by the TP size); the copies must stay bit-identical.
LG2=(--model llama --group-query-attention --num-query-groups 2 --hidden-dropout 0.1
     --attention-dropout 0.1)
check "llama, 2 groups: one process runs" run l2_single mpirun.openmpi 1 1 "${LG2[@]}"
check "llama, 2 groups at tp 4, sp runs" run l2_tp4_sp mpirun.openmpi 4 4 "${LG2[@]}" --sequence-parallel
check "llama, 2 groups at tp 4, sp asserts its layout" layout_is l2_tp4_sp 4 4 1 " (sequence parallel)"
check "llama, 2 groups at tp 4, sp: losses equal one process's" same_losses l2_single l2_tp4_sp
ckpt_both l2_tp4_sp l2_single
check "llama, 2 groups at tp 4, sp: final parameters equal one process's" ckpt_passed l2_tp4_sp same
check "llama, 2 groups at tp 4: the shared k, v copies and replicated tensors stay identical" \
    ckpt_passed l2_tp4_sp replicas
check "llama, 2 groups at tp 4, ZeRO 3 runs" run l2_tp4_z3 mpirun.openmpi 4 4 \
    "${LG2[@]}" --zero-stage 3
check "llama, 2 groups at tp 4, ZeRO 3: final parameters equal one process's" \
    same_params l2_tp4_z3 l2_single
LG1=(--model llama --group-query-attention --num-query-groups 1 --hidden-dropout 0.1
     --attention-dropout 0.1)
check "llama, multi-query (1 group): one process runs" run l1_single mpirun.openmpi 1 1 "${LG1[@]}"
check "llama, multi-query at tp 2 x dp 2, ZeRO 1 runs" run l1_tp2_dp2 mpirun.openmpi 4 2 \
    "${LG1[@]}" --zero-stage 1
check "llama, multi-query at tp 2 x dp 2: losses equal one process's" same_losses l1_single l1_tp2_dp2
ckpt_both l1_tp2_dp2 l1_single
check "llama, multi-query at tp 2 x dp 2: final parameters equal one process's" \
    ckpt_passed l1_tp2_dp2 same
check "llama, multi-query at tp 2: the k, v copies stay identical" ckpt_passed l1_tp2_dp2 replicas
check_fails "3 query groups at tp 2 (neither divides the other) are refused, naming both flags" \
    "--num-query-groups 3 and --tensor-model-parallel-size 2: one must divide the other" \
    timeout -k 5 60 mpirun.openmpi -n 2 "$PLAIT" train --model llama --num-layers 1 \
    --hidden-size 48 --num-attention-heads 6 --group-query-attention --num-query-groups 3 \
    --seq-length 16 --micro-batch-size 1 --train-iters 2 --mock-data --vocab-size 128 --lr 1e-3 \
    --tensor-model-parallel-size 2

# ---- memory ----------------------------------------------------------------------------
# Sequence parallelism keeps the residual stream's rows N/tp per rank: per layer res1,
# res2 (C floats a row) and the two LayerNorms' mean and rstd (4), plus the embedding
# output, the gradient of the residual stream (C each) and the final norm's statistics
# (2). It adds one norm's weight and bias gradients (2C) to the layers' scratch, which
# here costs nothing: the default fused LM head's workspace holds that scratch (both are
# transient and never live at once). With N = 64, tp 2: (N - N/tp) (L (2C + 4) + 2C + 2)
# floats.
act_falls() {
    $PY - "$TMP/g_tp2.jsonl" "$TMP/g_tp2_sp.jsonl" <<'PYEOF'
import json, sys
act = [[json.loads(l)['act_bytes'] for l in open(p) if 'act_bytes' in l][-1] for p in sys.argv[1:]]
N, C, L, t = 64, 64, 2, 2
want = 4 * ((N - N // t) * (L * (2 * C + 4) + 2 * C + 2))
print(f'activations planned: tp 2 {act[0]} B, tp 2 sp {act[1]} B; saved {act[0] - act[1]} B, '
      f'theory {want} B')
sys.exit(0 if act[0] - act[1] == want else 1)
PYEOF
}
check "sequence parallelism plans the residual stream's rows N/tp per rank" act_falls
act_falls | sed 's/^/    /'

# ---- resume, aliases and refusals ------------------------------------------------------
rm -rf "$TMP/resume"; mkdir -p "$TMP/resume"
cp -r "$TMP/g_tp2_dp2_z3_sp/iter_0000005" "$TMP/resume/"
echo 5 > "$TMP/resume/latest_checkpointed_iteration.txt"
check "tp 2 x dp 2, ZeRO 3, sp: resumed from iteration 5" \
    timeout -k 5 300 mpirun.openmpi -n 4 "$PLAIT" train "${COMMON[@]}" "${GPT[@]}" \
    --tensor-model-parallel-size 2 --make-vocab-size-divisible-by 256 --zero-stage 3 \
    --sequence-parallel --load "$TMP/resume" --save "$TMP/resume" --metrics-file "$TMP/resume.jsonl"
check "tp 2 x dp 2, ZeRO 3, sp: losses after resuming equal the uninterrupted run's, bit for bit" \
    diff <(losses "$TMP/g_tp2_dp2_z3_sp.jsonl" | tail -n 5) <(losses "$TMP/resume.jsonl")
check "tp 2 x dp 2, ZeRO 3, sp: each TP rank resumed its own optimizer shard (final parameters equal)" \
    $PY "$CK" same "$TMP/resume/iter_0000010" "$TMP/g_tp2_dp2_z3_sp/iter_0000010" 0 0
tp2_at_tp1() { # another padding (a multiple of 512 saved, of 256 here): a warning
    timeout -k 5 120 "$PLAIT" train "${BASE[@]}" "${GPT[@]}" --make-vocab-size-divisible-by 256 \
        --load "$TMP/g_tp2" --ckpt-step 5 --seq-length 32 --train-iters 10 >"$TMP/tp2_at_tp1.log" 2>&1 &&
        grep -q "padded to 50688 rows, this run's to 50432" "$TMP/tp2_at_tp1.log"; }
check "a TP 2 checkpoint resumes at TP 1 (reshard.sh checks the losses)" tp2_at_tp1
check "--model-parallel-size 2 (Megatron v1, DeepSpeed) means tensor parallelism" \
    bash -c "timeout -k 5 120 mpirun.openmpi -n 2 '$PLAIT' train $(printf '%q ' "${BASE[@]}") \
             --seq-length 32 --model-parallel-size 2 --train-iters 3 --make-vocab-size-divisible-by 256 \
             > '$TMP/alias.log' 2>&1 && grep -q 'world 2 = tp 2 x dp 1' '$TMP/alias.log'"
check "--tensor_model_parallel_size 2 (A4SFramework) means tensor parallelism" \
    bash -c "timeout -k 5 120 mpirun.openmpi -n 2 '$PLAIT' train $(printf '%q ' "${BASE[@]}") \
             --seq-length 32 --tensor_model_parallel_size 2 --train-iters 3 --make-vocab-size-divisible-by 256 \
             > '$TMP/alias2.log' 2>&1 && grep -q 'world 2 = tp 2 x dp 1' '$TMP/alias2.log'"
check_fails "conflicting TP sizes under two names are refused, naming both" \
    "--tensor-model-parallel-size 2 conflicts with --model-parallel-size 4" \
    timeout -k 5 60 "$PLAIT" train "${COMMON[@]}" --tensor-model-parallel-size 2 --model-parallel-size 4
check_fails "heads not divisible by TP are refused, naming both flags" \
    "--num-attention-heads 8 is not divisible by --tensor-model-parallel-size 3" \
    timeout -k 5 60 mpirun.openmpi -n 3 "$PLAIT" train "${COMMON[@]}" --tensor-model-parallel-size 3
check_fails "a world not divisible by TP is refused, naming the sizes" \
    "tensor-model-parallel-size" \
    timeout -k 5 60 mpirun.openmpi -n 3 "$PLAIT" train "${COMMON[@]}" --tensor-model-parallel-size 2
check_fails "sequence parallelism with rows not divisible by TP is refused, naming the flags" \
    "--sequence-parallel: --micro-batch-size x --seq-length \(62\) must divide by --tensor-model-parallel-size 4" \
    timeout -k 5 60 mpirun.openmpi -n 4 "$PLAIT" train "${BASE[@]}" --seq-length 31 \
    --train-iters 10 --tensor-model-parallel-size 4 --sequence-parallel
check "--sequence-parallel at TP 1 is ignored with a warning, as Megatron does" \
    bash -c "timeout -k 5 120 '$PLAIT' train $(printf '%q ' "${BASE[@]}") --sequence-parallel \
             --seq-length 32 --train-iters 3 > '$TMP/sp1.log' 2>&1 && grep -q 'sequence-parallel is ignored' '$TMP/sp1.log'"
summary tp
