#!/usr/bin/env bash
# Post-LN BART (--model bart --transformer-block-type post_ln): transformers' BART's layers
# in plait (both stacks post-LN with a LayerNorm of their embeddings, no final norms,
# exact GELU; the decoder's own position table; --scale-embedding). An independent
# PyTorch BART with transformers' modules and names (hf_bart.py) gives plait's logits,
# loss and every gradient (encdec_parity --post-ln, one process and TP 2 with sequence
# parallelism); cached decoding (plait seq2seq's) equals the training forward
# (encdec_decode_check --post-ln); training on NeMo's BART dataset under DP 2 with ZeRO 3
# and TP 2 with SP gives one process's losses; the manifest records the block type and a
# pre-LN run refuses the checkpoint. Hugging Face: the trained checkpoint exports as
# BartForConditionalGeneration (positions offset by 2, final_logits_bias, vocab.txt,
# [BOS]/[EOS]/[PAD] ids), read by the PyTorch BART giving plait's logits; imported at TP 2
# it exports to the same bytes, plait train --load of it gives the original's losses bit
# for bit and plait seq2seq its tokens; a random directory in transformers' names imports
# to plait's logits of the same model and exports to the same tensors (the positions' two
# offset rows, never read, come back zero); config keys plait cannot run are refused.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1
EP=$ROOT/build/testtools/encdec_parity

check "encdec_parity --post-ln: one process" "$EP" "$TMP/bart.safetensors" --post-ln
check "encdec_parity --post-ln: TP 2 with sequence parallelism" \
    timeout -k 5 60 mpirun.openmpi -n 2 "$EP" "$TMP/bart_tp2.safetensors" --post-ln --sp
check "encdec_parity --post-ln --scale-embedding: one process" "$EP" "$TMP/bart_scaled.safetensors" \
    --post-ln --scale-embedding
check "cached decoding equals the training forward (greedy, 4 sources)" bash -c "
    '$ROOT/build/testtools/encdec_decode_check' --post-ln >'$TMP/dec.out' 2>&1 &&
    grep -q ', 0 mismatches' '$TMP/dec.out'"
check "... with --scale-embedding" bash -c "
    '$ROOT/build/testtools/encdec_decode_check' --post-ln --scale-embedding >'$TMP/dec2.out' 2>&1 &&
    grep -q ', 0 mismatches' '$TMP/dec2.out'"

# training: losses of 6 iterations within 2e-7 relative of one process's (fp32 sums in
# another order; measured 6e-9). The vocabulary, 30524, padded to a multiple of 4 =
# divisible-by x TP: no padding rows (an import leaves them zero where plait draws them)
"$ROOT/build/testtools/bert_samples" make "$PLAIT_DATA/bert/vocab.txt" "$PLAIT_DATA/kjv.txt" \
    "$TMP/kjv_sent" 1000 >/dev/null
S=(--model bart --transformer-block-type post_ln --data-path "$TMP/kjv_sent"
   --vocab-file "$PLAIT_DATA/bert/vocab.txt" --split 90,10,0 --seq-length 32 --num-layers 2
   --hidden-size 64 --num-attention-heads 4 --micro-batch-size 2 --global-batch-size 8 --lr 1e-3
   --log-interval 1 --eval-iters 0 --seed 7 --train-iters 6 --hidden-dropout 0
   --attention-dropout 0)
lay() { # NAME NP FLAGS...
    local name=$1 np=$2; shift 2
    timeout -k 5 120 mpirun.openmpi -n "$np" "$PLAIT" train "${S[@]}" "$@" \
        --metrics-file "$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1
}
close() {
    paste <(losses "$TMP/$1.jsonl") <(losses "$TMP/$2.jsonl") | awk '
        { c++; d = $1 - $2; if (d < 0) d = -d; if (d > 2e-7 * $2) bad++ }
        END { exit !(c == 6 && !bad) }'
}
check "post-LN bart: one process, saved" lay one 1 --make-vocab-size-divisible-by 4 --save "$TMP/b1" \
    --save-interval 6
check "... the banner says post-LN with the exact GELU" grep -q "GELU (exact), .*post-LN" "$TMP/one.log"
check "DP 2, ZeRO 3" lay z3 2 --zero-stage 3 --make-vocab-size-divisible-by 4
check "DP 2, ZeRO 3: the losses of one process" close one z3
check "TP 2 with sequence parallelism" lay sp2 2 --tensor-model-parallel-size 2 --sequence-parallel \
    --make-vocab-size-divisible-by 2
check "TP 2 with sequence parallelism: the losses of one process" close one sp2
check "the manifest records post_ln, both stacks' norms of the embeddings and positions, no final norms" bash -c "
    M='$TMP/b1/iter_0000006/manifest.json'
    grep -q '\"transformer_block_type\":.*\"post_ln\"' \"\$M\" &&
    grep -q 'decoder_embedding.position_embeddings.weight' \"\$M\" &&
    grep -q 'encoder.initial_layernorm.weight' \"\$M\" && grep -q 'decoder.initial_layernorm.weight' \"\$M\" &&
    ! grep -q final_layernorm \"\$M\""
check_fails "a pre-LN bart run refuses the checkpoint naming --transformer-block-type" \
    "differs from this run's in --transformer-block-type" \
    "$PLAIT" train "${S[@]/post_ln/pre_ln}" --make-vocab-size-divisible-by 4 --load "$TMP/b1" --finetune
check_fails "--scale-embedding is refused for a pre-LN bart" "--scale-embedding is for --model bart --transformer-block-type post_ln" \
    "$PLAIT" train "${S[@]/post_ln/pre_ln}" --scale-embedding
check_fails "a --scale-embedding checkpoint is refused by a run without it, naming the flag" \
    "differs from this run's in --scale-embedding" bash -c "
    '$PLAIT' train ${S[*]@Q} --make-vocab-size-divisible-by 4 --train-iters 1 --scale-embedding \
        --save '$TMP/bs' --save-interval 1 >/dev/null 2>&1 &&
    '$PLAIT' train ${S[*]@Q} --make-vocab-size-divisible-by 4 --load '$TMP/bs' --finetune"
check "... and --use-checkpoint-args takes it" bash -c "
    '$PLAIT' train ${S[*]@Q} --make-vocab-size-divisible-by 4 --load '$TMP/bs' --finetune \
        --use-checkpoint-args >'$TMP/bs.log' 2>&1 && grep -q -- '--scale-embedding (the checkpoint.s)' '$TMP/bs.log'"
check_fails "post_ln is refused for --model t5" "--transformer-block-type post_ln is for --model bert and bart" \
    "$PLAIT" train "${S[@]/bart/t5}" --decoder-seq-length 32

# ---- Hugging Face: plait ckpt export / import --format hf
HB=$ROOT/tests/scripts/hf_bart.py
LOGITS=$ROOT/build/testtools/ckpt_logits
check "exported as BartForConditionalGeneration; plait's logits written" bash -c "
    '$PLAIT' ckpt export '$TMP/b1' --format hf --out '$TMP/b1_hf' >'$TMP/exp.log' 2>&1 &&
    grep -q '\"BartForConditionalGeneration\"' '$TMP/b1_hf/config.json' &&
    cmp '$TMP/b1_hf/vocab.txt' '$PLAIT_DATA/bert/vocab.txt' &&
    '$LOGITS' '$TMP/b1' '$TMP/b1_logits.safetensors' 24"
check "... config.json: [BOS] starts the decoder, [EOS] ends, [PAD] pads (plait's BART data)" bash -c "
    /usr/bin/python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))
sys.exit(not (c[\"decoder_start_token_id\"] == c[\"bos_token_id\"] == 30522 and
              c[\"eos_token_id\"] == 30523 and c[\"pad_token_id\"] == 0))' '$TMP/b1_hf/config.json'"
check "imported at TP 2; exported again: the same bytes" bash -c "
    '$PLAIT' ckpt import '$TMP/b1_hf' --format hf --out '$TMP/b1i' --tensor-model-parallel-size 2 \
        --make-vocab-size-divisible-by 2 >/dev/null 2>&1 &&
    '$PLAIT' ckpt export '$TMP/b1i' --out '$TMP/b1i_hf' >/dev/null 2>&1 &&
    cmp '$TMP/b1i_hf/model.safetensors' '$TMP/b1_hf/model.safetensors' &&
    cmp '$TMP/b1i_hf/config.json' '$TMP/b1_hf/config.json'"
R=(--micro-batch-size 2 --global-batch-size 8 --lr 1e-3 --train-iters 2 --log-interval 1
   --eval-iters 0 --hidden-dropout 0 --attention-dropout 0 --data-path "$TMP/kjv_sent" --split 90,10,0
   --seed 7)
check "plait train --load of the import --use-checkpoint-args --finetune: the original's losses bit for bit" bash -c "
    '$PLAIT' train ${R[*]@Q} --load '$TMP/b1i' --use-checkpoint-args --finetune \
        --metrics-file '$TMP/li.jsonl' >'$TMP/li.log' 2>&1 &&
    '$PLAIT' train ${S[*]@Q} ${R[*]@Q} --make-vocab-size-divisible-by 4 --load '$TMP/b1' --finetune \
        --metrics-file '$TMP/lo.jsonl' >'$TMP/lo.log' 2>&1 &&
    [ \"\$(grep -c lm_loss '$TMP/li.jsonl')\" = 2 ] &&
    diff <(grep -o '\"lm_loss\": [^,]*' '$TMP/li.jsonl') <(grep -o '\"lm_loss\": [^,]*' '$TMP/lo.jsonl')"
check "plait seq2seq from the import (TP 2) writes the original's tokens" bash -c "
    printf 'In the beginning God created the heaven\nand the earth\n' >'$TMP/src.txt' &&
    '$PLAIT' seq2seq --load '$TMP/b1' --input '$TMP/src.txt' --max-new-tokens 6 >'$TMP/s1.out' 2>/dev/null &&
    timeout -k 5 60 mpirun.openmpi -n 2 '$PLAIT' seq2seq --load '$TMP/b1i' --input '$TMP/src.txt' \
        --max-new-tokens 6 >'$TMP/s2.out' 2>/dev/null && [ -s '$TMP/s1.out' ] && cmp '$TMP/s1.out' '$TMP/s2.out'"
check "a random BartForConditionalGeneration (transformers' names): imported; plait's logits; exported" bash -c "
    /usr/bin/python3 '$HB' random '$TMP/rb' 5 >/dev/null &&
    '$PLAIT' ckpt import '$TMP/rb' --format hf --out '$TMP/rbi' >/dev/null 2>&1 &&
    '$LOGITS' '$TMP/rbi' '$TMP/rb_logits.safetensors' 24 &&
    '$PLAIT' ckpt export '$TMP/rbi' --out '$TMP/rbi_hf' >/dev/null 2>&1"
check "a random BART with scale_embedding: imported (--scale-embedding in the manifest); plait's logits" bash -c "
    /usr/bin/python3 '$HB' random '$TMP/rbs' 6 scale_embedding >/dev/null &&
    '$PLAIT' ckpt import '$TMP/rbs' --format hf --out '$TMP/rbsi' >/dev/null 2>&1 &&
    grep -q '\"scale_embedding\":.*1' '$TMP/rbsi/release/manifest.json' &&
    '$LOGITS' '$TMP/rbsi' '$TMP/rbs_logits.safetensors' 24 &&
    '$PLAIT' ckpt export '$TMP/rbsi' --out '$TMP/rbsi_hf' >/dev/null 2>&1 &&
    grep -q '\"scale_embedding\":.*true' '$TMP/rbsi_hf/config.json'"
check_fails "a pre-LN bart is refused naming --transformer-block-type" \
    "transformer-block-type pre_ln.*BartForConditionalGeneration is post-LayerNorm" \
    bash -c "'$PLAIT' train ${S[*]/post_ln/pre_ln} --make-vocab-size-divisible-by 4 --train-iters 1 \
        --save '$TMP/pre' --save-interval 1 >/dev/null 2>&1 &&
        '$PLAIT' ckpt export '$TMP/pre' --format hf --out '$TMP/pre_hf'"
bad() { # NAME PYTHON: a copy of rb with config.json changed by PYTHON (c)
    rm -rf "$TMP/$1" && cp -r "$TMP/rb" "$TMP/$1" && /usr/bin/python3 -c "import json, sys
c = json.load(open(sys.argv[1])); $2; json.dump(c, open(sys.argv[1], 'w'))" "$TMP/$1/config.json"
}
for kv in 'normalize_before:c["normalize_before"] = True:"normalize_before": true is not supported' \
          'act:c["activation_function"] = "relu":"activation_function": relu is not supported' \
          'heads:c["decoder_attention_heads"] = 2:encoder and decoder with 4 and 2 heads'; do
    IFS=: read -r name py msg <<<"$kv"
    bad "b_$name" "$py"
    check_fails "import refuses $name naming it" "$msg" "$PLAIT" ckpt import "$TMP/b_$name" --format hf --out "$TMP/b_out"
done

OMP_NUM_THREADS=2 /usr/bin/python3 "$HB" logits "$TMP/b1_hf" "$TMP/b1_logits.safetensors" \
    :: logits "$TMP/rb" "$TMP/rb_logits.safetensors" \
    :: logits "$TMP/rbs" "$TMP/rbs_logits.safetensors" \
    :: same "$TMP/rb" "$TMP/rbi_hf" model.encoder.embed_positions.weight model.decoder.embed_positions.weight \
    :: positions "$TMP/rb" "$TMP/rbi_hf" \
    :: parity "$TMP/bart.safetensors" "$TMP/bart_tp2.safetensors" "$TMP/bart_scaled.safetensors" \
    | tee "$TMP/py.out"
read -r p f < <(sed -nE 's/^hf_bart.py: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$TMP/py.out")
_pass=$((_pass + ${p:-0})); _fail=$((_fail + ${f:-1}))
summary hf_bart
