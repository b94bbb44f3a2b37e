#!/usr/bin/env python3
"""Set-up of tests/scripts/bf16_import.sh, in one start of python3-torch:

  bf16_import_write.py TMP

TMP/hf_gpt      a random Hugging Face GPT-2 directory (hf_models.make_random)
TMP/bf16_gpt    it as Megatron-DeepSpeed saves it through DeepSpeed's engine with bf16 and ZeRO
                stage 0 at TP 2 x DP 3, where the engine uses BF16_Optimizer: bf16 copies in
                global_step7/mp_rank_TT_model_states.pt ("module"; param_shapes None, as
                engine._common_checkpoint_state writes without ZeRO), the fp32 master weights in
                global_step7/bf16_zero_pp_rank_D_mp_rank_TT_optim_states.pt per DP rank D, as
                deepspeed/runtime/bf16_optimizer.py's state_dict holds them: per param group
                (matrices in reverse order, then the rest) the group flattened, padded to a
                multiple of 2 x DP, split into DP equal partitions (single_partition_of_fp32_groups,
                the padding left in the last), group_paddings, partition_count and
                param_slice_mappings (per parameter overlapping the partition its
                fragment_address(numel, start)); no zero_stage
TMP/bf16_zero1  the same saved under ZeRO stage 1 with bf16 (also BF16_Optimizer: its files
                the same, param_shapes in the model states)
TMP/bf16_z2     megatron_write.py's ZeRO 2 checkpoint with its shards named bf16_zero_pp_rank_*
                (as DeepSpeed names every ZeRO shard under bf16)
TMP/bf16_pipe   Megatron-DeepSpeed's GPTModelPipe through DeepSpeed's pipeline engine (layer files
                in bf16, TP 2, args PP 2) with BF16_Optimizer's shards per stage (write_pipe)
TMP/bf16_gap, TMP/bf16_pad   refusals: a fragment that does not continue its piece on the
                previous rank; a group_paddings one too large"""
import collections
import os
import shutil
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_models  # noqa: E402
import megatron_write  # noqa: E402


def write_bf16_shards(model, d, t, dp, spoil=None):
    """TP rank t's fp32 parameters as BF16_Optimizer saves them at DP dp."""
    return write_shards(megatron_write.flat(model, "", collections.OrderedDict()), d, t, dp, spoil)


def write_shards(params, d, mp, dp, spoil=None):
    """Model-parallel rank mp's fp32 parameters {name: tensor} as BF16_Optimizer saves them at DP
    dp; returns their param_shapes."""
    _, _, fragment_address = megatron_write.deepspeed_classes()
    mats = [k for k, v in params.items() if v.dim() == 2][::-1]
    groups = [mats, [k for k, v in params.items() if v.dim() != 2]]
    parts, pads, maps = [[None] * len(groups) for _ in range(dp)], [], [[None] * len(groups) for _ in range(dp)]
    for i, grp in enumerate(groups):
        flat32 = torch.cat([params[k].reshape(-1) for k in grp])
        pad = -flat32.numel() % (2 * dp)
        pads.append(pad)
        padded = torch.cat([flat32, torch.full((pad,), 7.0)])
        psize = padded.numel() // dp
        starts, at = {}, 0
        for k in grp:
            starts[k] = at
            at += params[k].numel()
        for r in range(dp):
            parts[r][i] = padded[r * psize:(r + 1) * psize].clone()
            lo, hi = r * psize, (r + 1) * psize
            m = collections.OrderedDict()
            for k in grp:
                a, b = max(starts[k], lo), min(starts[k] + params[k].numel(), hi)
                if a < b:
                    m[k] = fragment_address(numel=b - a, start=a - lo)
            maps[r][i] = m
    if spoil == "gap":  # rank 1's first piece of group 0 starts one element late
        k = next(iter(maps[1][0]))
        maps[1][0][k] = fragment_address(numel=maps[1][0][k].numel - 1, start=1)
    for r in range(dp):
        paddings = [p if r == dp - 1 else 0 for p in pads]
        if spoil == "pad" and r == dp - 1:
            paddings[0] += 1
        osd = {"clip_grad": 1.0,
               "base_optimizer_state": {"state": {i: {"step": torch.tensor(7.0), "exp_avg": torch.zeros_like(x),
                                                      "exp_avg_sq": torch.ones_like(x)} for i, x in enumerate(parts[r])},
                                        "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "params": [i]}
                                                         for i in range(len(groups))]},
               "single_partition_of_fp32_groups": parts[r], "group_paddings": paddings,
               "partition_count": [dp] * len(groups), "ds_version": "0.16.5", "param_slice_mappings": maps[r]}
        torch.save({"optimizer_state_dict": osd, "ds_config": {"bf16": {"enabled": True}}, "ds_version": "0.16.5"},
                   os.path.join(d, f"bf16_zero_pp_rank_{r}_mp_rank_{mp:02d}_optim_states.pt"))
    return [collections.OrderedDict((k, params[k].shape) for k in grp) for grp in groups]


def write(tmp, name, zero1=False, spoil=None):
    """megatron_write's ZeRO 2 layout at TP 2, its shards replaced by BF16_Optimizer's at DP 3."""
    save = f"{tmp}/{name}"
    megatron_write.write(f"{tmp}/hf_gpt", save, 2, 1, "zero", {})
    d = f"{save}/global_step7"
    cfg = hf_models.json.load(open(f"{tmp}/hf_gpt/config.json"))
    W = {k: torch.from_numpy(hf_models.as_f64(dt, a).numpy().astype(np.float32))
         for k, (dt, a) in hf_models.read_dir(f"{tmp}/hf_gpt").items()}
    g, _, L = megatron_write.global_tensors(cfg, W, 64, 2)
    for t in range(2):
        for r in range(2):
            os.remove(f"{d}/zero_pp_rank_{r}_mp_rank_{t:02d}_optim_states.pt")
        shapes = write_bf16_shards(megatron_write.rank_model(g, L, 2, 1, t, 0, "legacy"), d, t, 3, spoil)
        path = f"{d}/mp_rank_{t:02d}_model_states.pt"
        states = torch.load(path)
        states["param_shapes"] = shapes if zero1 else None
        states["ds_config"] = {"train_batch_size": 8, "bf16": {"enabled": True},
                               "zero_optimization": {"stage": 1 if zero1 else 0}}
        torch.save(states, path)


def write_pipe(tmp, name):
    """megatron_write's DeepSpeed pipeline engine layout (GPTModelPipe's layer files, tied, TP 2,
    args PP 2) with BF16_Optimizer's shards per stage p and TP rank t at DP 2
    (bf16_zero_pp_rank_D_mp_rank_{p x 2 + t}: the pipeline grid's model-parallel rank), named as
    PipelineModule names its parameters: "tied_modules.embed.<name>" for the tied EmbeddingPipe
    (on both stages; the last stage's copy here off by one, which the import must not take),
    "<N>.<name>" for layer list entry N (2, 3: the transformer layers, 4: the final norm). The
    layer files hold the weights rounded to bf16, so the fp32 import differs from them."""
    save = f"{tmp}/{name}"
    megatron_write.write(f"{tmp}/hf_gpt", save, 2, 2, "dspipe", {})
    d = f"{save}/global_step7"
    cfg = hf_models.json.load(open(f"{tmp}/hf_gpt/config.json"))
    W = {k: torch.from_numpy(hf_models.as_f64(dt, a).numpy().astype(np.float32))
         for k, (dt, a) in hf_models.read_dir(f"{tmp}/hf_gpt").items()}
    g, _, L = megatron_write.global_tensors(cfg, W, 64, 2)
    for f in os.listdir(d):  # the layer files in bf16, as a bf16 run saves them
        if f.startswith("layer_"):
            sd = torch.load(f"{d}/{f}")
            torch.save(collections.OrderedDict((k, v.to(torch.bfloat16)) for k, v in sd.items()), f"{d}/{f}")
    for t in range(2):
        lm = megatron_write.rank_model(g, L, 2, 1, t, 0, "legacy")["language_model"]
        emb = megatron_write.flat(lm["embedding"], "tied_modules.embed.", collections.OrderedDict())
        enc = lm["encoder"]
        stages = [collections.OrderedDict(), collections.OrderedDict()]
        stages[0].update(emb)
        for k, v in enc.items():
            if k.startswith("layers."):
                l, rest = k[len("layers."):].split(".", 1)
                stages[int(l) * 2 // L][f"{2 + int(l)}.{rest}"] = v
            else:
                stages[1][f"{L + 2}.{k[len('final_layernorm.'):]}"] = v
        stages[1].update((k, v + 1) for k, v in emb.items())
        for p in range(2):
            write_shards(stages[p], d, p * 2 + t, 2)


if __name__ == "__main__":
    tmp = sys.argv[1]
    hf_models.make_random("gpt2", f"{tmp}/hf_gpt", 1)
    write(tmp, "bf16_gpt")
    write(tmp, "bf16_zero1", zero1=True)
    write(tmp, "bf16_gap", spoil="gap")
    write(tmp, "bf16_pad", spoil="pad")
    write_pipe(tmp, "bf16_pipe")
    megatron_write.write(f"{tmp}/hf_gpt", f"{tmp}/bf16_z2", 2, 1, "zero", {})
    for f in os.listdir(f"{tmp}/bf16_z2/global_step7"):
        if f.startswith("zero_pp_rank_"):
            shutil.move(f"{tmp}/bf16_z2/global_step7/{f}", f"{tmp}/bf16_z2/global_step7/bf16_{f}")
