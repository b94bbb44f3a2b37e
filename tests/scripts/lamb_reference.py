"""DeepSpeed's Lamb recomputed in PyTorch (float64) from plait's inputs, and
compared with plait's results (tests/tools/lamb_steps writes both).

Written from DeepSpeed's source, not plait's: deepspeed/ops/lamb/fused_lamb.py
(defaults max_coeff 10.0, min_coeff 0.01, eps_inside_sqrt False, bias_correction
True) and csrc/lamb/fused_lamb_cuda_kernel.cu:
  part 1: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
          denom = sqrt(v + eps) (ADAM_MODE_0, eps inside) or sqrt(v) + eps (MODE_1);
          update = m / denom + decay p; w_l2 = sum p^2, u_l2 = sum update^2
  part 3: coeff = 1; if |p| != 0 and |u| != 0: coeff = clamp(|p| / |u|, min, max);
          p -= step_size coeff update, step_size = lr sqrt(1-b2^t) / (1-b1^t)
          (bias_correction 0: lr)
Clipping (gradient_clipping: DeepSpeed refuses Lamb's own max_grad_norm) is
torch's clip_grad_norm_: g *= max / (|g| + 1e-6) when that is below 1, with |g|
the norm over every tensor.

usage: lamb_reference.py FILE.safetensors...   prints "ok"/"not ok" lines and
"lamb_reference: N passed, N failed"."""
import json
import struct
import sys

import numpy as np
import torch


def read(path):
    raw = open(path, 'rb').read()
    n = struct.unpack('<Q', raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    meta = json.loads(head.pop('__metadata__')['lamb'])
    out = {}
    for k, v in head.items():
        a, b = v['data_offsets']
        out[k] = torch.from_numpy(np.frombuffer(raw[8 + n + a:8 + n + b], dtype=np.float32)
                                  .reshape(v['shape']).copy())
    return meta, out


def fused_lamb(meta, t):
    names = [k[3:] for k in t if k.startswith('p0.')]
    p = {k: t['p0.' + k].double().clone() for k in names}
    m = {k: torch.zeros_like(p[k]) for k in names}
    v = {k: torch.zeros_like(p[k]) for k in names}
    # the kernel takes lr, betas, eps, decay and the coefficient bounds as C floats
    f32 = lambda x: float(np.float32(x))
    b1, b2, eps = f32(meta['beta1']), f32(meta['beta2']), f32(meta['eps'])
    lo, hi = f32(meta['min_coeff']), f32(meta['max_coeff'])
    coeffs = {k: [] for k in names}
    for s in range(1, meta['steps'] + 1):
        g = {k: t['g%d.%s' % (s, k)].double() for k in names}
        if meta['clip'] > 0:
            norm = torch.sqrt(sum((g[k] ** 2).sum() for k in names)).item()
            c = meta['clip'] / (norm + 1e-6)
            if c < 1:
                g = {k: g[k] * c for k in names}
        lr = f32(meta['lr'][s - 1])
        step_size = lr * (1 - b2 ** s) ** 0.5 / (1 - b1 ** s) if meta['bias_correction'] else lr
        for k in names:
            decay = f32(meta['weight_decay']) if meta['weight_decay_on'][k] else 0.0
            m[k] = b1 * m[k] + (1 - b1) * g[k]
            v[k] = b2 * v[k] + (1 - b2) * g[k] * g[k]
            denom = torch.sqrt(v[k] + eps) if meta['eps_inside_sqrt'] else torch.sqrt(v[k]) + eps
            update = m[k] / denom + decay * p[k]
            w_norm, u_norm = p[k].norm().item(), update.norm().item()
            coeff = 1.0
            if w_norm != 0 and u_norm != 0:
                coeff = min(max(w_norm / u_norm, lo), hi)
            coeffs[k].append((w_norm / u_norm) if w_norm and u_norm else None)
            p[k] = p[k] - step_size * coeff * update
    return p, m, v, coeffs


passed = failed = 0


def check(ok, what):
    global passed, failed
    print(('ok ' if ok else 'not ok ') + what)
    passed += bool(ok)
    failed += not ok


for path in sys.argv[1:]:
    meta, t = read(path)
    p, m, v, coeffs = fused_lamb(meta, t)
    tag = '%s (eps_inside_sqrt %d, bias_correction %d, clip %g)' % (
        path.rsplit('/', 1)[-1], meta['eps_inside_sqrt'], meta['bias_correction'], meta['clip'])
    # plait works in fp32, the reference in float64. The moments are one fp32
    # multiply-add per step each (relative error ~1e-7 per step, 6 steps); a
    # parameter moves by step_size * coeff * update per step, computed in fp32 from
    # them, so its error is ~1e-6 of the total movement (sum of lr * coeff * |update|
    # <= 6 x 0.06 x 10 x ~3) plus the fp32 rounding of |p|: 1e-6 (|p| + 1) bounds it.
    # A wrong formula (eps placement, bias correction, a missing clamp or weight
    # decay, an unclipped gradient) moves parameters by >= 1e-3 here. The moments'
    # bounds are 1e-6 of the value plus (m) the largest gradient or (v) 1e-6.
    worst = 0.0
    for k in p:
        pk = t['p.' + k].double()
        err = ((pk - p[k]).abs() / (1e-6 * (p[k].abs() + 1))).max().item()
        worst = max(worst, err)
        # m sums signed gradients: its fp32 error is relative to the terms, not to |m|
        gmax = max(t['g%d.%s' % (s, k)].abs().max().item() for s in range(1, meta['steps'] + 1))
        err_m = ((t['m.' + k].double() - m[k]).abs() / (1e-6 * (m[k].abs() + gmax))).max().item()
        err_v = ((t['v.' + k].double() - v[k]).abs() / (1e-6 * (v[k].abs() + 1e-6))).max().item()
        worst = max(worst, err_m, err_v)
    check(worst <= 1.0, '%s: parameters and moments after %d steps match FusedLamb '
          '(worst error %.3f of the bound)' % (tag, meta['steps'], worst))
    # the cases the tensors are built to exercise did occur
    if meta['max_coeff'] == 10.0 and meta['min_coeff'] == 0.01:
        check(coeffs['bias'][0] is None, '%s: the zero bias takes coefficient 1 at step 1' % tag)
        check(all(c is not None and c < 0.01 for c in coeffs['tiny'][:1]),
              '%s: the std-0.001 weight falls below min_coeff' % tag)
        check(all(c is not None and c > 10.0 for c in coeffs['large']),
              '%s: the std-50 weight exceeds max_coeff' % tag)

print('lamb_reference: %d passed, %d failed' % (passed, failed))
sys.exit(1 if failed else 0)
