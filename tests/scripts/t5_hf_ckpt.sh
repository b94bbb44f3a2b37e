#!/usr/bin/env bash
# transformers' T5ForConditionalGeneration out of and into plait (plait ckpt export|import
# --format hf, src/ckpt/hf_t5.c). A T5 with transformers' layer trained at TP 2 (gated-gelu,
# untied) and one trained in one process (relu, tied: the output layer's input scaled by
# hidden^-0.5) are exported, and the independent PyTorch T5 of t5_hf_ref.py, reading the
# directory by Hugging Face names and config.json alone, gives plait's decoder logits of
# the same checkpoint (encdec_logits) within fp32 rounding (t5_hf_export.py, with a control
# that must differ); import (at TP 2 and TP 1) then export gives the same bytes; a
# spiece.model comes along both ways; plait train starts from an import
# (--use-checkpoint-args: the T5 flags from the checkpoint) and plait seq2seq generates from
# it; KV-cached decoding with the decoder's bias tables equals the training forward at TP 1
# and 2 (encdec_decode_check --hf-t5); a T5 directory written by Python alone
# (t5_hf_make.py) imports at TP 2, gives the PyTorch T5's logits and generates text with
# its spiece.model; Megatron's T5 and config.json values plait cannot
# run are refused naming the setting or the key.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1
"$ROOT/build/testtools/bert_samples" make "$PLAIT_DATA/bert/vocab.txt" "$PLAIT_DATA/kjv.txt" \
    "$TMP/kjv_sent" 1000 >/dev/null
LOGITS=$ROOT/build/testtools/encdec_logits
SMALL=(--model t5 --data-path "$TMP/kjv_sent" --vocab-file "$PLAIT_DATA/bert/vocab.txt"
       --vocab-extra-ids 100 --split 90,10,0 --encoder-num-layers 2 --decoder-num-layers 2
       --hidden-size 64 --num-attention-heads 4 --encoder-seq-length 32 --decoder-seq-length 16
       --micro-batch-size 2 --global-batch-size 4 --lr 1e-2 --log-interval 1 --eval-iters 0
       --seed 7 --train-iters 3 --save-interval 3)
HFL=(--normalization RMSNorm --disable-bias-linear --position-embedding-type relative
     --softmax-scale 1 --norm-epsilon 1e-6)
train() { # NAME NP FLAGS...
    local name=$1 np=$2; shift 2
    timeout -k 5 120 mpirun.openmpi -n "$np" "$PLAIT" train "${SMALL[@]}" "$@" \
        --tensor-model-parallel-size "$np" --save "$TMP/$name" >"$TMP/$name.log" 2>&1 &&
        layout_is "$name" "$np" "$np" 1 1
}
check "t5 hf: a gated-gelu untied T5 trains at TP 2" \
    train gg 2 "${HFL[@]}" --ffn-activation geglu --untie-embeddings-and-output-weights
check "t5 hf: a relu tied T5 trains in one process" \
    train rt 1 "${HFL[@]}" --ffn-activation relu --output-layer-input-scale 0.125
for n in gg rt; do
    check "t5 hf: $n exported" bash -c "'$PLAIT' ckpt export '$TMP/$n' --format hf \
        --out '$TMP/${n}_hf' > '$TMP/${n}_export.log' 2>&1"
    check "t5 hf: $n plait's logits written" "$LOGITS" "$TMP/$n" "$TMP/${n}_logits.safetensors"
done
check "t5 hf: config.json is T5Config's" $PY -c "
import json, sys
a, b = (json.load(open('$TMP/%s_hf/config.json' % n)) for n in ('gg', 'rt'))
sys.exit(not (a['architectures'] == ['T5ForConditionalGeneration'] and
              a['feed_forward_proj'] == 'gated-gelu' and not a['tie_word_embeddings'] and
              b['feed_forward_proj'] == 'relu' and b['tie_word_embeddings'] and
              a['d_kv'] == 16 and a['num_decoder_layers'] == 2 and
              a['relative_attention_num_buckets'] == 32 and a['decoder_start_token_id'] == 0))"
OMP_NUM_THREADS=2 $PY "$ROOT/tests/scripts/t5_hf_export.py" "$TMP/gg_hf" "$TMP/gg_logits.safetensors" \
    "$TMP/rt_hf" "$TMP/rt_logits.safetensors" | tee "$TMP/py.out" | grep -v '^ok'
read -r p f < <(sed -nE 's/^t5_hf_export: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$TMP/py.out")
_pass=$((_pass + ${p:-0})); _fail=$((_fail + ${f:-1}))

# import -> export: the same bytes (the tied model with a spiece.model along)
cp "$PLAIT_DATA/sentencepiece/30k-clean.model" "$TMP/rt_hf/spiece.model"
roundtrip() { # NAME TP
    "$PLAIT" ckpt import "$TMP/$1_hf" --format hf --out "$TMP/$1_imp$2" \
        --tensor-model-parallel-size "$2" >"$TMP/$1_imp$2.log" 2>&1 &&
        "$PLAIT" ckpt export "$TMP/$1_imp$2" --format hf --out "$TMP/$1_hf2_$2" \
            >>"$TMP/$1_imp$2.log" 2>&1 &&
        for f in config.json model.safetensors generation_config.json; do
            cmp "$TMP/$1_hf/$f" "$TMP/$1_hf2_$2/$f" || return 1
        done
}
check "t5 hf: gg imported at TP 1 exports the same bytes" roundtrip gg 1
check "t5 hf: rt imported at TP 2 exports the same bytes" roundtrip rt 2
check "t5 hf: the spiece.model comes back with a T5Tokenizer config" bash -c "
    cmp '$TMP/rt_hf/spiece.model' '$TMP/rt_hf2_2/spiece.model' &&
    grep -q '\"T5Tokenizer\"' '$TMP/rt_hf2_2/tokenizer_config.json'"

# an import trains (its T5 flags from the checkpoint) and generates
check "t5 hf: plait train starts from an import (--use-checkpoint-args)" bash -c "
    timeout -k 5 120 '$PLAIT' train --model t5 --data-path '$TMP/kjv_sent' \
        --vocab-file '$PLAIT_DATA/bert/vocab.txt' --vocab-extra-ids 100 --split 90,10,0 \
        --seq-length 32 --decoder-seq-length 16 --micro-batch-size 2 --global-batch-size 4 \
        --lr 1e-3 --log-interval 1 --eval-iters 0 --train-iters 2 --use-checkpoint-args \
        --load '$TMP/gg_imp1' --save '$TMP/gg_ft' --save-interval 2 > '$TMP/gg_ft.log' 2>&1 &&
    [ \$(grep -c 'lm loss: [0-9]' '$TMP/gg_ft.log') = 2 ] && $PY -c \"
import json, sys
m = json.load(open('$TMP/gg_ft/iter_0000002/manifest.json'))['model']
sys.exit(not (m['ffn_activation'] == 'geglu' and m['position_embedding_type'] == 'relative'
              and m['softmax_scale'] == 1 and m['relative_attention_num_buckets'] == 32))\""
printf 'in the beginning god created the heaven\nand the earth\n' >"$TMP/src.txt"
check "t5 hf: plait seq2seq generates from the trained import, one line per source" bash -c "
    '$PLAIT' seq2seq --load '$TMP/gg_ft' --input '$TMP/src.txt' --max-new-tokens 6 \
        --output '$TMP/gen.txt' > '$TMP/gen.log' 2>&1 && [ \$(wc -l < '$TMP/gen.txt') = 2 ]"
check "t5 hf: plait seq2seq --beam-size 3 --ids from it" bash -c "
    echo '5 6 7 8 9' > '$TMP/ids.txt' &&
    '$PLAIT' seq2seq --load '$TMP/gg_ft' --input '$TMP/ids.txt' --ids --beam-size 3 \
        --max-new-tokens 5 --output '$TMP/beam.txt' > '$TMP/beam.log' 2>&1 &&
    [ \$(wc -l < '$TMP/beam.txt') = 1 ]"
DEC="$ROOT/build/testtools/encdec_decode_check"
check "t5 hf: cached decoding with the bias tables equals the training forward (TP 1)" \
    bash -c "'$DEC' --hf-t5 > '$TMP/dec1.txt'"
check "t5 hf: TP 2 equals the forward and TP 1's tokens" \
    bash -c "timeout -k 5 60 mpirun.openmpi -n 2 '$DEC' --hf-t5 > '$TMP/dec2.txt' &&
             diff <(grep ^source '$TMP/dec1.txt') <(grep ^source '$TMP/dec2.txt')"

# a directory written independently of plait (t5_hf_make.py: t5-small's config style, no
# tie_word_embeddings key, the embed_tokens copies, Llama 2's SentencePiece model as
# spiece.model) imports, gives the PyTorch T5's logits, and generates from text
for v in relu gated; do
    dkv=$([ $v = relu ] && echo 24 || echo 16) # relu: T5 v1.1 small's heads x d_kv != d_model
    check "t5 hf: a third-party $v T5 directory (d_kv $dkv) imports (TP 2)" bash -c "
        $PY '$ROOT/tests/scripts/t5_hf_make.py' '$TMP/x_$v' '$PLAIT_DATA/llama2/tokenizer.model' \
            $v $dkv > /dev/null && '$PLAIT' ckpt import '$TMP/x_$v' --format hf --out '$TMP/x_${v}_imp' \
            --tensor-model-parallel-size 2 > '$TMP/x_$v.log' 2>&1 &&
        '$LOGITS' '$TMP/x_${v}_imp' '$TMP/x_${v}_logits.safetensors'"
done
OMP_NUM_THREADS=2 $PY "$ROOT/tests/scripts/t5_hf_export.py" "$TMP/x_relu" "$TMP/x_relu_logits.safetensors" \
    "$TMP/x_gated" "$TMP/x_gated_logits.safetensors" | tee "$TMP/py2.out" | grep -v '^ok'
read -r p f < <(sed -nE 's/^t5_hf_export: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$TMP/py2.out")
_pass=$((_pass + ${p:-0})); _fail=$((_fail + ${f:-1}))
check "t5 hf: plait seq2seq generates text from it at TP 2 (decoder start 0, eos </s>)" bash -c "
    timeout -k 5 60 mpirun.openmpi -n 2 '$PLAIT' seq2seq --load '$TMP/x_gated_imp' \
        --input '$TMP/src.txt' --max-new-tokens 6 --output '$TMP/xgen.txt' > '$TMP/xgen.log' 2>&1 &&
    [ \$(wc -l < '$TMP/xgen.txt') = 2 ]"

# refusals
check "t5 hf: Megatron's T5 trains (1 iteration)" \
    bash -c "timeout -k 5 120 '$PLAIT' train ${SMALL[*]} --train-iters 1 --save-interval 1 \
        --save '$TMP/mg' > '$TMP/mg.log' 2>&1"
check_fails "t5 hf: Megatron's T5 export is refused naming LayerNorm" \
    "normalization LayerNorm \(T5LayerNorm is an RMS norm" \
    "$PLAIT" ckpt export "$TMP/mg" --format hf --out "$TMP/mg_hf"
check "t5 hf: ... and leaves no directory" test ! -e "$TMP/mg_hf"
bad_config() { # KEY VALUE WORDS: an import of gg_hf with config.json's KEY set is refused
    rm -rf "$TMP/bad" "$TMP/bad_imp" && cp -r "$TMP/gg_hf" "$TMP/bad" &&
        $PY -c "
import json; p = '$TMP/bad/config.json'; c = json.load(open(p)); c['$1'] = json.loads('$2')
json.dump(c, open(p, 'w'))" &&
        ! "$PLAIT" ckpt import "$TMP/bad" --format hf --out "$TMP/bad_imp" >"$TMP/bad.log" 2>&1 &&
        grep -q "$3" "$TMP/bad.log"
}
check "t5 hf: feed_forward_proj gated-silu is refused naming the key" \
    bad_config feed_forward_proj '"gated-silu"' '"feed_forward_proj": "gated-silu"'
check "t5 hf: a d_kv that does not fit the tensors is refused naming the tensor" \
    bad_config d_kv 32 'tensor encoder.block.0.layer.0.SelfAttention.q.weight has'
check "t5 hf: heads x d_kv != d_model: export -> import -> export, the same bytes" bash -c "
    '$PLAIT' ckpt export '$TMP/x_relu_imp' --format hf --out '$TMP/x_relu_hf2' > /dev/null 2>&1 &&
    grep -q '\"d_kv\":.24' '$TMP/x_relu_hf2/config.json' &&
    '$PLAIT' ckpt import '$TMP/x_relu_hf2' --format hf --out '$TMP/x_relu_imp3' > /dev/null 2>&1 &&
    '$PLAIT' ckpt export '$TMP/x_relu_imp3' --format hf --out '$TMP/x_relu_hf3' > /dev/null 2>&1 &&
    cmp '$TMP/x_relu_hf2/model.safetensors' '$TMP/x_relu_hf3/model.safetensors' &&
    cmp '$TMP/x_relu_hf2/config.json' '$TMP/x_relu_hf3/config.json'"
summary t5_hf_ckpt
