#!/usr/bin/env python3
"""Set-up of tests/scripts/torch_import.sh, in one start of python3-torch:

  torch_import_write.py TMP

TMP/hf_gpt, TMP/hf_llama   random Hugging Face GPT-2 and Llama directories (hf_models.make_random)
TMP/bin_gpt, TMP/bin_llama the same models as pytorch_model.bin (GPT-2 in fp32 with a shared
                           lm_head and the old attn.bias buffers; Llama in bf16)
TMP/mg_gpt                 Megatron legacy names, TP 2 x PP 2, from hf_gpt (megatron_write.py)
TMP/mg_llama               Megatron core names, TP 2 x PP 1, from hf_llama (vocabulary 100 padded
                           to 128)
TMP/ds_gpt                 Megatron-DeepSpeed through DeepSpeed's engine, TP 2, from hf_gpt
TMP/dsp_gpt, TMP/dsp_llama DeepSpeed's pipeline engine (Megatron-DeepSpeed's GPTModelPipe): GPT at
                           TP 2 (args PP 2, tied), Llama at TP 1 (untied: LMHeadPipe's file);
                           dsp_badkey: dsp_gpt with an unexpected key in layer_02-model_01;
                           dsp_thirds: GPT at TP 2 as Megatron-DeepSpeed writes it since
                           2024-12-04 (args.ds_sequence_parallel_fpdt; query_key_value in
                           [Q; K; V] thirds), dsp_gqa_thirds: the same of the Llama (groups)
TMP/gpt.nemo, llama.nemo   NeMo archives: GPT at TP 2 x PP 2 (tar), Llama in one rank (tar.gz);
                           post.nemo with transformer_block_type post_ln, rpn.nemo with
                           apply_residual_connection_post_layernorm true
TMP/mg_one                 legacy, one rank; TMP/mg_one.listing: its file as torch.load reads it,
                           listed as pt_dump lists what plait reads
TMP/proto4.pt             the same object saved with pickle protocol 4
TMP/mg_post, TMP/mg_erf    one rank with args apply_residual_connection_post_layernorm=True
                           (mg_post_core: the same, Megatron core names),
                           openai_gelu=False
TMP/shared.pt              a list of the same list, 60 deep (2^60 paths): read in linear time
TMP/bad_*.pt               files plait must refuse: a pickle calling os.system, a truncated file, a
                           compressed entry, a storage larger than its entry, a list holding itself"""
import io
import os
import shutil
import sys
import zipfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_models  # noqa: E402
import megatron_write  # noqa: E402


def listing(o, path, out):
    """pt_dump's format (tests/tools/pt_dump.c)."""
    if o is None:
        out.append(f"{path} = None")
    elif isinstance(o, bool):
        out.append(f"{path} = {o}")
    elif isinstance(o, int):
        out.append(f"{path} = {o}")
    elif isinstance(o, float):
        out.append(f"{path} = {'%.17g' % o}")
    elif isinstance(o, str):
        out.append(f"{path} = '{o}'")
    elif isinstance(o, bytes):
        out.append(f"{path} = object _codecs.encode")  # protocol 2 pickles bytes so
    elif torch.is_tensor(o):
        dt = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16", torch.float64: "F64",
              torch.uint8: "U8", torch.int64: "I64"}[o.dtype]
        if dt in ("F32", "BF16", "F16", "F64"):
            s = 0.0
            for v in o.float().flatten().tolist():
                s += v
            out.append(f"{path} = tensor {dt} [{', '.join(str(x) for x in o.shape)}] sum={'%.9g' % s}")
        else:
            out.append(f"{path} = tensor {dt} numel={o.numel()}")
    elif isinstance(o, dict):
        for k, v in o.items():
            listing(v, f"{path}.{k}", out)
    elif isinstance(o, (list, tuple)):
        for i, v in enumerate(o):
            listing(v, f"{path}[{i}]", out)
    elif type(o).__name__ == "Namespace":
        listing(vars(o), path, out)
    else:  # numpy arrays: the callable their pickle names
        f = o.__reduce_ex__(2)[0]
        out.append(f"{path} = object {f.__module__}.{f.__name__}")


class System:
    def __init__(self, witness):
        self.witness = witness

    def __reduce__(self):  # unpickled by Python, this would create the witness file
        return (os.system, ("touch " + self.witness,))


def rewrite_zip(src, dst, change):
    """Copies the zip src to dst, entry by entry, through change(name, data) -> (data, compress)."""
    with zipfile.ZipFile(src) as zi, zipfile.ZipFile(dst, "w") as zo:
        for info in zi.infolist():
            data, compress = change(info.filename, zi.read(info.filename))
            zo.writestr(info.filename, data, zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED)


def write_bin(hf_dir, out, dtype, buffers):
    """The directory's weights as transformers' older pytorch_model.bin (torch.save of the
    state dict: a tied GPT-2's lm_head.weight shares wte's storage; buffers: the causal-mask
    attn.bias / attn.masked_bias buffers older GPT-2 files hold)."""
    os.makedirs(out, exist_ok=True)
    cfg = hf_models.json.load(open(os.path.join(hf_dir, "config.json")))
    hf_models.json.dump(cfg, open(os.path.join(out, "config.json"), "w"))
    sd = {k: torch.from_numpy(hf_models.as_f64(dt, a).numpy()).to(dtype) for k, (dt, a) in hf_models.read_dir(hf_dir).items()}
    if "transformer.wte.weight" in sd:
        sd["lm_head.weight"] = sd["transformer.wte.weight"]
    if buffers:
        T = cfg["n_positions"]
        for l in range(cfg["n_layer"]):
            sd[f"transformer.h.{l}.attn.bias"] = torch.tril(torch.ones(T, T, dtype=torch.uint8)).view(1, 1, T, T)
            sd[f"transformer.h.{l}.attn.masked_bias"] = torch.tensor(-1e4)
    torch.save(sd, os.path.join(out, "pytorch_model.bin"))


def main():
    tmp = sys.argv[1]
    hf_models.make_random("gpt2", f"{tmp}/hf_gpt", 1)
    hf_models.make_random("llama", f"{tmp}/hf_llama", 2)
    write_bin(f"{tmp}/hf_gpt", f"{tmp}/bin_gpt", torch.float32, True)
    write_bin(f"{tmp}/hf_llama", f"{tmp}/bin_llama", torch.bfloat16, False)
    megatron_write.write(f"{tmp}/hf_gpt", f"{tmp}/mg_gpt", 2, 2, "legacy", {})
    megatron_write.write(f"{tmp}/hf_llama", f"{tmp}/mg_llama", 2, 1, "core", {"make_vocab_size_divisible_by": 32})
    megatron_write.write(f"{tmp}/hf_gpt", f"{tmp}/mg_one", 1, 1, "legacy", {})
    megatron_write.write(f"{tmp}/hf_gpt", f"{tmp}/ds_gpt", 2, 1, "deepspeed", {})
    megatron_write.write(f"{tmp}/hf_gpt", f"{tmp}/dsp_gpt", 2, 2, "dspipe", {})
    megatron_write.write(f"{tmp}/hf_llama", f"{tmp}/dsp_llama", 1, 1, "dspipe", {})
    megatron_write.write(f"{tmp}/hf_gpt", f"{tmp}/dsp_thirds", 2, 1, "dspipe", {"ds_sequence_parallel_fpdt": False})
    megatron_write.write(f"{tmp}/hf_llama", f"{tmp}/dsp_gqa_thirds", 1, 1, "dspipe", {"ds_sequence_parallel_fpdt": False})
    shutil.copytree(f"{tmp}/dsp_gpt", f"{tmp}/dsp_badkey")
    bad = f"{tmp}/dsp_badkey/global_step7/layer_02-model_01-model_states.pt"
    sd = torch.load(bad)
    sd["mlp.fc1.weight"] = sd.pop("mlp.dense_h_to_4h.weight")
    torch.save(sd, bad)
    megatron_write.write_nemo(f"{tmp}/hf_gpt", f"{tmp}/gpt.nemo", 2, 2, False, {})
    megatron_write.write_nemo(f"{tmp}/hf_llama", f"{tmp}/llama.nemo", 1, 1, True, {})
    megatron_write.write_nemo(f"{tmp}/hf_gpt", f"{tmp}/post.nemo", 1, 1, False, {"transformer_block_type": "post_ln"})
    megatron_write.write_nemo(f"{tmp}/hf_gpt", f"{tmp}/rpn.nemo", 1, 1, False,
                              {"apply_residual_connection_post_layernorm": True})
    megatron_write.write(f"{tmp}/hf_gpt", f"{tmp}/mg_post", 1, 1, "legacy",
                         {"apply_residual_connection_post_layernorm": True})
    megatron_write.write(f"{tmp}/hf_gpt", f"{tmp}/mg_post_core", 1, 1, "core",
                         {"apply_residual_connection_post_layernorm": True})
    megatron_write.write(f"{tmp}/hf_gpt", f"{tmp}/mg_erf", 1, 1, "legacy", {"openai_gelu": False})
    one = f"{tmp}/mg_one/iter_0000007/mp_rank_00/model_optim_rng.pt"
    out = []
    obj = torch.load(one)
    listing(obj, "", out)
    open(f"{tmp}/mg_one.listing", "w").write("\n".join(out) + "\n")
    torch.save(obj, f"{tmp}/proto4.pt", pickle_protocol=4)  # FRAME, MEMOIZE, SHORT_BINUNICODE, STACK_GLOBAL
    torch.save({"model": System(f"{tmp}/os_system_ran")}, f"{tmp}/bad_system.pt")
    raw = open(one, "rb").read()
    open(f"{tmp}/bad_trunc.pt", "wb").write(raw[: len(raw) // 2])
    rewrite_zip(one, f"{tmp}/bad_deflate.pt", lambda n, d: (d, n.endswith("data.pkl")))
    rewrite_zip(one, f"{tmp}/bad_oversize.pt", lambda n, d: (d[:8] if n.endswith("/data/0") else d, False))
    loop = []
    loop.append(loop)
    torch.save({"model": loop}, f"{tmp}/bad_recursive.pt")
    shared = []
    for _ in range(60):  # 2^60 paths through 60 memo-shared lists
        shared = [shared, shared]
    torch.save({"model": {"x": shared}}, f"{tmp}/shared.pt")


if __name__ == "__main__":
    main()
