#!/usr/bin/env bash
# plait under Slurm the way clusters run it: a one-node Slurm (munge + slurmctld + slurmd,
# tests/lib/slurm.sh) in the scratch directory, examples/slurm/train_gpt.sbatch submitted
# with `sbatch --parsable`, polled until it ends (bounded), then:
#   - the job COMPLETED with exit code 0:0;
#   - plait's banner shows the world size asked for (4 ranks; the singleton pitfall of a
#     wrong --mpi plugin would show world 1) and one OpenMP thread (--cpus-per-task=1);
#   - its 10 losses are bit-identical to `mpirun -n 4` with the same flags (the example's
#     own argument list, from DRY_RUN=1). Same binary, same rank count, same threads, same
#     MPI library and transport (ob1/vader): only the launcher differs, and the launcher
#     does not enter the arithmetic, so any difference is a bug, not rounding.
#   - the same for MPICH (build-mpich/plait, srun --mpi=pmi2) at 2 ranks against
#     mpirun.mpich -n 2 (MPICH cannot yield when oversubscribed, see mpi-slurm.md 4);
#   - a job whose plait fails (unknown flag) ends FAILED with a non-zero exit code.
# Slurm not starting is a failure with its logs, never a skip. Teardown in an EXIT trap.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
source "$ROOT/tests/lib/slurm.sh"

SBATCH_SCRIPT=$ROOT/examples/slurm/train_gpt.sbatch
JOB_LIMIT=${SLURM_JOB_LIMIT:-120} # seconds a job may take from submission to its end
MPICH_PLAIT=$ROOT/build-mpich/plait
: >"$TMP/timings"
on_exit slurm_down

# The run: train_dp.sh's model, as the example's environment variables.
kjv_dataset 2000 "$TMP/kjv"
export NUM_LAYERS=2 HIDDEN_SIZE=64 NUM_ATTENTION_HEADS=4 SEQ_LENGTH=64 MICRO_BATCH_SIZE=1
export GLOBAL_BATCH_SIZE=8 TRAIN_ITERS=10 LR=1e-3 MIN_LR=1e-4 LR_WARMUP_ITERS=2 SEED=7
export LOG_INTERVAL=1 EVAL_ITERS=0 SPLIT=98,2,0 DATA_PATH=$TMP/kjv_text_document
export VOCAB_FILE=$PLAIT_DATA/gpt2/encoder.json MERGE_FILE=$PLAIT_DATA/gpt2/vocab.bpe
unset OMP_NUM_THREADS METRICS_FILE EXTRA_ARGS CHECKPOINT_PATH PLAIT_BIN PLAIT_MPI
# An enclosing Slurm job's variables must not leak into ours (or into the mpirun runs).
for v in $(compgen -e | grep -E '^SLURM_' | grep -v '^SLURM_CONF$'); do unset "$v"; done

timed() { # LABEL COMMAND...: runs it, appends its wall time to $TMP/timings
    local label=$1 t0 rc; shift
    t0=$(date +%s.%N)
    "$@"; rc=$?
    awk -v t0="$t0" -v t1="$(date +%s.%N)" -v l="$label" -v rc=$rc \
        'BEGIN { printf "    %6.2f s  %s (rc %d)\n", t1 - t0, l, rc }' >>"$TMP/timings"
    return $rc
}

# reference NAME MPIRUN N BIN: the example's arguments under mpirun, one thread per rank.
reference() {
    local name=$1 mpirun=$2 n=$3 bin=$4 args
    mapfile -t args < <(DRY_RUN=1 bash "$SBATCH_SCRIPT")
    [ ${#args[@]} -gt 20 ] || { echo "DRY_RUN printed ${#args[@]} arguments"; return 1; }
    OMP_NUM_THREADS=1 timed "$name: $mpirun -n $n" timeout -k 5 120 \
        "$mpirun" -n "$n" "$bin" train "${args[@]}" --metrics-file "$TMP/$name.jsonl" \
        >"$TMP/$name.log" 2>&1 || { tail -n 20 "$TMP/$name.log"; return 1; }
}

# job NAME PLAIT_MPI NTASKS BIN [EXTRA_ARGS]: submits the example and waits for its end;
# leaves $TMP/NAME.out (the job's output), NAME.state (scontrol show job), NAME.jsonl.
job() {
    local name=$1 mpi=$2 n=$3 bin=$4 extra=${5:-}
    rm -f "$TMP/$name.out" "$TMP/$name.jsonl"
    # Without OMPI_MCA_mpi_yield_when_idle: the script must set it itself when oversubscribed.
    (
        unset OMPI_MCA_mpi_yield_when_idle
        export PLAIT_MPI=$mpi PLAIT_BIN=$bin METRICS_FILE=$TMP/$name.jsonl EXTRA_ARGS=$extra
        slurm_job "$TMP/$name.state" "$JOB_LIMIT" --job-name="$name" --output="$TMP/$name.out" \
            --nodes=1 --ntasks-per-node="$n" --cpus-per-task=1 --time=00:05:00 "$SBATCH_SCRIPT"
    )
    local rc=$?
    tail -n 15 "$TMP/$name.out" 2>/dev/null
    return $rc
}

completed() { # NAME: the job ended COMPLETED with exit code 0:0
    grep -q 'JobState=COMPLETED ' "$TMP/$1.state" && grep -q ' ExitCode=0:0 ' "$TMP/$1.state" ||
        { cat "$TMP/$1.state"; tail -n 30 "$TMP/$1.out"; return 1; }
}
failed_job() { # NAME PATTERN: the job ended FAILED, non-zero exit, its output matching PATTERN
    grep -q 'JobState=FAILED ' "$TMP/$1.state" && ! grep -q ' ExitCode=0:0 ' "$TMP/$1.state" &&
        grep -qE -- "$2" "$TMP/$1.out" || { cat "$TMP/$1.state"; tail -n 20 "$TMP/$1.out"; return 1; }
}
banner() { # FILE WORLD LIBRARY: plait's banner shows that world size, MPI library, 1 thread
    grep -E "\| $3 [0-9.]+ \| world $2 = tp 1 x dp $2 x pp 1 \| 1 threads per rank" "$1" ||
        { grep -E 'world|error|warning' "$1" | head; return 1; }
}
bit_identical() { # A B: the same 10 losses, printed digit for digit
    paste <(losses "$TMP/$1.jsonl") <(losses "$TMP/$2.jsonl") | tee "$TMP/$1-$2.losses"
    [ "$(wc -l <"$TMP/$1-$2.losses")" -eq 10 ] && awk '$1 != $2 { bad++ } END { exit bad > 0 }' \
        "$TMP/$1-$2.losses"
}

check "the example script is valid bash" bash -n "$SBATCH_SCRIPT"
failed_before=$_fail
check "slurm starts (munge, slurmctld, slurmd; node idle)" timed "slurm_up" slurm_up "$TMP/slurm" 8
if [ "$_fail" -ne "$failed_before" ]; then # not a skip: show everything, stop
    echo "slurm did not start:"
    sed 's/^/    /' "$TMP/check.out"
    summary slurm
    exit 1
fi

# OpenMPI: srun --mpi=pmix, 4 ranks on 2 cores (oversubscribed: the script sets yield).
check "mpirun -n 4 reference run" reference mpirun4 mpirun.openmpi 4 "$PLAIT"
check "sbatch OpenMPI job (4 tasks, srun --mpi=pmix) ends" \
    timed "sbatch ompi 4 tasks (submit to end)" job ompi4 pmix 4 "$PLAIT"
check "OpenMPI job COMPLETED, exit 0:0" completed ompi4
check "OpenMPI job: banner shows world 4, OpenMPI, 1 thread" banner "$TMP/ompi4.out" 4 OpenMPI
cores=$(env -u OMP_NUM_THREADS nproc)
if [ "$cores" -lt 4 ]; then
    check "OpenMPI job: script set yield when idle (4 ranks > $cores cores)" grep -q \
        "oversubscribed: 4 ranks x 1 threads > $cores cores: OMPI_MCA_mpi_yield_when_idle=1" \
        "$TMP/ompi4.out"
else
    check "OpenMPI job: not oversubscribed, yield left alone" \
        bash -c "! grep -q oversubscribed '$TMP/ompi4.out'"
fi
check "OpenMPI job: losses bit-identical to mpirun -n 4" bit_identical mpirun4 ompi4

# MPICH: srun --mpi=pmi2, 2 ranks.
check "MPICH build exists (make mpich-build)" test -x "$MPICH_PLAIT"
check "mpirun.mpich -n 2 reference run" reference mpich_mpirun2 mpirun.mpich 2 "$MPICH_PLAIT"
check "sbatch MPICH job (2 tasks, srun --mpi=pmi2) ends" \
    timed "sbatch mpich 2 tasks (submit to end)" job mpich2 pmi2 2 "$MPICH_PLAIT"
check "MPICH job COMPLETED, exit 0:0" completed mpich2
check "MPICH job: banner shows world 2, MPICH, 1 thread" banner "$TMP/mpich2.out" 2 MPICH
check "MPICH job: losses bit-identical to mpirun.mpich -n 2" bit_identical mpich_mpirun2 mpich2

# A failing rank: the job must end FAILED (not hang, not COMPLETED).
check "a job whose plait fails ends" timed "sbatch failing job" job bad pmix 2 "$PLAIT" --no-such-flag
check "failing job ends FAILED with plait's message" failed_job bad "no-such-flag"

check "slurm shuts down" timed "slurm_down" slurm_down
echo "timings:"
cat "$TMP/timings"
for f in "$TMP"/*.losses; do
    [ -f "$f" ] || continue
    echo "losses $(basename "$f" .losses | sed 's/-/ vs /'):"
    sed 's/^/    /' "$f"
done
summary slurm
