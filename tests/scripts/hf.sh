#!/usr/bin/env bash
# Hugging Face export and import (plait ckpt export|import --format hf, src/ckpt/hf_*.c).
# Export: checkpoints
# trained at TP 2 x PP 2 (GPT; Llama with 2 key/value groups, rope base 500000 and
# Llama 3.1's rope scaling) and PP 2 (GPT with an untied output layer) are exported, and
# an independent PyTorch GPT-2 / Llama written from transformers' modeling files
# (hf_models.py), reading the directory by Hugging Face names and config.json only, gives
# plait's logits (ckpt_logits: plait's forward of the same checkpoint) within fp32
# rounding. BF16 exports are the fp32 tensors rounded to nearest even; a sharded export
# (index + shards) holds the same tensors as the single file. The run's tokenizer files
# (GPT-2 BPE, Llama 2 SentencePiece) are exported byte for byte with their bos/eos ids.
# A model GPT2LMHeadModel cannot express, a pre-LN BERT (Megatron core's, unlike
# transformers' post-LN BERT: hf_bert.sh has the post-LN one) and a non-empty --out are
# refused.
# Import: the exports read back into plait release checkpoints (TP 2 x PP 2; Llama at TP 4,
# its 2 key/value groups shared) hold the trained checkpoint's model tensors bit for bit
# (the vocabulary, 128 tokens padded by 64 x TP, has no padding rows for the export to
# drop), export again to the same bytes, and plait train starts from one at another layout
# (its model flags from the import: --use-checkpoint-args) with the losses of --finetune
# from the original; the tokenizer's files come along; a
# config.json or tensor plait cannot run is refused naming the key or the tensor.
# --use-checkpoint-args: sizes fill the flags not given, the architecture overrides them.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1
HF=$ROOT/tests/scripts/hf_models.py
LOGITS=$ROOT/build/testtools/ckpt_logits
BASE=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64
      --max-position-embeddings 64 --micro-batch-size 1 --global-batch-size 4 --lr 1e-3
      --mock-data --vocab-size 128 --make-vocab-size-divisible-by 64 --train-iters 2
      --log-interval 1 --eval-iters 0)
SMALL=("${BASE[@]}" --save-interval 2)

# go NAME NP TP PP FLAGS...: trains into $TMP/NAME
go() {
    local name=$1 np=$2 tp=$3 pp=$4; shift 4
    timeout -k 5 120 mpirun.openmpi -n "$np" "$PLAIT" train "$@" --tensor-model-parallel-size "$tp" \
        --pipeline-model-parallel-size "$pp" --save "$TMP/$name" >"$TMP/$name.log" 2>&1 &&
        layout_is "$name" "$np" "$tp" $((np / (tp * pp))) "$pp"
}
export_hf() { local name=$1; shift; "$PLAIT" ckpt export "$TMP/$name" --format hf "$@"; }

check "gpt: TP 2 x PP 2, 2 iterations" go g 4 2 2 "${SMALL[@]}"
check "llama (2 groups, rope scaling): TP 2 x PP 2, 2 iterations" \
    go l 4 2 2 --model llama --group-query-attention --num-query-groups 2 --use-rope-scaling \
    --rotary-base 500000 "${SMALL[@]}"
check "gpt, untied output layer: PP 2, 2 iterations" \
    go gu 2 1 2 --untie-embeddings-and-output-weights "${SMALL[@]}"
for n in g l gu; do
    check "$n: exported (fp32) and plait's logits written" \
        bash -c "'$PLAIT' ckpt export '$TMP/$n' --out '$TMP/${n}_hf' >/dev/null &&
                 '$LOGITS' '$TMP/$n' '$TMP/${n}_logits.safetensors' 64"
done
check "gpt: exported as bf16" export_hf g --out "$TMP/g_bf16" --bf16
check "gpt: exported in shards of at most 20KB" export_hf g --out "$TMP/g_sh" --max-shard-size 20KB
check "gpt: ... an index and 2+ shards" bash -c "test -f '$TMP/g_sh/model.safetensors.index.json' &&
    test -f '$TMP/g_sh/model-00002-of-'*.safetensors && ! test -e '$TMP/g_sh/model.safetensors'"
# keys FILE KEY...: the values of the JSON file's keys, space-separated
keys() { /usr/bin/python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))
print(" ".join(json.dumps(c.get(k)) for k in sys.argv[2:]))' "$@"; }
# keys_are FILE "VALUES" KEY...
keys_are() { local f=$1 want=$2; shift 2; [ "$(keys "$f" "$@")" = "$want" ]; }
check "gpt: config.json: GPT2LMHeadModel, tied, 128 tokens, 64 positions" \
    keys_are "$TMP/g_hf/config.json" '["GPT2LMHeadModel"] true 128 64' architectures \
    tie_word_embeddings vocab_size n_positions
check_fails "an existing non-empty --out is refused" "exists and is not an empty directory" \
    export_hf g --out "$TMP/g_hf"
check_fails "an unknown --format is refused naming the format" "--format torch: expected hf" \
    export_hf g --out "$TMP/g_x" --format torch

# ---- the tokenizer's files and ids (one process, one iteration)
ONE=(--num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 16
     --max-position-embeddings 16 --micro-batch-size 1 --global-batch-size 1 --lr 1e-3
     --mock-data --train-iters 1 --log-interval 1 --save-interval 1 --eval-iters 0)
check "gpt with GPT2BPETokenizer: trained and exported" bash -c "
    '$PLAIT' train ${ONE[*]} --tokenizer-type GPT2BPETokenizer --vocab-file '$PLAIT_DATA/gpt2/encoder.json' \
        --merge-file '$PLAIT_DATA/gpt2/vocab.bpe' --save '$TMP/gt' >'$TMP/gt.log' 2>&1 &&
    '$PLAIT' ckpt export '$TMP/gt' --out '$TMP/gt_hf' --bf16"
check "gpt: vocab.json and merges.txt are the run's files" bash -c "
    cmp '$TMP/gt_hf/vocab.json' '$PLAIT_DATA/gpt2/encoder.json' &&
    cmp '$TMP/gt_hf/merges.txt' '$PLAIT_DATA/gpt2/vocab.bpe' &&
    grep -q '\"GPT2Tokenizer\"' '$TMP/gt_hf/tokenizer_config.json'"
check "gpt: bos = eos = <|endoftext|> 50256, vocab 50257 (config and generation config)" \
    keys_are "$TMP/gt_hf/config.json" '50256 50256 50257' bos_token_id eos_token_id vocab_size
check "gpt: ... generation_config.json" \
    keys_are "$TMP/gt_hf/generation_config.json" '50256 50256' bos_token_id eos_token_id
check "llama with Llama2Tokenizer: trained and exported" bash -c "
    '$PLAIT' train --model llama ${ONE[*]} --tokenizer-type Llama2Tokenizer \
        --tokenizer-model '$PLAIT_DATA/llama2/tokenizer.model' --save '$TMP/lt' >'$TMP/lt.log' 2>&1 &&
    '$PLAIT' ckpt export '$TMP/lt' --out '$TMP/lt_hf' --bf16"
check "llama: tokenizer.model is the run's" \
    cmp "$TMP/lt_hf/tokenizer.model" "$PLAIT_DATA/llama2/tokenizer.model"
check "llama: bos <s> 1, eos </s> 2, untied, 32000 tokens" keys_are "$TMP/lt_hf/config.json" \
    '1 2 false 32000 ["LlamaForCausalLM"]' bos_token_id eos_token_id tie_word_embeddings \
    vocab_size architectures

# ---- what GPT2LMHeadModel cannot express
check "gpt with --swiglu: trained" bash -c "'$PLAIT' train ${ONE[*]} --vocab-size 100 --swiglu \
    --save '$TMP/gs' >'$TMP/gs.log' 2>&1"
check_fails "gpt with --swiglu (LayerNorm, learned positions): refused naming the setting" \
    "--normalization LayerNorm .*which LlamaForCausalLM cannot express" export_hf gs --out "$TMP/gs_hf"
check "... and nothing is left behind" bash -c "! test -e '$TMP/gs_hf' && ! test -e '$TMP/gs_hf.tmp'"
check "bert: trained" bash -c "'$PLAIT' train --model bert ${ONE[*]} --vocab-size 100 \
    --save '$TMP/bt' >'$TMP/bt.log' 2>&1"
check_fails "bert: the export is refused: Megatron core's pre-LN BERT is not transformers' post-LN BERT" \
    "BertForPreTraining are post-LayerNorm" export_hf bt --out "$TMP/bt_hf"

# ---- import
import_hf() { local from=$1; shift; "$PLAIT" ckpt import "$TMP/$from" --format hf "$@"; }
check "gpt: imported at TP 2 x PP 2" import_hf g_hf --out "$TMP/gi" --tensor-model-parallel-size 2 \
    --pipeline-model-parallel-size 2 --make-vocab-size-divisible-by 64
check "gpt: ... a release checkpoint" grep -qx release "$TMP/gi/latest_checkpointed_iteration.txt"
check "gpt: ... exported again: the same model.safetensors, byte for byte" bash -c "
    '$PLAIT' ckpt export '$TMP/gi' --out '$TMP/gi_hf' && cmp '$TMP/gi_hf/model.safetensors' '$TMP/g_hf/model.safetensors'"
check "llama: imported at TP 4 (2 key/value groups shared)" import_hf l_hf --out "$TMP/li" \
    --tensor-model-parallel-size 4 --make-vocab-size-divisible-by 32
check "llama: ... exported again: the same bytes" bash -c "
    '$PLAIT' ckpt export '$TMP/li' --out '$TMP/li_hf' && cmp '$TMP/li_hf/model.safetensors' '$TMP/l_hf/model.safetensors' &&
    cmp '$TMP/li_hf/config.json' '$TMP/l_hf/config.json'"
check "gpt (untied): imported and exported again: the same bytes" bash -c "
    '$PLAIT' ckpt import '$TMP/gu_hf' --out '$TMP/gui' && '$PLAIT' ckpt export '$TMP/gui' --out '$TMP/gui_hf' &&
    cmp '$TMP/gui_hf/model.safetensors' '$TMP/gu_hf/model.safetensors'"
# the run's flags only: the model's come from the import with --use-checkpoint-args
RUN=(--micro-batch-size 1 --global-batch-size 4 --lr 1e-3 --mock-data --train-iters 2
     --log-interval 1 --eval-iters 0 --pipeline-model-parallel-size 2)
check "gpt: plait train --load of the import --use-checkpoint-args at TP 1 x PP 2" bash -c "
    timeout -k 5 120 mpirun.openmpi -n 2 '$PLAIT' train ${RUN[*]} --load '$TMP/gi' --use-checkpoint-args \
    --metrics-file '$TMP/ft_hf.jsonl' >'$TMP/ft_hf.log' 2>&1"
check "gpt: ... the model's flags noted as the checkpoint's" grep -q \
    "use-checkpoint-args: --num-layers 2 from the checkpoint" "$TMP/ft_hf.log"
check "gpt: plait train --finetune --load of the original at TP 1 x PP 2 (the model's flags)" bash -c "
    timeout -k 5 120 mpirun.openmpi -n 2 '$PLAIT' train ${BASE[*]} --pipeline-model-parallel-size 2 \
    --load '$TMP/g' --finetune --metrics-file '$TMP/ft_pl.jsonl' >'$TMP/ft_pl.log' 2>&1"
same_2_losses() { [ "$(losses "$1" | wc -l)" = 2 ] && diff <(losses "$1") <(losses "$2"); }
check "gpt: ... the same 2 losses, bit for bit" same_2_losses "$TMP/ft_hf.jsonl" "$TMP/ft_pl.jsonl"
check "gpt with GPT2BPETokenizer: imported with its tokenizer" bash -c "
    '$PLAIT' ckpt import '$TMP/gt_hf' --out '$TMP/gti' &&
    cmp '$TMP/gti/release/tokenizer/vocab/vocab.json' '$PLAIT_DATA/gpt2/encoder.json' &&
    grep -q GPT2BPETokenizer '$TMP/gti/release/manifest.json'"
check "gpt with GPT2BPETokenizer: plait generate from the import (its tokenizer, greedy)" bash -c "
    '$PLAIT' generate --load '$TMP/gti' --prompt 'In the beginning' --max-new-tokens 4 \
        --temperature 0 >'$TMP/gen.out' 2>&1 && grep -q '^In the beginning' '$TMP/gen.out'"
# --use-checkpoint-args as Megatron's: sizes given on the command line win (then the
# checkpoint is refused naming the flag); the architecture is the checkpoint's
ONE_RUN=(--micro-batch-size 1 --global-batch-size 1 --lr 1e-3 --mock-data --train-iters 1
         --log-interval 1 --eval-iters 0 --finetune)
check "llama: --use-checkpoint-args over --model gpt --normalization LayerNorm: the checkpoint's" \
    bash -c "'$PLAIT' train ${ONE_RUN[*]} --load '$TMP/l' --use-checkpoint-args --model gpt \
        --normalization LayerNorm >'$TMP/ua.log' 2>&1 &&
    grep -q 'layers: RMSNorm, SwiGLU, rope (Llama 3.1 scaling), no biases, untied output layer' '$TMP/ua.log' &&
    grep -q 'model: llama, 2 layers, hidden 64, 4 heads (2 query groups), ffn 128, seq 64' '$TMP/ua.log' &&
    grep -q -- '--rotary-base 500000 (the checkpoint.s) instead of 10000' '$TMP/ua.log'"
check_fails "llama: --use-checkpoint-args with --num-layers 3 given: refused naming the flag" \
    "--num-layers is 2 in the checkpoint but 3 in this run" \
    "$PLAIT" train "${ONE_RUN[@]}" --load "$TMP/l" --use-checkpoint-args --num-layers 3

# a Llama with a tied output layer (Llama 3.2's): plait's --model llama is untied, so it
# becomes Megatron's GPT with Llama's flags, and exports as LlamaForCausalLM again
check "llama, tied output layer (random): imported, exported, plait's logits written" bash -c "
    /usr/bin/python3 '$HF' random llama_tied '$TMP/lt2_hf' 3 >/dev/null &&
    '$PLAIT' ckpt import '$TMP/lt2_hf' --out '$TMP/lt2i' --make-vocab-size-divisible-by 64 &&
    '$PLAIT' ckpt export '$TMP/lt2i' --out '$TMP/lt2i_hf' &&
    '$LOGITS' '$TMP/lt2i' '$TMP/lt2_logits.safetensors' 64"
check "llama, tied: ... exported as LlamaForCausalLM, tied, without lm_head.weight" bash -c "
    grep -q '\"LlamaForCausalLM\"' '$TMP/lt2i_hf/config.json' &&
    grep -q '\"tie_word_embeddings\":.*true' '$TMP/lt2i_hf/config.json' &&
    ! grep -q lm_head '$TMP/lt2i_hf/model.safetensors'"

# bad NAME PYTHON: a copy of g_hf with config.json changed by PYTHON (c is the dict)
bad() {
    rm -rf "$TMP/$1" && cp -r "$TMP/${3:-g_hf}" "$TMP/$1" && /usr/bin/python3 -c "import json, sys
c = json.load(open(sys.argv[1])); $2; json.dump(c, open(sys.argv[1], 'w'))" "$TMP/$1/config.json"
}
bad b_act 'c["activation_function"] = "gelu"'
check_fails "import refuses GPT-2's erf GELU naming the key" '"activation_function": "gelu" is not supported' \
    import_hf b_act --out "$TMP/b_act_out"
bad b_bert 'c["architectures"] = ["RobertaForMaskedLM"]'
check_fails "import refuses RobertaForMaskedLM naming it" '"architectures": RobertaForMaskedLM is not supported' \
    import_hf b_bert --out "$TMP/b_bert_out"
bad b_bias 'c["attention_bias"] = True' l_hf
check_fails "import refuses a Llama with attention biases naming the key" '"attention_bias": true is not supported' \
    import_hf b_bias --out "$TMP/b_bias_out"
bad b_inner 'c["n_inner"] = 128'
check_fails "import refuses a tensor whose shape is not config.json's, naming it" \
    'tensor transformer.h.0.mlp.c_fc.weight has 2 dimensions \[64, 256\], config.json gives \[64, 128\]' \
    import_hf b_inner --out "$TMP/b_inner_out"
check "... and no checkpoint is written" bash -c "! test -e '$TMP/b_inner_out/release'"

# ---- the oracle
OMP_NUM_THREADS=2 /usr/bin/python3 "$HF" \
    logits "$TMP/g_hf" "$TMP/g_logits.safetensors" :: \
    logits "$TMP/l_hf" "$TMP/l_logits.safetensors" :: \
    logits "$TMP/gu_hf" "$TMP/gu_logits.safetensors" :: \
    bf16 "$TMP/g_hf" "$TMP/g_bf16" :: \
    same "$TMP/g_hf" "$TMP/g_sh" :: shards "$TMP/g_sh" 20000 :: \
    plait_same "$TMP/g/iter_0000002" "$TMP/gi/release" :: same "$TMP/lt2_hf" "$TMP/lt2i_hf" :: \
    logits "$TMP/lt2_hf" "$TMP/lt2_logits.safetensors" | tee "$TMP/py.out"
read -r p f < <(sed -nE 's/^hf_models: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$TMP/py.out")
_pass=$((_pass + ${p:-0})); _fail=$((_fail + ${f:-1}))
summary hf
