#!/usr/bin/env bash
# plait train --config-file X.yaml (NeMo-style): a NeMo Megatron GPT config trains
# with losses bit-identical to the same settings given as Megatron flags; Hydra's
# --config-path/--config-name and key=value overrides; a MegaMolBART-shaped config
# (its conf/ layout: trainer, model with tokenizer/data/optim.sched, exp_manager) is
# read, every key either applied or named in a note, and its NoamAnnealing schedule
# refused by name until --lr-decay-style is given; a config with a Hydra defaults list
# (group files as MegaMolBART's conf/ has them) trains from the composed settings.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1
kjv_dataset 400 "$TMP/kjv"
cat >"$TMP/gpt.yaml" <<YAML
name: &name TinyGPT
seed: 7
trainer:
  devices: 1
  num_nodes: 1
  precision: 32
  max_steps: 6
  log_every_n_steps: 1
  val_check_interval: 1000
  limit_val_batches: 0
  gradient_clip_val: 1.0
model:
  name: *name
  global_batch_size: 4
  micro_batch_size: 2
  tensor_model_parallel_size: 1
  pipeline_model_parallel_size: 1
  encoder_seq_length: 32
  max_position_embeddings: \${.encoder_seq_length}
  num_layers: 2
  hidden_size: 32
  ffn_hidden_size: \${multiply:\${model.hidden_size}, 4}
  num_attention_heads: 2
  init_method_std: 0.02
  hidden_dropout: 0.0
  attention_dropout: 0.0
  layernorm_epsilon: 1e-5
  persist_layer_norm: True
  tokenizer:
    library: megatron
    type: GPT2BPETokenizer
    vocab_file: $PLAIT_DATA/gpt2/encoder.json
    merge_file: $PLAIT_DATA/gpt2/vocab.bpe
  data:
    data_prefix: [$TMP/kjv_text_document]
    splits_string: 98,2,0
  optim:
    name: fused_adam
    lr: 3e-3
    betas: [0.9, 0.98]
    eps: 1e-8
    weight_decay: 0.01
    sched:
      name: CosineAnnealing
      warmup_steps: 2
      min_lr: 3e-4
      max_steps: \${trainer.max_steps}
exp_manager:
  exp_dir: /results/\${name}
YAML
FLAGS=(--seed 7 --train-iters 6 --log-interval 1 --eval-interval 1000 --eval-iters 0 --clip-grad 1.0
       --global-batch-size 4 --micro-batch-size 2 --seq-length 32 --max-position-embeddings 32
       --num-layers 2 --hidden-size 32 --ffn-hidden-size 128 --num-attention-heads 2
       --init-method-std 0.02 --hidden-dropout 0.0 --attention-dropout 0.0 --layernorm-epsilon 1e-5
       "${GPT2[@]}" --data-path "$TMP/kjv_text_document" --split 98,2,0 --optimizer adam --lr 3e-3
       --adam-beta1 0.9 --adam-beta2 0.98 --adam-eps 1e-8 --weight-decay 0.01
       --lr-decay-style cosine --lr-warmup-iters 2 --min-lr 3e-4 --lr-decay-iters 6)
run() { local name=$1; shift; timeout -k 5 120 "$PLAIT" train "$@" --metrics-file "$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1; }
same_losses() { [ "$(losses "$TMP/$1.jsonl" | wc -l)" = 6 ] && cmp <(losses "$TMP/$1.jsonl") <(losses "$TMP/$2.jsonl"); }
check "Megatron flags train 6 iterations" run flags "${FLAGS[@]}"
check "--config-file gpt.yaml trains 6 iterations" run yaml --config-file "$TMP/gpt.yaml"
check "  losses bit-identical to the flags'" same_losses flags yaml
check "  notes: known keys plait does not use" grep -q "trainer.devices: the world size comes from the launcher" "$TMP/yaml.log"
check "  notes: unknown keys named" grep -q "model.persist_layer_norm: unknown key, ignored" "$TMP/yaml.log"
check "Hydra --config-path/--config-name with overrides" \
    run hydra --config-path "$TMP" --config-name gpt model.num_layers=1 trainer.max_steps=3
check "  the overrides took effect (1 layer, 3 iterations)" sh -c "grep -q 'gpt, 1 layers' '$TMP/hydra.log' && [ \$(grep -c lm_loss '$TMP/hydra.jsonl') = 3 ]"
check "a flag on the command line wins over the YAML" run cli --config-file "$TMP/gpt.yaml" --num-layers 3 --train-iters 1
check "  3 layers, said in a note" sh -c "grep -q 'gpt, 3 layers' '$TMP/cli.log' && grep -q 'model.num_layers: --num-layers given on the command line wins' '$TMP/cli.log'"

# MegaMolBART's conf/ layout (megamolbart_pretrain_base.yaml's keys, small sizes)
cat >"$TMP/mmb.yaml" <<YAML
name: MegaMolBART
do_training: True
seed: 42
restore_from_path: null
trainer:
  devices: 1
  num_nodes: 1
  precision: 32
  accelerator: cpu
  max_steps: 3
  log_every_n_steps: 1
  val_check_interval: 100
  limit_val_batches: 0
  accumulate_grad_batches: 1
  gradient_clip_val: 1.0
model:
  name: \${name}
  global_batch_size: 4
  micro_batch_size: 2
  tensor_model_parallel_size: 1
  pipeline_model_parallel_size: 1
  make_vocab_size_divisible_by: 128
  seq_length: 32
  max_position_embeddings: \${.seq_length}
  num_layers: 2
  hidden_size: 32
  ffn_hidden_size: \${multiply:\${model.hidden_size}, 4}
  num_attention_heads: 2
  kv_channels: null
  encoder_arch: 'transformer'
  decoder_arch: 'transformer'
  activation: 'gelu'
  tokenizer:
    library: 'regex'
    type: null
    model: /workspace/megamolbart.model
    vocab_file: $TMP/smiles.vocab
  data:
    dataset_path: /data/zinc_csv_split
    dataset:
      train: x[000..002].csv
    num_workers: 10
  optim:
    name: fused_adam
    lr: 1.0
    betas: [0.9, 0.999]
    sched:
      name: NoamAnnealing
      d_model: \${model.hidden_size}
      warmup_steps: 2
      min_lr: 1e-5
exp_manager:
  name: \${name}
  create_wandb_logger: True
YAML
SMI="$PLAIT_DATA/smiles/first_5K.smi"
check "a SMILES vocabulary" "$PLAIT" data build-vocab --tokenizer-type SmilesTokenizer --input "$SMI" --output "$TMP/smiles.vocab"
check "SMILES preprocess" "$PLAIT" preprocess --input "$SMI" --output-prefix "$TMP/smi" --tokenizer-type SmilesTokenizer --vocab-file "$TMP/smiles.vocab" --append-eod
check_fails "MegaMolBART config: NoamAnnealing refused by name" "model.optim.sched.name NoamAnnealing: plait has Megatron's schedules" \
    "$PLAIT" train --config-file "$TMP/mmb.yaml" --data-path "$TMP/smi_text_document" --split 98,2,0
check "with --lr-decay-style and --data-path it trains" \
    run mmb --config-file "$TMP/mmb.yaml" --data-path "$TMP/smi_text_document" --split 98,2,0 --lr-decay-style constant --lr 1e-3
check "  library regex is SmilesTokenizer (vocab = the .vocab file's lines, padded to 128)" \
    sh -c "grep -q \"vocab \$(wc -l < '$TMP/smiles.vocab') (padded 384)\" '$TMP/mmb.log'"
check "  the CSV dataset keys and the BART architecture are noted" sh -c "grep -q 'model.data.dataset_path: MegaMolBART' '$TMP/mmb.log' && grep -q 'model.encoder_arch: an encoder-decoder (BART) config' '$TMP/mmb.log'"
check "  tokenizer.model noted as unused with library regex" grep -q "model.tokenizer.model: not used with library regex" "$TMP/mmb.log"
check "  d_model (Noam's) named as unknown" grep -q "model.optim.sched.d_model: unknown key, ignored" "$TMP/mmb.log"
# Hydra's defaults list, as MegaMolBART's conf/: group files under the config's directory
mkdir -p "$TMP/conf/trainer" "$TMP/conf/model/optim"
printf 'max_steps: 2\nlog_every_n_steps: 1\nlimit_val_batches: 0\nval_check_interval: 100\n' >"$TMP/conf/trainer/cpu.yaml"
printf 'defaults:\n  - optim: adam\nnum_layers: 3\nhidden_size: 32\nnum_attention_heads: 2\nseq_length: 32\nmax_position_embeddings: ${.seq_length}\n' >"$TMP/conf/model/tiny.yaml"
printf 'name: fused_adam\nlr: 1e-3\n' >"$TMP/conf/model/optim/adam.yaml"
cat >"$TMP/conf/pretrain.yaml" <<YAML
defaults:
  - trainer: cpu
  - model: tiny
seed: 3
model:
  global_batch_size: 4
  micro_batch_size: 2
  tokenizer:
    library: regex
    vocab_file: $TMP/smiles.vocab
  data:
    data_prefix: $TMP/smi_text_document
    splits_string: 98,2,0
YAML
check "a config with a defaults list (--config-path/--config-name) trains" \
    run composed --config-path "$TMP/conf" --config-name pretrain
check "  the group files were read (3 layers, 2 iterations, Adam lr 1e-3)" sh -c \
    "grep -q 'gpt, 3 layers' '$TMP/composed.log' && [ \$(grep -c '\"lm_loss\"' '$TMP/composed.jsonl') = 2 ] && grep -q '\"lr\": 0.001,' '$TMP/composed.jsonl'"
# MegaMolBART's model.data switches (mmb_switches.sh trains with them): its own objective's,
# refused by name for the decoder-only model this config trains; a non-boolean named.
printf 'model:\n  data:\n    encoder_augment: False\n' >"$TMP/mmb_sw.yaml"
check_fails "model.data.encoder_augment with --model gpt is refused by name" \
    "--encoder-augment is MegaMolBART's \\(--model bart with --tokenizer-type SmilesTokenizer\\), not --model gpt" \
    "$PLAIT" train --config-file "$TMP/mmb_sw.yaml" --num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 16 --mock-data --vocab-size 64 --train-iters 1 --micro-batch-size 1
printf 'model:\n  data:\n    decoder_mask: maybe\n' >"$TMP/mmb_bad.yaml"
check_fails "model.data.decoder_mask maybe: expected true or false" "mmb_bad.yaml: model.data.decoder_mask: expected true or false, got 'maybe'" \
    "$PLAIT" train --config-file "$TMP/mmb_bad.yaml"
printf 'model:\n  num_layers: 2\n   hidden_size: 3\n' >"$TMP/broken.yaml"
check_fails "malformed YAML names file:line" "broken.yaml:3: " "$PLAIT" train --config-file "$TMP/broken.yaml"
summary nemo_yaml
