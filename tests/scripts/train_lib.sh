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
