#!/usr/bin/env bash
# plait generate with tensor parallelism: a checkpoint saved at TP T generates under
# mpirun -n T, each rank loading its mp_rank_XX shard (model/generate.h); a checkpoint
# saved with pipeline stages (PP 2, PP 2 x TP 2) generates the same way, every stage's
# mp_rank_XX_YYY file read into the one model.
#  - GPT trained at TP 1, TP 2 and TP 4 with sequence parallelism (the same model within
#    fp32 rounding: same seed, padded vocabulary 50688 rows in every layout) and Llama
#    (RMSNorm, rope, SwiGLU, 4 query groups) at TP 1 and 2: greedy text under mpirun -n T
#    equals one process's from the TP 1 checkpoint; only rank 0 prints.
#  - tie-free: tests/tools/generate_tp_check compares the TP generator's logits at every
#    position with one process's generator on the same weights (random ones, and the
#    TP 1 checkpoints sliced per rank) within 1e-5, and with the TP checkpoints' own
#    shards (plait generate's loading path) within the training layouts' difference;
#    every rank holds the same logits bit for bit.
#  - a wrong number of ranks for the checkpoint's TP size is refused by name, on every
#    rank, without hanging; a shard only one rank cannot read stops all ranks.
# Every launch runs under a timeout and asserts its world size.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
TOOLS=${PLAIT_TESTTOOLS:-$ROOT/build/testtools}
export OMP_NUM_THREADS=1 # up to 4 ranks share 2 cores
kjv_dataset 2000 "$TMP/kjv"
# 8 heads and 4 query groups divide by TP 4; N = 2 x 32 rows divide by 4 (sequence
# parallelism). lr 1e-2 for 30 iterations: the loss falls from 10.9 to ~6 (still a
# model that mostly repeats frequent tokens), and the layouts stay equal to ~1e-6 in
# the loss.
BASE=(--num-layers 2 --hidden-size 64 --num-attention-heads 8 --seq-length 32
      --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 8 --lr 1e-2
      --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 5 --log-interval 1 --eval-iters 0
      --train-iters 30 --hidden-dropout 0 --attention-dropout 0
      --data-path "$TMP/kjv_text_document" --split 98,2,0 "${GPT2[@]}" --seed 7)
LLAMA=(--model llama --group-query-attention --num-query-groups 4)
PROMPT="And God said"
# Launchers: one process with no launcher at all (as a user runs plait generate), or
# OpenMPI's mpirun. Launcher variables of an enclosing launch must not leak in.
alone() { env -u OMPI_COMM_WORLD_SIZE -u PMI_SIZE -u SLURM_STEP_NUM_TASKS timeout -k 5 60 "$@"; }
ompi() { local n=$1; shift; timeout -k 5 120 mpirun.openmpi -n "$n" "$@"; }

# Megatron pads the vocabulary to a multiple of divisible-by x TP; 512 / TP keeps it
# 50688 rows in every layout, so that the layouts train the same model (tp.sh).
train() { # NAME NP TP FLAGS...: checkpoint in $TMP/NAME, metrics in $TMP/NAME.jsonl
    local name=$1 np=$2 tp=$3; shift 3
    local launch=(ompi "$np"); [ "$np" = 0 ] && launch=(alone)
    rm -rf "${TMP:?}/$name"
    "${launch[@]}" "$PLAIT" train "${BASE[@]}" "$@" --tensor-model-parallel-size "$tp" \
        --make-vocab-size-divisible-by $((512 / tp)) --save "$TMP/$name" \
        --metrics-file "$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1
}
layout_is() { grep -q "world $2 = tp $3 x dp 1 x pp 1$4 |" "$TMP/$1.log"; }
# Losses within 1e-4 relative: the precondition for comparing texts. tp.sh bounds the
# layouts' difference by 2e-5 over 10 iterations at lr 1e-3; at lr 1e-2 Adam's steps turn
# the same rounding differences into larger parameter differences (measured up to 3e-5
# in the loss over these 30 iterations). A wrong layout is off by 1e-3 or more.
same_losses() {
    paste <(losses "$TMP/$1.jsonl") <(losses "$TMP/$2.jsonl") | awk -v n=30 -v tol=1e-4 '
        { c++; d = $1 - $2; if (d < 0) d = -d; if (d > tol * $2) bad++ }
        END { exit !(c == n && !bad) }'
}

gen() { # OUT NP CKPT [FLAGS...]: greedy text of 20 new tokens in $TMP/OUT.txt, stderr in .err
    local out=$1 np=$2 ckpt=$3; shift 3
    local launch=(ompi "$np"); [ "$np" = 0 ] && launch=(alone)
    "${launch[@]}" "$PLAIT" generate --load "$TMP/$ckpt" --prompt "$PROMPT" \
        --max-new-tokens 20 --temperature 0 "$@" >"$TMP/$out.txt" 2>"$TMP/$out.err"
}
# The generation of rank 0 only: one line, the prompt continued by new text.
one_continuation() { [ "$(wc -l <"$TMP/$1.txt")" -eq 1 ] && grep -q "^$PROMPT." "$TMP/$1.txt"; }
gen_world_is() { grep -q "plait generate: world $2 = tp $2 x dp 1 x pp 1" "$TMP/$1.err"; }
quiet() { ! [ -s "$TMP/$1.err" ]; }
same_text() { cmp "$TMP/$1.txt" "$TMP/$2.txt"; }
show() { sed 's/^/    /' "$TMP/$1.txt"; }

tp_check() { # NP ARGS...: generate_tp_check's lines are counted into this suite's
    local np=$1; shift
    ompi "$np" "$TOOLS/generate_tp_check" "$np" "$@" >"$TMP/tpc.out" 2>&1
    cat "$TMP/tpc.out"
    local p f
    read -r p f < <(sed -nE 's/^generate_tp_check: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' \
        "$TMP/tpc.out")
    _pass=$((_pass + ${p:-0})); _fail=$((_fail + ${f:-1}))
}

# ---- the TP generator's logits against one process's, on random weights ---------------
tp_check 2
tp_check 4

# ---- GPT --------------------------------------------------------------------------------
check "gpt: one process trains 30 iterations" train g_tp1 0 1
check "gpt: tp 2 trains under mpirun -n 2" train g_tp2 2 2
check "gpt: tp 2 asserts its layout" layout_is g_tp2 2 2 ""
check "gpt: tp 4 with sequence parallelism trains under mpirun -n 4" train g_tp4 4 4 \
    --sequence-parallel
check "gpt: tp 4 asserts its layout" layout_is g_tp4 4 4 " (sequence parallel)"
check "gpt: tp 2 losses equal one process's" same_losses g_tp1 g_tp2
check "gpt: tp 4 losses equal one process's" same_losses g_tp1 g_tp4

check "gpt: one process generates from the tp 1 checkpoint" gen g1 0 g_tp1
check "gpt: one process prints one continuation" one_continuation g1
check "gpt: one process (no launcher) prints nothing else, as before" quiet g1
show g1
check "gpt: mpirun -n 1 on the tp 1 checkpoint prints the same text" gen g1_mpi 1 g_tp1
check "gpt: mpirun -n 1 asserts world 1" gen_world_is g1_mpi 1
check "gpt: mpirun -n 1 text = one process's" same_text g1 g1_mpi
check "gpt: mpirun -n 2 generates from the tp 2 checkpoint" gen g2 2 g_tp2
check "gpt: mpirun -n 2 asserts world 2 = tp 2" gen_world_is g2 2
check "gpt: tp 2 greedy text = one process's from the tp 1 checkpoint" same_text g1 g2
check "gpt: tp 2: only rank 0 prints" one_continuation g2
check "gpt: mpirun -n 4 generates from the tp 4 (sequence-parallel) checkpoint" gen g4 4 g_tp4
check "gpt: mpirun -n 4 asserts world 4 = tp 4" gen_world_is g4 4
check "gpt: tp 4 greedy text = one process's from the tp 1 checkpoint" same_text g1 g4
check "gpt: tp 4: only rank 0 prints" one_continuation g4

# Tie-free, on trained weights: the tp 1 checkpoint sliced per rank (1e-5), and the TP
# checkpoints' own shards, loaded as plait generate loads them. Those are other
# trainings: Adam turns the layouts' rounding differences into parameter differences of
# up to ~1e-4 relative (tp.sh), measured here as logit differences of 1e-4 to 1e-3;
# 1e-2 keeps clear of that, and a wrong shard, slice or vocabulary block is off by
# order 1.
tp_check 2 --load "$TMP/g_tp1"
tp_check 4 --load "$TMP/g_tp1"
tp_check 2 --load "$TMP/g_tp1" --shards "$TMP/g_tp2" --tol 1e-2
tp_check 4 --load "$TMP/g_tp1" --shards "$TMP/g_tp4" --tol 1e-2

# ---- pipeline checkpoints: every stage's file read into the one model ------------------
# (the manifest says which stage saved each tensor; pl_ckpt_load reads it from there)
check "gpt: pp 2 trains under mpirun -n 2" train g_pp2 2 1 --pipeline-model-parallel-size 2
check "gpt: pp 2 asserts its layout" grep -q "world 2 = tp 1 x dp 1 x pp 2" "$TMP/g_pp2.log"
check "gpt: pp 2 losses equal one process's" same_losses g_tp1 g_pp2
check "gpt: one process generates from the pp 2 checkpoint" gen gp2 0 g_pp2
check "gpt: pp 2 greedy text = one process's from the tp 1 checkpoint" same_text g1 gp2
check "gpt: pp 2 x tp 2 trains under mpirun -n 4" train g_pp2tp2 4 2 \
    --pipeline-model-parallel-size 2 --sequence-parallel
check "gpt: pp 2 x tp 2 losses equal one process's" same_losses g_tp1 g_pp2tp2
check "gpt: mpirun -n 2 generates from the pp 2 x tp 2 checkpoint" gen gp2t2 2 g_pp2tp2
check "gpt: mpirun -n 2 on it asserts world 2 = tp 2" gen_world_is gp2t2 2
check "gpt: pp 2 x tp 2 greedy text = one process's from the tp 1 checkpoint" same_text g1 gp2t2
tp_check 1 --load "$TMP/g_tp1" --shards "$TMP/g_pp2" --tol 1e-2
tp_check 2 --load "$TMP/g_tp1" --shards "$TMP/g_pp2tp2" --tol 1e-2

# ---- Llama (RMSNorm, rope, SwiGLU, untied output layer, 4 query groups) ----------------
check "llama: one process trains 30 iterations" train l_tp1 0 1 "${LLAMA[@]}"
check "llama: tp 2 trains under mpirun -n 2" train l_tp2 2 2 "${LLAMA[@]}"
check "llama: tp 2 asserts its layout" layout_is l_tp2 2 2 ""
check "llama: tp 2 losses equal one process's" same_losses l_tp1 l_tp2
check "llama: one process generates from the tp 1 checkpoint" gen l1 0 l_tp1
show l1
check "llama: mpirun -n 2 generates from the tp 2 checkpoint" gen l2 2 l_tp2
check "llama: mpirun -n 2 asserts world 2 = tp 2" gen_world_is l2 2
check "llama: tp 2 greedy text = one process's from the tp 1 checkpoint" same_text l1 l2
check "llama: tp 2: only rank 0 prints" one_continuation l2
tp_check 2 --load "$TMP/l_tp1"
tp_check 2 --load "$TMP/l_tp1" --shards "$TMP/l_tp2" --tol 1e-2
if [ -x "$ROOT/build-mpich/plait" ]; then # make mpich-build
    check "llama: MPICH's mpirun -n 2 generates from the tp 2 checkpoint" \
        env PLAIT="$ROOT/build-mpich/plait" bash -c "timeout -k 5 120 mpirun.mpich -n 2 \
            \"\$PLAIT\" generate --load '$TMP/l_tp2' --prompt '$PROMPT' --max-new-tokens 20 \
            --temperature 0 >'$TMP/l2_mpich.txt' 2>'$TMP/l2_mpich.err'"
    check "llama: MPICH asserts world 2 = tp 2" gen_world_is l2_mpich 2
    check "llama: MPICH tp 2 greedy text = one process's" same_text l1 l2_mpich
fi

# ---- refusals: the number of ranks must be the checkpoint's TP size ----------------------
# Every rank reaches the same verdict; rank 0 alone prints it, once.
once() { [ "$(grep -c 'plait: error' "$TMP/$1.err")" -eq 1 ]; }
refused() { # OUT PATTERN NP CKPT: fails, names the sizes, one message
    local out=$1 pat=$2 np=$3 ckpt=$4
    ! gen "$out" "$np" "$ckpt" && grep -qE -- "$pat" "$TMP/$out.err" && once "$out"
}
WANT2="g_tp2: iteration 30 was saved with --tensor-model-parallel-size 2: "
WANT2+="launch generate with 2 ranks \(mpirun -n 2"
check "a tp 2 checkpoint without a launcher (world 1) is refused, naming the sizes" \
    refused e1 "$WANT2 plait generate ...\); this run has 1" 0 g_tp2
check "a tp 2 checkpoint under mpirun -n 1 is refused" refused e1m "$WANT2.*this run has 1" 1 g_tp2
check "a tp 2 checkpoint under mpirun -n 3 is refused on every rank" \
    refused e3 "$WANT2.*this run has 3" 3 g_tp2
check "a tp 4 checkpoint under mpirun -n 2 is refused" \
    refused e42 "size 4: launch generate with 4 ranks.*this run has 2" 2 g_tp4
check "a tp 1 checkpoint under mpirun -n 2 is refused, saying to run one process" \
    refused e12 "size 1: run generate as one process \(without mpirun, or mpirun -n 1\), not 2 ranks" \
    2 g_tp1
# A corrupt shard of rank 1: all stop (no hang), one message naming the file (whichever
# rank's checksum pass reads the file first reports it).
rm -rf "$TMP/bad"; cp -r "$TMP/g_tp2" "$TMP/bad"
printf 'x' | dd of="$TMP/bad/iter_0000030/mp_rank_01/model_optim.safetensors" bs=1 seek=200 \
    conv=notrunc 2>/dev/null
check "a corrupt shard of rank 1 stops every rank, reported once, naming the file" \
    refused bad "mp_rank_01/model_optim.safetensors: xxh64 .* \(corrupt file\)" 2 bad
summary generate_tp
