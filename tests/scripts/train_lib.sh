# Shared set-up for the training suites (source after lib.sh): a small GPT-2
# tokenized slice of the King James Bible, and MPI settings for root and
# oversubscription on this 2-core machine (shared/reference/mpi-env.sh).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_pml=ob1
GPT2=(--tokenizer-type GPT2BPETokenizer --vocab-file "$PLAIT_DATA/gpt2/encoder.json"
      --merge-file "$PLAIT_DATA/gpt2/vocab.bpe")

# kjv_dataset LINES OUTPREFIX: the first LINES verses, one JSON document each.
kjv_dataset() {
    head -n "$1" "$PLAIT_DATA/kjv.txt" | /usr/bin/python3 -c '
import json, sys
for line in sys.stdin:
    print(json.dumps({"text": line.rstrip("\n")}))' > "$2.jsonl"
    "$PLAIT" preprocess --input "$2.jsonl" --output-prefix "$2" "${GPT2[@]}" --append-eod \
        --workers 2 >"$2.log" 2>&1
}

# losses FILE: the lm_loss of each logged iteration of a metrics file, one per line.
losses() { grep '"lm_loss"' "$1" | sed -E 's/.*"lm_loss": ([^,]*),.*/\1/'; }

# field FILE ITERATION KEY: KEY's value in the metrics line of that iteration.
field() { grep "\"iteration\": $2," "$1" | head -n 1 | sed -E "s/.*\"$3\": ([^,}]*).*/\1/"; }

# The parallel suites' checkpoint checks (tests/scripts/ckpt_tensors.py, independent of
# plait): iteration 10's parameters of run A equal run B's within 1e-5 + 1e-4 |p| (each
# suite argues the bound), and the tensors replicated over TP (and shared k/v, and the
# tied copy of a pipelined run) are bit-identical on every rank that holds them.
PY=/usr/bin/python3
CK="$ROOT/tests/scripts/ckpt_tensors.py"
same_params() { $PY "$CK" same "$TMP/$1/iter_0000010" "$TMP/$2/iter_0000010"; }
replicas_equal() { $PY "$CK" replicas "$TMP/$1/iter_0000010"; }
# Both in one python run, which reads A's files once: ckpt_both A B runs it, then
# ckpt_passed A same|replicas prints its output and passes when that check did.
ckpt_both() {
    $PY "$CK" same+replicas "$TMP/$1/iter_0000010" "$TMP/$2/iter_0000010" >"$TMP/$1.ckpt_checks" 2>&1
}
ckpt_passed() { cat "$TMP/$1.ckpt_checks"; tail -n 1 "$TMP/$1.ckpt_checks" | grep -q "^status: .*$2 ok"; }

# Layout equivalence (pp.sh, bert.sh): COMMON holds the runs' flags, 10 iterations with
# validation at 5 and 10. run NAME NP TP PP FLAGS... trains with checkpoints at 5 and 10
# in $TMP/NAME; layout_checks compares a layout with one process.
run() { # NAME NP TP PP FLAGS...: checkpoints at 5 and 10 in $TMP/NAME
    local name=$1 np=$2 tp=$3 pp=$4; shift 4
    rm -rf "$TMP/$name" "$TMP/$name.jsonl"
    timeout -k 5 300 mpirun.openmpi -n "$np" "$PLAIT" train "${COMMON[@]}" "$@" \
        --tensor-model-parallel-size "$tp" --pipeline-model-parallel-size "$pp" \
        --make-vocab-size-divisible-by $((512 / tp)) --save "$TMP/$name" --save-interval 5 \
        --metrics-file "$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1
}
layout_is() { grep -q "world $2 = tp $3 x dp $4 x pp $5" "$TMP/$1.log"; }
valid() { grep '"valid_lm_loss"' "$1" | sed -E 's/.*"valid_lm_loss": ([^,]*),.*/\1/'; }
# Losses within 2e-5 relative and validation losses within 1e-6 (train_dp.sh's bound and
# argument: the stages sum the same products; only the TP/DP reductions and the norm's
# sum over stages change the order of additions).
same_losses() {
    paste <(losses "$TMP/$1.jsonl") <(losses "$TMP/$2.jsonl") | awk -v n=10 '
        { c++; d = $1 - $2; if (d < 0) d = -d; if (d > 2e-5 * $2) bad++ }
        END { exit !(c == n && !bad) }' &&
        paste <(valid "$TMP/$1.jsonl") <(valid "$TMP/$2.jsonl") | awk '
        { c++; d = $1 - $2; if (d < 0) d = -d; if (d > 1e-6 * $2) bad++ }
        END { exit !(c == 2 && !bad) }'
}

# layout_checks FAMILY SINGLE NAME "NP TP DP PP" FLAGS...
layout_checks() {
    local family=$1 single=$2 name=$3 np tp dp pp; shift 3
    read -r np tp dp pp <<<"$1"; shift
    local what="$family: pp $pp x tp $tp x dp $dp${*:+ ($*)}"
    check "$what runs" run "$name" "$np" "$tp" "$pp" "$@"
    check "$what asserts its layout" layout_is "$name" "$np" "$tp" "$dp" "$pp"
    check "$what: losses and validation equal one process's" same_losses "$single" "$name"
    ckpt_both "$name" "$single"
    check "$what: final parameters equal one process's" ckpt_passed "$name" same
    check "$what: replicas and the tied copy identical" ckpt_passed "$name" replicas
}

