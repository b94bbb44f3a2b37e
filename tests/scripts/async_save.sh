#!/usr/bin/env bash
# --async-save: the checkpoint files a background thread writes are the synchronous
# save's, byte for byte (one process, DP 2 under ZeRO 3, TP 2 x PP 2); a run resumed
# from one continues bit for bit; a kill -9 while the files are being written leaves the
# previous checkpoint as the latest, and resuming from it gives the uninterrupted losses.
# --keep-last-n: only the newest N iterations stay, synchronous and async; an interrupted
# removal (iter_N.del) is finished at the next save; other names are not touched.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
MODEL=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32
       --vocab-size 512 --micro-batch-size 2 --global-batch-size 4 --train-iters 6 --lr 1e-3
       --mock-data --log-interval 1 --save-interval 2 --eval-iters 1)
train() { # NAME NP FLAGS...: trains into $TMP/NAME, logs to $TMP/NAME.log
    local name=$1 np=$2; shift 2
    rm -rf "$TMP/$name"
    timeout -k 5 120 mpirun.openmpi -n "$np" "$PLAIT" train "${MODEL[@]}" "$@" \
        --save "$TMP/$name" --metrics-file "$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1
}
same_files() { diff -r -x .plait.lock -x metrics.jsonl "$TMP/$1" "$TMP/$2"; }

check "one process: synchronous saves" train sync 1
check "one process: --async-save" train async 1 --async-save
check "the async saves were logged as such, three of them" \
    test "$(grep -c 'saved checkpoint at iteration [246] .*(async: files written' "$TMP/async.log")" = 3
check "every checkpoint file equals the synchronous save's, byte for byte" same_files sync async
check "the same losses" diff <(losses "$TMP/sync.jsonl") <(losses "$TMP/async.jsonl")

mkdir -p "$TMP/resumed"
cp -r "$TMP/async/iter_0000002" "$TMP/resumed/"
echo 2 >"$TMP/resumed/latest_checkpointed_iteration.txt"
check "resume from an async checkpoint" \
    timeout -k 5 120 "$PLAIT" train "${MODEL[@]}" --load "$TMP/resumed" --save "$TMP/resumed" \
    --async-save --metrics-file "$TMP/resumed.jsonl"
check "its losses continue the uninterrupted run's, bit for bit" \
    diff <(losses "$TMP/sync.jsonl" | tail -n 4) <(losses "$TMP/resumed.jsonl")
check "and its final checkpoint equals the uninterrupted run's" \
    cmp "$TMP/sync/iter_0000006/mp_rank_00/model_optim.safetensors" \
    "$TMP/resumed/iter_0000006/mp_rank_00/model_optim.safetensors"

check "DP 2, ZeRO 3: synchronous" train z3_sync 2 --zero-stage 3
check "DP 2, ZeRO 3: async" train z3_async 2 --zero-stage 3 --async-save
check "the layout is DP 2" grep -q "world 2 = tp 1 x dp 2 x pp 1" "$TMP/z3_async.log"
check "ZeRO 3: the same files (model and both optimizer shards)" same_files z3_sync z3_async
check "TP 2 x PP 2: synchronous" train tp_pp_sync 4 --tensor-model-parallel-size 2 \
    --pipeline-model-parallel-size 2
check "TP 2 x PP 2: async" train tp_pp_async 4 --tensor-model-parallel-size 2 \
    --pipeline-model-parallel-size 2 --async-save
check "the layout is TP 2 x PP 2" grep -q "world 4 = tp 2 x dp 1 x pp 2" "$TMP/tp_pp_async.log"
check "TP 2 x PP 2: the same files (four model shards)" same_files tp_pp_sync tp_pp_async

# A crash while the writer thread writes: every fsync is delayed 0.3 s (strace), so the
# writing of iteration 4 takes over a second; the process is killed once its temporary
# directory exists.
crash_run() {
    rm -rf "$TMP/crash"
    timeout -k 5 120 strace -f -o /dev/null -e trace=fsync -e inject=fsync:delay_enter=300000 \
        "$PLAIT" train "${MODEL[@]}" --save "$TMP/crash" --async-save >"$TMP/crash.log" 2>&1 &
    local pid=$! i
    for ((i = 0; i < 600; i++)); do
        [ -d "$TMP/crash/iter_0000004.tmp" ] && break
        sleep 0.05
    done
    pkill -9 -f "plait train .*--save $TMP/crash" 
    wait "$pid"
    [ -d "$TMP/crash/iter_0000004.tmp" ] && [ ! -e "$TMP/crash/iter_0000004" ]
}
check "killed (-9) while iteration 4's files were being written" crash_run
check "the latest checkpoint is still iteration 2" \
    test "$(cat "$TMP/crash/latest_checkpointed_iteration.txt")" = 2
check "resuming after the crash" \
    timeout -k 5 120 "$PLAIT" train "${MODEL[@]}" --load "$TMP/crash" --save "$TMP/crash" \
    --async-save --metrics-file "$TMP/crash_resumed.jsonl"
check "gives the uninterrupted run's losses from iteration 3, bit for bit" \
    diff <(losses "$TMP/sync.jsonl" | tail -n 4) <(losses "$TMP/crash_resumed.jsonl")
check "and publishes iteration 4 this time, with its temporary directory gone" \
    test -f "$TMP/crash/iter_0000004/manifest.json" -a ! -e "$TMP/crash/iter_0000004.tmp"
check "--keep-last-n 2, synchronous" train keep2 1 --keep-last-n 2
check "only iterations 4 and 6 remain" test "$(cd "$TMP/keep2" && echo iter_*)" = \
    "iter_0000004 iter_0000006"
check "and the removal was logged" grep -q "removed 1 older checkpoint of .*(--keep-last-n 2)" \
    "$TMP/keep2.log"
mkdir -p "$TMP/keep1/iter_0000001.del/mp_rank_00" "$TMP/keep1/iter_1"
touch "$TMP/keep1/iter_1/mine"
keep1() {
    timeout -k 5 120 "$PLAIT" train "${MODEL[@]}" --save "$TMP/keep1" --async-save \
        --keep-last-n 1 >"$TMP/keep1.log" 2>&1
}
check "--keep-last-n 1 with --async-save, over a directory with an interrupted removal" keep1
check "only iteration 6 remains, the .del is gone, iter_1 (not a name plait writes) is kept" \
    test "$(cd "$TMP/keep1" && echo iter_*)" = "iter_0000006 iter_1"
check "the kept checkpoint is the synchronous run's" \
    cmp "$TMP/sync/iter_0000006/mp_rank_00/model_optim.safetensors" \
    "$TMP/keep1/iter_0000006/mp_rank_00/model_optim.safetensors"
check_fails "a negative --keep-last-n is refused" "--keep-last-n >= 0" \
    "$PLAIT" train "${MODEL[@]}" --save "$TMP/neg" --keep-last-n -1
summary async_save
