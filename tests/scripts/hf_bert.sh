#!/usr/bin/env bash
# Hugging Face's post-LN BERT in plait (--model bert --transformer-block-type post_ln):
# the model against an independent PyTorch BERT with transformers' modules and names
# (hf_bert.py: logits, MLM + NSP loss and every gradient of the pretraining model and
# of the sequence, token and span heads); TP 2 (with and without sequence parallelism),
# TP 2 x PP 2 and DP 2 with ZeRO 2 give one process's losses; the manifest records the
# block type, and a post-LN checkpoint is refused by a pre-LN run naming the flag.
# Hugging Face: the TP 2 x PP 2 checkpoint exports as BertForPreTraining (vocab.txt,
# tokenizer_config.json), a --bert-no-binary-head one as BertForMaskedLM (zero token
# types) and a plait finetune one as BertForSequenceClassification (id2label from its
# labels.txt); the PyTorch BERT reading each directory by transformers' names gives
# plait's logits (ckpt_logits). Import: the export read back at TP 2 x PP 2 exports to
# the same bytes, and plait train --load of it gives the original's losses bit for bit;
# directories written by the PyTorch reference with random weights (each of the five
# classes) import to plait's logits of the same model and export to the same tensors
# (BertForMaskedLM: its type-0 row folded into the positions); one of them fine-tunes
# with plait finetune. Keys plait cannot run are refused by name.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1
HB=$ROOT/tests/scripts/hf_bert.py
MP=$ROOT/build/testtools/model_parity

# ---- the model against PyTorch
PAR=()
for v in "pre::" "seq::--task sequence" "tok::--task token" "span::--task span"; do
    name=${v%%::*}; flags=${v#*::}
    check "model_parity --post-ln $flags" "$MP" "$TMP/par_$name.safetensors" --model bert --post-ln $flags
    PAR+=("$TMP/par_$name.safetensors")
done
check "model_parity --post-ln --bf16" "$MP" "$TMP/par_bf16.safetensors" --model bert --post-ln --bf16

# ---- layouts (the BERT vocabulary, 30524 with Megatron's [BOS] and [EOS], padded to a
# multiple of 4 = divisible-by x TP: no padding rows, which plait draws at random and an
# import leaves zero, so an import's losses can equal the original's): losses of 4 iterations equal one process's within 2e-7 relative (fp32
# sums in another order over TP; measured 3e-8)
A=(--model bert --transformer-block-type post_ln --num-layers 2 --hidden-size 64
   --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32 --global-batch-size 4
   --lr 1e-3 --lr-decay-style constant --mock-data --tokenizer-type BertWordPieceLowerCase
   --vocab-file "$PLAIT_DATA/bert/vocab.txt" --train-iters 4
   --log-interval 1 --eval-iters 0 --hidden-dropout 0 --attention-dropout 0)
lay() { # NAME NP FLAGS...
    local name=$1 np=$2; shift 2
    timeout -k 5 120 mpirun.openmpi -n "$np" "$PLAIT" train "${A[@]}" "$@" \
        --metrics-file "$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1
}
close() {
    paste <(losses "$TMP/$1.jsonl") <(losses "$TMP/$2.jsonl") | awk '
        { c++; d = $1 - $2; if (d < 0) d = -d; if (d > 2e-7 * $2) bad++ }
        END { exit !(c == 4 && !bad) }'
}
check "post-LN bert: one process, saved" lay one 1 --micro-batch-size 2 --make-vocab-size-divisible-by 4 \
    --save "$TMP/c1" --save-interval 4
check "... the banner says post-LN with the exact GELU" grep -q \
    "layers: LayerNorm, GELU (exact), .*post-LN (a norm after each residual and of the embeddings, no final norm)" \
    "$TMP/one.log"
check "TP 2" lay tp2 2 --micro-batch-size 2 --tensor-model-parallel-size 2 --make-vocab-size-divisible-by 2
check "... world 2 = tp 2" layout_is tp2 2 2 1 1
check "TP 2: the losses of one process" close one tp2
check "TP 2 with sequence parallelism" lay sp2 2 --micro-batch-size 2 --tensor-model-parallel-size 2 \
    --sequence-parallel --make-vocab-size-divisible-by 2
check "TP 2 with sequence parallelism: the losses of one process" close one sp2
check "TP 2 x PP 2, saved" lay tp2pp2 4 --micro-batch-size 2 --tensor-model-parallel-size 2 \
    --pipeline-model-parallel-size 2 --make-vocab-size-divisible-by 2 --save "$TMP/c4" --save-interval 4
check "... world 4 = tp 2 x pp 2" layout_is tp2pp2 4 2 1 2
check "TP 2 x PP 2: the losses of one process" close one tp2pp2
check "one process, micro-batches of 1" lay one_m1 1 --micro-batch-size 1 --make-vocab-size-divisible-by 4
check "DP 2, ZeRO 2" lay dp2 2 --micro-batch-size 1 --zero-stage 2 --make-vocab-size-divisible-by 4
check "DP 2, ZeRO 2: the losses of one process" close one_m1 dp2

# ---- the manifest and the flags
M=$TMP/c1/iter_0000004/manifest.json
check "the manifest records transformer_block_type post_ln and the exact GELU" bash -c "
    grep -q '\"transformer_block_type\":.*\"post_ln\"' '$M' && grep -q '\"gelu_exact\":.*1' '$M' &&
    grep -q 'encoder.initial_layernorm.weight' '$M' && ! grep -q 'final_layernorm' '$M'"
B=(--model bert --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32
   --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4 --lr 1e-3 --mock-data
   --tokenizer-type BertWordPieceLowerCase --vocab-file "$PLAIT_DATA/bert/vocab.txt"
   --make-vocab-size-divisible-by 4 --train-iters 4 --eval-iters 0)
check_fails "a pre-LN run refuses the post-LN checkpoint naming --transformer-block-type" \
    "differs from this run's in --transformer-block-type" "$PLAIT" train "${B[@]}" --load "$TMP/c1" --finetune
check "--use-checkpoint-args takes post_ln from the checkpoint" bash -c "
    '$PLAIT' train --micro-batch-size 2 --global-batch-size 4 --lr 1e-3 --mock-data --train-iters 4 \
        --eval-iters 0 --load '$TMP/c1' --finetune --use-checkpoint-args >'$TMP/ua.log' 2>&1 &&
    grep -q 'post-LN (a norm after' '$TMP/ua.log'"
check_fails "post_ln is refused for --model gpt" "--transformer-block-type post_ln is for --model bert" \
    "$PLAIT" train "${B[@]}" --model gpt --transformer-block-type post_ln
check_fails "post_ln is refused with --apply-residual-connection-post-layernorm" \
    "post_ln with --apply-residual-connection-post-layernorm" \
    "$PLAIT" train "${B[@]}" --transformer-block-type post_ln --apply-residual-connection-post-layernorm

# ---- export (plait ckpt export --format hf)
LOGITS=$ROOT/build/testtools/ckpt_logits
exp() { # NAME: $TMP/NAME exported to $TMP/NAME_hf, plait's logits of it in $TMP/NAME_logits
    "$PLAIT" ckpt export "$TMP/$1" --format hf --out "$TMP/$1_hf" >"$TMP/$1_exp.log" 2>&1 &&
        "$LOGITS" "$TMP/$1" "$TMP/$1_logits.safetensors" 32
}
keys_are() { [ "$(/usr/bin/python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))
print(" ".join(json.dumps(c.get(k)) for k in sys.argv[2:]))' "$@" | tail -n 1)" = "$WANT" ]; }
check "TP 2 x PP 2: exported; plait's logits written" exp c4
check "... BertForPreTraining, vocab.txt the run's, BertTokenizer lower-casing" bash -c "
    grep -q '\"BertForPreTraining\"' '$TMP/c4_hf/config.json' &&
    cmp '$TMP/c4_hf/vocab.txt' '$PLAIT_DATA/bert/vocab.txt' &&
    grep -q '\"do_lower_case\":.*true' '$TMP/c4_hf/tokenizer_config.json' &&
    grep -q '\"BertTokenizer\"' '$TMP/c4_hf/tokenizer_config.json' &&
    ! test -e '$TMP/c4_hf/generation_config.json'"
WANT='"gelu" 1e-05 2 30524 0 "absolute"' check "... config.json: exact GELU, eps, 2 token types, vocab, [PAD] 0" \
    keys_are "$TMP/c4_hf/config.json" hidden_act layer_norm_eps type_vocab_size vocab_size \
    pad_token_id position_embedding_type
check "--bert-no-binary-head: one process, saved" bash -c "'$PLAIT' train ${A[*]@Q} --micro-batch-size 2 \
    --bert-no-binary-head --save '$TMP/nb' --save-interval 4 >'$TMP/nb.log' 2>&1"
check "--bert-no-binary-head: exported as BertForMaskedLM; plait's logits written" bash -c "
    exp() { $(declare -f exp | tail -n +2); }; LOGITS='$LOGITS' PLAIT='$PLAIT' TMP='$TMP' exp nb &&
    grep -q '\"BertForMaskedLM\"' '$TMP/nb_hf/config.json'"
check_fails "a pre-LN BERT is refused naming --transformer-block-type" \
    "transformer-block-type pre_ln.*BertForPreTraining are post-LayerNorm" \
    bash -c "'$PLAIT' train ${B[*]@Q} --save '$TMP/pre' --save-interval 4 >/dev/null 2>&1 &&
             '$PLAIT' ckpt export '$TMP/pre' --format hf --out '$TMP/pre_hf'"

# ---- import (plait ckpt import --format hf)
check "TP 2 x PP 2's export imported at TP 2 x PP 2" "$PLAIT" ckpt import "$TMP/c4_hf" --format hf \
    --out "$TMP/c4i" --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
    --make-vocab-size-divisible-by 2
check "... with the BertWordPiece tokenizer" bash -c "
    grep -q BertWordPieceLowerCase '$TMP/c4i/release/manifest.json' &&
    cmp '$TMP/c4i/release/tokenizer/vocab/vocab.txt' '$PLAIT_DATA/bert/vocab.txt'"
check "... exported again: the same model.safetensors and config.json, byte for byte" bash -c "
    '$PLAIT' ckpt export '$TMP/c4i' --out '$TMP/c4i_hf' >/dev/null 2>&1 &&
    cmp '$TMP/c4i_hf/model.safetensors' '$TMP/c4_hf/model.safetensors' &&
    cmp '$TMP/c4i_hf/config.json' '$TMP/c4_hf/config.json'"
RUN=(--micro-batch-size 2 --global-batch-size 4 --lr 1e-3 --lr-decay-style constant --mock-data
     --train-iters 2 --log-interval 1
     --eval-iters 0 --pipeline-model-parallel-size 2 --hidden-dropout 0 --attention-dropout 0)
check "plait train --load of the import --use-checkpoint-args --finetune at PP 2" bash -c "
    timeout -k 5 120 mpirun.openmpi -n 2 '$PLAIT' train ${RUN[*]} --load '$TMP/c4i' --use-checkpoint-args \
    --finetune --metrics-file '$TMP/ld_hf.jsonl' >'$TMP/ld_hf.log' 2>&1"
check "plait train --load of the original --finetune at PP 2 (the model's flags)" bash -c "
    timeout -k 5 120 mpirun.openmpi -n 2 '$PLAIT' train ${A[*]@Q} ${RUN[*]} --make-vocab-size-divisible-by 4 \
    --load '$TMP/c4' --finetune --metrics-file '$TMP/ld_pl.jsonl' >'$TMP/ld_pl.log' 2>&1"
check "... the same 2 losses, bit for bit" bash -c "
    [ \"\$(grep -c lm_loss '$TMP/ld_hf.jsonl')\" = 2 ] &&
    diff <(grep -o '\"lm_loss\": [^,]*' '$TMP/ld_hf.jsonl') <(grep -o '\"lm_loss\": [^,]*' '$TMP/ld_pl.jsonl')"
# directories written by the PyTorch reference with random weights (and transformers' names)
for arch in BertForPreTraining BertForMaskedLM BertForSequenceClassification \
            BertForTokenClassification BertForQuestionAnswering; do
    vocab=; [ $arch = BertForPreTraining ] && vocab=$PLAIT_DATA/bert/vocab.txt
    check "$arch (random, transformers' names): imported; plait's logits written; exported" bash -c "
        /usr/bin/python3 '$HB' random $arch '$TMP/r_$arch' 7 $vocab >/dev/null &&
        '$PLAIT' ckpt import '$TMP/r_$arch' --format hf --out '$TMP/r_${arch}_i' >'$TMP/r_$arch.log' 2>&1 &&
        '$LOGITS' '$TMP/r_${arch}_i' '$TMP/r_${arch}_logits.safetensors' 32 &&
        '$PLAIT' ckpt export '$TMP/r_${arch}_i' --out '$TMP/r_${arch}_x' >/dev/null 2>&1"
done
check "plait train --load of the BertForPreTraining import (vocab.txt's 30522 tokens; the run's tokenizer adds [BOS], [EOS])" bash -c "
    '$PLAIT' train --micro-batch-size 2 --global-batch-size 2 --lr 1e-3 --mock-data --train-iters 2 \
        --eval-iters 0 --log-interval 1 --load '$TMP/r_BertForPreTraining_i' --use-checkpoint-args \
        --finetune >'$TMP/mlm.log' 2>&1 &&
    grep -q \"vocabulary has 30522 tokens, this run's tokenizer 30524\" '$TMP/mlm.log' &&
    grep -q 'iteration  *2/' '$TMP/mlm.log'"
check "BertForMaskedLM with LayerNorm.gamma / beta and BertForPreTraining's heads (as bert-base-uncased's files): imported, the heads dropped by name; plait's logits" bash -c "
    /usr/bin/python3 '$HB' random BertForMaskedLM:legacy '$TMP/r_legacy' 7 >/dev/null &&
    '$PLAIT' ckpt import '$TMP/r_legacy' --format hf --out '$TMP/r_legacy_i' >'$TMP/r_legacy.log' 2>&1 &&
    grep -q 'cls.seq_relationship.weight is not part of the config.s class: dropped' '$TMP/r_legacy.log' &&
    '$LOGITS' '$TMP/r_legacy_i' '$TMP/r_legacy_logits.safetensors' 32"
check "BertForMaskedLM: token types other than 0 (not zero here) are named as dropped" \
    grep -q "token_type_embeddings.weight: the rows of token types other than 0 are not zero" \
    "$TMP/r_BertForMaskedLM.log"

# ---- fine-tuning from a Hugging Face BERT (issue 13): the imported random
# BertForPreTraining (the real BERT vocabulary) on finetune.sh's tiny task, KJV verses
# labelled OT / NT by their line
verses() { # FILE EVERY OFFSET
    { printf 'sentence\tlabel\n'
      awk -F'\n' -v e="$2" -v o="$3" 'NR % e == o { sub(/\r$/, ""); gsub(/\t/, " ");
        print $0 "\t" (NR <= 23145 ? "OT" : "NT") }' "$PLAIT_DATA/kjv.txt"; } >"$1"
}
verses "$TMP/train.tsv" 634 0
verses "$TMP/valid.tsv" 1481 7
FT=(--train-data "$TMP/train.tsv" --valid-data "$TMP/valid.tsv" --header
    --pretrained-checkpoint "$TMP/r_BertForPreTraining_i" --vocab-file "$PLAIT_DATA/bert/vocab.txt"
    --transformer-block-type post_ln --num-layers 2 --hidden-size 64 --num-attention-heads 4
    --max-position-embeddings 64 --seq-length 32 --micro-batch-size 8 --global-batch-size 16
    --epochs 2 --lr 1e-3 --log-interval 1 --eval-interval 3)
check_fails "plait finetune from it without the import's --norm-epsilon 1e-12: refused naming the flag" \
    "differs from this run's in --norm-epsilon" "$PLAIT" finetune "${FT[@]}" --save "$TMP/ftx"
check "plait finetune from it (--norm-epsilon 1e-12): 6 iterations" bash -c "
    '$PLAIT' finetune ${FT[*]@Q} --norm-epsilon 1e-12 --save '$TMP/ft' >'$TMP/ft.log' 2>&1 &&
    grep -q 'loaded the pretrained weights of .*r_BertForPreTraining_i' '$TMP/ft.log' &&
    [ \"\$(grep -c '\"lm_loss\"' '$TMP/ft/metrics.jsonl')\" = 6 ]"
check "... exported as BertForSequenceClassification with its labels (NT, OT); plait's logits" bash -c "
    exp() { $(declare -f exp | tail -n +2); }; LOGITS='$LOGITS' PLAIT='$PLAIT' TMP='$TMP' exp ft &&
    grep -q '\"BertForSequenceClassification\"' '$TMP/ft_hf/config.json'"
WANT='{"0": "NT", "1": "OT"} {"NT": 0, "OT": 1}' check "... id2label and label2id from labels.txt" \
    keys_are "$TMP/ft_hf/config.json" id2label label2id
check "plait finetune from the BertForMaskedLM import with --bert-no-binary-head (the pooler from --seed)" bash -c "
    '$PLAIT' finetune --train-data '$TMP/train.tsv' --header --pretrained-checkpoint '$TMP/r_BertForMaskedLM_i' \
        --vocab-file '$TMP/r_BertForMaskedLM/vocab.txt' --bert-no-binary-head --transformer-block-type post_ln \
        --num-layers 2 --hidden-size 64 --num-attention-heads 4 --max-position-embeddings 64 \
        --norm-epsilon 1e-12 --seq-length 32 --micro-batch-size 8 --global-batch-size 16 --epochs 1 \
        --lr 1e-3 --log-interval 1 --save '$TMP/ftm' >'$TMP/ftm.log' 2>&1 &&
    grep -q 'initialised from --seed 1234: pooler.dense.weight' '$TMP/ftm.log' &&
    [ \"\$(grep -c '\"lm_loss\"' '$TMP/ftm/metrics.jsonl')\" = 3 ]"

# ---- what plait cannot run is refused naming the key
bad() { # NAME PYTHON: a copy of r_BertForMaskedLM with config.json changed by PYTHON (c)
    rm -rf "$TMP/$1" && cp -r "$TMP/r_BertForMaskedLM" "$TMP/$1" && /usr/bin/python3 -c "import json, sys
c = json.load(open(sys.argv[1])); $2; json.dump(c, open(sys.argv[1], 'w'))" "$TMP/$1/config.json"
}
bad b_act 'c["hidden_act"] = "gelu_new"'
check_fails "import refuses hidden_act gelu_new naming the key" '"hidden_act": "gelu_new" is not supported' \
    "$PLAIT" ckpt import "$TMP/b_act" --format hf --out "$TMP/b_out"
bad b_pos 'c["position_embedding_type"] = "relative_key"'
check_fails "import refuses relative positions naming the key" '"position_embedding_type": "relative_key" is not supported' \
    "$PLAIT" ckpt import "$TMP/b_pos" --format hf --out "$TMP/b_out"
bad b_dec 'c["is_decoder"] = True'
check_fails "import refuses a decoder naming the key" '"is_decoder": true is not supported' \
    "$PLAIT" ckpt import "$TMP/b_dec" --format hf --out "$TMP/b_out"
bad b_arch 'c["architectures"] = ["BertForMultipleChoice"]'
check_fails "import refuses BertForMultipleChoice naming it" '"architectures": BertForMultipleChoice is not supported' \
    "$PLAIT" ckpt import "$TMP/b_arch" --format hf --out "$TMP/b_out"

# ---- the oracle
O=()
for arch in BertForPreTraining BertForMaskedLM BertForSequenceClassification \
            BertForTokenClassification BertForQuestionAnswering; do
    O+=(:: logits_in "$TMP/r_$arch" "$TMP/r_${arch}_logits.safetensors")
    [ $arch = BertForMaskedLM ] || O+=(:: same "$TMP/r_$arch" "$TMP/r_${arch}_x")
done
OMP_NUM_THREADS=2 /usr/bin/python3 "$HB" parity "${PAR[@]}" \
    :: bf16_loss "$TMP/par_pre.safetensors" "$TMP/par_bf16.safetensors" :: logits "$TMP/c4_hf" "$TMP/c4_logits.safetensors" \
    :: logits "$TMP/nb_hf" "$TMP/nb_logits.safetensors" \
    :: zeros "$TMP/nb_hf" bert.embeddings.token_type_embeddings.weight \
    :: logits "$TMP/ft_hf" "$TMP/ft_logits.safetensors" \
    :: logits_in "$TMP/r_legacy" "$TMP/r_legacy_logits.safetensors" \
    :: same "$TMP/r_BertForMaskedLM" "$TMP/r_BertForMaskedLM_x" bert.embeddings.token_type_embeddings.weight \
       bert.embeddings.position_embeddings.weight "${O[@]}" | tee "$TMP/py.out"
read -r p f < <(sed -nE 's/^hf_bert.py: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$TMP/py.out")
_pass=$((_pass + ${p:-0})); _fail=$((_fail + ${f:-1}))
summary hf_bert
