#!/usr/bin/env bash
# plait's GPT, Llama and BERT (pretraining, and the fine-tuning heads: sequence and token
# classification, spans, regression; BERT with --apply-residual-connection-post-layernorm) against the same models in PyTorch (float64): logits, loss,
# gradients, and parameters after 5 AdamW steps, in fp32, with bf16 GEMMs and
# activations, and with fp16 GEMMs under a static loss scale (the reference then
# rounds the same values). See torch_parity.py.
# The same run with the LM head's logits kept from forward to backward
# (--lm-head-logits keep) must write the same bytes: its vocabulary fits one
# chunk, so only the recomputation differs, and it must not change a bit.
source "$(dirname "$0")/lib.sh"
"$ROOT/build/testtools/model_parity" "$TMP/parity.safetensors" || { echo "parity: 0 passed, 1 failed"; exit 1; }
"$ROOT/build/testtools/model_parity" "$TMP/parity_bf16.safetensors" --bf16 || { echo "parity: 0 passed, 1 failed"; exit 1; }
"$ROOT/build/testtools/model_parity" "$TMP/parity_fp16.safetensors" --fp16 || { echo "parity: 0 passed, 1 failed"; exit 1; }
MP="$ROOT/build/testtools/model_parity"
LLAMA_FILES=()
# Llama: multi-head, grouped-query (2 groups) and multi-query attention, Llama 3.1's
# rope scaling, bf16 and fp16; dropout (GPT and Llama) with the masks exported.
for v in "mha::--model llama" "gqa::--model llama --groups 2" "mqa::--model llama --groups 1" \
         "scaled::--model llama --groups 2 --rope-scaling" "bf16::--model llama --groups 2 --bf16" \
         "fp16::--model llama --groups 2 --fp16" "gpt_dropout::--dropout 0.1" \
         "llama_dropout::--model llama --groups 2 --dropout 0.1" "bert::--model bert" \
         "bert_bf16::--model bert --bf16" "bert_seq::--model bert --task sequence" \
         "bert_tok::--model bert --task token" "bert_span::--model bert --task span" \
         "bert_reg::--model bert --task regression" \
         "bert_respost::--model bert --res-post-norm"; do
    name=${v%%::*}; flags=${v#*::}
    "$MP" "$TMP/case_$name.safetensors" $flags || { echo "parity: 0 passed, 1 failed"; exit 1; }
    LLAMA_FILES+=("$TMP/case_$name.safetensors")
done
check "kept LM-head logits give the recomputed run's bytes" \
    bash -c "'$ROOT/build/testtools/model_parity' '$TMP/kept.safetensors' --keep-logits &&
             cmp '$TMP/parity.safetensors' '$TMP/kept.safetensors'"
check "kept LM-head logits give the recomputed run's bytes in bf16" \
    bash -c "'$ROOT/build/testtools/model_parity' '$TMP/kept_bf16.safetensors' --keep-logits --bf16 &&
             cmp '$TMP/parity_bf16.safetensors' '$TMP/kept_bf16.safetensors'"
check "BERT: kept LM-head logits (with the output bias) give the recomputed run's bytes" \
    bash -c "'$ROOT/build/testtools/model_parity' '$TMP/bert_kept.safetensors' --model bert --keep-logits &&
             cmp '$TMP/case_bert.safetensors' '$TMP/bert_kept.safetensors'"
OMP_NUM_THREADS=2 /usr/bin/python3 "$ROOT/tests/scripts/torch_parity.py" "$TMP/parity.safetensors" \
    "$TMP/parity_bf16.safetensors" "$TMP/parity_fp16.safetensors" "${LLAMA_FILES[@]}" | tee "$TMP/py.out"
read -r p f < <(sed -nE 's/^torch_parity: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$TMP/py.out")
_pass=$((_pass + ${p:-0})); _fail=$((_fail + ${f:-1}))
summary torch_parity
