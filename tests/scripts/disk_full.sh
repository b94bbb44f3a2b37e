#!/usr/bin/env bash
# Full disks (issue 18): a metrics, TensorBoard or checkpoint write that fails stops the
# run with exit status 1 and a message naming the file and the error; a checkpoint save
# that fails leaves the previous checkpoint published and loadable. /dev/full for the
# metrics; small tmpfs mounts (this suite mounts them itself, as root, and unmounts them
# at exit) for the rest. Without root (no mount), the tmpfs checks are skipped and say so.
source "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=1
TINY=(--mock-data --vocab-size 100 --num-layers 1 --hidden-size 16 --num-attention-heads 2
      --seq-length 16 --micro-batch-size 1 --lr 1e-3 --log-interval 1 --eval-iters 0
      --lr-decay-iters 8)
status_is() {
    local want=$1; shift
    "$@"; local rc=$?
    echo "# exit status $rc, expected $want"
    [ "$rc" -eq "$want" ]
}

# 1. --metrics-file on /dev/full: the first metrics line fails (before, silently).
check_fails "--metrics-file /dev/full stops at iteration 1, naming the file and the error" \
    "--metrics-file /dev/full: cannot write the metrics of iteration 1: No space left on device" \
    timeout 20 "$PLAIT" train "${TINY[@]}" --train-iters 3 --metrics-file /dev/full
check "... exit status 1 (an I/O failure)" status_is 1 \
    timeout 20 "$PLAIT" train "${TINY[@]}" --train-iters 3 --metrics-file /dev/full
source /tmp/mpienv.sh 2>/dev/null || true
timeout 60 mpirun.openmpi -n 2 "$PLAIT" train "${TINY[@]}" --train-iters 50 \
    --metrics-file /dev/full >"$TMP/mpi.log" 2>&1
rc=$?
check "mpirun -n 2 (world size 2): rank 0's failed metrics write ends the job, exit 1" \
    test "$(grep -c "world 2 = " "$TMP/mpi.log")/$rc" = 1/1
check "... naming the file" grep -q "metrics-file /dev/full: cannot write" "$TMP/mpi.log"

# 2. Small tmpfs mounts. mnt NAME SIZE: a tmpfs at $TMP/NAME, unmounted at exit.
mnt() {
    mkdir -p "$TMP/$1" && mount -t tmpfs -o "size=$2" tmpfs "$TMP/$1" 2>/dev/null || return 1
    on_exit "umount '$TMP/$1'"
}
if ! mnt probe 4k; then
    echo "# skipped: cannot mount a tmpfs (not root?); the disk-full checks below did not run"
    summary disk_full
    exit $?
fi

# 2a. Metrics on a disk that fills mid-run: 16 KiB, of which a filler leaves one 4 KiB
#     page (a metrics line is ~1.1 KB): the run stops at a later iteration, naming it.
mnt m 16k
head -c 12288 /dev/zero >"$TMP/m/filler"
timeout 20 "$PLAIT" train "${TINY[@]}" --train-iters 8 --metrics-file "$TMP/m/metrics.jsonl" \
    >"$TMP/m.log" 2>&1
rc=$?
check "metrics on a disk that fills mid-run: exit status 1" test "$rc" -eq 1
check "... the message names the file, the iteration and ENOSPC" grep -qE \
    "metrics-file $TMP/m/metrics.jsonl: cannot write the metrics of iteration [2-8]: No space left on device" \
    "$TMP/m.log"
check "... and the run stopped there (no iteration 8 logged)" \
    sh -c "! grep -q 'iteration        8/' '$TMP/m.log'"

# 2b. TensorBoard events on a full disk (the writer's checks, end to end).
mnt tb 4k
head -c 4096 /dev/zero >"$TMP/tb/filler" 2>/dev/null
check_fails "--tensorboard-dir on a full disk stops the run, naming the events file" \
    "tensorboard-dir: cannot write $TMP/tb/.*events.out.tfevents.*: No space left on device" \
    timeout 20 "$PLAIT" train "${TINY[@]}" --train-iters 3 --tensorboard-dir "$TMP/tb"

# 2c. A checkpoint save on a full disk. 160 KiB hold one checkpoint of this model
#     (~92 KiB with its metrics) but not two: the save at iteration 4 fails.
mnt ck 160k
A=("${TINY[@]}" --save "$TMP/ck/c")
check "iteration 2 saved to the small disk" status_is 0 \
    timeout 20 "$PLAIT" train "${A[@]}" --train-iters 2
timeout 20 "$PLAIT" train "${A[@]}" --train-iters 4 --load "$TMP/ck/c" >"$TMP/full.log" 2>&1
rc=$?
check "the save at iteration 4 on the full disk fails with exit status 1" test "$rc" -eq 1
check "... naming the file and ENOSPC" grep -qE \
    "error: $TMP/ck/c/iter_0000004.tmp/.*: write failed: No space left on device" "$TMP/full.log"
check "... latest_checkpointed_iteration.txt still names iteration 2" \
    test "$(cat "$TMP/ck/c/latest_checkpointed_iteration.txt")" = 2
check "... no iter_0000004 was published" test ! -e "$TMP/ck/c/iter_0000004"
cp -r "$TMP/ck/c" "$TMP/resume"
timeout 20 "$PLAIT" train "${TINY[@]}" --train-iters 4 --load "$TMP/resume" \
    --save "$TMP/resume" >"$TMP/resume.log" 2>&1
rc=$?
check "iteration 2 loads and resumes to 4 elsewhere (exit 0)" test "$rc" -eq 0
loss() { grep -o "iteration *$2/ *4 .*lm loss: [0-9.E+-]*" "$1" | grep -o "lm loss: .*"; }
check "... iteration 3 and 4's losses bit-identical to the run whose save failed" \
    test "$(loss "$TMP/resume.log" 3)/$(loss "$TMP/resume.log" 4)" = \
    "$(loss "$TMP/full.log" 3)/$(loss "$TMP/full.log" 4)"
check "... (and they are there to compare)" test -n "$(loss "$TMP/full.log" 4)"
mount -o remount,size=400k "$TMP/ck"
timeout 20 "$PLAIT" train "${A[@]}" --train-iters 4 --load "$TMP/ck/c" >"$TMP/again.log" 2>&1
check "with room again (remounted 400k), the same command saves iteration 4" \
    test "$(cat "$TMP/ck/c/latest_checkpointed_iteration.txt")" = 4
check "... and removed the failed save's temporary" test ! -e "$TMP/ck/c/iter_0000004.tmp"

summary disk_full
