#!/usr/bin/env bash
# The progress line as Megatron prints it (train/progress.c): field names and order read by
# a parser written for Megatron's training_log, values against the metrics file, the
# window-mean loss, throughput per GPU against Megatron's num_floating_point_operations
# recomputed here (one rank and, under mpirun, two); DeepSpeed's SamplesPerSec line with
# a DeepSpeed config only; MFU against the cached peak (train/peak.c): the cache written,
# a higher cached peak kept, a too-low peak raised with a warning and MFU never above
# 100%. ~15 s.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1
unset PLAIT_TEST_GEMM_PEAK # (lib.sh's) every start measures the peak, as outside the tests
PY=/usr/bin/python3
MODEL=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 --mock-data
       --vocab-size 200 --micro-batch-size 2 --global-batch-size 8 --train-iters 6 --lr 1e-3
       --eval-iters 0 --seed 5)
run() { # NAME NP FLAGS...: log in $TMP/NAME.log, metrics in $TMP/NAME.jsonl
    local name=$1 np=$2; shift 2
    rm -f "$TMP/$name.jsonl"
    timeout -k 5 120 mpirun.openmpi -n "$np" "$PLAIT" train "${MODEL[@]}" "$@" \
        --metrics-file "$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1 &&
        grep -q "world $np = " "$TMP/$name.log"
}
check "one rank, --log-interval 1: trains" run l1 1 --log-interval 1
check "one rank, --log-interval 3: trains" run l3 1 --log-interval 3
check "two ranks (dp 2), --log-interval 1: trains (world size 2)" run dp2 2 --log-interval 1

# A parser as Megatron users write them: split on '|', 'key: value' pairs, in order.
cat > "$TMP/parse.py" <<'PYEOF'
import json, math, re, sys

MEGATRON = ['iteration', 'consumed samples', 'elapsed time per iteration (ms)',
            'throughput per GPU (TFLOP/s/GPU)', 'learning rate', 'global batch size', 'lm loss',
            'loss scale', 'grad norm', 'number of skipped iterations', 'number of nan iterations']
PLAIT = ['tokens/s', 'MFU', 'ETA']

def lines(log):
    out = []
    for line in open(log):
        if not line.startswith(' iteration '):
            continue
        fields = [f.strip() for f in line.rstrip('\n').split('|')]
        assert fields[-1] == '', 'the line ends with " |" as Megatron\'s: %r' % line
        it = re.fullmatch(r'iteration +(\d+)/ +(\d+)', fields[0])
        d = {'iteration': int(it.group(1)), 'train_iters': int(it.group(2))}
        keys = ['iteration']
        for f in fields[1:-1]:
            k, v = f.split(': ', 1)
            keys.append(k)
            d[k] = v
        d['keys'] = keys
        out.append(d)
    return out

def megatron_flops(b, s, h, L, heads, groups, ffn, swiglu, vocab, divisible, tp):
    # megatron/training/training.py num_floating_point_operations, dense, standard attention
    padded = -(-vocab // (divisible * tp)) * divisible * tp
    kv = h // heads
    q, k, v = kv * heads, kv * groups, kv * groups
    attn = 3 * 2 * (h * (q + k + v) + q * h)
    core = 3 * 2 * q / 2 * 2
    return (b * s * (3 * 2 * h * (ffn * (3 if swiglu else 2)) * L + attn * L + 3 * 2 * h * padded)
            + b * s * s * core * L)

def want(ok, what):
    print(('ok ' if ok else 'not ok ') + what)
    return ok

mode = sys.argv[1]
if mode == 'fields':
    log, metrics, world = sys.argv[2], sys.argv[3], int(sys.argv[4])
    ls = lines(log)
    ms = [json.loads(l) for l in open(metrics) if '"lm_loss"' in l]
    good = want(len(ls) == 6 and len(ms) == 6, '%s: 6 lines and 6 metrics rows' % log)
    F = megatron_flops(8, 32, 64, 2, 4, 4, 256, False, 200, 128, 1)
    for d, m in zip(ls, ms):
        i = d['iteration']
        good &= want(d['keys'] == ['iteration'] + MEGATRON[1:] + PLAIT,
                     'iteration %d: Megatron\'s fields in Megatron\'s order, then plait\'s' % i)
        good &= want(i == m['iteration'] and int(d['consumed samples']) == m['consumed_samples']
                     and int(d['global batch size']) == 8 and d['train_iters'] == 6,
                     'iteration %d: iteration, consumed samples, global batch size' % i)
        # Megatron prints the optimizer's lr after the scheduler stepped: the next
        # iteration's (the metrics' lr is the one the iteration ran with)
        nxt = [n for n in ms if n['iteration'] == i + 1]
        good &= want(not nxt or d['learning rate'] == '%.6E' % nxt[0]['lr'],
                     'iteration %d: the learning rate is the next iteration\'s' % i)
        good &= want(d['lm loss'] == '%.6E' % m['lm_loss'] and
                     d['grad norm'] == '%.3f' % m['grad_norm'] and d['loss scale'] == '1.0',
                     'iteration %d: lm loss, grad norm, loss scale' % i)
        good &= want(int(d['number of skipped iterations']) == 0 and
                     int(d['number of nan iterations']) == 0, 'iteration %d: no skipped, no nan' % i)
        # Megatron's FLOPs over the seconds per iteration and the world size; the metrics
        # carry ms_per_iter rounded to 1e-3 ms (relative 5e-4 / ms) and the throughput
        # to 6 digits; the line prints it to 3 decimals
        tf = F / (m['ms_per_iter'] / 1e3 * 1e12 * world)
        tol = (0.0005 / m['ms_per_iter'] + 1e-6) * tf
        good &= want(abs(m['tflops_per_gpu'] - tf) <= tol and
                     abs(float(d['throughput per GPU (TFLOP/s/GPU)']) - m['tflops_per_gpu'])
                     <= 0.0005 + 1e-9,
                     'iteration %d: throughput per GPU = Megatron\'s FLOPs / (s x 1e12 x world %d)'
                     % (i, world))
        mfu = float(d['MFU'].rstrip('%'))
        good &= want(0 < mfu <= 100 and abs(mfu - 100 * m['mfu']) <= 0.051,
                     'iteration %d: MFU in (0, 100] and the metrics\' value' % i)
    sys.exit(0 if good else 1)
if mode == 'window':
    # the line at iteration 3 and 6 of a --log-interval 3 run: the mean of the three
    # iterations' losses of the --log-interval 1 run (the same seed and data)
    l3, m1 = lines(sys.argv[2]), [json.loads(l) for l in open(sys.argv[3]) if '"lm_loss"' in l]
    loss = [m['lm_loss'] for m in m1]
    ok = [d['iteration'] for d in l3] == [3, 6]
    for d in l3:
        i = d['iteration']
        ok &= d['lm loss'] == '%.6E' % (sum(loss[i - 3:i]) / 3)
    sys.exit(0 if ok else 1)
if mode == 'mfu_max':
    sys.exit(0 if all(float(d['MFU'].rstrip('%')) <= 100 for d in lines(sys.argv[2])) else 1)
PYEOF
check "one rank: every field parsed and checked" $PY "$TMP/parse.py" fields "$TMP/l1.log" "$TMP/l1.jsonl" 1
check "two ranks: every field parsed and checked, throughput divided by world 2" \
    $PY "$TMP/parse.py" fields "$TMP/dp2.log" "$TMP/dp2.jsonl" 2
check "--log-interval 3: lm loss is the mean of the window's three losses (Megatron's)" \
    $PY "$TMP/parse.py" window "$TMP/l3.log" "$TMP/l1.jsonl"

# ---- DeepSpeed's throughput line ------------------------------------------------------
echo '{"steps_per_print": 2}' > "$TMP/ds.json"
check "with a DeepSpeed config: trains" run ds 1 --deepspeed_config "$TMP/ds.json"
DSRE='^\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8},[0-9]{3}\] \[INFO\] \[plait\] epoch=0/micro_step=[0-9]+/global_step=[0-9]+, RunningAvgSamplesPerSec=[0-9.e+-]+, CurrSamplesPerSec=[0-9.e+-]+, MemAllocated=[0-9.]+GB, MaxMemAllocated=[0-9.]+GB$'
check "DeepSpeed's line in DeepSpeed's format" grep -qE "$DSRE" "$TMP/ds.log"
check "... every steps_per_print (2) global steps from the third, micro_step = 4 micro-batches x step" \
    test "$(grep -oE 'micro_step=[0-9]+/global_step=[0-9]+' "$TMP/ds.log" | tr '\n' ' ')" = \
    "micro_step=16/global_step=4 micro_step=24/global_step=6 "
check "no DeepSpeed line without a DeepSpeed config" bash -c "! grep -q SamplesPerSec '$TMP/l1.log'"

# ---- the GEMM peak -----------------------------------------------------------------------
rm -f "$TMP/peak.json"
check "a run writes the peak cache" env PLAIT_PEAK_CACHE="$TMP/peak.json" bash -c \
    "'$PLAIT' train ${MODEL[*]} --log-interval 1 > '$TMP/p1.log' 2>&1 && test -s '$TMP/peak.json'"
check "... keyed by CPU model, threads and precision, holding the banner's peak" $PY - "$TMP/peak.json" "$TMP/p1.log" <<'PYEOF'
import json, re, sys
d = json.load(open(sys.argv[1]))
(k, v), = d.items()
banner = re.search(r'GEMM peak \(MFU\'s denominator\): ([0-9.]+) GFLOP/s', open(sys.argv[2]).read())
sys.exit(0 if re.fullmatch(r'.+ \| 1 threads \| fp32', k) and banner and
         abs(v / 1e9 - float(banner.group(1))) < 0.051 else 1)
PYEOF
KEY=$($PY -c 'import json,sys; print(list(json.load(open(sys.argv[1])))[0])' "$TMP/peak.json")
$PY -c 'import json,sys; json.dump({sys.argv[2]: 1e15, "other": 5}, open(sys.argv[1], "w"))' \
    "$TMP/peak.json" "$KEY"
check "a higher cached peak is the denominator and stays (and other keys stay)" \
    env PLAIT_PEAK_CACHE="$TMP/peak.json" bash -c "'$PLAIT' train ${MODEL[*]} --log-interval 1 > '$TMP/p2.log' 2>&1 &&
      grep -q 'peak (MFU.s denominator): 1000000.0 GFLOP/s' '$TMP/p2.log' &&
      grep -q 'MFU: 0.0%' '$TMP/p2.log' &&
      $PY -c 'import json,sys; d = json.load(open(sys.argv[1])); sys.exit(d != {sys.argv[2]: 1e15, \"other\": 5})' '$TMP/peak.json' '$KEY'"
rm -f "$TMP/peak.json"
check "a peak below the model's rate: a warning, MFU 100%, never above" \
    env PLAIT_PEAK_CACHE="$TMP/peak.json" PLAIT_FAULT_PEAK=1000 bash -c \
    "'$PLAIT' train ${MODEL[*]} --log-interval 1 > '$TMP/p3.log' 2>&1 &&
     grep -q 'exceeds the GEMM peak 0.0 GFLOP/s, which was therefore wrong' '$TMP/p3.log' &&
     grep -q 'MFU: 100.0%' '$TMP/p3.log' && $PY '$TMP/parse.py' mfu_max '$TMP/p3.log'"
check "... and the raised peak is cached" $PY -c '
import json, sys; (v,) = json.load(open(sys.argv[1])).values(); sys.exit(0 if v > 1000 else 1)' "$TMP/peak.json"
summary progress
