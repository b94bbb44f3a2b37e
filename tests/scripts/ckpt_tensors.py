"""Reads a plait checkpoint iteration directory back into whole (global) tensors,
independently of plait: the manifest's tensor table (global shape, tensor-parallel
split) and each mp_rank_XX[_YYY]/model_optim.safetensors file, parsed here.

    python3 ckpt_tensors.py same A_ITER_DIR B_ITER_DIR [ABS REL]
        exit 0 when every parameter of A equals B's within ABS + REL * |b|
        (vocabulary tensors compared over the unpadded rows: the padding
        depends on the TP size), printing the worst excess
    python3 ckpt_tensors.py replicas ITER_DIR
        exit 0 when every tensor replicated over TP is bit-identical on every
        TP rank (ranks that drift apart would silently train different models)
    python3 ckpt_tensors.py same+replicas A_ITER_DIR B_ITER_DIR
        both (default tolerances), reading A once; the last line is
        "status: same ok|bad, replicas ok|bad"

Splits (src/model/registry.h): rows and vocab concatenate along dim 0, cols along
dim 1, rows_halves holds [gate_r; up_r] per rank (whole: [gate_0..; up_0..]),
qkv_shared_kv holds rank r's query heads and its group's k, v (the copies of a
group's k, v must be equal: checked with the replicated tensors).
"""
import json
import os
import re
import struct
import sys

import numpy as np


def read_safetensors(path):
    raw = open(path, 'rb').read()
    n = struct.unpack('<Q', raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    out = {}
    for k, v in head.items():
        if k == '__metadata__':
            continue
        assert v['dtype'] in ('F32', 'BF16'), (path, k, v['dtype'])
        a, b = v['data_offsets']
        if v['dtype'] == 'BF16':  # the top 16 bits of a float32
            bits = np.frombuffer(raw[8 + n + a:8 + n + b], dtype='<u2').astype(np.uint32) << 16
            out[k] = bits.view(np.float32).reshape(v['shape'])
            continue
        out[k] = np.frombuffer(raw[8 + n + a:8 + n + b], dtype=np.float32).reshape(v['shape'])
    return out


def rank_files(idir, man):
    tp = man['parallel']['tensor_model_parallel_size']
    pp = man['parallel']['pipeline_model_parallel_size']
    files = {}
    for t in range(tp):
        for p in range(pp):
            sub = f'mp_rank_{t:02d}' if pp == 1 else f'mp_rank_{t:02d}_{p:03d}'
            files[(t, p)] = read_safetensors(os.path.join(idir, sub, 'model_optim.safetensors'))
    return tp, files


def whole(idir, prefix='', trim=True):
    """{name: global array}, and {name: [per-TP-rank arrays]} of replicated tensors.
    prefix 'optimizer.exp_avg.' (or '...exp_avg_sq.') assembles a stage-0 checkpoint's
    Adam moments instead of the parameters; trim=False keeps the vocabulary padding."""
    man = json.load(open(os.path.join(idir, 'manifest.json')))
    tp, files = rank_files(idir, man)
    out, replicas = {}, {}
    for name, info in man['tensors'].items():
        stage = info['pipeline_stage']
        parts = [files[(t, stage)][prefix + name] for t in range(tp)]
        split = info['tp_split']
        if split == 'replicated':
            out[name], replicas[name] = parts[0], parts
        elif split in ('rows', 'vocab'):
            out[name] = np.concatenate(parts, axis=0)
        elif split == 'cols':
            out[name] = np.concatenate(parts, axis=1)
        elif split == 'qkv_shared_kv':
            # rank r: its NH/tp query heads, then the k and v of its group g = r // R
            nh, g_ = man['model']['num_attention_heads'], man['model']['num_query_groups']
            R, hs = tp // g_, info['shape'][0] // (nh + 2 * g_)
            q = nh // tp * hs
            blocks = []
            for g in range(g_):
                mine = parts[g * R:(g + 1) * R]
                blocks += [p[:q] for p in mine] + [mine[0][q:]]
                replicas[f'{name} (k, v of group {g})'] = [p[q:] for p in mine]
            out[name] = np.concatenate(blocks, axis=0)
        elif split == 'rows_halves':
            halves = [np.split(p, 2, axis=0) for p in parts]
            out[name] = np.concatenate([h[0] for h in halves] + [h[1] for h in halves], axis=0)
        else:
            raise SystemExit(f'{name}: unknown split {split}')
        want = tuple(info['shape'])
        if out[name].shape != want:
            raise SystemExit(f'{name}: assembled {out[name].shape}, manifest says {want}')
        if split == 'vocab' and trim:
            out[name] = out[name][:man['model']['vocab_size']]
    # Pipelined with tied embeddings, the last stage holds a copy of the word embeddings
    # as output_layer.weight: it must equal them bit for bit, and is the same tensor.
    if not man['model'].get('untie_embeddings_and_output_weights') and 'output_layer.weight' in out:
        replicas['output_layer.weight (tied copy of the word embeddings)'] = [
            out['embedding.word_embeddings.weight'], out.pop('output_layer.weight')]
    # A pipelined encoder-decoder's decoder embeds on its first stage with copies of the
    # embeddings (Megatron's embedding and position-embedding groups): equal bit for bit.
    for what in ('word_embeddings', 'position_embeddings'):
        copy = f'decoder_embedding.{what}.weight'
        if copy in out:
            replicas[f'{copy} (the decoder\'s copy)'] = [out[f'embedding.{what}.weight'],
                                                         out.pop(copy)]
    # Relative positions pipelined: a stack's later stages hold copies of its bias table
    # (<stack>_relative_pos_emb.stageN....), equal to the original bit for bit.
    for name in [n for n in out if re.match(r'(en|de)coder_relative_pos_emb\.stage\d+\.', n)]:
        orig = re.sub(r'\.stage\d+\.', '.', name)
        replicas[f'{name} (the stack\'s copy)'] = [out[orig], out.pop(name)]
    return out, replicas


def same(a, b, abs_tol=1e-5, rel_tol=1e-4):
    if set(a) != set(b):
        print('tensor names differ:', sorted(set(a) ^ set(b)))
        return 1
    worst, where = -np.inf, None
    for k in a:
        excess = float(np.max(np.abs(a[k] - b[k]) - rel_tol * np.abs(b[k]))) - abs_tol
        if excess > worst:
            worst, where = excess, k
    print(f'{len(a)} tensors; worst excess over {abs_tol:g} + {rel_tol:g}|p|: {worst:.3g} ({where})')
    return 0 if worst <= 0 else 1


def replicas_equal(reps):
    bad = [k for k, parts in reps.items() if any(not np.array_equal(parts[0], p) for p in parts)]
    print(f'{len(reps)} replicated tensors; differing across TP ranks: {bad}')
    return 0 if not bad else 1


def main():
    if sys.argv[1] == 'same':
        a, _ = whole(sys.argv[2])
        b, _ = whole(sys.argv[3])
        return same(a, b, *map(float, sys.argv[4:6]))
    if sys.argv[1] == 'replicas':
        _, reps = whole(sys.argv[2])
        return replicas_equal(reps)
    if sys.argv[1] == 'same+replicas':
        # A's files read once for both checks; the last line says which passed
        a, reps = whole(sys.argv[2])
        b, _ = whole(sys.argv[3])
        print('same:', end=' ')
        s = same(a, b)
        print('replicas:', end=' ')
        r = replicas_equal(reps)
        print(f'status: same {"ok" if s == 0 else "bad"}, replicas {"ok" if r == 0 else "bad"}')
        return s | r
    raise SystemExit(__doc__)


if __name__ == '__main__':
    sys.exit(main())
