#!/usr/bin/env python3
"""Writes a Megatron-LM torch-format checkpoint with python3-torch's torch.save, in the
layout megatron/training/checkpointing.py saves (reference: megatron-facts.md section 10.1),
from the weights of a Hugging Face GPT-2 or Llama directory (read by hf_models.py):

  megatron_write.py HF_DIR SAVE_DIR TP PP legacy|core|deepspeed|dspipe|zero|zero3 [ARG=VALUE ...]

SAVE_DIR/latest_checkpointed_iteration.txt holds 7; SAVE_DIR/iter_0000007/mp_rank_TT[_PPP]/
model_optim_rng.pt holds, per (TP, PP) rank: args (argparse.Namespace, ARG=VALUE overriding,
VALUE a Python literal), checkpoint_version 3.0, iteration, model, optimizer (a Megatron-like
state with integer keys and tensors), opt_param_scheduler, rng_state (Python's, numpy's and
torch's states, as Megatron saves them) and num_floating_point_operations_so_far.

model: `legacy` names (language_model.embedding.word_embeddings.weight, language_model.encoder
.layers.N.self_attention.query_key_value..., word_embeddings_for_head on the last stage of a
tied model) or Megatron core's local ones (embedding..., decoder.layers.N..., output_layer);
N is the stage's local layer. `deepspeed`: Megatron-DeepSpeed through DeepSpeed's engine (PP 1):
SAVE_DIR/latest names global_step7, whose mp_rank_TT_model_states.pt hold the legacy state
dict as "module" beside DeepSpeed's keys and Megatron's client state (args, iteration).
`dspipe`: Megatron-DeepSpeed's GPTModelPipe through DeepSpeed's pipeline engine (any PP):
global_step7/mp_rank_TT_model_states.pt with "module" None, and per TP rank TT one
torch.save(layer.state_dict()) per GPTModelPipe layer with parameters (DeepSpeed's
PipelineModule.save_state_dict / ckpt_layer_path): layer_01-model_TT-model_states.pt
EmbeddingPipe (word_embeddings.weight, position_embeddings.weight), layer_02 .. layer_{L+1}
ParallelTransformerLayerPipe (input_layernorm.weight, self_attention.query_key_value.weight,
...), layer_{L+2} the final norm (weight, bias), layer_{L+3} LMHeadPipe (lm_head.weight) when
untied (tied: the head reuses layer 01's module through a functools.partial: no file).
`zero`: `deepspeed` with ZeRO stage 2 at DP 2: "module" holds bf16 copies, the fp32 weights are
in global_step7/zero_pp_rank_D_mp_rank_TT_optim_states.pt (write_zero_shards), param_shapes
beside "module". `zero3`: ZeRO stage 3 at DP 3 (write_zero3_shards): "module" holds empty
placeholders in zero_pp_rank_D_mp_rank_TT_model_states.pt, one per DP rank.
With ds_sequence_parallel_fpdt among the ARGs (Megatron-DeepSpeed since 2024-12-04) each rank's
query_key_value rows are [Q; K; V] thirds, as that version's attention splits them. The tensors are Megatron's TP slices: QKV rows per key/value
group [its query heads; k; v] (per head [q; k; v] without groups) split by rows, SwiGLU's
fc1 per rank [gate_r; up_r], the vocabulary padded to make_vocab_size_divisible_by x TP and
split by rows, row-parallel weights split by columns with their biases whole."""
import argparse
import ast
import collections
import io
import os
import random
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_models  # noqa: E402


def global_tensors(cfg, W, div, tp):
    """Megatron's global tensors (layer, name) -> tensor, and the args of the model."""
    gpt = cfg["architectures"][0] == "GPT2LMHeadModel"
    if gpt:
        C, H, L, F = cfg["n_embd"], cfg["n_head"], cfg["n_layer"], cfg["n_inner"]
        G, P, V, eps = H, cfg["n_positions"], cfg["vocab_size"], cfg["layer_norm_epsilon"]
    else:
        C, H, L, F = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"], cfg["intermediate_size"]
        G, P, V, eps = cfg["num_key_value_heads"], cfg["max_position_embeddings"], cfg["vocab_size"], cfg["rms_norm_eps"]
    HS, QG = C // H, H // G
    Vp = -(-V // (div * tp)) * div * tp
    pad = lambda t: torch.cat([t, torch.zeros(Vp - V, t.shape[1])]) if Vp > V else t
    g = {}
    if gpt:
        g["word"] = pad(W["transformer.wte.weight"])
        g["pos"] = W["transformer.wpe.weight"]
    else:
        g["word"] = pad(W["model.embed_tokens.weight"])
        if not cfg.get("tie_word_embeddings", False):
            g["out"] = pad(W["lm_head.weight"])
    for l in range(L):
        if gpt:
            p = f"transformer.h.{l}."
            wt, bt = W[p + "attn.c_attn.weight"].T, W[p + "attn.c_attn.bias"]  # rows [q | k | v]
            rows = [part * C + h * HS + e for h in range(H) for part in range(3) for e in range(HS)]
            g[l, "qkv.weight"], g[l, "qkv.bias"] = wt[rows], bt[rows]  # per head [q; k; v]
            g[l, "ln1.weight"], g[l, "ln1.bias"] = W[p + "ln_1.weight"], W[p + "ln_1.bias"]
            g[l, "proj.weight"], g[l, "proj.bias"] = W[p + "attn.c_proj.weight"].T, W[p + "attn.c_proj.bias"]
            g[l, "ln2.weight"], g[l, "ln2.bias"] = W[p + "ln_2.weight"], W[p + "ln_2.bias"]
            g[l, "fc1.weight"], g[l, "fc1.bias"] = W[p + "mlp.c_fc.weight"].T, W[p + "mlp.c_fc.bias"]
            g[l, "fc2.weight"], g[l, "fc2.bias"] = W[p + "mlp.c_proj.weight"].T, W[p + "mlp.c_proj.bias"]
        else:
            p = f"model.layers.{l}.self_attn."
            q, k, v = W[p + "q_proj.weight"], W[p + "k_proj.weight"], W[p + "v_proj.weight"]
            parts = []
            for grp in range(G):
                parts += [q[(grp * QG + j) * HS:(grp * QG + j + 1) * HS] for j in range(QG)]
                parts += [k[grp * HS:(grp + 1) * HS], v[grp * HS:(grp + 1) * HS]]
            g[l, "qkv.weight"] = torch.cat(parts)
            g[l, "proj.weight"] = W[p + "o_proj.weight"]
            m = f"model.layers.{l}."
            g[l, "ln1.weight"] = W[m + "input_layernorm.weight"]
            g[l, "ln2.weight"] = W[m + "post_attention_layernorm.weight"]
            g[l, "gate"], g[l, "up"] = W[m + "mlp.gate_proj.weight"], W[m + "mlp.up_proj.weight"]
            g[l, "fc2.weight"] = W[m + "mlp.down_proj.weight"]
    g["lnf.weight"] = W["transformer.ln_f.weight" if gpt else "model.norm.weight"]
    if gpt:
        g["lnf.bias"] = W["transformer.ln_f.bias"]
    args = dict(num_layers=L, hidden_size=C, num_attention_heads=H, ffn_hidden_size=F, seq_length=P,
                max_position_embeddings=P, padded_vocab_size=Vp, make_vocab_size_divisible_by=div,
                tensor_model_parallel_size=tp, swiglu=not gpt, add_bias_linear=gpt,
                normalization="LayerNorm" if gpt else "RMSNorm", group_query_attention=G != H,
                num_query_groups=G, position_embedding_type="learned_absolute" if gpt else "rope",
                untie_embeddings_and_output_weights="out" in g, norm_epsilon=eps, layernorm_epsilon=eps,
                rotary_base=cfg.get("rope_theta", 10000), rotary_percent=1.0,
                use_rope_scaling=bool(cfg.get("rope_scaling")), openai_gelu=gpt,
                init_method_std=0.02, hidden_dropout=0.0, attention_dropout=0.0, fp16=False, bf16=False,
                tokenizer_type="GPT2BPETokenizer", vocab_file="/nonexistent/gpt2-vocab.json",
                merge_file="/nonexistent/gpt2-merges.txt", consumed_train_samples=56,
                consumed_valid_samples=0, lr=1e-3, apply_residual_connection_post_layernorm=False)
    if args["use_rope_scaling"]:
        args["rope_scaling_factor"] = cfg["rope_scaling"]["factor"]
    return g, args, L


def qkv_thirds(x, hn):
    """A rank's query_key_value rows from Megatron's per-head [q; k; v] to [Q; K; V] thirds
    (Megatron-DeepSpeed's ParallelAttention since 676a482c, 2024-12-04; heads without groups)."""
    nh = x.shape[0] // (3 * hn)
    return x.reshape(nh, 3, hn, *x.shape[1:]).transpose(0, 1).reshape(x.shape).clone()


def rank_model(g, L, tp, pp, t, p, style, thirds=0):
    """The state dict of TP rank t, stage p (thirds: the head size, query_key_value as
    [Q; K; V] thirds)."""
    chunk = lambda x, dim: x.chunk(tp, dim=dim)[t].clone()
    lps = L // pp
    core = style == "core"
    layers = collections.OrderedDict()
    for j in range(lps):
        l = p * lps + j
        pre = f"decoder.layers.{j}." if core else f"layers.{j}."
        names = {"ln1": "input_layernorm", "qkv": "self_attention.linear_qkv" if core else "self_attention.query_key_value",
                 "proj": "self_attention.linear_proj" if core else "self_attention.dense",
                 "ln2": "pre_mlp_layernorm" if core else "post_attention_layernorm",
                 "fc1": "mlp.linear_fc1" if core else "mlp.dense_h_to_4h",
                 "fc2": "mlp.linear_fc2" if core else "mlp.dense_4h_to_h"}
        for key in ["ln1", "qkv", "proj", "ln2", "fc1", "fc2"]:
            for wb in ["weight", "bias"]:
                if key == "fc1" and (l, "gate") in g:
                    if wb == "weight":
                        layers[pre + names[key] + ".weight"] = torch.cat([chunk(g[l, "gate"], 0), chunk(g[l, "up"], 0)])
                    continue
                x = g.get((l, f"{key}.{wb}"))
                if x is None:
                    continue
                if key in ("qkv", "fc1"):
                    x = chunk(x, 0)  # column-parallel
                    if key == "qkv" and thirds:
                        x = qkv_thirds(x, thirds)
                elif key in ("proj", "fc2") and wb == "weight":
                    x = chunk(x, 1)  # row-parallel (its bias whole)
                layers[pre + names[key] + "." + wb] = x.clone()
    last, first = p == pp - 1, p == 0
    if last:
        for wb in ["weight", "bias"]:
            if f"lnf.{wb}" in g:
                layers[("decoder.final_layernorm." if core else "final_layernorm.") + wb] = g[f"lnf.{wb}"].clone()
    model = collections.OrderedDict()
    if core:
        if first:
            model["embedding.word_embeddings.weight"] = chunk(g["word"], 0)
            if "pos" in g:
                model["embedding.position_embeddings.weight"] = g["pos"].clone()
        model.update(layers)
        if last and ("out" in g or pp > 1):
            model["output_layer.weight"] = chunk(g.get("out", g["word"]), 0)
        return model
    lm = collections.OrderedDict()
    if first:
        emb = collections.OrderedDict(word_embeddings=collections.OrderedDict(weight=chunk(g["word"], 0)))
        if "pos" in g:
            emb["position_embeddings"] = collections.OrderedDict(weight=g["pos"].clone())
        lm["embedding"] = emb
    lm["encoder"] = layers
    if last and "out" in g:
        lm["output_layer"] = collections.OrderedDict(weight=chunk(g["out"], 0))
    model["language_model"] = lm
    if last and pp > 1 and "out" not in g:
        model["word_embeddings_for_head"] = collections.OrderedDict(weight=chunk(g["word"], 0))
    return model


def write(hf_dir, save, tp, pp, style, extra):
    extra = dict(extra)
    cfg = hf_models.json.load(open(os.path.join(hf_dir, "config.json")))
    W = {k: torch.from_numpy(hf_models.as_f64(dt, a).numpy().astype(np.float32)) for k, (dt, a) in hf_models.read_dir(hf_dir).items()}
    zero_opts = {k: extra.pop(k) for k in ("partition_count", "stage", "trim") if k in extra}  # zero: write_zero_shards
    g, args, L = global_tensors(cfg, W, extra.pop("make_vocab_size_divisible_by", 64), tp)
    args.update(pipeline_model_parallel_size=pp, iteration=7)
    args.update(extra)
    ns = argparse.Namespace(**args)
    pipe = style == "dspipe"  # DeepSpeed's pipeline engine: layer files
    zero = style in ("zero", "zero3")  # fp32 weights in the optimizer shards, bf16 (ZeRO 3: none) in "module"
    ds = style == "deepspeed" or pipe or zero  # Megatron-DeepSpeed through DeepSpeed's engine (legacy names)
    it = os.path.join(save, "global_step7" if ds else "iter_0000007")
    rng = np.random.RandomState(1234)
    for t in range(tp):
        for p in range(pp):
            d = it if ds else os.path.join(it, f"mp_rank_{t:02d}" + (f"_{p:03d}" if pp > 1 else ""))
            os.makedirs(d, exist_ok=True)
            if pipe and p > 0:
                continue
            thirds = (args["hidden_size"] // args["num_attention_heads"]  # (with groups: not defined)
                      if "ds_sequence_parallel_fpdt" in args and not args["group_query_attention"] else 0)
            model = rank_model(g, L, tp, 1 if pipe else pp, t, p, "legacy" if ds else style, thirds)
            if pipe:
                write_layer_files(model, L, d, t)
                model = None
            extra_keys, names = {}, [f"mp_rank_{t:02d}_model_states.pt"]
            if style == "zero3":  # DP 3, so that parameters are padded
                shapes = write_zero3_shards(model, d, t, 3)
                model = placeholders(model)
                names = [f"zero_pp_rank_{r}_mp_rank_{t:02d}_model_states.pt" for r in range(3)]
            elif zero:
                shapes = write_zero_shards(model, d, t, 2, **zero_opts)
                model = to_bf16(model)
            if zero:
                extra_keys = {"param_shapes": shapes, "shared_params": {}, "frozen_param_shapes": None}
            for name in names if ds else []:
                torch.save({"module": model, "buffer_names": [], **extra_keys, "optimizer": None, "lr_scheduler": {"num_steps": 56},
                            "global_steps": 7, "global_samples": 56, "dp_world_size": 1, "mp_world_size": tp,
                            "ds_config": {"train_batch_size": 8, "zero_optimization": {"stage": 1}},
                            "ds_version": "0.9.5", "args": ns, "iteration": 7, "checkpoint_version": 3.0},
                           os.path.join(d, name))
            if ds:
                continue
            state = {"args": ns, "checkpoint_version": 3.0, "iteration": 7, "model": model,
                     "optimizer": {"optimizer": {"state": {i: {"exp_avg": torch.zeros(3), "exp_avg_sq": torch.ones(3)}
                                                           for i in range(2)},
                                                 "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "params": [0, 1]}]},
                                   "grad_scaler": None, "fp32_from_fp16_params": [[torch.ones(2)]]},
                     "opt_param_scheduler": {"max_lr": 1e-3, "num_steps": 56, "decay_style": "cosine"},
                     "rng_state": [{"random_rng_state": random.Random(7).getstate(), "np_rng_state": rng.get_state(),
                                    "torch_rng_state": torch.get_rng_state(), "cuda_rng_state": torch.zeros(16, dtype=torch.uint8),
                                    "rng_tracker_states": {}}],
                     "num_floating_point_operations_so_far": 12345}
            torch.save(state, os.path.join(d, "model_optim_rng.pt"))
    with open(os.path.join(save, "latest_checkpointed_iteration.txt"), "w") as f:
        f.write("7")
    if ds:
        with open(os.path.join(save, "latest"), "w") as f:
            f.write("global_step7")


def to_bf16(d):
    return collections.OrderedDict((k, to_bf16(v) if isinstance(v, dict) else v.to(torch.bfloat16))
                                   for k, v in d.items())


def deepspeed_classes():
    """Stand-ins under DeepSpeed's module names for the classes its ZeRO shards pickle
    (ZeroStageEnum, DynamicLossScaler, fragment_address), so the pickles name the same globals."""
    import dataclasses
    import enum
    import types
    names = {"deepspeed.runtime.zero.config": "ZeroStageEnum",
             "deepspeed.runtime.fp16.loss_scaler": "DynamicLossScaler",
             "deepspeed.utils.tensor_fragment": "fragment_address"}
    if "deepspeed.runtime.zero.config" not in sys.modules:
        for mod in list(names) + ["deepspeed", "deepspeed.runtime", "deepspeed.runtime.zero",
                                  "deepspeed.runtime.fp16", "deepspeed.utils"]:
            sys.modules.setdefault(mod, types.ModuleType(mod))
        classes = {"ZeroStageEnum": enum.IntEnum("ZeroStageEnum", {"disabled": 0, "optimizer_states": 1,
                                                                  "gradients": 2, "weights": 3}),
                   "DynamicLossScaler": type("DynamicLossScaler", (), {}),
                   "fragment_address": dataclasses.make_dataclass("fragment_address", [("numel", int), ("start", int)])}
        for mod, name in names.items():
            classes[name].__module__ = mod
            classes[name].__qualname__ = name
            setattr(sys.modules[mod], name, classes[name])
    return [getattr(sys.modules[m], n) for m, n in names.items()]


def write_zero_shards(model, d, t, dp, partition_count=None, stage=2, trim=0):
    """TP rank t's fp32 parameters as DeepSpeed's ZeRO stage 2 saves them at DP dp
    (stage_1_and_2.py state_dict, engine._save_zero_checkpoint; undone by zero_to_fp32.py):
    two param groups (matrices in reverse order, then the rest), each flattened in that order,
    padded to a multiple of 2 x dp, split into dp equal partitions, the padding cut from the
    last one; d/zero_pp_rank_D_mp_rank_TT_optim_states.pt per DP rank D. Returns param_shapes.
    For refusals: partition_count recorded instead of dp, zero_stage 1 (the same layout) or
    3, trim elements cut from (negative: added to) the last partition of group 0."""
    ZeroStageEnum, DynamicLossScaler, fragment_address = deepspeed_classes()
    params = flat(model, "", collections.OrderedDict())
    mats = [k for k, v in params.items() if v.dim() == 2][::-1]
    groups = [mats, [k for k, v in params.items() if v.dim() != 2]]
    shapes = [collections.OrderedDict((k, params[k].shape) for k in grp) for grp in groups]
    parts = [[None] * len(groups) for _ in range(dp)]
    pads = []
    for i, grp in enumerate(groups):
        flat32 = torch.cat([params[k].reshape(-1) for k in grp])
        pad = -flat32.numel() % (2 * dp)
        pads.append(pad)
        padded = torch.cat([flat32, torch.full((pad,), 7.0)])
        n = padded.numel() // dp
        for r in range(dp):
            keep = n - (pad if r == dp - 1 else 0)
            parts[r][i] = padded[r * n: r * n + keep].clone()
    if trim > 0:
        parts[dp - 1][0] = parts[dp - 1][0][:-trim].clone()
    elif trim < 0:
        parts[dp - 1][0] = torch.cat([parts[dp - 1][0], torch.zeros(-trim)])
    for r in range(dp):
        scaler = DynamicLossScaler()
        scaler.cur_scale, scaler.scale_window = 65536.0, 1000
        osd = {"loss_scaler": scaler, "dynamic_loss_scale": True, "overflow": False, "clip_grad": 1.0,
               "base_optimizer_state": [{"exp_avg": torch.zeros_like(x), "exp_avg_sq": torch.ones_like(x)}
                                        for x in parts[r]],
               "single_partition_of_fp32_groups": parts[r], "zero_stage": ZeroStageEnum(stage),
               "group_paddings": [p if r == dp - 1 else 0 for p in pads],
               "partition_count": [partition_count or dp] * len(groups), "ds_version": "0.16.5",
               "param_slice_mappings": [collections.OrderedDict((k, fragment_address(params[k].numel(), 0))
                                                                for k in grp) for grp in groups]}
        torch.save({"optimizer_state_dict": osd, "ds_config": {"zero_optimization": {"stage": 2}, "bf16": {"enabled": True}},
                    "ds_version": "0.16.5"}, os.path.join(d, f"zero_pp_rank_{r}_mp_rank_{t:02d}_optim_states.pt"))
    return shapes


def placeholders(d):
    """ZeRO 3's module state dict: each partitioned parameter an empty bf16 tensor."""
    return collections.OrderedDict((k, placeholders(v) if isinstance(v, dict) else torch.empty(0, dtype=torch.bfloat16))
                                   for k, v in d.items())


def write_zero3_shards(model, d, t, dp):
    """TP rank t's fp32 parameters as ZeRO stage 3 saves them at DP dp (stage3.py
    _rigid_state_dict; undone by zero_to_fp32.py's _zero3_merge_trainable_params): each
    parameter padded to a multiple of dp and split in dp equal pieces, rank r's pieces back to
    back in its fp32_flat_groups (two sub-groups, matrices reversed then the rest);
    d/zero_pp_rank_D_mp_rank_TT_optim_states.pt per DP rank D. Returns param_shapes."""
    ZeroStageEnum, DynamicLossScaler, _ = deepspeed_classes()
    params = flat(model, "", collections.OrderedDict())
    mats = [k for k, v in params.items() if v.dim() == 2][::-1]
    groups = [mats, [k for k, v in params.items() if v.dim() != 2]]
    shapes = [collections.OrderedDict((k, params[k].shape) for k in grp) for grp in groups]
    for r in range(dp):
        flats = []
        for grp in groups:
            pieces = []
            for k in grp:
                x = params[k].reshape(-1)
                pn = -(-x.numel() // dp)
                x = torch.cat([x, torch.full((pn * dp - x.numel(),), 7.0)])
                pieces.append(x[r * pn:(r + 1) * pn])
            flats.append(torch.cat(pieces).clone())
        osd = {"zero_stage": ZeroStageEnum(3), "loss_scaler": DynamicLossScaler(), "dynamic_loss_scale": True,
               "overflow": False, "partition_count": dp, "fp32_flat_groups": flats, "ds_version": "0.16.5",
               "optimizer_state_dict": {"state": {i: {"exp_avg": torch.zeros_like(x)} for i, x in enumerate(flats)},
                                        "param_groups": [{"lr": 1e-3, "params": [0, 1]}]}}
        torch.save({"optimizer_state_dict": osd, "ds_config": {"zero_optimization": {"stage": 3}},
                    "ds_version": "0.16.5"}, os.path.join(d, f"zero_pp_rank_{r}_mp_rank_{t:02d}_optim_states.pt"))
    return shapes


def write_layer_files(model, L, d, t):
    """TP rank t's whole legacy state dict (rank_model at PP 1) as GPTModelPipe's layer files."""
    lm = model["language_model"]
    files = {1: flat(lm["embedding"], "", collections.OrderedDict())}
    enc = lm["encoder"]
    for l in range(L):
        pre = f"layers.{l}."
        files[2 + l] = collections.OrderedDict((k[len(pre):], v) for k, v in enc.items() if k.startswith(pre))
    files[L + 2] = collections.OrderedDict((k[len("final_layernorm."):], v) for k, v in enc.items()
                                           if k.startswith("final_layernorm."))
    if "output_layer" in lm:
        files[L + 3] = collections.OrderedDict(lm_head=collections.OrderedDict(weight=lm["output_layer"]["weight"]))
        files[L + 3] = flat(files[L + 3], "", collections.OrderedDict())
    for idx, sd in files.items():
        torch.save(collections.OrderedDict((k, v.clone()) for k, v in sd.items()),
                   os.path.join(d, f"layer_{idx:02d}-model_{t:02d}-model_states.pt"))


def flat(d, prefix, out):
    for k, v in d.items():
        if isinstance(v, dict):
            flat(v, prefix + k + ".", out)
        else:
            out[prefix + k] = v
    return out


def write_nemo(hf_dir, path, tp, pp, compress, extra):
    """A NeMo .nemo archive (tar, gzip when compress) of the model in Megatron's legacy layout:
    model_config.yaml (NeMo's keys) and model_weights.ckpt or mp_rank_TT[_PPP]/model_weights.ckpt,
    flat state dicts prefixed "model.", as NeMo's MegatronGPTModel saves them."""
    import tarfile
    cfg = hf_models.json.load(open(os.path.join(hf_dir, "config.json")))
    W = {k: torch.from_numpy(hf_models.as_f64(dt, a).numpy().astype(np.float32)) for k, (dt, a) in hf_models.read_dir(hf_dir).items()}
    g, args, L = global_tensors(cfg, W, 64, tp)
    gpt = cfg["architectures"][0] == "GPT2LMHeadModel"
    yaml = {"num_layers": L, "hidden_size": args["hidden_size"], "ffn_hidden_size": args["ffn_hidden_size"],
            "num_attention_heads": args["num_attention_heads"], "encoder_seq_length": args["seq_length"],
            "max_position_embeddings": args["max_position_embeddings"], "make_vocab_size_divisible_by": 64,
            "tensor_model_parallel_size": tp, "pipeline_model_parallel_size": pp,
            "normalization": "layernorm" if gpt else "rmsnorm", "activation": "gelu" if gpt else "fast-swiglu",
            "bias": "true" if gpt else "false", "position_embedding_type": args["position_embedding_type"],
            "share_embeddings_and_output_weights": "false" if args["untie_embeddings_and_output_weights"] else "true",
            "layernorm_epsilon": args["norm_epsilon"], "openai_gelu": "true" if gpt else "false",
            "num_query_groups": args["num_query_groups"] if args["group_query_attention"] else "null",
            "rotary_base": args["rotary_base"], "rotary_percentage": 1.0, "transformer_block_type": "pre_ln",
            "precision": 32, "megatron_amp_O2": "false"}
    yaml.update(extra)
    text = "".join(f"{k}: {v}\n" for k, v in yaml.items())
    text += "tokenizer:\n  library: megatron\n  type: GPT2BPETokenizer\n  model: null\n" \
            "optim:\n  name: fused_adam\n  lr: 0.0001\n  sched: {name: CosineAnnealing, warmup_steps: 10}\n"
    mode = "w:gz" if compress else "w"
    with tarfile.open(path, mode) as tar:
        def add(name, data):
            info = tarfile.TarInfo("./" + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        add("model_config.yaml", text.encode())
        for t in range(tp):
            for p in range(pp):
                buf = io.BytesIO()
                torch.save(flat(rank_model(g, L, tp, pp, t, p, "legacy"), "model.", collections.OrderedDict()), buf)
                sub = "" if tp == 1 and pp == 1 else f"mp_rank_{t:02d}" + (f"_{p:03d}" if pp > 1 else "") + "/"
                add(sub + "model_weights.ckpt", buf.getvalue())


if __name__ == "__main__":
    write(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5],
          dict((kv.split("=", 1)[0], ast.literal_eval(kv.split("=", 1)[1])) for kv in sys.argv[6:]))
