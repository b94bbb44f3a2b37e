#!/usr/bin/env python3
"""Set-up of tests/scripts/torch_dist_import.sh, in one start of python3-torch:

  torch_dist_write.py TMP

writes Megatron-LM's `--ckpt-format torch_dist` checkpoints (megatron/core/dist_checkpointing:
serialization.save, strategies/torch.py, filesystem_async.py) of random Hugging Face models
(hf_models.make_random), in the layout PyTorch >= 2.4's Distributed Checkpoint (DCP) writes:

  SAVE/latest_checkpointed_iteration.txt     7
  SAVE/iter_0000007/metadata.json             {"sharded_backend": "torch_dist", ...}
  SAVE/iter_0000007/.metadata                 pickle.dump(Metadata(...)) (protocol 4)
  SAVE/iter_0000007/__R_0.distcp              global rank R's items back to back: each tensor
                                              chunk as torch.save(chunk) into the stream, each
                                              ShardedObject as the bytes of torch.save([obj])
  SAVE/iter_0000007/common.pt                 legacy layouts only: torch.save(common state)

python3-torch is 1.13, whose torch.distributed._shard.checkpoint names its classes under other
modules (and writes files named differently), so the files are written here, after
torch/distributed/checkpoint/{metadata,filesystem}.py of PyTorch 2.x: stand-in dataclasses
registered under the real module names (torch.distributed.checkpoint.metadata.Metadata,
TensorStorageMetadata, BytesStorageMetadata, ChunkStorageMetadata, MetadataIndex,
TensorProperties with its (dtype, layout, requires_grad, _MEM_FORMAT_ENCODING, pin_memory)
state, StorageMeta; torch.distributed.checkpoint.filesystem._StorageInfo without None fields),
so that pickle names the same globals the real files hold.

Megatron's keys are its ShardedTensor keys: a transformer layer's tensors stacked as
decoder.layers.<name> [L, ...] (the layer axis prepended by sharded_offsets, each (layer, TP
rank) chunk [1, ...]) or, with non-homogeneous layers, decoder.layers.<l>.<name>; TP chunks at
their global offsets (column-parallel by rows, row-parallel by columns, SwiGLU's linear_fc1 as
[gate; up] with rank t's gate at fragment t and its up at fragment TP + t of 2 TP, or as
linear_fc1.weight_w / weight_v with singleton local shards); replicated tensors once. The
common state (args, checkpoint_version, iteration, ...) is the ShardedObject common_state
(bytes item common_state/shard_0_1) or, legacy, common.pt. Beside the model: optimizer.* tensors
(the distributed optimizer's), _extra_state and rng_state ShardedObjects, which the import skips.

TMP/hf_gpt, TMP/hf_llama   the Hugging Face models
TMP/td_gpt     GPT-2 (tied), TP 2 x PP 2, Transformer Engine's fused norm names, common_state inside
               the DCP checkpoint, args with params_dtype torch.float32 and model_type ModelType
TMP/td_llama   Llama (GQA, SwiGLU, untied), TP 2 x PP 1, local names, legacy common.pt, tensors bf16
               (TMP/hf_llama16: the Llama rounded to bf16, the import's expected tensors)
TMP/td_llama_nh  the Llama at TP 2 with non-homogeneous layers (decoder.layers.<l>.* keys, no
               layer axis, SwiGLU as weight_w / weight_v), fp32
TMP/hf_gpt4, TMP/td_vpp  a 4-layer GPT-2 at PP 2 with 2 virtual pipeline chunks per stage (layers
               0 and 2 saved by stage 0, 1 and 3 by stage 1; the keys the same)
TMP/td_bad_*   td_gpt spoiled: trunc (a .distcp cut short), offset (an item's offset past its
               file), global (planner_data naming os.system), missing (a key dropped from the
               metadata), path (a relative_path ../x), transform (transform_descriptors)"""
import argparse
import collections
import dataclasses
import enum
import io
import os
import pickle
import shutil
import sys
import types
import uuid

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_models  # noqa: E402
import megatron_write  # noqa: E402


def module(name):
    for k in range(1, name.count(".") + 2):
        part = ".".join(name.split(".")[:k])
        if part not in sys.modules:
            sys.modules[part] = types.ModuleType(part)
    return sys.modules[name]


def register(mod, cls, name=None):
    cls.__module__, cls.__qualname__ = mod, name or cls.__name__
    setattr(module(mod), cls.__qualname__, cls)
    return cls


MD = "torch.distributed.checkpoint.metadata"


@dataclasses.dataclass
class ChunkStorageMetadata:
    offsets: torch.Size
    sizes: torch.Size


class _MEM_FORMAT_ENCODING(enum.Enum):
    TORCH_CONTIGUOUS_FORMAT = 0
    TORCH_CHANNELS_LAST = 1
    TORCH_PRESERVE_FORMAT = 2


@dataclasses.dataclass
class TensorProperties:
    dtype: torch.dtype = torch.float32
    layout: torch.layout = torch.strided
    requires_grad: bool = False
    memory_format: object = torch.contiguous_format
    pin_memory: bool = False

    def __getstate__(self):  # as PyTorch's: torch.memory_format cannot be pickled
        return (self.dtype, self.layout, self.requires_grad,
                _MEM_FORMAT_ENCODING.TORCH_CONTIGUOUS_FORMAT, self.pin_memory)

    def __setstate__(self, state):
        self.dtype, self.layout, self.requires_grad, _, self.pin_memory = state
        self.memory_format = torch.contiguous_format


@dataclasses.dataclass
class TensorStorageMetadata:
    properties: TensorProperties
    size: torch.Size
    chunks: list


@dataclasses.dataclass
class BytesStorageMetadata:
    pass


@dataclasses.dataclass
class StorageMeta:
    checkpoint_id: object = None
    save_id: object = None
    load_id: object = None
    modules: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Metadata:
    state_dict_metadata: dict
    planner_data: object = None
    storage_data: object = None
    storage_meta: object = None
    version: object = None


@dataclasses.dataclass(frozen=True)
class MetadataIndex:
    fqn: str
    offset: object = None
    index: object = dataclasses.field(hash=False, compare=False, default=None)


@dataclasses.dataclass
class _StorageInfo:
    relative_path: str
    offset: int
    length: int
    transform_descriptors: object = None

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if v is not None}


for c in [ChunkStorageMetadata, _MEM_FORMAT_ENCODING, TensorProperties, TensorStorageMetadata,
          BytesStorageMetadata, StorageMeta, Metadata, MetadataIndex]:
    register(MD, c)
register("torch.distributed.checkpoint.filesystem", _StorageInfo)
ModelType = register("megatron.core.enums", enum.Enum("ModelType", {"encoder_or_decoder": 1}))

# Megatron core names of megatron_write.global_tensors' (layer, name) entries: (local spec, TE spec)
LAYER_NAMES = {"ln1": ("input_layernorm", "self_attention.linear_qkv.layer_norm_"),
               "qkv": ("self_attention.linear_qkv", None), "proj": ("self_attention.linear_proj", None),
               "ln2": ("pre_mlp_layernorm", "mlp.linear_fc1.layer_norm_"),
               "fc1": ("mlp.linear_fc1", None), "fc2": ("mlp.linear_fc2", None)}
SPLIT = {"qkv": 0, "fc1": 0, "proj": 1, "fc2": 1}  # column- / row-parallel weights' TP axis


def sharded_tensors(g, L, tp, pp, te, homogeneous, vpp=1):
    """Megatron's ShardedTensors: [(key, global shape, [(global rank, offsets, chunk)])]; with vpp
    virtual pipeline chunks of L / (pp x vpp) layers, chunk c on stage c % pp."""
    per_chunk = L // (pp * vpp)
    out = collections.OrderedDict()

    def add(key, x, axis, stage, layer=None, frag=None):
        """x: the global tensor (without the layer axis); axis: its TP axis or None
        (replicated); frag: (t -> fragment index, fragments) along axis 0 (SwiGLU's halves)."""
        shape = list(x.shape)
        pre = [] if layer is None else [layer[0]]
        gshape = ([layer[1]] if layer is not None else []) + shape
        ent = out.setdefault(key, (gshape, []))
        for t in range(tp if axis is not None else 1):
            offs, piece = [0] * len(shape), x
            if frag is not None:
                n, k = frag[1], frag[0](t)
                piece = x.chunk(n, 0)[k]
                offs[0] = k * piece.shape[0]
            elif axis is not None:
                piece = x.chunk(tp, axis)[t]
                offs[axis] = t * piece.shape[axis]
            if layer is not None:
                piece = piece.unsqueeze(0) if homogeneous else piece
            ent[1].append((stage * tp + t, pre + offs if homogeneous or layer is None else offs,
                           piece.contiguous().clone()))

    add("embedding.word_embeddings.weight", g["word"], 0, 0)
    if "pos" in g:
        add("embedding.position_embeddings.weight", g["pos"], None, 0)
    for l in range(L):
        stage = (l // per_chunk) % pp
        for key in ["ln1", "qkv", "proj", "ln2", "fc1", "fc2"]:
            for wb in ["weight", "bias"]:
                local, fused = LAYER_NAMES[key]
                name = (fused + wb if te and fused else local + "." + wb)
                kname = (lambda n: f"decoder.layers.{n}") if homogeneous else (lambda n: f"decoder.layers.{l}.{n}")
                lay = (l, L) if homogeneous else None
                if key == "fc1" and (l, "gate") in g:
                    if wb != "weight":
                        continue
                    if homogeneous:
                        x = torch.cat([g[l, "gate"], g[l, "up"]])
                        add(kname(name), x, 0, stage, lay, (lambda t: t, 2 * tp))
                        add(kname(name), x, 0, stage, lay, (lambda t: tp + t, 2 * tp))
                    else:
                        add(kname(name + "_w"), g[l, "gate"], 0, stage)
                        add(kname(name + "_v"), g[l, "up"], 0, stage)
                    continue
                x = g.get((l, f"{key}.{wb}"))
                if x is None:
                    continue
                axis = SPLIT.get(key) if not (key in ("proj", "fc2") and wb == "bias") else None
                if key in ("ln1", "ln2"):
                    axis = None
                add(kname(name), x, axis, stage, lay)
    last = pp - 1
    for wb in ["weight", "bias"]:
        if f"lnf.{wb}" in g:
            add(f"decoder.final_layernorm.{wb}", g[f"lnf.{wb}"], None, last)
    if "out" in g:
        add("output_layer.weight", g["out"], 0, last)
    return out


def torch_save_bytes(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def write(hf_dir, save, tp, pp, te=True, homogeneous=True, legacy_common=False, dtype=torch.float32, vpp=1):
    cfg = hf_models.json.load(open(os.path.join(hf_dir, "config.json")))
    W = {k: torch.from_numpy(hf_models.as_f64(dt, a).numpy().astype(np.float32))
         for k, (dt, a) in hf_models.read_dir(hf_dir).items()}
    g, args, L = megatron_write.global_tensors(cfg, W, 64, tp)
    args.update(pipeline_model_parallel_size=pp, iteration=7, ckpt_format="torch_dist",
                params_dtype=torch.float32 if dtype == torch.float32 else torch.bfloat16,
                bf16=dtype == torch.bfloat16, model_type=ModelType.encoder_or_decoder)
    if vpp > 1:
        args.update(virtual_pipeline_model_parallel_size=vpp, num_layers_per_virtual_pipeline_stage=L // (pp * vpp))
    ns = argparse.Namespace(**args)
    common = {"args": ns, "checkpoint_version": 3.0, "iteration": 7,
              "num_floating_point_operations_so_far": 12345,
              "opt_param_scheduler": {"max_lr": 1e-3, "num_steps": 56}}
    d = os.path.join(save, "iter_0000007")
    os.makedirs(d, exist_ok=True)
    world = tp * pp
    items = [[] for _ in range(world)]  # per global rank: (fqn, offsets or None, bytes)
    sdm = collections.OrderedDict()
    for key, (shape, chunks) in sharded_tensors(g, L, tp, pp, te, homogeneous, vpp).items():
        meta = []
        for rank, offs, x in chunks:
            x = x.to(dtype)
            items[rank].append((key, offs, torch_save_bytes(x)))
            meta.append(ChunkStorageMetadata(torch.Size(offs), torch.Size(x.shape)))
        sdm[key] = TensorStorageMetadata(TensorProperties(dtype), torch.Size(shape), meta)
    # the distributed optimizer's state (flattened ranges, not read), TE's _extra_state, RNG
    opt = torch.zeros(1, 2, 8)
    sdm["optimizer.distributed.dp_group_idx_0.gbuf_idx_0.dtype_(torch.float32, torch.float32).exp_avg"] = \
        TensorStorageMetadata(TensorProperties(), torch.Size([1, 2, 8]), [ChunkStorageMetadata(torch.Size([0, 0, 0]), torch.Size([1, 2, 8]))])
    items[0].append(("optimizer.distributed.dp_group_idx_0.gbuf_idx_0.dtype_(torch.float32, torch.float32).exp_avg",
                     [0, 0, 0], torch_save_bytes(opt)))
    objs = [(f"decoder.layers.self_attention.core_attention._extra_state/shard_0.{t}_{L}.{tp}", 0 * pp + t, None)
            for t in range(tp)]
    objs += [(f"rng_state/shard_{p}.{t}.0_{pp}.{tp}.1", p * tp + t, {"random_rng_state": (3, (1, 2), None)})
             for p in range(pp) for t in range(tp)]
    if not legacy_common:
        objs.append(("common_state/shard_0_1", 0, common))
    for fqn, rank, obj in objs:
        sdm[fqn] = BytesStorageMetadata()
        items[rank].append((fqn, None, torch_save_bytes([obj])))
    storage = {}
    for rank in range(world):
        name = f"__{rank}_0.distcp"
        with open(os.path.join(d, name), "wb") as f:
            for k, (fqn, offs, data) in enumerate(items[rank]):
                at = f.tell()
                f.write(data)
                index = MetadataIndex(fqn, torch.Size(offs) if offs is not None else None,
                                      k if offs is not None else None)
                storage[index] = _StorageInfo(name, at, len(data))
    md = Metadata(sdm, planner_data={}, storage_data=storage,
                  storage_meta=StorageMeta(checkpoint_id=d, save_id=str(uuid.UUID(int=7))), version="1.0.0")
    with open(os.path.join(d, ".metadata"), "wb") as f:
        pickle.dump(md, f)
    if legacy_common:
        torch.save(common, os.path.join(d, "common.pt"))
    with open(os.path.join(d, "metadata.json"), "w") as f:
        f.write('{"sharded_backend": "torch_dist", "sharded_backend_version": 1}')
    with open(os.path.join(save, "latest_checkpointed_iteration.txt"), "w") as f:
        f.write("7")
    return md


def spoil(src, dst, how):
    shutil.copytree(src, dst)
    d = os.path.join(dst, "iter_0000007")
    md = pickle.load(open(os.path.join(d, ".metadata"), "rb"))
    if how == "trunc":
        p = os.path.join(d, "__3_0.distcp")
        os.truncate(p, os.path.getsize(p) - 100)
        return
    key = "decoder.layers.self_attention.linear_proj.weight"
    idx = next(i for i in md.storage_data if i.fqn == key)
    info = md.storage_data[idx]
    if how == "offset":
        info.offset = os.path.getsize(os.path.join(d, info.relative_path)) + 64
    elif how == "path":
        info.relative_path = "../__0_0.distcp"
    elif how == "transform":
        info.transform_descriptors = ["zstd"]
    elif how == "global":
        md.planner_data = {"x": os.system}
    elif how == "missing":
        del md.state_dict_metadata["decoder.final_layernorm.bias"]
    with open(os.path.join(d, ".metadata"), "wb") as f:
        pickle.dump(md, f)


if __name__ == "__main__":
    tmp = sys.argv[1]
    hf_models.make_random("gpt2", f"{tmp}/hf_gpt", 1)
    hf_models.make_random("llama", f"{tmp}/hf_llama", 2)
    write(f"{tmp}/hf_gpt", f"{tmp}/td_gpt", 2, 2)
    write(f"{tmp}/hf_llama", f"{tmp}/td_llama", 2, 1, te=False, legacy_common=True, dtype=torch.bfloat16)
    write(f"{tmp}/hf_llama", f"{tmp}/td_llama_nh", 2, 1, te=False, homogeneous=False)
    hf_models.make_random("gpt2", f"{tmp}/hf_gpt4", 3, layers=4)
    write(f"{tmp}/hf_gpt4", f"{tmp}/td_vpp", 1, 2, vpp=2)
    W = hf_models.read_dir(f"{tmp}/hf_llama")
    os.makedirs(f"{tmp}/hf_llama16", exist_ok=True)
    shutil.copy(f"{tmp}/hf_llama/config.json", f"{tmp}/hf_llama16/config.json")
    hf_models.write_safetensors(f"{tmp}/hf_llama16/model.safetensors", {
        k: torch.from_numpy(hf_models.as_f64(dt, a).numpy().astype(np.float32)).to(torch.bfloat16).float().numpy()
        for k, (dt, a) in W.items()})
    for how in ["trunc", "offset", "path", "transform", "global", "missing"]:
        spoil(f"{tmp}/td_gpt", f"{tmp}/td_bad_{how}", how)
