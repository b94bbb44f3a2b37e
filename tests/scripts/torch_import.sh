#!/usr/bin/env bash
# Megatron-LM torch checkpoints read without Python (plait ckpt import --format megatron;
# src/ckpt/{zip,pickle,torch_file,megatron}.c). torch_import_write.py writes, with
# python3-torch's torch.save, Megatron checkpoints in its layouts (legacy names at TP 2 x
# PP 2, Megatron core names at TP 2 with a padded vocabulary, Megatron-DeepSpeed's
# global_stepN/mp_rank_TT_model_states.pt at TP 2 and its pipeline engine's layer files
# (GPT at TP 2, Llama at TP 1; a missing layer file and an unexpected key refused), NeMo .nemo archives (tar and tar.gz), with
# args, optimizer, scheduler (and Hugging Face's pytorch_model.bin, fp32 and bf16)
# and RNG states) from random Hugging Face GPT-2 and Llama directories, plus files plait must
# refuse. Checked: plait's reader lists one file exactly as torch.load reads it; the imports,
# exported again as Hugging Face directories, hold the original tensors bit for bit (also
# when imported into another layout); plait's logits of the imports equal the independent
# PyTorch models' (hf_models.py); a model trains from an import with --use-checkpoint-args;
# args plait cannot run are refused by name, Megatron's exact GELU is warned about; a pickle
# calling os.system, a truncated file, a compressed entry, a storage larger than its entry
# and a list holding itself are refused with a message, and nothing is run; 2^60
# memo-shared paths are read in linear time (a fuzzing finding).
source "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=1
HF=$ROOT/tests/scripts/hf_models.py
DUMP=$ROOT/build/testtools/pt_dump
LOGITS=$ROOT/build/testtools/ckpt_logits

check "torch.save files written (python3-torch)" \
    /usr/bin/python3 "$ROOT/tests/scripts/torch_import_write.py" "$TMP"
ONE=$TMP/mg_one/iter_0000007/mp_rank_00/model_optim_rng.pt
check "plait's reader lists a Megatron file (args, model, optimizer, scheduler, RNG) as torch.load reads it" \
    bash -c "'$DUMP' '$ONE' >'$TMP/one.dump' && diff '$TMP/one.dump' '$TMP/mg_one.listing'"
check "... including the argparse.Namespace" grep -qx ".args.num_layers = 2" "$TMP/one.dump"
check "... and the same object saved with pickle protocol 4" \
    bash -c "'$DUMP' '$TMP/proto4.pt' >'$TMP/p4.dump' && diff '$TMP/p4.dump' '$TMP/mg_one.listing'"

check "gpt, pytorch_model.bin (fp32, shared lm_head, attn.bias buffers): imported as Hugging Face" \
    bash -c "'$PLAIT' ckpt import '$TMP/bin_gpt' --format hf --out '$TMP/bgi' --make-vocab-size-divisible-by 64 &&
             '$PLAIT' ckpt export '$TMP/bgi' --out '$TMP/bgi_hf'"
check "llama, pytorch_model.bin in bf16: imported, exported as bf16" \
    bash -c "'$PLAIT' ckpt import '$TMP/bin_llama' --format hf --out '$TMP/bli' &&
             '$PLAIT' ckpt export '$TMP/bli' --out '$TMP/bli_hf' --bf16"

imp() { local from=$1; shift; "$PLAIT" ckpt import "$TMP/$from" --format megatron "$@"; }
exp() { "$PLAIT" ckpt export "$TMP/$1" --out "$TMP/$2"; }
check "gpt, legacy names, TP 2 x PP 2: imported" imp mg_gpt --out "$TMP/gi"
check "gpt: ... in its layout, TP 2 x PP 2" grep -q '"tensor_model_parallel_size":	2' "$TMP/gi/release/manifest.json"
check "gpt: ... exported as Hugging Face" exp gi gi_hf
check "gpt: imported into TP 1 x PP 2 and exported" bash -c "
    '$PLAIT' ckpt import '$TMP/mg_gpt' --format megatron --out '$TMP/gi12' --tensor-model-parallel-size 1 \
        --pipeline-model-parallel-size 2 && '$PLAIT' ckpt export '$TMP/gi12' --out '$TMP/gi12_hf'"
check "gpt, Megatron-DeepSpeed (DIR/latest -> global_step7/mp_rank_TT_model_states.pt, TP 2): imported" \
    bash -c "'$PLAIT' ckpt import '$TMP/ds_gpt' --format megatron --out '$TMP/dsi' &&
             '$PLAIT' ckpt export '$TMP/dsi' --out '$TMP/dsi_hf'"
check "gpt, DeepSpeed's pipeline engine (global_step7/layer_NN-model_TT-model_states.pt, TP 2, args PP 2, tied): imported" \
    bash -c "'$PLAIT' ckpt import '$TMP/dsp_gpt' --format megatron --out '$TMP/dspi' &&
             '$PLAIT' ckpt export '$TMP/dspi' --out '$TMP/dspi_hf'"
check "llama, DeepSpeed's pipeline engine (TP 1, untied: LMHeadPipe's file): imported with --vocab-size 100" \
    bash -c "'$PLAIT' ckpt import '$TMP/dsp_llama' --format megatron --out '$TMP/dspli' --vocab-size 100 &&
             '$PLAIT' ckpt export '$TMP/dspli' --out '$TMP/dspli_hf'"
check "gpt, Megatron-DeepSpeed since 2024-12 (args.ds_sequence_parallel_fpdt: query_key_value in [Q; K; V] thirds), TP 2: imported" \
    bash -c "'$PLAIT' ckpt import '$TMP/dsp_thirds' --format megatron --out '$TMP/dspti' &&
             '$PLAIT' ckpt export '$TMP/dspti' --out '$TMP/dspti_hf'"
check_fails "... with key/value groups (whose thirds are not Q, K, V) refused by name" \
    "args.ds_sequence_parallel_fpdt is present .* with 2 key/value groups for 4 heads" \
    imp dsp_gqa_thirds --out "$TMP/dsp_gqa_out"
cp -r "$TMP/dsp_gpt" "$TMP/dsp_missing" && rm "$TMP/dsp_missing/global_step7/layer_03-model_01-model_states.pt"
check_fails "... a missing layer file is refused, naming it and what it holds" \
    "layer_03-model_01-model_states.pt: missing: DeepSpeed's pipeline engine saves GPTModelPipe's layer 3 \\(ParallelTransformerLayerPipe of a transformer layer\\) of TP rank 1" \
    imp dsp_missing --out "$TMP/dsp_missing_out"
check_fails "... an unexpected key is refused, naming the file, the key and the expected names" \
    "layer_02-model_01-model_states.pt: unexpected key mlp.fc1.weight: ParallelTransformerLayerPipe's file holds input_layernorm.weight\\|bias, self_attention.query_key_value.weight\\|bias" \
    imp dsp_badkey --out "$TMP/dsp_badkey_out"
check "gpt, NeMo .nemo (tar, TP 2 x PP 2, model. prefixed flat state dicts): imported" \
    bash -c "'$PLAIT' ckpt import '$TMP/gpt.nemo' --format nemo --out '$TMP/ngi' &&
             '$PLAIT' ckpt export '$TMP/ngi' --out '$TMP/ngi_hf'"
check "llama, NeMo .nemo (gzip, one rank, fast-swiglu, rmsnorm): imported with --vocab-size 100" \
    bash -c "'$PLAIT' ckpt import '$TMP/llama.nemo' --format nemo --out '$TMP/nli' --vocab-size 100 &&
             '$PLAIT' ckpt export '$TMP/nli' --out '$TMP/nli_hf'"
check_fails "NeMo's transformer_block_type post_ln is refused by name" \
    "transformer_block_type: post_ln is not supported" \
    "$PLAIT" ckpt import "$TMP/post.nemo" --format nemo --out "$TMP/npost"
check_fails "NeMo's apply_residual_connection_post_layernorm: true is refused by name" \
    "apply_residual_connection_post_layernorm: true is not imported" \
    "$PLAIT" ckpt import "$TMP/rpn.nemo" --format nemo --out "$TMP/nrpn"
check "llama, core names, TP 2, vocabulary 100 padded to 128: imported with --vocab-size 100" \
    imp mg_llama --out "$TMP/li" --vocab-size 100
check "llama: ... exported as Hugging Face" exp li li_hf
check "gpt and llama: plait's logits of the imports written" bash -c "
    '$LOGITS' '$TMP/gi' '$TMP/gi_logits.safetensors' 64 && '$LOGITS' '$TMP/li' '$TMP/li_logits.safetensors' 64"
check "gpt: trains from the import with --use-checkpoint-args (one process, 2 iterations)" bash -c "
    '$PLAIT' train --load '$TMP/gi' --use-checkpoint-args --mock-data --micro-batch-size 1 \
        --global-batch-size 2 --lr 1e-4 --train-iters 2 --log-interval 1 --eval-iters 0 \
        --metrics-file '$TMP/ft.jsonl' >'$TMP/ft.log' 2>&1 && [ \$(grep -c lm_loss '$TMP/ft.jsonl') = 2 ]"
check "args.apply_residual_connection_post_layernorm: imported, the manifest records it" bash -c "
    '$PLAIT' ckpt import '$TMP/mg_post' --format megatron --out '$TMP/post_out' >/dev/null &&
    grep -qE '\"apply_residual_connection_post_layernorm\":[[:space:]]*1' \
        '$TMP/post_out/release/manifest.json'"
check_fails "... and its export to Hugging Face is refused, naming the flag" \
    "apply-residual-connection-post-layernorm .*cannot express" exp post_out post_hf
check_fails "... but on a Megatron core model (whose layer ignores it since 2023-08) refused" \
    "set on a Megatron core model" imp mg_post_core --out "$TMP/post_core_out"
check "args without openai_gelu: imported with a warning about Megatron's exact GELU" bash -c "
    '$PLAIT' ckpt import '$TMP/mg_erf' --format megatron --out '$TMP/erf_out' 2>&1 | grep -q 'GELU exactly (erf'"

# refused files: each names what is wrong, and nothing is run
for f in system:"the global posix.system, which plait refuses" \
         trunc:"not a ZIP archive" \
         deflate:"entry model_optim_rng/data.pkl is compressed" \
         oversize:"storage 0 claims 8192 elements of 4 bytes, its entry holds 8 bytes" \
         recursive:"the pickle holds a cycle"; do
    name=${f%%:*}
    check_fails "a .pt file that is $name is refused" "${f#*:}" "$DUMP" "$TMP/bad_$name.pt"
done
mkdir -p "$TMP/mg_bad/iter_0000007/mp_rank_00" && echo 7 >"$TMP/mg_bad/latest_checkpointed_iteration.txt" &&
    cp "$TMP/bad_system.pt" "$TMP/mg_bad/iter_0000007/mp_rank_00/model_optim_rng.pt"
check_fails "plait ckpt import of it refuses it the same way" "posix.system, which plait refuses" \
    imp mg_bad --out "$TMP/bad_out"
check "... and os.system never ran (its witness file does not exist)" test ! -e "$TMP/os_system_ran"
mkdir -p "$TMP/mg_shared/iter_0000007/mp_rank_00" && echo 7 >"$TMP/mg_shared/latest_checkpointed_iteration.txt" &&
    cp "$TMP/shared.pt" "$TMP/mg_shared/iter_0000007/mp_rank_00/model_optim_rng.pt"
check_fails "a file of 2^60 memo-shared paths is read in linear time (then refused: no args)" \
    'no "args"' timeout 20 "$PLAIT" ckpt import "$TMP/mg_shared" --format megatron --out "$TMP/shared_out"

OMP_NUM_THREADS=2 /usr/bin/python3 "$HF" \
    same "$TMP/hf_gpt" "$TMP/gi_hf" :: same "$TMP/hf_gpt" "$TMP/gi12_hf" :: same "$TMP/hf_llama" "$TMP/li_hf" :: \
    same "$TMP/hf_gpt" "$TMP/dsi_hf" :: same "$TMP/hf_gpt" "$TMP/dspi_hf" :: same "$TMP/hf_gpt" "$TMP/dspti_hf" :: same "$TMP/hf_llama" "$TMP/dspli_hf" :: same "$TMP/hf_gpt" "$TMP/ngi_hf" :: same "$TMP/hf_llama" "$TMP/nli_hf" :: \
    same "$TMP/hf_gpt" "$TMP/bgi_hf" :: bf16 "$TMP/hf_llama" "$TMP/bli_hf" :: \
    logits "$TMP/hf_gpt" "$TMP/gi_logits.safetensors" :: logits "$TMP/hf_llama" "$TMP/li_logits.safetensors" \
    | tee "$TMP/py.out"
read -r p f < <(sed -nE 's/^hf_models: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$TMP/py.out")
_pass=$((_pass + ${p:-0})); _fail=$((_fail + ${f:-1}))
summary torch_import
