#!/usr/bin/python3
"""An independent beam search over t5_parity.py's float64 PyTorch T5/BART forward
(or torch_parity.py's GPT or Llama for a gpt or llama checkpoint, GPT-2's
<|endoftext|> the end; the
whole prefix recomputed every step, no KV cache), written from Hugging
Face transformers' generate(num_beams=W, length_penalty=A, early_stopping=E)
(generation/beam_search.py: BeamSearchScorer.process/finalize, BeamHypotheses), with
the tie-break plait states where torch.topk leaves it open (a higher sum first, equal
sums by the lower beam * V + token), and compared with plait seq2seq --ids
--num-return W (or plait generate --ids ..., one prompt a line of SOURCES): every
hypothesis' tokens equal, in the same order, and its score
within 1e-4 relative (plait's logits are float32 against float64 here: t5.sh holds
them to 1e-5; a score sums at most a dozen log-probabilities).

usage: beam_oracle.py ITER_DIR SOURCES.ids PLAIT_OUT:W:A:hf|gnmt:EARLY(0|1):MAX_NEW...
(prints "beam_oracle: N passed, N failed")
"""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckpt_tensors import whole  # noqa: E402
from t5_parity import forward  # noqa: E402
from torch_parity import forward as gpt_forward, forward_llama  # noqa: E402



def special_ids(idir):
    """[BOS] and [EOS]: the vocabulary's own, else appended after it (Megatron's
    _BertWordPieceTokenizer.add_token)."""
    words = [w.rstrip("\n") for w in open(os.path.join(idir, "tokenizer/vocab/vocab.txt"))]
    ids = {w: i for i, w in enumerate(words)}
    n = len(words)
    for w in ("[BOS]", "[EOS]"):
        if w not in ids:
            ids[w] = n
            n += 1
    return ids["[BOS]"], ids["[EOS]"]


def beam_search(next_logits, prefix, eos, W, A, form, early, max_new, V):
    """next_logits(seqs): the logits (W, V) after each of the W sequences."""
    lp = (lambda x: x ** A) if form == "hf" else (lambda x: ((5.0 + x) / 6.0) ** A)
    seqs = [list(prefix) for _ in range(W)]
    sums = np.array([0.0] + [-1e9] * (W - 1))
    hyps = []  # (score, tokens), in the order added
    worst = [1e9]

    def add(tokens, s):  # BeamHypotheses.add; tokens include the prefix
        score = s / lp(len(tokens))
        if len(hyps) < W or score > worst[0]:
            hyps.append((score, tokens))
            if len(hyps) > W:
                ranked = sorted((h[0], i) for i, h in enumerate(hyps))
                del hyps[ranked[0][1]]
                worst[0] = ranked[1][0]
            else:
                worst[0] = min(score, worst[0])

    done = False
    for _ in range(max_new):
        cur_len = len(seqs[0])
        with torch.no_grad():
            logits = next_logits(seqs)
        logp = torch.log_softmax(logits, dim=-1).numpy()
        flat = (logp + sums[:, None]).reshape(-1)
        K = min(2 * W, W * V)
        top = np.lexsort((np.arange(flat.size), -flat))[:K]
        nxt = []
        for rank, i in enumerate(top):
            beam, tok = divmod(int(i), V)
            if tok == eos:
                if rank < W:
                    add(list(seqs[beam]), float(flat[i]))
            else:
                nxt.append((beam, tok, float(flat[i])))
            if len(nxt) == W:
                break
        best = float(flat[top[0]])
        if len(hyps) >= W and (early or worst[0] >= best / lp(cur_len)):
            done = True
            break
        seqs = [seqs[b] + [t] for b, t, _ in nxt]
        sums = np.array([s for _, _, s in nxt])
    if not done:
        for j in range(W):
            add(list(seqs[j]), float(sums[j]))
    ranked = sorted(hyps, key=lambda h: h[0])
    return [(s, t[len(prefix):]) for s, t in reversed(ranked)]


def compare(P, cfg, idir, sources, out, W, A, form, early, max_new):
    V = cfg["vocab"]
    lines = open(out).read().splitlines()
    ok = bad = 0
    tag = f"[{os.path.basename(out)}: W {W}, A {A}, {form}, early {int(early)}]"
    if len(lines) != W * len(sources):
        print(f"not ok {tag} plait wrote {len(lines)} lines, expected {W * len(sources)}")
        bad += 1
    for k, src in enumerate(sources):
        if cfg["causal"]:  # the prompt is the prefix
            f = forward_llama if cfg["llama"] else gpt_forward

            def next_logits(seqs):
                return f(P, torch.tensor(seqs), cfg)[:, -1, :V]
            want = beam_search(next_logits, src, cfg["eod"], W, A, form, early, max_new, V)
        else:  # the source through the encoder, [BOS] the decoder's prefix
            bos, eos = special_ids(idir)
            src_t, src_len = torch.tensor([src] * W), torch.tensor([len(src)] * W)

            def next_logits(seqs):
                return forward(P, src_t, src_len, torch.tensor(seqs), cfg)[:, -1, :V]
            want = beam_search(next_logits, [bos], eos, W, A, form, early, max_new, V)
        for h, (score, toks) in enumerate(want):
            got = lines[W * k + h].split("\t") if W * k + h < len(lines) else []
            gt = [int(x) for x in got[0].split()] if len(got) == 2 else None
            gs = float(got[1]) if len(got) == 2 else float("nan")
            good = gt == toks and abs(gs - score) <= 1e-4 * max(1.0, abs(score))
            print(f"{'ok' if good else 'not ok'} {tag} source {k} hypothesis {h}: "
                  f"{len(toks)} tokens, score {score:.6f} (plait {gs:.6f})"
                  + ("" if gt == toks else f"\n    reference {toks}\n    plait     {gt}"))
            ok, bad = ok + good, bad + (not good)
    return ok, bad


def main():
    idir, srcs = sys.argv[1:3]
    man = json.load(open(os.path.join(idir, "manifest.json")))["model"]
    arch = man["architecture"]
    cfg = {"hidden": man["hidden_size"], "heads": man["num_attention_heads"],
           "layers": man["num_layers"], "causal": arch in ("gpt", "llama"),
           "llama": arch == "llama", "groups": man["num_query_groups"],
           "rotary_base": man["rotary_base"], "eod": 50256,  # GPT-2's <|endoftext|>
           "enc_layers": man["num_layers"], "dec_layers": man.get("decoder_num_layers"),
           "res_post_norm": man["apply_residual_connection_post_layernorm"],
           "vocab": man["vocab_size"]}
    T, _ = whole(idir)
    P = {n: torch.tensor(a, dtype=torch.float64) for n, a in T.items()}
    sources = [[int(x) for x in ln.split()] for ln in open(srcs).read().splitlines()]
    ok = bad = 0
    for run in sys.argv[3:]:
        out, W, A, form, early, max_new = run.split(":")
        o, b = compare(P, cfg, idir, sources, out, int(W), float(A), form, early == "1",
                       int(max_new))
        ok, bad = ok + o, bad + b
    print(f"beam_oracle: {ok} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
