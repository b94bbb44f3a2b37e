#!/usr/bin/env bash
# plait launch inside a Slurm allocation (a throw-away one-node Slurm, tests/lib/slurm.sh):
# a batch job that runs `plait launch --nproc_per_node 2 train ...` gets srun --mpi=pmix
# with 2 tasks (with 4 tasks on fewer cores, OMPI_MCA_mpi_yield_when_idle=1, which srun
# does not set), and one that runs `plait launch train ...` gets the allocation's tasks;
# with the MPICH build, srun --mpi=pmi2; each job must COMPLETE, print the srun command,
# and train with the world size asserted from plait's banner. Slurm not starting is a failure, never a skip.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
source "$ROOT/tests/lib/slurm.sh"
on_exit slurm_down
for v in $(compgen -e | grep -E '^SLURM_' | grep -v '^SLURM_CONF$'); do unset "$v"; done
export OMP_NUM_THREADS=1
kjv_dataset 300 "$TMP/kjv"
MODEL=(--num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 32
       --micro-batch-size 1 --global-batch-size 4 --train-iters 3 --lr 1e-3 --min-lr 1e-4
       --lr-decay-style cosine --lr-warmup-iters 1 --log-interval 1 --eval-iters 0
       --data-path "$TMP/kjv_text_document" --split 98,2,0 "${GPT2[@]}" --seed 7)

batch() { # NAME TASKS LAUNCH-ARGS...: an sbatch script running plait launch ($BIN, default
          # $PLAIT), submitted and waited for
    local name=$1 n=$2; shift 2
    { echo '#!/bin/bash'; printf '%q ' "${BIN:-$PLAIT}" launch "$@" train "${MODEL[@]}"; echo; } >"$TMP/$name.sh"
    slurm_job "$TMP/$name.state" 120 --job-name="$name" --output="$TMP/$name.out" --nodes=1 \
        --ntasks-per-node="$n" --cpus-per-task=1 --time=00:05:00 "$TMP/$name.sh"
}
completed() { grep -q 'JobState=COMPLETED ' "$TMP/$1.state" && grep -q ' ExitCode=0:0 ' "$TMP/$1.state" ||
    { cat "$TMP/$1.state"; tail -n 30 "$TMP/$1.out"; return 1; }; }

failed_before=$_fail
check "slurm starts" slurm_up "$TMP/slurm" 8
if [ "$_fail" -ne "$failed_before" ]; then sed 's/^/    /' "$TMP/check.out"; summary launch_slurm; exit 1; fi
check "job: plait launch --nproc_per_node 2 train ends" batch np2 2 --nproc_per_node 2
check "  COMPLETED, exit 0:0" completed np2
check "  it printed srun --mpi=pmix with 2 tasks" \
    grep -qF "plait launch: srun -K --mpi=pmix --nodes=1 --ntasks-per-node=2 $PLAIT train" "$TMP/np2.out"
check "  world 2" grep -q "world 2 = tp 1 x dp 2 x pp 1" "$TMP/np2.out"
check "job: plait launch --nproc_per_node 4 (on 2 cores) ends" batch np4 4 --nproc_per_node 4
check "  COMPLETED, exit 0:0" completed np4
if [ "$(env -u OMP_NUM_THREADS nproc)" -lt 4 ]; then
    check "  it asked OpenMPI to yield (srun does not)" grep -qF "OMPI_MCA_mpi_yield_when_idle=1 (4 ranks per node" "$TMP/np4.out"
else
    check "  not oversubscribed: yield left alone" sh -c "! grep -q OMPI_MCA_mpi_yield_when_idle '$TMP/np4.out'"
fi
check "  world 4" grep -q "world 4 = tp 1 x dp 4 x pp 1" "$TMP/np4.out"
check "job: plait launch train (the allocation's 4 tasks) ends" batch alloc4 4
check "  COMPLETED, exit 0:0" completed alloc4
check "  it printed srun without counts" grep -qF "plait launch: srun -K --mpi=pmix $PLAIT train" "$TMP/alloc4.out"
check "  world 4" grep -q "world 4 = tp 1 x dp 4 x pp 1" "$TMP/alloc4.out"
MPICH_PLAIT=$ROOT/build-mpich/plait
if [ -x "$MPICH_PLAIT" ]; then
    BIN=$MPICH_PLAIT
    check "job: the MPICH build's plait launch --nproc_per_node 2 ends" batch mpich2 2 --nproc_per_node 2
    unset BIN
    check "  COMPLETED, exit 0:0" completed mpich2
    check "  it printed srun --mpi=pmi2" \
        grep -qF "plait launch: srun -K --mpi=pmi2 --nodes=1 --ntasks-per-node=2 $MPICH_PLAIT train" "$TMP/mpich2.out"
    check "  world 2 under MPICH" grep -qE "MPICH [0-9.]+ \| world 2 = tp 1 x dp 2 x pp 1" "$TMP/mpich2.out"
fi
check "slurm shuts down" slurm_down
summary launch_slurm
