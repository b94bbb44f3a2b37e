#!/usr/bin/env bash
# plait's GPT, Llama and BERT (pretraining, and the fine-tuning heads: sequence and token
# classification, spans, regression; BERT with --apply-residual-connection-post-layernorm) against the same models in PyTorch (float64): logits, loss,
# gradients, and parameters after 5 AdamW steps, in fp32, with bf16 GEMMs and
# activations, and with fp16 GEMMs under a static loss scale (the reference then
# rounds the same values). See torch_parity.py.
# The same run with the LM head's logits kept from forward to backward
# (--lm-head-logits keep) must write the same bytes: its vocabulary fits one
# chunk, so only the recomputation differs, and it must not change a bit.
# The same for the fused LM head (--lm-head-logits fused) in one block of rows; in
# blocks of 24 rows it is one of the PyTorch cases.
source "$(dirname "$0")/lib.sh"
"$ROOT/build/testtools/model_parity" "$TMP/parity.safetensors" || { echo "parity: 0 passed, 1 failed"; exit 1; }
"$ROOT/build/testtools/model_parity" "$TMP/parity_bf16.safetensors" --bf16 || { echo "parity: 0 passed, 1 failed"; exit 1; }
"$ROOT/build/testtools/model_parity" "$TMP/parity_fp16.safetensors" --fp16 || { echo "parity: 0 passed, 1 failed"; exit 1; }
MP="$ROOT/build/testtools/model_parity"
LLAMA_FILES=()
# Llama: multi-head, grouped-query (2 groups) and multi-query attention, Llama 3.1's
# rope scaling, bf16 and fp16; dropout (GPT and Llama) with the masks exported; the BERT task
# heads' input dropout (--head-dropout, plait finetune's --fc-dropout) with its masks exported.
for v in "mha::--model llama" "gqa::--model llama --groups 2" "mqa::--model llama --groups 1" \
         "scaled::--model llama --groups 2 --rope-scaling" "bf16::--model llama --groups 2 --bf16" \
         "fp16::--model llama --groups 2 --fp16" "gpt_dropout::--dropout 0.1" \
         "llama_dropout::--model llama --groups 2 --dropout 0.1" "bert::--model bert" \
         "bert_bf16::--model bert --bf16" "bert_seq::--model bert --task sequence" \
         "bert_tok::--model bert --task token" "bert_span::--model bert --task span" \
         "bert_reg::--model bert --task regression" \
         "bert_seq_hdrop::--model bert --task sequence --head-dropout 0.2" \
         "bert_tok_hdrop::--model bert --task token --head-dropout 0.2" \
         "bert_span_hdrop::--model bert --task span --head-dropout 0.2" \
         "bert_reg_hdrop::--model bert --task regression --head-dropout 0.2" \
         "bert_respost::--model bert --res-post-norm" \
         "fused_blocks::--fused-logits --lm-rows 24" \
         "llama_kept::--model llama --groups 2 --keep-logits" \
         "llama_fused_blocks::--model llama --groups 2 --fused-logits --lm-rows 24" \
         "bert_fused_blocks::--model bert --fused-logits --lm-rows 24"; do
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
# The fused LM head (the gradient formed in the forward) in one block of rows runs the
# kept path's kernels in the same order: the same bytes. In blocks of 24 of the 64 rows
# (the last 16) it is checked against PyTorch with the other cases above.
check "a fused LM head in one block gives the kept run's bytes" \
    bash -c "'$MP' '$TMP/fused.safetensors' --fused-logits && cmp '$TMP/kept.safetensors' '$TMP/fused.safetensors'"
check "a fused LM head in one block gives the kept run's bytes in bf16" \
    bash -c "'$MP' '$TMP/fused_bf16.safetensors' --fused-logits --bf16 &&
             cmp '$TMP/kept_bf16.safetensors' '$TMP/fused_bf16.safetensors'"
check "BERT: a fused LM head in one block (with the output bias) gives the kept run's bytes" \
    bash -c "'$MP' '$TMP/bert_fused.safetensors' --model bert --fused-logits &&
             cmp '$TMP/bert_kept.safetensors' '$TMP/bert_fused.safetensors'"
check "a fused LM head in blocks of rows differs from one block only by rounding" \
    bash -c "! cmp -s '$TMP/fused.safetensors' '$TMP/case_fused_blocks.safetensors'"
OMP_NUM_THREADS=2 /usr/bin/python3 "$ROOT/tests/scripts/torch_parity.py" "$TMP/parity.safetensors" \
    "$TMP/parity_bf16.safetensors" "$TMP/parity_fp16.safetensors" "${LLAMA_FILES[@]}" | tee "$TMP/py.out"
read -r p f < <(sed -nE 's/^torch_parity: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$TMP/py.out")
_pass=$((_pass + ${p:-0})); _fail=$((_fail + ${f:-1}))
summary torch_parity
