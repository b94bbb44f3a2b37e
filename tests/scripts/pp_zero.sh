#!/usr/bin/env bash
# ZeRO stages 2 and 3 with pipeline parallelism (the 3D part of the pipeline issue;
# DeepSpeed refuses the combination). PP 2 x DP 2 under 1F1B, GPipe, ZB-H1 and
# interleaved 1F1B (2 and 3 model chunks per rank), PP 4 x DP 2,
# PP 2 x TP 2 x DP 2 (8 ranks), GPT (tied embeddings: the embedding group's sum comes
# before the DP reduce-scatter) and Llama (untied, 3 layers per stage), full recompute
# (whose rerun forwards gather again), dropout on: one process's losses, validation
# losses, gradient norms (so clipping sees every stage) and final parameters within fp32
# rounding. A non-finite gradient on the last stage skips the step on every rank. The DP
# bytes each step moves on the first stage equal the theory of docs/pipeline.md (stage 2
# reduce-scatters each layer once per micro-batch, stage 3 gathers each layer its
# parameter slots do not already hold), beside ZeRO-1's. Resume under ZeRO 2 and 3 is
# bit-exact. 4 iterations of a tiny model keep it short; every run asserts its layout
# from plait's banner and runs under a timeout.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1 # up to 8 ranks share 2 cores
kjv_dataset 2000 "$TMP/kjv"
# micro-batch 2 x 32 rows; 4 micro-batches per step at DP 1, 2 at DP 2; validation at 2 and 4.
COMMON=(--hidden-size 64 --num-attention-heads 8 --seq-length 32 --micro-batch-size 2
        --global-batch-size 8 --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine
        --lr-warmup-iters 2 --log-interval 1 --eval-iters 1 --eval-interval 2 --seed 7
        --hidden-dropout 0.1 --attention-dropout 0.1 --train-iters 4)
# GPT trains on synthetic tokens over 4100 words (pp.sh: padded to 4608 as GPT-2's 50257 to
# 50688; the equality does not depend on the text or the vocabulary's size, and the bytes
# theory reads each run's own partition; GPT-2's vocabulary was most of each launch's
# work). Llama stays on the King James Bible: its untied input embeddings see only the
# tokens of the batch, and uniform synthetic tokens give thousands of rows a gradient of a
# few occurrences, which left less of the parameter bound's margin (tp.sh's tp 2 x dp 2
# exceeded it).
KJV=(--data-path "$TMP/kjv_text_document" --split 90,10,0 "${GPT2[@]}")
SYN=(--mock-data --vocab-size 4100)
GPT=(--num-layers 4 "${SYN[@]}")
LLAMA=(--num-layers 6 --model llama --group-query-attention --num-query-groups 4 "${KJV[@]}")

run() { # NAME NP TP PP FLAGS...: the final checkpoint in $TMP/NAME
    local name=$1 np=$2 tp=$3 pp=$4; shift 4
    rm -rf "${TMP:?}/$name" "$TMP/$name.jsonl"
    timeout -k 5 120 mpirun.openmpi -n "$np" "$PLAIT" train "${COMMON[@]}" "$@" \
        --tensor-model-parallel-size "$tp" --pipeline-model-parallel-size "$pp" \
        --make-vocab-size-divisible-by $((512 / tp)) --save "$TMP/$name" \
        --metrics-file "$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1
}
layout_is() { grep -q "world $2 = tp $3 x dp $4 x pp $5" "$TMP/$1.log"; }
valid() { grep '"valid_lm_loss"' "$1" | sed -E 's/.*"valid_lm_loss": ([^,]*),.*/\1/'; }
norms() { grep '"grad_norm"' "$1" | sed -E 's/.*"grad_norm": ([^,]*),.*/\1/'; }
# Losses and gradient norms within 2e-5 relative, validation within 1e-6 (pp.sh's
# bounds and argument: the layouts sum the same products in another order).
same_losses() {
    paste <(losses "$TMP/$1.jsonl") <(losses "$TMP/$2.jsonl") | awk -v n=4 '
        { c++; d = $1 - $2; if (d < 0) d = -d; if (d > 2e-5 * $2) bad++ }
        END { exit !(c == n && !bad) }' &&
        paste <(norms "$TMP/$1.jsonl") <(norms "$TMP/$2.jsonl") | awk -v n=4 '
        { c++; d = $1 - $2; if (d < 0) d = -d; if (d > 2e-5 * $2) bad++ }
        END { exit !(c == n && !bad) }' &&
        paste <(valid "$TMP/$1.jsonl") <(valid "$TMP/$2.jsonl") | awk '
        { c++; d = $1 - $2; if (d < 0) d = -d; if (d > 1e-6 * $2) bad++ }
        END { exit !(c == 2 && !bad) }'
}
# Final parameters within 1e-5 + 1e-4 |p| (train_lib.sh's bound, argued for 10 steps;
# 4 steps stay inside it), assembled from every (tp, pp) shard by ckpt_tensors.py.
same_final() { $PY "$CK" same "$TMP/$1/iter_0000004" "$TMP/$2/iter_0000004"; }
replicas_ok() { $PY "$CK" replicas "$TMP/$1/iter_0000004"; }

# DP bytes per step on rank 0's stage (the first), from its metrics, against the theory:
# f = (N-1)/N of the ring, P the stage's padded flat buffer, L its layers' elements
# (layer_regions), m micro-batches; all-reduce: loss, skip flag and squared norm, 24 B
# (2 f of it on the wire);
#   stage 1  reduce-scatter f 4P, all-gather f 4P (after the step)
#   stage 2  reduce-scatter f 4 (m L + P - L): layers after every micro-batch's backward,
#            embeddings once; all-gather f 4P
#   stage 3  reduce-scatter as stage 2; all-gather f 4 (P - L + G): the embeddings once,
#            and G = the layer elements gathered, from a simulation of the stage's
#            actions over two parameter slots (layer parity) that keep their layer for
#            the step: a layer is gathered when its slot does not hold it, the next
#            one in the pass prefetched likewise.
bytes_theory() { # NAME N STAGE SCHEDULE PP
    $PY - "$TMP/$1.jsonl" "$2" "$3" "$4" "$5" <<'PYEOF'
import json, sys
path, N, stage, kind, npp = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
rows = [json.loads(l) for l in open(path)]
part = [r for r in rows if 'zero_partition' in r][-1]['zero_partition']
steps = [r for r in rows if 'dp_wire_bytes_mean' in r]
P, m, sizes = part['padded'], part['micro_batches'], part['layer_regions']
L, nl, f = sum(sizes), len(sizes), (N - 1) / N
if kind == 'gpipe':
    acts = [('F', i) for i in range(m)] + [('B', i) for i in range(m)]
else:  # 1f1b on stage 0: warmup forwards, pairs, the remaining backwards
    w = min(npp - 1, m)
    acts = [('F', i) for i in range(w)]
    for i in range(m - w):
        acts += [('F', w + i), ('B', i)]
    acts += [('B', i) for i in range(m - w, m)]
slot, G = [-1, -1], 0
def need(j):
    global G
    if 0 <= j < nl and slot[j % 2] != j:
        slot[j % 2] = j
        G += sizes[j]
for op, _ in acts:
    order = range(nl) if op == 'F' else range(nl - 1, -1, -1)
    if op == 'F':
        need(0)  # the first stage's embedding prefetches layer 0
    for j in order:
        need(j)
        need(j + 1 if op == 'F' else j - 1)
want = {1: (2 * f * 24, f * 4 * P, f * 4 * P),
        2: (2 * f * 24, f * 4 * (m * L + P - L), f * 4 * P),
        3: (2 * f * 24, f * 4 * (m * L + P - L), f * 4 * (P - L + G))}[stage]
ok = len(steps) == 4
for s in steps:
    got = tuple(s['dp_wire_bytes_mean'][k] for k in ('all-reduce', 'reduce-scatter', 'all-gather'))
    ok &= all(abs(g - w) <= 0.5 for g, w in zip(got, want))
    ok &= s['dp_wire_bytes_mean_stages'][0] == list(got)  # every stage's, rank 0's first
print(f'stage {stage} {kind}: measured {got}, theory {want} (P {P}, L {L}, m {m}'
      + (f', layer gathers {G / sizes[0]:.0f} of {2 * m * nl} without reuse)' if sizes else ')'))
print(f'  every stage (all-reduce, reduce-scatter, all-gather): {s["dp_wire_bytes_mean_stages"]}')
sys.exit(0 if ok else 1)
PYEOF
}

# layout_checks FAMILY SINGLE NAME "NP TP DP PP" FLAGS...
layout_checks() {
    local family=$1 single=$2 name=$3 np tp dp pp; shift 3
    read -r np tp dp pp <<<"$1"; shift
    local what="$family: pp $pp x tp $tp x dp $dp ($*)"
    check "$what runs" run "$name" "$np" "$tp" "$pp" "$@"
    check "$what asserts its layout" layout_is "$name" "$np" "$tp" "$dp" "$pp"
    check "$what: losses, grad norms and validation equal one process's" same_losses "$single" "$name"
    check "$what: final parameters equal one process's" same_final "$name" "$single"
    check "$what: replicas and the tied copy identical" replicas_ok "$name"
}

check "gpt: one process trains 4 iterations" run g1 1 1 1 "${GPT[@]}"
check "llama: one process trains 4 iterations" run l1 1 1 1 "${LLAMA[@]}"
layout_checks gpt g1 z1 "4 1 2 2" "${GPT[@]}" --zero-stage 1
layout_checks gpt g1 z2 "4 1 2 2" "${GPT[@]}" --zero-stage 2 --save-interval 2
layout_checks gpt g1 z3 "4 1 2 2" "${GPT[@]}" --zero-stage 3 --save-interval 2
layout_checks gpt g1 z2_gpipe "4 1 2 2" "${GPT[@]}" --zero-stage 2 --pipeline-schedule gpipe
layout_checks gpt g1 z3_gpipe "4 1 2 2" "${GPT[@]}" --zero-stage 3 --pipeline-schedule gpipe
layout_checks gpt g1 z3_pp4 "8 1 2 4" "${GPT[@]}" --zero-stage 3
layout_checks gpt g1 z3_full "4 1 2 2" "${GPT[@]}" --zero-stage 3 --recompute-granularity full \
    --recompute-method uniform --recompute-num-layers 1
layout_checks gpt g1 z3_3d "8 2 2 2" "${GPT[@]}" --zero-stage 3 --sequence-parallel
layout_checks llama l1 l_z3_3d "8 2 2 2" "${LLAMA[@]}" --zero-stage 3
layout_checks llama l1 l_z2_gpipe "4 1 2 2" "${LLAMA[@]}" --zero-stage 2 --pipeline-schedule gpipe
# Interleaved (2 model chunks per rank: the rank's regions are chunk 0's layers, then
# chunk 1's) and ZB-H1 (the weight half readies and reduce-scatters each layer).
check "gpt: one process trains 4 iterations (8 layers)" run g8 1 1 1 --num-layers 8 "${SYN[@]}"
layout_checks gpt g8 z2_v2 "4 1 2 2" --num-layers 8 "${SYN[@]}" --zero-stage 2 \
    --num-layers-per-virtual-pipeline-stage 2
layout_checks gpt g8 z3_v2 "4 1 2 2" --num-layers 8 "${SYN[@]}" --zero-stage 3 \
    --num-layers-per-virtual-pipeline-stage 2
layout_checks gpt g1 z3_zb "4 1 2 2" "${GPT[@]}" --zero-stage 3 --pipeline-schedule zb-h1
layout_checks llama l1 l_z3_v3 "4 1 2 2" "${LLAMA[@]}" --zero-stage 3 \
    --num-virtual-stages-per-pipeline-rank 3

check "pp 2 x dp 2, ZeRO 1: DP bytes per step equal the theory" bytes_theory z1 2 1 1f1b 2
check "pp 2 x dp 2, ZeRO 2: DP bytes per step equal the theory" bytes_theory z2 2 2 1f1b 2
check "pp 2 x dp 2, ZeRO 3: DP bytes per step equal the theory" bytes_theory z3 2 3 1f1b 2
check "pp 2 x dp 2, ZeRO 3, gpipe: DP bytes per step equal the theory" \
    bytes_theory z3_gpipe 2 3 gpipe 2
check "llama pp 2 x tp 2 x dp 2, ZeRO 3 (3 layers a stage): DP bytes equal the theory" \
    bytes_theory l_z3_3d 2 3 1f1b 2
check "llama pp 2 x dp 2, ZeRO 2, gpipe: DP bytes per step equal the theory" \
    bytes_theory l_z2_gpipe 2 2 gpipe 2
for ns in "z1 1" "z2 2" "z3 3" "l_z3_3d 3"; do
    read -r n stage <<<"$ns"
    bytes_theory "$n" 2 "$stage" 1f1b 2 2>&1 | sed "s/^/    $n: /"
done

# A NaN gradient on rank 2 (the last stage, DP rank 0; the fault hits the first element
# of the rank's shard, here layer 2's, which the norm counts: rank 3's would land in the
# tied output-layer copy, counted on the first stage only, where a real NaN would also be
# after the embedding group's sum) at iteration 3: the sum of squares over TP x PP and the
# flag over DP skip the step on every rank (rank 0 reports it), and the run goes on from
# iteration 2's state.
check "pp 2 x dp 2, ZeRO 3: a NaN gradient on the last stage's rank 2 at iteration 3 runs" \
    env PLAIT_FAULT_NAN_ITER=3 PLAIT_FAULT_NAN_RANK=2 timeout -k 5 120 mpirun.openmpi -n 4 \
    -x PLAIT_FAULT_NAN_ITER -x PLAIT_FAULT_NAN_RANK "$PLAIT" train "${COMMON[@]}" "${GPT[@]}" \
    --pipeline-model-parallel-size 2 --zero-stage 3 --make-vocab-size-divisible-by 512 \
    --metrics-file "$TMP/nan.jsonl"
check "the first stage reports iteration 3 skipped, with no gradient norm" \
    test "$(field "$TMP/nan.jsonl" 3 skipped)/$(field "$TMP/nan.jsonl" 3 grad_norm)" = "true/null"
check "iterations before it equal the clean run's, and the schedule did not advance" \
    test "$(field "$TMP/nan.jsonl" 2 lm_loss)/$(field "$TMP/nan.jsonl" 4 lr)" = \
    "$(field "$TMP/z3.jsonl" 2 lm_loss)/$(field "$TMP/z3.jsonl" 3 lr)"

# Resume under ZeRO 3 (and 2) from iteration 2: every (pp, dp) rank reloads its shard.
for stage in 3 2; do
    r=resume$stage
    rm -rf "${TMP:?}/$r"; mkdir -p "$TMP/$r"
    cp -r "$TMP/z$stage/iter_0000002" "$TMP/$r/"
    echo 2 > "$TMP/$r/latest_checkpointed_iteration.txt"
    check "pp 2 x dp 2, ZeRO $stage: resumed from iteration 2" \
        timeout -k 5 120 mpirun.openmpi -n 4 "$PLAIT" train "${COMMON[@]}" "${GPT[@]}" \
        --pipeline-model-parallel-size 2 --zero-stage $stage --make-vocab-size-divisible-by 512 \
        --load "$TMP/$r" --save "$TMP/$r" --metrics-file "$TMP/$r.jsonl"
    check "ZeRO $stage pipelined: losses after resuming equal the uninterrupted run's, bit for bit" \
        diff <(losses "$TMP/z$stage.jsonl" | tail -n 2) <(losses "$TMP/$r.jsonl")
    check "ZeRO $stage pipelined: final parameters after resuming equal, bit for bit" \
        $PY "$CK" same "$TMP/$r/iter_0000004" "$TMP/z$stage/iter_0000004" 0 0
done
check "the ZeRO 3 checkpoint has an optimizer shard for every (pp, dp) rank" \
    $PY -c "
import json, sys
z = json.load(open('$TMP/z3/iter_0000004/manifest.json'))['zero']
print(json.dumps(z)[:400])
ranks = {(e.get('pp_rank'), e.get('dp_rank')) for e in z['shards']}
sys.exit(ranks != {(p, d) for p in (0, 1) for d in (0, 1)})"
summary pp_zero
