#!/usr/bin/env bash
# plait launch: torchrun- and deepspeed-style launch lines start real (tiny)
# trainings under mpirun; each asserts the world size from plait's banner, and
# the torchrun-style run's losses are bit-identical to the same mpirun typed by
# hand. Bad input (a malformed hostfile, an unknown host) stops before any rank
# starts, naming the file:line or the host.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1
kjv_dataset 300 "$TMP/kjv"
MODEL=(--num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 32
       --micro-batch-size 1 --global-batch-size 12 --train-iters 3 --lr 1e-3 --min-lr 1e-4
       --lr-decay-style cosine --lr-warmup-iters 1 --log-interval 1 --eval-iters 0
       --data-path "$TMP/kjv_text_document" --split 98,2,0 "${GPT2[@]}" --seed 7)

run() { # NAME COMMAND...: trains with metrics in $TMP/NAME.jsonl, output in $TMP/NAME.log
    local name=$1; shift
    timeout -k 5 120 "$@" "${MODEL[@]}" --metrics-file "$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1
}
world_is() { grep -q "world $2 = tp 1 x dp $2 x pp 1" "$TMP/$1.log"; }
printed() { grep -qF -- "plait launch: $2" "$TMP/$1.log"; }
same_losses() { [ "$(losses "$TMP/$1.jsonl" | wc -l)" = 3 ] && cmp -s <(losses "$TMP/$1.jsonl") <(losses "$TMP/$2.jsonl"); }

# torchrun's line, and the mpirun it stands for typed by hand
check "torchrun-style --nproc_per_node 2 trains" \
    run tr2 "$PLAIT" launch --nproc_per_node 2 --nnodes 1 --node_rank 0 --master_addr 127.0.0.1 \
    --master_port 6000 train
check "it prints the mpirun command before running" \
    printed tr2 "mpirun.openmpi -n 2 -x OMP_NUM_THREADS $PLAIT train --num-layers 1"
check "it asserts world 2" world_is tr2 2
check "mpirun -n 2 by hand trains" run byhand2 mpirun.openmpi -n 2 "$PLAIT" train
check "losses bit-identical to mpirun -n 2 by hand" same_losses tr2 byhand2

# Megatron's script name stands for plait train; 3 ranks on this 2-core machine
# without the suites' OMPI_MCA_rmaps_base_oversubscribe: launch adds --oversubscribe
check "pretrain_gpt.py --nproc-per-node=3 trains" \
    run pg3 env -u OMPI_MCA_rmaps_base_oversubscribe "$PLAIT" launch --nproc-per-node=3 pretrain_gpt.py
check "  prints mpirun -n 3 --oversubscribe ... train" \
    printed pg3 "mpirun.openmpi -n 3 --oversubscribe -x OMP_NUM_THREADS $PLAIT train"
check "  world 3" world_is pg3 3

# DeepSpeed's hostfile with include/exclude and --num_gpus (localhost: no ssh)
printf '# DeepSpeed hostfile\nlocalhost slots=4\n' >"$TMP/hostfile"
check "deepspeed-style --hostfile --include localhost:1,3 trains" \
    run ds2 "$PLAIT" launch --hostfile "$TMP/hostfile" --include localhost:1,3 train
check "  prints --host localhost:2" printed ds2 "mpirun.openmpi -n 2 --host localhost:2"
check "  world 2" world_is ds2 2
check "deepspeed-style --exclude localhost:0 trains" \
    run ds3 "$PLAIT" launch -H "$TMP/hostfile" -e localhost:0 train
check "  world 3" world_is ds3 3
check "deepspeed-style --num_nodes 1 --num_gpus 4 trains" \
    run ds4 "$PLAIT" launch --hostfile "$TMP/hostfile" --num_nodes 1 --num_gpus 4 train
check "  world 4" world_is ds4 4

# DeepSpeedExamples' ds_pretrain_gpt2.sh passes --hostfile /job/hostfile even on one
# machine; a missing hostfile means this machine only, with a note, as in DeepSpeed
check "deepspeed-style line with a missing hostfile trains on this machine" \
    run dsx "$PLAIT" launch --num_nodes 1 --num_gpus 2 --hostfile "$TMP/no/hostfile" pretrain_gpt2.py
check "  said so in one line" printed dsx "--hostfile $TMP/no/hostfile not found: this machine only"
check "  world 2" world_is dsx 2

if [ -x "$ROOT/build-mpich/plait" ]; then
    check "MPICH build: --nproc_per_node 2 runs mpirun.mpich" \
        run mpich2 "$ROOT/build-mpich/plait" launch --nproc_per_node 2 train
    check "  prints mpirun.mpich" printed mpich2 "mpirun.mpich -n 2 $ROOT/build-mpich/plait train"
    check "  world 2" world_is mpich2 2
fi

# --dry-run prints, runs nothing; inside Slurm it is srun
check_fails "--dry-run prints the command and starts nothing" "^mpirun.openmpi -n 4 --host localhost:4" \
    sh -c "'$PLAIT' launch --dry-run -H '$TMP/hostfile' train --train-iters 1 && false"
check_fails "inside an allocation (SLURM_JOB_ID) the command is srun --mpi=pmix" \
    "^srun -K --mpi=pmix --nodes=2 --ntasks-per-node=2 $PLAIT train" \
    sh -c "SLURM_JOB_ID=1 '$PLAIT' launch --dry-run --nnodes 2 --nproc_per_node 2 train && false"
check "torchrun --node_rank 1 of --nnodes 2: nothing to do here, exit 0" \
    sh -c "out=\$('$PLAIT' launch --nnodes 2 --node_rank 1 --nproc_per_node 2 train 2>&1) && echo \"\$out\" | grep -q 'nothing to do on this node'"

# bad input stops before mpirun, with the usage/input exit codes
printf 'localhost slots=2\n\n# a typo on line 4\nnode2 slot=2\n' >"$TMP/badhosts"
check_fails "malformed hostfile line names file:line" "badhosts:4: expected 'HOST slots=N', got 'node2 slot=2'" \
    "$PLAIT" launch --hostfile "$TMP/badhosts" train
check "  exit code 3 (bad input)" sh -c "'$PLAIT' launch --hostfile '$TMP/badhosts' train >/dev/null 2>&1; [ \$? = 3 ]"
check_fails "unknown host in --include is named" "host 'node9' is not in hostfile .*hostfile \(hosts: localhost\)" \
    "$PLAIT" launch --hostfile "$TMP/hostfile" --include node9 train
check_fails "a slot the host does not have" "host localhost has no slot 4 \(it has slots 0-3\)" \
    "$PLAIT" launch --hostfile "$TMP/hostfile" --include localhost:4 train
check "  exit code 2 (usage)" sh -c "'$PLAIT' launch --hostfile '$TMP/hostfile' -i node9 train >/dev/null 2>&1; [ \$? = 2 ]"
check_fails "a Python script other than pretrain_gpt.py is refused" "'finetune.py' after the launcher flags" \
    "$PLAIT" launch --nproc_per_node 2 finetune.py
# a failing training: the job's exit code comes back through launch (exec)
check_fails "a training flag error comes back with plait's message" "unknown flag .--no-such-flag" \
    timeout -k 5 60 "$PLAIT" launch --nproc_per_node 2 train --no-such-flag
check "  exit code non-zero" sh -c "timeout -k 5 60 '$PLAIT' launch --nproc_per_node 2 train --no-such-flag >/dev/null 2>&1; [ \$? != 0 ]"
summary launch
