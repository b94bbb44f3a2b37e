#!/usr/bin/env bash
# Checkpoints lose nothing, trust nothing and never hang (issue 18, items 1-3):
#  - a re-save of the same iteration (Slurm requeue: --load D --save D) killed
#    between moving the old copy aside and renaming the new one in (made exact by
#    the test hook PLAIT_TEST_CRASH_AT) leaves a checkpoint that loads and resumes
#    bit for bit like an uninterrupted run;
#  - temporaries of killed saves are removed at the next save, nothing else is;
#  - every tampering of the issue is refused with a message naming the field, the
#    value and what was expected, before anything is sized from it (train and
#    generate); paths outside the checkpoint, symbolic links and FIFOs are
#    refused, a FIFO within seconds;
#  - the manifest's checksum (manifest.json.xxh64, checked here against an
#    independent Python xxh64) catches an edited manifest;
#  - a second run saving into a locked --save directory fails at once naming the
#    first's host and pid; a dead holder's lock does not block; under mpirun only
#    one rank locks.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
# The models are tiny and startup dominates: one thread per process. Two OpenMP
# threads spin-waiting per process made this suite 3-4x slower while other
# suites shared the 2 cores (64 s against 18 s, measured); every comparison
# below is between runs with the same setting.
export OMP_NUM_THREADS=1
kjv_dataset 300 "$TMP/kjv"
# A fixed decay length (--lr-decay-iters), so that --train-iters 10 and 12 share
# one schedule and a run stopped at 10 may resume to 12.
ARCH=(--num-layers 2 --hidden-size 16 --num-attention-heads 4 --seq-length 32
      --global-batch-size 2 --lr 1e-3 --min-lr 1e-4
      --lr-decay-style cosine --lr-warmup-iters 2 --lr-decay-iters 20 --log-interval 1
      --eval-iters 0 --split 100,0,0 --data-path "$TMP/kjv_text_document" "${GPT2[@]}")
MODEL=("${ARCH[@]}" --micro-batch-size 2)
train() { timeout -k 5 60 "$PLAIT" train "${MODEL[@]}" "$@"; }
gen() { timeout -k 5 60 "$PLAIT" generate --prompt "And God" --max-new-tokens 2 --load "$@"; }
# check_log NAME PATTERN COMMAND...: passes if the command succeeds and its output matches.
check_log() {
    local name=$1 pat=$2; shift 2
    if "$@" >"$TMP/check.out" 2>&1 && grep -qE -- "$pat" "$TMP/check.out"; then
        _pass=$((_pass + 1)); echo "ok $name"
    else
        _fail=$((_fail + 1)); echo "not ok $name"; tail -n 10 "$TMP/check.out" | sed 's/^/    /'
    fi
}
# exits_with CODE COMMAND...: the command's exit status is CODE.
exits_with() { local want=$1; shift; "$@"; test $? -eq "$want"; }

# xxh64 in Python (the reference algorithm, independent of plait's C), and a
# manifest editor: tamper.py DIR 'STATEMENT on m' [--keep-sum] rewrites
# DIR/manifest.json and, unless --keep-sum, its checksum file to match.
cat > "$TMP/tamper.py" <<'EOF'
import json, os, sys
M = (1 << 64) - 1
P1, P2, P3 = 11400714785074694791, 14029467366897019727, 1609587929392839161
P4, P5 = 9650029242287828579, 2870177450012600261
def rotl(x, r): return ((x << r) | (x >> (64 - r))) & M
def rnd(a, x): return (rotl((a + x * P2) & M, 31) * P1) & M
def merge(h, v): return (((h ^ rnd(0, v)) * P1) + P4) & M
def u64(b, i): return int.from_bytes(b[i:i + 8], "little")
def xxh64(b):
    n, i = len(b), 0
    if n >= 32:
        v = [(P1 + P2) & M, P2, 0, (-P1) & M]
        while i + 32 <= n:
            v = [rnd(v[k], u64(b, i + 8 * k)) for k in range(4)]
            i += 32
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M
        for x in v: h = merge(h, x)
    else:
        h = P5
    h = (h + n) & M
    while i + 8 <= n:
        h = (rotl(h ^ rnd(0, u64(b, i)), 27) * P1 + P4) & M; i += 8
    if i + 4 <= n:
        h = (rotl(h ^ (int.from_bytes(b[i:i + 4], "little") * P1 & M), 23) * P2 + P3) & M; i += 4
    while i < n:
        h = (rotl(h ^ (b[i] * P5 & M), 11) * P1) & M; i += 1
    h ^= h >> 33; h = (h * P2) & M; h ^= h >> 29; h = (h * P3) & M; h ^= h >> 32
    return h
d = sys.argv[1]
if sys.argv[2] == "--check":   # the checksum file equals Python's xxh64 of the manifest
    text = open(d + "/manifest.json", "rb").read()
    want = "%016x  manifest.json\n" % xxh64(text)
    sys.exit(0 if open(d + "/manifest.json.xxh64").read() == want else 1)
m = json.load(open(d + "/manifest.json"))
exec(sys.argv[2])
def replace(path, data):   # a new file, never a write through a hard link
    open(path + ".new", "wb").write(data)
    os.replace(path + ".new", path)
text = json.dumps(m, indent=1).encode()
replace(d + "/manifest.json", text)
if "--keep-sum" not in sys.argv:
    replace(d + "/manifest.json.xxh64", b"%016x  manifest.json\n" % xxh64(text))
EOF
tamper() { $PY "$TMP/tamper.py" "$@"; }

# 1. The re-save window. Reference: one run to 12, saving at 10 and 12.
check "uninterrupted run to iteration 12" train --train-iters 12 --save "$TMP/full" \
    --save-interval 10 --metrics-file "$TMP/full.jsonl"
check "a job to iteration 10 saves it" train --train-iters 10 --save "$TMP/ck"
check "its checksum file is the xxh64 of its manifest (independent Python xxh64)" \
    tamper "$TMP/ck/iter_0000010" --check
check "the requeued job (--load = --save, nothing left to train) stops at the test hook with 86" \
    exits_with 86 env PLAIT_TEST_CRASH_AT=ckpt-aside timeout -k 5 60 "$PLAIT" train "${MODEL[@]}" \
    --train-iters 10 --load "$TMP/ck" --save "$TMP/ck"
check "killed in the window: iter_10 moved aside, not yet replaced, latest still 10" \
    test ! -e "$TMP/ck/iter_0000010" -a -d "$TMP/ck/iter_0000010.old" -a \
    "$(cat "$TMP/ck/latest_checkpointed_iteration.txt")" = 10
check_log "generate loads the aside copy, saying so" \
    "iter_0000010 is missing but .*iter_0000010.old exists" gen "$TMP/ck"
check "loading changed nothing on disk" test -d "$TMP/ck/iter_0000010.old" -a ! -e "$TMP/ck/iter_0000010"
check_log "the job resumes from the aside copy and puts it back at its next save" \
    "iter_0000010: recovered from iter_0000010.old" \
    train --train-iters 12 --load "$TMP/ck" --save "$TMP/ck" --metrics-file "$TMP/resumed.jsonl"
bit_exact() { diff <(losses "$TMP/full.jsonl" | tail -n 2) <(losses "$TMP/resumed.jsonl"); }
check "losses 11 and 12 equal the uninterrupted run's, bit for bit" bit_exact
check "iteration 12's shard equals the uninterrupted run's, byte for byte" \
    cmp "$TMP/full/iter_0000012/mp_rank_00/model_optim.safetensors" \
    "$TMP/ck/iter_0000012/mp_rank_00/model_optim.safetensors"
check "the recovered iteration 10 equals the uninterrupted run's, no aside copy left" \
    cmp "$TMP/full/iter_0000010/mp_rank_00/model_optim.safetensors" \
    "$TMP/ck/iter_0000010/mp_rank_00/model_optim.safetensors"
check "no aside copy left" test ! -e "$TMP/ck/iter_0000010.old"
cp -r "$TMP/ck" "$TMP/ck2"
check "killed after the new copy is in: the re-save still completes its job" \
    exits_with 86 env PLAIT_TEST_CRASH_AT=ckpt-renamed timeout -k 5 60 "$PLAIT" train \
    "${MODEL[@]}" --train-iters 12 --load "$TMP/ck2" --save "$TMP/ck2"
after_renamed() {
    test -d "$TMP/ck2/iter_0000012" -a -d "$TMP/ck2/iter_0000012.old" &&
        train --train-iters 12 --load "$TMP/ck2" --save "$TMP/ck2" &&
        test ! -e "$TMP/ck2/iter_0000012.old" -a -d "$TMP/ck2/iter_0000012"
}
check "then the new iter_12 and the old aside both exist, and the next save removes the aside" \
    after_renamed
rm -rf "$TMP/ck2"

# 2. Temporaries of killed saves: plait's own names only, in the save directory only.
check "a save killed before publishing exits 86" exits_with 86 env PLAIT_TEST_CRASH_AT=ckpt-written \
    timeout -k 5 60 "$PLAIT" train "${MODEL[@]}" --train-iters 2 --save "$TMP/st"
check "it left iter_0000002.tmp and no latest file" \
    test -d "$TMP/st/iter_0000002.tmp" -a ! -e "$TMP/st/latest_checkpointed_iteration.txt"
mkdir -p "$TMP/st/iter_0000007.tmp/mp_rank_00" "$TMP/st/notes"
touch "$TMP/st/latest_checkpointed_iteration.txt.tmp.4242" "$TMP/st/iter_notes.tmp" \
    "$TMP/st/my.tmp" "$TMP/st/iter_12x.tmp" "$TMP/st/latest_checkpointed_iteration.txt.tmp.x" \
    "$TMP/st/notes/iter_0000003.tmp"
check_log "the next save removes them, saying so" "removing the temporary of an interrupted save" \
    train --train-iters 2 --save "$TMP/st"
check "iter_*.tmp and latest's temporaries are gone" test ! -e "$TMP/st/iter_0000002.tmp" -a \
    ! -e "$TMP/st/iter_0000007.tmp" -a ! -e "$TMP/st/latest_checkpointed_iteration.txt.tmp.4242"
check "files of other names, and below the save directory, are kept" test -e "$TMP/st/iter_notes.tmp" \
    -a -e "$TMP/st/my.tmp" -a -e "$TMP/st/iter_12x.tmp" -a \
    -e "$TMP/st/latest_checkpointed_iteration.txt.tmp.x" -a -e "$TMP/st/notes/iter_0000003.tmp"
check "and the save was published" test -d "$TMP/st/iter_0000002" -a \
    "$(cat "$TMP/st/latest_checkpointed_iteration.txt")" = 2

# 3. Tampered manifests. fresh NAME: a copy of the full run's iteration 12.
# Hard links keep the disk use of ~20 copies near zero: tamper.py replaces the files
# it edits (new inodes), the cases below remove or rename links, and nothing saves
# into a copy. Only the latest copy is kept.
fresh() {
    rm -rf "$TMP"/t_*; mkdir -p "$TMP/t_$1"
    cp -al "$TMP/full/iter_0000012" "$TMP/t_$1/"
    echo 12 > "$TMP/t_$1/latest_checkpointed_iteration.txt"
    T="$TMP/t_$1"; I="$T/iter_0000012"
}
# The manifest is read and validated by one function for train and generate;
# generate starts faster, so most cases use it and train covers a few.
load() { train --train-iters 12 --load "$@"; }  # nothing left to train: the load is the test
fresh ok
check "an untouched copy loads" load "$T"
check "an untouched copy generates" gen "$T"
# The edges of the ranges are values plait itself writes: --seed -1 is saved as 2^64,
# --adam-beta2 may be any value below 1.
fresh edge; tamper "$I" 'm["seed"] = 2**64; m["optimizer"]["beta2"] = 0.99999999999'
check "a manifest at the edges of the ranges loads" load "$T"
# A manifest of an older plait (version 1: no checksum file, the user's own tokenizer paths).
fresh v1; rm "$I/manifest.json.xxh64"
tamper "$I" 'm["version"] = 1; m["tokenizer"]["vocab_file"] = "/etc/passwd"' --keep-sum
check_log "a version 1 manifest loads, with a warning that it is unverified" \
    "without a checksum: not verified" load "$T"
check_fails "its tokenizer paths are not used" "tokenizer files outside the checkpoint; they are not used" \
    gen "$T"
check "with --vocab-file and --merge-file it generates" gen "$T" "${GPT2[@]:2}"
fresh v60k; tamper "$I" 'm["model"]["vocab_size"] = 60000'
V60K='"model.padded_vocab_size" is 50304 but "model.vocab_size" 60000 padded'
check_fails "vocab_size 60000: generate refuses it" "$V60K" gen "$T"
check_fails "vocab_size 60000: train refuses it" "$V60K" load "$T"
fresh v60kp; tamper "$I" 'm["model"]["vocab_size"] = 60000; m["model"]["padded_vocab_size"] = 60032'
check_fails "vocab_size 60000 with a consistent padding: the tensor table disagrees (generate)" \
    "tensor embedding.word_embeddings.weight's \"shape\" is not \[60032, 16\]" gen "$T"
fresh heads; tamper "$I" 'm["model"]["num_attention_heads"] = 0'
check_fails "num_attention_heads 0" '"model.num_attention_heads" is 0; expected an integer in \[1, 65536\]' \
    gen "$T"
fresh layers; tamper "$I" 'm["model"]["num_layers"] = 1e9'
check_fails "num_layers 1e9" '"model.num_layers" is 1000000000; expected an integer in \[1, 10000\]' \
    gen "$T"
fresh layers3; tamper "$I" 'm["model"]["num_layers"] = 3'
check_fails "num_layers 3 with two layers' tensors" '"model.num_layers" is 3 but "tensors" has no tensor of layer 2' \
    gen "$T"
fresh step; tamper "$I" 'm["optimizer"]["step"] = -5'
check_fails "optimizer.step -5" '"optimizer.step" is -5; expected an integer in \[0, ' gen "$T"
fresh nsteps; tamper "$I" 'm["scheduler"]["num_steps"] = -50'
check_fails "scheduler.num_steps -50" '"scheduler.num_steps" is -50; expected an integer' gen "$T"
fresh iter; tamper "$I" 'm["iteration"] = -100'
check_fails "iteration -100" '"iteration" is -100; expected an integer in \[0, ' gen "$T"
fresh iter11; tamper "$I" 'm["iteration"] = 11'
check_fails "an iteration other than the directory's" '"iteration" is 11 but the directory is iteration 12' \
    gen "$T"
fresh samples; tamper "$I" 'm["consumed_train_samples"] = -1'
check_fails "consumed_train_samples -1" '"consumed_train_samples" is -1' gen "$T"
fresh sum; tamper "$I" 'm["consumed_train_samples"] = 20' --keep-sum
check_fails "an edited manifest fails its checksum" \
    'manifest.json: xxh64 [0-9a-f]{16}, .*manifest.json.xxh64 says [0-9a-f]{16} \(the manifest was changed' \
    gen "$T"
fresh nosum; rm "$I/manifest.json.xxh64"
check_fails "a version 2 manifest without its checksum file" 'manifest.json.xxh64 is missing' gen "$T"
fresh tokabs; tamper "$I" 'm["tokenizer"]["vocab_file"] = "/etc/passwd"'
check_fails "a tokenizer path that is absolute" '"tokenizer.vocab_file" "/etc/passwd" is an absolute path' \
    gen "$T"
fresh tokdots; tamper "$I" 'm["tokenizer"]["merge_file"] = "../../full/iter_0000012/tokenizer/merges/vocab.bpe"'
check_fails "a tokenizer path with .." '"tokenizer.merge_file" .* has an empty, "." or ".." component' gen "$T"
fresh shardlink
mv "$I/mp_rank_00/model_optim.safetensors" "$T/elsewhere.safetensors"
ln -s "$T/elsewhere.safetensors" "$I/mp_rank_00/model_optim.safetensors"
check_fails "a shard that is a symbolic link (to the right bytes) is refused" \
    'mp_rank_00/model_optim.safetensors: a symbolic link' load "$T"
fresh iterlink; mv "$I" "$T/real_iter"; ln -s real_iter "$I"
check_fails "an iter_* directory that is a symbolic link is refused" 'iter_0000012: a symbolic link' gen "$T"
fresh fifo; rm "$I/mp_rank_00/model_optim.safetensors"; mkfifo "$I/mp_rank_00/model_optim.safetensors"
check_fails "a FIFO shard: an error within the timeout, not a hang" \
    'model_optim.safetensors: a FIFO; expected a regular file' timeout -k 2 20 "$PLAIT" train \
    "${MODEL[@]}" --train-iters 12 --load "$T"
fresh fifom; rm "$I/manifest.json"; mkfifo "$I/manifest.json"
check_fails "a FIFO manifest (generate)" 'manifest.json: a FIFO; expected a regular file' \
    timeout -k 2 20 "$PLAIT" generate --load "$T"
fresh fifol; rm "$T/latest_checkpointed_iteration.txt"; mkfifo "$T/latest_checkpointed_iteration.txt"
check_fails "a FIFO latest_checkpointed_iteration.txt" \
    'latest_checkpointed_iteration.txt: a FIFO; expected a regular file' \
    timeout -k 2 20 "$PLAIT" generate --load "$T"

# ZeRO optimizer shards name their file in the manifest.
check "a ZeRO-1 checkpoint (one rank)" train --train-iters 2 --zero-stage 1 --save "$TMP/z"
zfresh() {
    rm -rf "$TMP"/t_* "$TMP"/tz_*; mkdir -p "$TMP/tz_$1"; cp -al "$TMP/z/iter_0000002" "$TMP/tz_$1/"
    echo 2 > "$TMP/tz_$1/latest_checkpointed_iteration.txt"; T="$TMP/tz_$1"; I="$T/iter_0000002"
}
zload() { train --train-iters 2 --zero-stage 1 --load "$@"; }
zfresh ok
check "an untouched ZeRO copy loads" zload "$T"
zfresh up; ln -f "$I/mp_rank_00/optim_dp_000.safetensors" "$TMP/x"
tamper "$I" 'm["zero"]["shards"][0]["file"] = "../../x"; m["files"]["../../x"] = m["files"]["mp_rank_00/optim_dp_000.safetensors"]'
check_fails 'a ZeRO shard "file": "../../x" (the right bytes there) is refused' \
    "a ZeRO shard's \"file\" \"../../x\" has an empty, \".\" or \"..\" component" zload "$T"
zfresh abs; tamper "$I" 'm["zero"]["shards"][0]["file"] = "/etc/passwd"'
check_fails 'a ZeRO shard "file" that is absolute is refused' '"/etc/passwd" is an absolute path' zload "$T"

# 4. One run per --save directory.
timeout -k 5 120 "$PLAIT" train "${MODEL[@]}" --train-iters 100000 --save "$TMP/lk" \
    >"$TMP/lk_first.log" 2>&1 &
first=$!
holder() { for _ in $(seq 300); do grep -q "pid" "$TMP/lk/.plait.lock" 2>/dev/null && return 0; sleep 0.1; done; return 1; }
check "the first run holds the lock" holder
first_pid=$(sed -E 's/.*pid ([0-9]+).*/\1/' "$TMP/lk/.plait.lock" 2>/dev/null)
check "the lock file names this host and the first run's pid" \
    grep -qx "host $(hostname) pid $first_pid" "$TMP/lk/.plait.lock"
check "that pid is the first run's plait process" test "$(cat /proc/"$first_pid"/comm 2>/dev/null)" = plait
start=$(date +%s%N)
check_fails "a second run saving there fails, naming the first's host and pid" \
    "--save $TMP/lk: in use by another plait run \(host $(hostname) pid $first_pid" \
    train --train-iters 2 --save "$TMP/lk"
check "... at once (under 10 s)" test $(( ($(date +%s%N) - start) / 1000000 )) -lt 10000
check "... without writing a checkpoint there" sh -c "! ls -d '$TMP'/lk/iter_* >/dev/null 2>&1"
kill -9 "$first_pid" 2>/dev/null || kill "$first" 2>/dev/null
wait "$first" 2>/dev/null
check "a lock left by a killed run does not block the next one" train --train-iters 2 --save "$TMP/lk"
mpi_save() {
    timeout -k 5 60 mpirun.openmpi -n 2 "$PLAIT" train "${ARCH[@]}" --micro-batch-size 1 \
        --train-iters 2 --save "$TMP/lk2" >"$TMP/lk2.log" 2>&1
}
check "under mpirun -n 2 only rank 0 locks: the job saves" mpi_save
check "... as a world of 2" grep -q "world 2 = tp 1 x dp 2" "$TMP/lk2.log"
summary ckpt_safety
