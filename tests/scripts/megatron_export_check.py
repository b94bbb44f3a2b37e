#!/usr/bin/env python3
"""Oracle of tests/scripts/megatron_export.sh: a Megatron checkpoint written by
`plait ckpt export --format megatron`, read by python3-torch, against the plait
checkpoint it came from, read by ckpt_tensors.py (numpy, independently of plait):

    megatron_export_check.py PLAIT_ITER_DIR MEGATRON_SAVE_DIR TP PP fp32|bf16 [:: ...]

    megatron_export_check.py vs HF_DIR MEGATRON_SAVE_DIR TP PP [:: ...]

(several exports checked in one start of torch, separated by "::"). `vs`: the export against
megatron_write.py's (torch_import.sh's writer of Megatron checkpoints) Megatron core layout of
plait's Hugging Face export of the same checkpoint: the same keys in the same order and the
same bits (vocabulary rows past the tokenizer's left out: Hugging Face has none).

Checked, for every mp_rank_TT[_PPP]/model_optim_rng.pt of the layout:
- torch.load(weights_only=False) reads it: a dict of args (argparse.Namespace), checkpoint_version
  3.0 (a float), iteration (latest_checkpointed_iteration.txt's, 0 for a release), model (an
  OrderedDict) and nothing else (no optimizer, rng_state, opt_param_scheduler);
- weights_only=True: with torch.serialization.safe_globals (torch >= 2.5) the file loads with
  argparse.Namespace allowed; torch 1.13's weights-only unpickler lacks BINFLOAT and has no
  allow list, so there the pickle is checked statically instead: every opcode one it reads, or
  BINFLOAT; every GLOBAL on its allow list, or argparse.Namespace; NEWOBJ only on that;
- args hold what Megatron's check_checkpoint_args compares (num_layers, hidden_size,
  num_attention_heads, max_position_embeddings, make_vocab_size_divisible_by,
  padded_vocab_size, tensor/pipeline_model_parallel_size) with the manifest's values;
- model's keys are exactly Megatron core's (local spec) for that rank: the embeddings on the
  first stage, decoder.layers.N with N local to the stage (layers split evenly), the final
  norm and the output layer on the last (a tied one only when PP > 1);
- every tensor is, bit for bit (bf16: torch's round to nearest even of plait's fp32), the
  rank's slice of plait's global tensor by Megatron's tensor-parallel rules, stated here:
  vocabulary rows split (padded to make_vocab_size_divisible_by x TP; rows past plait's saved
  padding zero), linear_qkv by query groups ([G, NH/G + 2, HS] rows: each group's queries, its
  key, its value; G/TP groups per rank),
  linear_fc1 rows ([gate_r; up_r] per rank with SwiGLU), linear_proj / linear_fc2 weights by
  columns, the rest replicated.
Prints each failure and "megatron_export_check: N passed, M failed"; exits 1 on any failure.
"""
import argparse
import collections
import json
import os
import pickletools
import sys
import zipfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ckpt_tensors  # noqa: E402

PASS, FAIL = [0], [0]


def check(ok, what):
    if ok:
        PASS[0] += 1
    else:
        FAIL[0] += 1
        print('FAIL', what)


def megatron_slice(name, g, t, tp, m):
    """Rank t's slice of the global tensor g, by Megatron's tensor-parallel rules."""
    nh, G = m['num_attention_heads'], m['num_query_groups']
    hs = m['hidden_size'] // nh
    if 'word_embeddings' in name or name.startswith('output_layer'):
        n = g.shape[0] // tp
        return g[t * n:(t + 1) * n]
    if 'linear_qkv' in name:
        v = g.reshape((G, nh // G + 2, hs) + g.shape[1:])
        assert G % tp == 0, 'Megatron core splits the query groups over TP'
        return v[t * G // tp:(t + 1) * G // tp].reshape((-1,) + g.shape[1:])
    if 'linear_fc1' in name:
        if m['swiglu']:
            gate, up = np.split(g, 2, axis=0)
            n = gate.shape[0] // tp
            return np.concatenate([gate[t * n:(t + 1) * n], up[t * n:(t + 1) * n]], axis=0)
        n = g.shape[0] // tp
        return g[t * n:(t + 1) * n]
    if name.endswith('linear_proj.weight') or name.endswith('linear_fc2.weight'):
        n = g.shape[1] // tp
        return g[:, t * n:(t + 1) * n]
    return g


def static_weights_only(path):
    """torch 1.13's weights-only unpickler's opcodes and globals (+ BINFLOAT, Namespace)."""
    from torch import _weights_only_unpickler as wo
    allowed_ops = {'PROTO', 'STOP', 'GLOBAL', 'NEWOBJ', 'REDUCE', 'BUILD', 'APPEND', 'APPENDS',
                   'SETITEM', 'SETITEMS', 'MARK', 'TUPLE', 'TUPLE1', 'TUPLE2', 'TUPLE3', 'NONE',
                   'NEWFALSE', 'NEWTRUE', 'EMPTY_TUPLE', 'EMPTY_LIST', 'EMPTY_DICT', 'EMPTY_SET',
                   'BININT', 'BININT1', 'BININT2', 'BINUNICODE', 'SHORT_BINSTRING', 'BINPERSID',
                   'BINGET', 'LONG_BINGET', 'BINPUT', 'LONG_BINPUT', 'LONG1', 'BINFLOAT'}
    globs = set(wo._get_allowed_globals()) | {'argparse.Namespace'}
    with zipfile.ZipFile(path) as z:
        pkl = z.read([n for n in z.namelist() if n.endswith('/data.pkl')][0])
    last_global, bad = None, []
    for op, arg, _ in pickletools.genops(pkl):
        if op.name not in allowed_ops:
            bad.append(op.name)
        if op.name == 'GLOBAL':
            last_global = arg.replace(' ', '.')
            if last_global not in globs:
                bad.append(last_global)
        if op.name == 'NEWOBJ' and last_global != 'argparse.Namespace':
            bad.append('NEWOBJ of ' + str(last_global))
    return bad


def vs_megatron_write(hf_dir, mdir, tp, pp):
    """Our export against megatron_write.py's Megatron layout of plait's Hugging Face export
    of the same checkpoint (an independent path: hf_names.c, then Python from HF's q/k/v)."""
    import megatron_write
    tp, pp = int(tp), int(pp)
    cfg = json.load(open(os.path.join(hf_dir, 'config.json')))
    W = {k: torch.from_numpy(megatron_write.hf_models.as_f64(dt, a).numpy().astype(np.float32))
         for k, (dt, a) in megatron_write.hf_models.read_dir(hf_dir).items()}
    latest = open(os.path.join(mdir, 'latest_checkpointed_iteration.txt')).read().strip()
    idir = os.path.join(mdir, 'release' if latest == 'release' else f'iter_{int(latest):07d}')
    first = None
    for t in range(tp):
        for p in range(pp):
            sub = f'mp_rank_{t:02d}' if pp == 1 else f'mp_rank_{t:02d}_{p:03d}'
            d = torch.load(os.path.join(idir, sub, 'model_optim_rng.pt'), map_location='cpu')
            if first is None:
                first = d['args']
                g, _, L = megatron_write.global_tensors(cfg, W, first.make_vocab_size_divisible_by, tp)
                V = cfg['vocab_size']
            ref = megatron_write.rank_model(g, L, tp, pp, t, p, 'core')
            got = d['model']
            check(list(got) == list(ref), f'{sub}: keys (in order) differ from megatron_write.py\'s: '
                  f'{sorted(set(got) ^ set(ref))}')
            for k in ref:
                if k not in got:
                    continue
                x, r = got[k].float(), ref[k]
                if 'word_embeddings' in k or k.startswith('output_layer'):
                    n = r.shape[0]  # rows of the tokenizer's vocabulary only (HF drops the padding)
                    keep = max(0, min(n, V - t * n))
                    x, r = x[:keep], r[:keep]
                check(x.shape == r.shape and torch.equal(x.view(torch.int32), r.view(torch.int32)),
                      f'{sub} {k}: differs from megatron_write.py\'s')


def main():
    args = sys.argv[1:]
    while args:
        if args[0] == 'vs':
            vs_megatron_write(*args[1:5])
            args = args[6:]
            continue
        one(*args[:5])
        args = args[6:]
    print(f'megatron_export_check: {PASS[0]} passed, {FAIL[0]} failed')
    return 1 if FAIL[0] else 0


def one(pdir, mdir, tp, pp, dtype):
    tp, pp = int(tp), int(pp)
    man = json.load(open(os.path.join(pdir, 'manifest.json')))
    m = man['model']
    m.setdefault('num_query_groups', m['num_attention_heads'])
    m['swiglu'] = bool(m.get('swiglu'))
    full, _ = ckpt_tensors.whole(pdir, trim=False)
    V, div = m['vocab_size'], m['make_vocab_size_divisible_by']
    vp = -(-V // (div * tp)) * div * tp
    for k in ('embedding.word_embeddings.weight', 'output_layer.weight'):
        if k in full:  # the export's padding: plait's rows, then zeros
            g = np.zeros((vp,) + full[k].shape[1:], np.float32)
            n = min(vp, full[k].shape[0])
            g[:n] = full[k][:n]
            full[k] = g
    tied = not m.get('untie_embeddings_and_output_weights')
    latest = open(os.path.join(mdir, 'latest_checkpointed_iteration.txt')).read().strip()
    it = 0 if latest == 'release' else int(latest)
    idir = os.path.join(mdir, 'release' if latest == 'release' else f'iter_{it:07d}')
    L = m['num_layers']
    for t in range(tp):
        for p in range(pp):
            sub = f'mp_rank_{t:02d}' if pp == 1 else f'mp_rank_{t:02d}_{p:03d}'
            path = os.path.join(idir, sub, 'model_optim_rng.pt')
            d = torch.load(path, map_location='cpu', weights_only=False)
            check(set(d) == {'args', 'checkpoint_version', 'iteration', 'model'},
                  f'{sub}: top-level keys {sorted(d)}')
            check(isinstance(d['args'], argparse.Namespace), f'{sub}: args a Namespace')
            check(type(d['checkpoint_version']) is float and d['checkpoint_version'] == 3.0,
                  f'{sub}: checkpoint_version {d["checkpoint_version"]!r}')
            check(d['iteration'] == it, f'{sub}: iteration {d["iteration"]} != {it}')
            check(type(d['model']) is collections.OrderedDict, f'{sub}: model an OrderedDict')
            a = d['args']
            for k, want in (('num_layers', L), ('hidden_size', m['hidden_size']),
                            ('num_attention_heads', m['num_attention_heads']),
                            ('max_position_embeddings', m['max_position_embeddings']),
                            ('make_vocab_size_divisible_by', div), ('padded_vocab_size', vp),
                            ('tensor_model_parallel_size', tp), ('pipeline_model_parallel_size', pp)):
                check(getattr(a, k, None) == want, f'{sub}: args.{k} {getattr(a, k, None)} != {want}')
            if hasattr(torch.serialization, 'safe_globals'):
                with torch.serialization.safe_globals([argparse.Namespace]):
                    torch.load(path, map_location='cpu', weights_only=True)
                check(True, 'weights_only')
            else:
                bad = static_weights_only(path)
                check(not bad, f'{sub}: outside torch\'s weights-only subset: {bad}')
            # the keys Megatron core's GPTModel (local spec) has on this rank
            nl = L // pp
            want = {}
            if p == 0:
                for k in ('embedding.word_embeddings.weight', 'embedding.position_embeddings.weight'):
                    if k in full:
                        want[k] = k
            for name in full:
                if name.startswith('decoder.layers.'):
                    layer = int(name.split('.')[2])
                    if p * nl <= layer < (p + 1) * nl:
                        rest = name.split('.', 3)[3]
                        want[f'decoder.layers.{layer - p * nl}.{rest}'] = name
            if p == pp - 1:
                for name in full:
                    if name.startswith('decoder.final_layernorm.'):
                        want[name] = name
                if not tied:
                    want['output_layer.weight'] = 'output_layer.weight'
                elif pp > 1:
                    want['output_layer.weight'] = 'embedding.word_embeddings.weight'
            got = d['model']
            check(set(got) == set(want), f'{sub}: keys differ: {sorted(set(got) ^ set(want))}')
            for k, src in want.items():
                if k not in got:
                    continue
                x = got[k]
                ref = torch.from_numpy(np.array(megatron_slice(k, full[src], t, tp, m), np.float32))
                if dtype == 'bf16':
                    ref = ref.to(torch.bfloat16)
                check(x.dtype == ref.dtype, f'{sub} {k}: dtype {x.dtype}')
                check(tuple(x.shape) == tuple(ref.shape), f'{sub} {k}: shape {tuple(x.shape)} != '
                      f'{tuple(ref.shape)}')
                check(x.shape == ref.shape and x.is_contiguous() and
                      torch.equal(x.view(torch.int16) if dtype == 'bf16' else x.view(torch.int32),
                                  ref.view(torch.int16) if dtype == 'bf16' else ref.view(torch.int32)),
                      f'{sub} {k}: values differ from plait\'s')


if __name__ == '__main__':
    sys.exit(main())
