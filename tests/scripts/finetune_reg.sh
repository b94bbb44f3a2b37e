#!/usr/bin/env bash
# plait finetune --task regression: a tiny BERT (from --seed; the BERT vocabulary) regresses
# RDKit's TPSA of real molecules (data/smiles/first_5K.smi, the rule of
# scripts/derive_smiles_tpsa.py): one process, then TP 2, PP 2 and DP 2 give its training losses,
# validation and test figures and final parameters (dropout on). RMSE, MAE, Pearson and
# Spearman equal numpy's and scipy's on the predictions file; the top-k checkpoints by
# val_rmse are the lowest; plait evaluate reproduces the predictions under PP 2 from the
# saved target scale. Errors name their flag or file:line.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1
VOCAB="$PLAIT_DATA/bert/vocab.txt"
MODEL=(--vocab-file "$VOCAB" --tokenizer-type BertWordPieceCase --num-layers 2
       --hidden-size 32 --num-attention-heads 4 --seq-length 48 --seed 11)
$PY "$ROOT/scripts/derive_smiles_tpsa.py" "$PLAIT_DATA/smiles/first_5K.smi" "$TMP" >/dev/null
{ head -n 1 "$TMP/smiles-tpsa.train.tsv"; sed -n '2,49p' "$TMP/smiles-tpsa.train.tsv"; } >"$TMP/train.tsv"
{ head -n 1 "$TMP/smiles-tpsa.dev.tsv"; sed -n '2,22p' "$TMP/smiles-tpsa.dev.tsv"; } >"$TMP/valid.tsv"
{ head -n 1 "$TMP/smiles-tpsa.dev.tsv"; sed -n '23,36p' "$TMP/smiles-tpsa.dev.tsv"; } >"$TMP/test.tsv"

FT=(--task regression --train-data "$TMP/train.tsv" --valid-data "$TMP/valid.tsv"
    --test-data "$TMP/test.tsv" --header "${MODEL[@]}" --micro-batch-size 8
    --global-batch-size 16 --epochs 2 --lr 1e-3 --lr-decay-style linear --eval-interval 2
    --log-interval 1)
ft() { # NAME NP TP PP FLAGS...
    local name=$1 np=$2 tp=$3 pp=$4; shift 4
    rm -rf "$TMP/$name"
    timeout -k 5 120 mpirun.openmpi -n "$np" "$PLAIT" finetune "${FT[@]}" "$@" \
        --tensor-model-parallel-size "$tp" --pipeline-model-parallel-size "$pp" \
        --save "$TMP/$name" >"$TMP/$name.log" 2>&1
}
jl() { echo "$TMP/$1/metrics.jsonl"; }
check "one process: 2 epochs (6 iterations), the 2 best by val_rmse kept" \
    ft one 1 1 1 --save-top-k 2 --monitor val_rmse
check "the head is the pooler and a 1-row classification_head (task regression)" bash -c "
    '$PLAIT' ckpt inspect '$TMP/one' >'$TMP/inspect.txt' &&
    grep -q '\"task\":\"regression\",\"num_classes\":1' '$TMP/inspect.txt' &&
    grep -qE '^ +pooler.dense.weight +32 x 32 ' '$TMP/inspect.txt' &&
    grep -qE '^ +classification_head.weight +1 x 32 ' '$TMP/inspect.txt'"
check "the training targets' mean and population std standardise them (target_scale.txt)" $PY -c "
import csv, numpy as np
y = np.array([float(r['tpsa']) for r in csv.DictReader(open('$TMP/train.tsv'), delimiter='\t')])
m, s = map(float, open('$TMP/one/target_scale.txt').read().split())
assert len(y) == 48 and abs(m - y.mean()) < 1e-12 * abs(m) and abs(s - y.std()) < 1e-12 * s, (m, s)"
check "RMSE, MAE, R², Pearson and Spearman equal numpy's and scipy's on the predictions files" $PY -c "
import csv, json, numpy as np
from scipy import stats
d = '$TMP/one'
m = [json.loads(l) for l in open(d + '/metrics.jsonl')]
for split, key, src in (('validation', 'val', 'valid'), ('test', 'test', 'test')):
    rows = list(csv.DictReader(open(f'{d}/{split}_predictions.tsv'), delimiter='\t'))
    gold = list(csv.DictReader(open(f'$TMP/{src}.tsv'), delimiter='\t'))
    t = np.array([float(r['target']) for r in rows]); p = np.array([float(r['prediction']) for r in rows])
    assert list(t) == [float(g['tpsa']) for g in gold], split
    last = [x for x in m if key + '_rmse' in x][-1]
    want = {'rmse': np.sqrt(np.mean((t - p) ** 2)), 'mae': np.mean(np.abs(t - p)),
            'pearson': np.corrcoef(t, p)[0, 1], 'spearman': stats.spearmanr(t, p).correlation,
            'r2': 1 - np.sum((t - p) ** 2) / np.sum((t - t.mean()) ** 2)}
    for k, v in want.items():  # predictions are written with 17 significant digits
        assert abs(last[key + '_' + k] - v) <= 1e-9 * max(1, abs(v)), (split, k, last[key + '_' + k], v)
    print(split, {k: round(float(v), 4) for k, v in want.items()})
"
check "the Markdown reports hold the metrics and the table a row per evaluation" bash -c "
    grep -q '^| spearman | ' '$TMP/one/test_report.md' &&
    [ \"\$(grep -c '| validation |' '$TMP/one/evaluations.md')\" = 4 ] &&
    grep -q '| RMSE | MAE | Pearson | Spearman |' '$TMP/one/evaluations.md'"
check "--save-top-k 2 --monitor val_rmse: the two lowest kept, as regression checkpoints" $PY -c "
import json, os
m = [json.loads(l) for l in open('$(jl one)') if 'val_rmse' in l]
want = sorted(m, key=lambda x: (x['val_rmse'], x['iteration']))[:2]
names = {'bert--val_rmse=%.4f-epoch=%d-step=%d' % (x['val_rmse'], x['epoch'], x['iteration']) for x in want}
have = set(os.listdir('$TMP/one/checkpoints'))
assert len(m) == 4 and have == names, (have, names)
for n in names:
    d = '$TMP/one/checkpoints/' + n
    it = int(open(d + '/latest_checkpointed_iteration.txt').read())
    man = json.load(open(d + '/iter_%07d/manifest.json' % it))
    assert man['model']['task'] == 'regression' and man['model']['num_classes'] == 1
    assert os.path.exists(d + '/target_scale.txt')
"

same_reg() { # A B: losses within 2e-5 relative, validation and test loss within 1e-5, RMSE too
    paste <(losses "$(jl "$1")") <(losses "$(jl "$2")") | awk '
        { c++; d = $1 - $2; if (d < 0) d = -d; if (d > 2e-5 * $2) bad++ }
        END { exit !(c == 6 && !bad) }' &&
    $PY -c "
import json
def ev(p): return [json.loads(l) for l in open(p) if '_rmse' in l]
a, b = ev('$(jl "$1")'), ev('$(jl "$2")')
assert len(a) == len(b) == 5, (len(a), len(b))
for x, y in zip(a, b):
    k = 'val' if 'val_rmse' in x else 'test'
    assert x['iteration'] == y['iteration'], (x, y)
    for f in ('loss', 'rmse', 'mae'):
        assert abs(x[k + '_' + f] - y[k + '_' + f]) <= 1e-5 * abs(y[k + '_' + f]), (f, x, y)
"
}
for lay in "tp2 2 2 1" "pp2 2 1 2" "dp2 2 1 1"; do
    read -r name np tp pp <<<"$lay"
    dp=$((np / tp / pp))
    check "$name runs" ft "$name" "$np" "$tp" "$pp"
    check "$name asserts its layout" grep -q "world $np = tp $tp x dp $dp x pp $pp" "$TMP/$name.log"
    check "$name: losses, validation and test figures equal one process's" same_reg one "$name"
    check "$name: final parameters equal one process's" \
        $PY "$CK" same "$TMP/$name/iter_0000006" "$TMP/one/iter_0000006"
done

check "plait evaluate: the regression checkpoint on the validation file under PP 2" \
    timeout -k 5 120 mpirun.openmpi -n 2 "$PLAIT" evaluate --load "$TMP/one" \
    --test-data "$TMP/valid.tsv" --header --pipeline-model-parallel-size 2 --micro-batch-size 4 \
    --results-dir "$TMP/ev"
check "plait evaluate: the run's last validation predictions, bit for bit" \
    cmp "$TMP/one/validation_predictions.tsv" "$TMP/ev/test_predictions.tsv"
check_fails "--monitor val_acc is refused for regression" "regression reports val_loss" \
    "$PLAIT" finetune "${FT[@]}" --monitor val_acc --save "$TMP/x"
printf 'smiles\ttpsa\nCCO\t20.23\nCCN\tabc\n' >"$TMP/bad.tsv"
check_fails "a target that is not a number names file:line" "bad.tsv:3: target 'abc'" \
    "$PLAIT" finetune "${FT[@]}" --train-data "$TMP/bad.tsv" --save "$TMP/x"
summary finetune_reg
