#!/usr/bin/env bash
# examples/megamolbart/ run as MegaMolBART's users run theirs: the one-node Slurm of
# tests/lib/slurm.sh, `sbatch run_training.sbatch` with the example's own YAML config
# (MegaMolBART's conf/ layout) and DeepSpeed JSON, MegaMolBART's "zinc_id,smiles" CSV:
#   - a 40-iteration job at 2 tasks COMPLETES (exit 0:0), plait's banner shows world 2 =
#     tp 1 x dp 2 x pp 1 (the task count, with ZeRO 1 from the JSON), the loss falls;
#   - the seed's gotcha: the run extended to 60 train_iters / lr_decay_iters resumes only
#     when a schedule is chosen. Without RESUME_SCHEDULE the job FAILS naming the decay
#     length and both flags; with RESUME_SCHEDULE=override it COMPLETES, the log says what
#     changed (decay 320 -> 480 samples) and iterations 41..60 follow the checkpoint.
# Slurm not starting is a failure with its logs, never a skip.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
source "$ROOT/tests/lib/slurm.sh"
on_exit slurm_down
for v in $(compgen -e | grep -E '^SLURM_' | grep -v '^SLURM_CONF$'); do unset "$v"; done
SBATCH_SCRIPT=$ROOT/examples/megamolbart/run_training.sbatch

# MegaMolBART's CSV layout from the shipped molecules, and a vocabulary of augmented SMILES.
{ echo "zinc_id,smiles"; head -n 1000 "$PLAIT_DATA/smiles/first_5K.smi" | awk '{ print "ZINC" NR "," $1 }'; } >"$TMP/x000.csv"
"$PLAIT" data smiles-augment --input "$TMP/x000.csv" --csv-column 1 --skip-header --num 5 \
    --keep-input 2>/dev/null | tr '\t' '\n' >"$TMP/aug.txt"
check "a SMILES vocabulary" "$PLAIT" data build-vocab --tokenizer-type SmilesTokenizer \
    --input "$TMP/aug.txt" --output "$TMP/megamolbart.vocab"
export EXAMPLE_DIR=$ROOT/examples/megamolbart PLAIT_BIN=$PLAIT PLAIT_MPI=pmix OMP_NUM_THREADS=1
export DATA_PATH=$TMP/x000.csv VOCAB_FILE=$TMP/megamolbart.vocab CHECKPOINT_PATH=$TMP/ckpt
unset TRAIN_ITERS LR_DECAY_ITERS RESUME_SCHEDULE EXTRA_ARGS TP PP

job() { # NAME [VAR=VALUE...]: submits the example with those variables, waits for its end
    local name=$1; shift
    (
        unset OMPI_MCA_mpi_yield_when_idle
        export METRICS_FILE=$TMP/$name.jsonl "$@"
        slurm_job "$TMP/$name.state" 120 --job-name="$name" --output="$TMP/$name.out" \
            --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 --time=00:05:00 "$SBATCH_SCRIPT"
    )
}
completed() { grep -q 'JobState=COMPLETED ' "$TMP/$1.state" && grep -q ' ExitCode=0:0 ' "$TMP/$1.state" ||
    { cat "$TMP/$1.state"; tail -n 30 "$TMP/$1.out"; return 1; }; }
failed_job() { # NAME PATTERN
    grep -q 'JobState=FAILED ' "$TMP/$1.state" && grep -qF -- "$2" "$TMP/$1.out" ||
        { cat "$TMP/$1.state"; tail -n 20 "$TMP/$1.out"; return 1; }
}
loss_falls() { # NAME: the mean of the last 5 losses is below 70% of the first
    losses "$TMP/$1.jsonl" | awk 'NR == 1 { f = $1 } { l[NR] = $1 } END {
        for (i = NR - 4; i <= NR; i++) s += l[i]; m = s / 5; print "first " f ", last 5 mean " m;
        exit !(NR >= 10 && m < 0.7 * f) }'
}
iterations() { # NAME FIRST LAST: the metrics hold exactly iterations FIRST..LAST
    [ "$(grep '"lm_loss"' "$TMP/$1.jsonl" | grep -o '^{"iteration": [0-9]*' | awk '{ print $2 }' | tr '\n' ' ')" = \
      "$(seq "$2" "$3" | tr '\n' ' ')" ]
}

check "the example script is valid bash" bash -n "$SBATCH_SCRIPT"
check "the DeepSpeed JSON is valid JSON" /usr/bin/python3 -m json.tool "$EXAMPLE_DIR/ds_config.json"
failed_before=$_fail
check "slurm starts" slurm_up "$TMP/slurm" 8
if [ "$_fail" -ne "$failed_before" ]; then
    sed 's/^/    /' "$TMP/check.out"
    summary megamolbart_slurm
    exit 1
fi

check "sbatch run_training.sbatch (2 tasks, 40 iterations) ends" job first
check "  COMPLETED, exit 0:0" completed first
check "  world 2 = tp 1 x dp 2 x pp 1 (the Slurm task count)" grep -q "world 2 = tp 1 x dp 2 x pp 1" "$TMP/first.out"
check "  ZeRO stage 1 and micro-batch 4 from ds_config.json" sh -c \
    "grep -q 'ZeRO stage 1' '$TMP/first.out' && grep -q 'batch: micro 4 x 1 micro-batches x dp 2 = global 8; 40 iterations' '$TMP/first.out'"
check "  the YAML's sizes: bart, 2 layers, hidden 64, 4 heads, seq 64" grep -q \
    "model: bart, 2 layers, hidden 64, 4 heads .*seq 64" "$TMP/first.out"
check "  iterations 1..40" iterations first 1 40
check "  the loss falls" loss_falls first
check "  checkpoint at iteration 40" test -d "$TMP/ckpt/iter_0000040"

check "extended to 60 iterations without choosing a schedule: the job ends" \
    job extend_refused TRAIN_ITERS=60 LR_DECAY_ITERS=60
check "  FAILED, naming the decay length (480 in this run, 320 in the checkpoint)" failed_job extend_refused \
    "the decay length (samples: --lr-decay-iters, else --train-iters, x the global batch) is 480 in this run and 320 in the checkpoint"
check "  and both ways out" failed_job extend_refused \
    "--override-opt_param-scheduler keeps this run's, --use-checkpoint-opt_param-scheduler the checkpoint's"
check "extended with RESUME_SCHEDULE=override: the job ends" \
    job extend TRAIN_ITERS=60 LR_DECAY_ITERS=60 RESUME_SCHEDULE=override
check "  COMPLETED, exit 0:0" completed extend
check "  resumed from iteration 40" grep -q "loaded checkpoint .*ckpt iteration 40" "$TMP/extend.out"
check "  the log says what changed" grep -q \
    "LR schedule: the decay length (samples: --lr-decay-iters, else --train-iters, x the global batch) 320 -> 480 (--override-opt_param-scheduler: this run's flags)" \
    "$TMP/extend.out"
check "  iterations 41..60" iterations extend 41 60
check "  checkpoint at iteration 60" test -d "$TMP/ckpt/iter_0000060"
check "slurm shuts down" slurm_down
summary megamolbart_slurm
