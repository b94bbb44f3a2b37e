#!/usr/bin/env bash
# Megatron-LM's --ckpt-format torch_dist checkpoints (a PyTorch Distributed Checkpoint:
# metadata.json, the .metadata pickle, __R_K.distcp files) read without Python by plait ckpt
# import --format megatron (src/ckpt/megatron_dist.c). torch_dist_write.py writes them with
# python3-torch in the layout Megatron core's dist_checkpointing and PyTorch 2.x's DCP write
# (class names as in the real files), from random Hugging Face GPT-2 and Llama models: GPT at
# TP 2 x PP 2 with Transformer Engine's fused norm names and the common state inside the DCP
# checkpoint; Llama (GQA, SwiGLU) at TP 2 in bf16 with a legacy common.pt; Llama with
# non-homogeneous layers (decoder.layers.<l>.* keys, SwiGLU as weight_w / weight_v); a 4-layer
# GPT at PP 2 with virtual pipeline chunks (whose keys are global: read, unlike the torch
# format's model0, model1); beside
# the model, optimizer tensors and ShardedObjects the import skips. Checked: the imports (into
# another layout too), exported as Hugging Face, hold the original tensors bit for bit (the
# bf16 one: the originals rounded to bf16); plait's logits of the imports equal the independent
# PyTorch models' (hf_models.py); a truncated .distcp, an item's offset past its file, a
# relative_path leaving the directory, transform_descriptors, a global not on the reader's
# list (os.system) and a key missing from the metadata are refused naming the file and key;
# a backend other than torch_dist is refused by name.
source "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=1
HF=$ROOT/tests/scripts/hf_models.py
LOGITS=$ROOT/build/testtools/ckpt_logits

check "torch_dist checkpoints written (python3-torch)" \
    /usr/bin/python3 "$ROOT/tests/scripts/torch_dist_write.py" "$TMP"
imp() { local from=$1; shift; "$PLAIT" ckpt import "$TMP/$from" --format megatron "$@"; }
exp() { "$PLAIT" ckpt export "$TMP/$1" --out "$TMP/$2"; }

check "gpt, TP 2 x PP 2, TE names, common_state inside: imported in its layout, the log names the source" bash -c "
    '$PLAIT' ckpt import '$TMP/td_gpt' --format megatron --out '$TMP/gi' >'$TMP/gi.log' 2>&1 &&
    grep -q 'Megatron torch_dist gpt (TP 2 x PP 2' '$TMP/gi.log' &&
    grep -q '\"tensor_model_parallel_size\":	2' '$TMP/gi/release/manifest.json'"
check "gpt: ... exported as Hugging Face" exp gi gi_hf
check "gpt: imported into TP 1 x PP 2 (from the iteration directory) and exported" bash -c "
    '$PLAIT' ckpt import '$TMP/td_gpt/iter_0000007' --format megatron --out '$TMP/gi12' \
        --tensor-model-parallel-size 1 --pipeline-model-parallel-size 2 &&
    '$PLAIT' ckpt export '$TMP/gi12' --out '$TMP/gi12_hf'"
check "llama, TP 2, bf16, legacy common.pt: imported with --vocab-size 100 and exported" bash -c "
    '$PLAIT' ckpt import '$TMP/td_llama' --format megatron --out '$TMP/li' --vocab-size 100 &&
    '$PLAIT' ckpt export '$TMP/li' --out '$TMP/li_hf'"
check "llama, non-homogeneous layers (decoder.layers.<l>.*, weight_w / weight_v): imported into TP 1" bash -c "
    '$PLAIT' ckpt import '$TMP/td_llama_nh' --format megatron --out '$TMP/ni' --vocab-size 100 \
        --tensor-model-parallel-size 1 && '$PLAIT' ckpt export '$TMP/ni' --out '$TMP/ni_hf'"
check "gpt, 4 layers at PP 2 with 2 virtual pipeline chunks (args.virtual_pipeline_model_parallel_size 2): imported" bash -c "
    '$PLAIT' ckpt import '$TMP/td_vpp' --format megatron --out '$TMP/vi' >/dev/null 2>&1 &&
    '$PLAIT' ckpt export '$TMP/vi' --out '$TMP/vi_hf'"
check "gpt and llama: plait's logits of the imports written" bash -c "
    '$LOGITS' '$TMP/gi' '$TMP/gi_logits.safetensors' 64 && '$LOGITS' '$TMP/ni' '$TMP/ni_logits.safetensors' 64"

check_fails "a truncated .distcp is refused, naming the file, the item and the sizes" \
    "__3_0.distcp: rng_state/shard_1.1.0_2.2.1: bytes \\[[0-9]+, [0-9]+\\) past the file's end" \
    imp td_bad_trunc --out "$TMP/bt"
check_fails "an item's offset past its file is refused, naming the file and key" \
    "__0_0.distcp: decoder.layers.self_attention.linear_proj.weight: bytes \\[[0-9]+, [0-9]+\\) past the file's end" \
    imp td_bad_offset --out "$TMP/bo"
check_fails "a relative_path leaving the directory is refused" \
    "linear_proj.weight: relative_path \"../__0_0.distcp\" is not a file name inside the checkpoint directory" \
    imp td_bad_path --out "$TMP/bp"
check_fails "transform_descriptors (a compressed item) are refused" \
    "linear_proj.weight: _StorageInfo.transform_descriptors" imp td_bad_transform --out "$TMP/bx"
check_fails "a global not on the reader's list (os.system in planner_data) is refused, nothing run" \
    "\\.metadata: the pickle names the global posix.system, which plait refuses" \
    imp td_bad_global --out "$TMP/bg"
check_fails "a tensor missing from the metadata is refused, naming plait's tensor" \
    "\\.metadata: no tensor for plait's decoder.final_layernorm.bias" imp td_bad_missing --out "$TMP/bm"
cp -r "$TMP/td_gpt" "$TMP/td_zarr" &&
    echo '{"sharded_backend": "zarr", "sharded_backend_version": 1}' >"$TMP/td_zarr/iter_0000007/metadata.json"
check_fails "a backend other than torch_dist is refused by name" \
    "metadata.json: sharded_backend zarr: the import reads torch_dist" imp td_zarr --out "$TMP/bz"

OMP_NUM_THREADS=2 /usr/bin/python3 "$HF" \
    same "$TMP/hf_gpt" "$TMP/gi_hf" :: same "$TMP/hf_gpt" "$TMP/gi12_hf" :: same "$TMP/hf_llama16" "$TMP/li_hf" :: \
    same "$TMP/hf_llama" "$TMP/ni_hf" :: same "$TMP/hf_gpt4" "$TMP/vi_hf" :: \
    logits "$TMP/hf_gpt" "$TMP/gi_logits.safetensors" :: logits "$TMP/hf_llama" "$TMP/ni_logits.safetensors" \
    | tee "$TMP/py.out"
read -r p f < <(sed -nE 's/^hf_models: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$TMP/py.out")
_pass=$((_pass + ${p:-0})); _fail=$((_fail + ${f:-1}))
summary torch_dist_import
