#!/usr/bin/env bash
# Data-parallel equivalence: the same 10 iterations with 1, 2 and 4 ranks
# (OpenMPI, oversubscribed) and 2 ranks under MPICH give the same losses as one
# process without a launcher, within fp32 rounding; with --bf16, 1 and 2 ranks.
# Each run asserts its world size from plait's own banner ("world N = ...").
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
kjv_dataset 2000 "$TMP/kjv"
MODEL=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64
       --micro-batch-size 1 --global-batch-size 8 --train-iters 10 --lr 1e-3 --min-lr 1e-4
       --lr-decay-style cosine --lr-warmup-iters 2 --log-interval 1 --eval-iters 0
       --data-path "$TMP/kjv_text_document" --split 98,2,0 "${GPT2[@]}" --seed 7)

run() { # NAME LAUNCH...: trains with metrics in $TMP/NAME.jsonl
    local name=$1; shift
    timeout -k 5 300 "$@" "${MODEL[@]}" --metrics-file "$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1
}
world_is() { grep -q "world $2 = tp 1 x dp $2 x pp 1" "$TMP/$1.log"; }
# Ranks run single-threaded (OMP_NUM_THREADS=1, as pp.sh and tp.sh): 4 ranks of 2 OpenMP
# threads each on the 2 cores spun against each other (a 10-iteration run took 150 s on
# a busy machine instead of 5 s). One process keeps the default threads.
R1=(env OMP_NUM_THREADS=1)

# Losses agree to 2e-5 relative: the runs sum the same gradients in a different
# order (fp32, ~1e-7 per addition), and Adam carries the difference for 10 steps.
same_losses() { # A B [TOL]
    paste <(losses "$TMP/$1.jsonl") <(losses "$TMP/$2.jsonl") | awk -v n=10 -v tol="${3:-2e-5}" '
        { c++; d = $1 - $2; if (d < 0) d = -d; if (d > tol * $2) bad++ }
        END { exit !(c == n && !bad) }'
}

check "single process trains 10 iterations" run single "$PLAIT" train
check "single process reports world 1" world_is single 1
for n in 1 2 4; do
    check "mpirun -n $n (OpenMPI) runs" run ompi$n "${R1[@]}" mpirun.openmpi -n "$n" "$PLAIT" train
    check "mpirun -n $n asserts world $n" world_is ompi$n "$n"
    check "mpirun -n $n losses equal one process's" same_losses single ompi$n
done
# bf16 (--bf16: GEMM inputs rounded to bf16, fp32 accumulation, fp32 gradient
# all-reduce): the layouts again differ only in the order of the fp32 gradient
# sums (~1e-7 relative), but after each step a weight that close to a bf16
# rounding boundary rounds to the other neighbour (a fraction ~1e-7 / 2^-8 ~ 3e-5
# of them, each off by 2^-8 in its products), and Adam carries that on: 5e-5
# relative over 10 iterations (measured ~2e-6).
check "bf16: single process trains 10 iterations" run single_bf16 "$PLAIT" train --bf16
check "bf16: mpirun -n 2 runs" run ompi2_bf16 "${R1[@]}" mpirun.openmpi -n 2 "$PLAIT" train --bf16
check "bf16: mpirun -n 2 asserts world 2" world_is ompi2_bf16 2
check "bf16: mpirun -n 2 losses within 5e-5 of one process's" same_losses single_bf16 ompi2_bf16 5e-5
if [ -x "$ROOT/build-mpich/plait" ]; then
    check "mpirun.mpich -n 2 runs" run mpich2 "${R1[@]}" mpirun.mpich -n 2 "$ROOT/build-mpich/plait" train
    check "mpirun.mpich -n 2 asserts world 2" world_is mpich2 2
    check "MPICH losses equal one process's" same_losses single mpich2
fi
check_fails "global batch not divisible by micro-batch x dp is an error naming the flag" \
    "--global-batch-size 8 is not a multiple of --micro-batch-size 1 x data-parallel size 3" \
    timeout 60 "${R1[@]}" mpirun.openmpi -n 3 "$PLAIT" train "${MODEL[@]}"
summary train_dp
