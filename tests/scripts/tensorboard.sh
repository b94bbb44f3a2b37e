#!/usr/bin/env bash
# --tensorboard-dir (issue 16, "their tools see the run"): TensorBoard event files with
# Megatron's scalar names and cadence (training_log, evaluate_and_print_results), read
# back by tests/scripts/tfevents_read.py, an independent reader of the format (framing,
# masked CRC32C, protobuf) written from the spec, and compared iteration by iteration
# with the --metrics-file that rank 0 writes. Budget: under 30 s on 2 cores.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1
READ="$ROOT/tests/scripts/tfevents_read.py"
TINY=(--mock-data --vocab-size 128 --num-layers 2 --hidden-size 32 --num-attention-heads 4
      --seq-length 16 --max-position-embeddings 16 --lr 1e-3 --min-lr 1e-4
      --lr-decay-style cosine --lr-warmup-iters 2)
HOST=$(hostname)

# compare DIR METRICS [--fp16]: the file's scalars against the metrics, iteration by
# iteration. The event's float is the double rounded to float32: lm_loss (printed with
# 17 digits) must round to exactly the event's value; lr and grad_norm are printed with
# 9 digits, so within half a float32 ulp (2^-24 relative) plus 5e-9 relative.
compare() {
    $PY - "$READ" "$@" <<'EOF'
import glob, json, math, struct, sys, importlib.util
spec = importlib.util.spec_from_file_location("r", sys.argv[1]); r = importlib.util.module_from_spec(spec)
spec.loader.exec_module(r)
d, metrics, fp16 = sys.argv[2], sys.argv[3], "--fp16" in sys.argv
ev = r.read(glob.glob(d + "/events.out.tfevents.*")[0])["events"]
by = {}
for e in ev:
    by.setdefault(e["tag"], {})[e["step"]] = e["value"]
rows = [json.loads(x) for x in open(metrics)]
train = [m for m in rows if "lm_loss" in m]
valid = [m for m in rows if "valid_lm_loss" in m]
f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]
close = lambda a, b: abs(a - b) <= (2**-24 + 5e-9) * abs(b) + 1e-30
bad = []
def want(cond, what):
    if not cond:
        bad.append(what)
for k, m in enumerate(train):
    i, s = m["iteration"], m["consumed_samples"]
    want(by["lm loss"].get(i) == f32(m["lm_loss"]), "lm loss at %d" % i)
    want(by["lm loss vs samples"].get(s) == f32(m["lm_loss"]), "lm loss vs samples at %d" % s)
    want(close(by["learning-rate"].get(i, -1), m["lr"]), "learning-rate at %d" % i)
    want(close(by["learning-rate vs samples"].get(s, -1), m["lr"]), "lr vs samples at %d" % s)
    want(by["batch-size"].get(i) == 2 and by["batch-size vs samples"].get(s) == 2, "batch-size %d" % i)
    if m["skipped"]:  # Megatron's grad_norm is None on a skipped iteration
        want(i not in by.get("grad-norm", {}), "grad-norm written on skipped iteration %d" % i)
    else:
        want(close(by["grad-norm"].get(i, -1), m["grad_norm"]), "grad-norm at %d" % i)
        want(close(by["grad-norm vs samples"].get(s, -1), m["grad_norm"]), "grad-norm vs samples")
    # Megatron's loss-scale is read after the step: the scale the next iteration runs with
    if k + 1 < len(train):
        want(by["loss-scale"].get(i) == train[k + 1]["loss_scale"], "loss-scale at %d" % i)
    if not fp16:
        want(by["loss-scale"].get(i) == 1.0, "loss-scale 1 without --fp16 at %d" % i)
for m in valid:
    i = m["iteration"]
    want(close(by["lm loss validation"].get(i, -1), m["valid_lm_loss"]), "validation at %d" % i)
    want(close(by["lm loss validation ppl"].get(i, -1), m["valid_ppl"]), "ppl at %d" % i)
want(len(by["lm loss"]) == len(train) == 8, "8 iterations: %d, %d" % (len(by["lm loss"]), len(train)))
want(len(by["lm loss validation"]) == len(valid) == 2, "2 evaluations")
if fp16:
    want(any(m["skipped"] for m in train) and not all(m["skipped"] for m in train),
         "the fp16 run has skipped and taken steps (the grad-norm rule is exercised)")
print("\n".join(bad) or "all equal")
sys.exit(1 if bad else 0)
EOF
}
# tags DIR: the distinct tags of the directory's event file, one per line, sorted
tags() { $PY "$READ" "$1"/events.out.tfevents.* | tail -n +2 | cut -f2 | sort -u; }
# steps DIR TAG: the steps at which TAG was written, space-separated
steps() { $PY "$READ" "$1"/events.out.tfevents.* | awk -F'\t' -v t="$2" '$2 == t {print $1}' | xargs; }

# 1. One rank, fp16 from 2^22 (its first 3 steps overflow and are skipped), every optional tag.
check "one rank: trains with --tensorboard-dir and every Megatron TensorBoard flag" \
    timeout -k 5 20 "$PLAIT" train "${TINY[@]}" --micro-batch-size 2 --train-iters 8 \
    --log-interval 1 --eval-interval 4 --eval-iters 1 --fp16 --initial-loss-scale 4194304 \
    --hysteresis 1 --tensorboard-dir "$TMP/tb1" --metrics-file "$TMP/m1.jsonl" \
    --log-timers-to-tensorboard --log-params-norm --log-memory-to-tensorboard \
    --log-validation-ppl-to-tensorboard --log-world-size-to-tensorboard
cp "$TMP/check.out" "$TMP/one.log"
check "one rank: exactly one file, named as TensorBoard names it (tfevents.<10-digit s>.host.pid.0)" \
    test "$(ls "$TMP/tb1" | grep -cE "^events\.out\.tfevents\.[0-9]{10}\.$HOST\.[0-9]+\.0$")" = 1 -a \
    "$(ls "$TMP/tb1" | wc -l)" = 1
check "every record's length and data CRC verify; the first event is file_version brain.Event:2" \
    test "$($PY "$READ" "$TMP"/tb1/events.* | sed -n 1p)" = "version brain.Event:2"
check "Megatron's tag names, no other" test "$(tags "$TMP/tb1" | tr '\n' '|')" = \
"batch-size|batch-size vs samples|grad-norm|grad-norm vs samples|iteration-time|learning-rate|\
learning-rate vs samples|lm loss|lm loss validation|lm loss validation ppl|\
lm loss validation ppl vs samples|lm loss validation vs samples|lm loss vs samples|loss-scale|\
loss-scale vs samples|mem-allocated-bytes|mem-allocated-count|mem-max-allocated-bytes|\
mem-reserved-bytes|params-norm|params-norm vs samples|world-size|world-size vs samples|"
check "one rank: lm loss, learning-rate, grad-norm, batch-size, loss-scale and validation equal \
the metrics iteration by iteration" compare "$TMP/tb1" "$TMP/m1.jsonl" --fp16
check "vs samples: the step is the consumed samples (2 per iteration)" \
    test "$(steps "$TMP/tb1" "lm loss vs samples")" = "2 4 6 8 10 12 14 16"
check "validation at each --eval-interval (4 and 8)" \
    test "$(steps "$TMP/tb1" "lm loss validation")" = "4 8"
check "iteration-time every --log-interval, in seconds (0 < t < 1)" $PY -c '
import sys
v = [float(l.split("\t")[2]) for l in sys.stdin if l.split("\t")[1:2] == ["iteration-time"]]
sys.exit(not (len(v) == 8 and all(0 < x < 1 for x in v)))' < <($PY "$READ" "$TMP"/tb1/events.*)
check "params-norm: finite and positive; world-size 1; mem-reserved-bytes at least 1 MiB" $PY -c '
import sys
v = {}
for l in sys.stdin:
    p = l.rstrip("\n").split("\t")
    if len(p) == 3: v.setdefault(p[1], []).append(float(p[2]))
ok = all(0 < x < 1e6 for x in v["params-norm"]) and set(v["world-size"]) == {1.0}
sys.exit(not (ok and min(v["mem-reserved-bytes"]) >= 2**20 and len(v["params-norm"]) == 8))' \
    < <($PY "$READ" "$TMP"/tb1/events.*)

# 2. The reader is independent and strict: one flipped byte fails its CRC.
F=$(ls "$TMP"/tb1/events.* | head -n 1)
cp "$F" "$TMP/corrupt"
printf '\x00' | dd of="$TMP/corrupt" bs=1 seek=100 conv=notrunc 2>/dev/null
check_fails "the reader refuses a file with one byte changed (CRC mismatch)" "CRC mismatch" \
    $PY "$READ" "$TMP/corrupt"

# 3. Two ranks (dp 2): one file, by the last rank; rank 0's metrics agree with it.
check "two ranks: trains with --tensorboard-dir (mpirun -n 2)" timeout -k 5 25 mpirun.openmpi -n 2 \
    -x OMP_NUM_THREADS "$PLAIT" train "${TINY[@]}" --micro-batch-size 1 --train-iters 8 \
    --log-interval 1 --eval-interval 4 --eval-iters 1 --tensorboard-dir "$TMP/tb2" \
    --metrics-file "$TMP/m2.jsonl" --log-validation-ppl-to-tensorboard
cp "$TMP/check.out" "$TMP/two.log"
check "two ranks: the banner says world 2 = dp 2" grep -q "world 2 = tp 1 x dp 2 x pp 1" "$TMP/two.log"
check "two ranks: exactly one event file" test "$(ls "$TMP/tb2" | wc -l)" = 1
check "two ranks: written by the last rank (rank 1 of 2), said once" \
    test "$(grep -c "tensorboard: rank 1 of 2 writes $TMP/tb2/events.out.tfevents" "$TMP/two.log")" = 1
check "two ranks: the last rank's scalars equal rank 0's metrics (loss-scale 1 without --fp16)" \
    compare "$TMP/tb2" "$TMP/m2.jsonl"

# params_norm_is DIR CKPT_ITER_DIR STEP: TensorBoard's params-norm at STEP equals the L2
# norm of the checkpoint's whole tensors, assembled from the rank files by ckpt_tensors.py
# (independent of plait), padded vocabulary rows included; 1e-5 relative: plait and the
# reader sum in different orders, and the event keeps a float32 (6e-8).
params_norm_is() {
    $PY - "$ROOT/tests/scripts" "$READ" "$@" <<'EOF'
import glob, importlib.util, json, math, sys
sys.path.insert(0, sys.argv[1])
import ckpt_tensors
spec = importlib.util.spec_from_file_location("r", sys.argv[2]); r = importlib.util.module_from_spec(spec)
spec.loader.exec_module(r)
ev = r.read(glob.glob(sys.argv[3] + "/events.out.tfevents.*")[0])["events"]
tb = [e["value"] for e in ev if e["tag"] == "params-norm" and e["step"] == int(sys.argv[5])]
# whole() drops a vocabulary tensor's padding rows; the norm counts them, as Megatron's
# (the padded rows are parameters, initialised like the others), so take those whole
tensors, _ = ckpt_tensors.whole(sys.argv[4])
man = json.load(open(sys.argv[4] + "/manifest.json"))
tp, files = ckpt_tensors.rank_files(sys.argv[4], man)
sq = lambda t: float((t.astype("float64") ** 2).sum())
ref = 0.0
for name, t in tensors.items():
    info = man["tensors"][name]
    if info["tp_split"] == "vocab":
        ref += sum(sq(files[(k, info["pipeline_stage"])][name]) for k in range(tp))
    else:
        ref += sq(t)
ref = math.sqrt(ref)
print("tensorboard", tb, "checkpoint", ref)
sys.exit(not (len(tb) == 1 and abs(tb[0] - ref) <= 1e-5 * ref))
EOF
}
for par in "--tensor-model-parallel-size 2" "--zero-stage 3" "--pipeline-model-parallel-size 2"; do
    d=$(echo "$par" | tr -dc 'a-z0-9')
    check "params-norm, 2 ranks with $par: runs and saves" timeout -k 5 25 mpirun.openmpi -n 2 \
        -x OMP_NUM_THREADS "$PLAIT" train "${TINY[@]}" $par --micro-batch-size 2 --train-iters 4 \
        --log-interval 2 --eval-iters 0 --tensorboard-dir "$TMP/tb_$d" --log-params-norm \
        --save "$TMP/ck_$d"
    check "params-norm with $par: the norm of the saved checkpoint's tensors (replicated and \
sharded counted once)" params_norm_is "$TMP/tb_$d" "$TMP/ck_$d/iter_0000004" 4
done

# num-zeros: the first step's gradients come from the same initial weights and global
# batch in every layout, so their exact zeros are the same ones (later steps may differ
# by a cancellation or two, as the weights differ in the last bits). Untied, so that the
# rows of tokens absent from the batch stay zero. TP 2 pads the vocabulary from 128 to 256
# rows: the word embeddings' 128 padded rows x hidden 32 no token reaches (the output
# layer's padded rows do get gradients, from the softmax over the padded vocabulary, as
# in Megatron).
NZ=(--log-num-zeros-in-grad --untie-embeddings-and-output-weights --train-iters 3
    --eval-iters 0 --log-interval 1)
# nz DIR: num-zeros at iteration 1
nz() { $PY "$READ" "$1"/events.out.tfevents.* | awk -F'\t' '$2 == "num-zeros" && $1 == 1 {print $3}'; }
check "num-zeros: one rank" timeout -k 5 10 "$PLAIT" train "${TINY[@]}" "${NZ[@]}" \
    --micro-batch-size 2 --tensorboard-dir "$TMP/nz1"
N1=$(nz "$TMP/nz1")
check "num-zeros: positive at one rank, and written every iteration" \
    test "${N1:-0}" -gt 0 -a "$(steps "$TMP/nz1" num-zeros)" = "1 2 3"
for par in "--zero-stage 3 --micro-batch-size 1" "--zero-stage 1 --micro-batch-size 1" \
           "--pipeline-model-parallel-size 2 --micro-batch-size 2" \
           "--tensor-model-parallel-size 2 --micro-batch-size 2"; do
    d=$(echo "$par" | tr -dc 'a-z0-9')
    pad=0
    case "$par" in *tensor-model*) pad=$((128 * 32)) ;; esac
    check "num-zeros with $par: 2 ranks run" timeout -k 5 20 mpirun.openmpi -n 2 \
        -x OMP_NUM_THREADS "$PLAIT" train "${TINY[@]}" "${NZ[@]}" $par --tensorboard-dir "$TMP/nz_$d"
    check "num-zeros with $par at iteration 1: one rank's ${N1:-?} + $pad padded embedding values" \
        test "$(nz "$TMP/nz_$d")" = "$(( ${N1:-0} + pad ))"
done

# 4. Cadence: --tensorboard-log-interval 2, --log-interval 4, loss-scale left out.
check "--tensorboard-log-interval 2 --no-log-loss-scale-to-tensorboard runs" timeout -k 5 20 \
    "$PLAIT" train "${TINY[@]}" --micro-batch-size 2 --train-iters 8 --log-interval 4 \
    --eval-iters 0 --tensorboard-dir "$TMP/tb3" --tensorboard-log-interval 2 \
    --no-log-loss-scale-to-tensorboard --log-timers-to-tensorboard
check "scalars at iterations 2, 4, 6, 8 only" test "$(steps "$TMP/tb3" "lm loss")" = "2 4 6 8"
check "iteration-time at each --log-interval (4, 8)" \
    test "$(steps "$TMP/tb3" "iteration-time")" = "4 8"
check "no loss-scale with --no-log-loss-scale-to-tensorboard; no validation with --eval-iters 0" \
    test -z "$(tags "$TMP/tb3" | grep -E "loss-scale|validation")"

# 5. A directory that cannot be made: the run stops naming it.
touch "$TMP/not_a_dir"
check_fails "--tensorboard-dir under a file: an error naming the path" \
    "tensorboard-dir.*not_a_dir" timeout -k 5 10 "$PLAIT" train "${TINY[@]}" \
    --micro-batch-size 2 --train-iters 3 --tensorboard-dir "$TMP/not_a_dir/tb"

summary tensorboard
