"""Oracle for tests/scripts/mmb_dataset.sh: checks plait's MegaMolBART samples
(tests/tools/mmb_samples output) against MegaMolBART v0.2.0's rules
(nemo_chem/data/augment.py MoleculeEnumeration.collate_fn) and RDKit.

  mmb_check.py check SAMPLES VOCAB SEQ EA EM DA DM
      every sample: encoder and decoder SMILES are the input molecule by RDKit
      canonical SMILES; the token ids are NeMo's RegExTokenizer's (the regex
      wrapped as "(regex|.)", vocab.get(token, unk)) of those strings, cut to
      SEQ; a masked side is its tokens with spans collapsed to <MASK>;
      decoder input ^ + tokens, labels tokens + &, padding <PAD> / -1.
  mmb_check.py lengths SAMPLES
      token counts of plait's encoder SMILES against MegaMolBART's own
      augmentation of the same inputs (np.random.shuffle, RenumberAtoms,
      MolToSmiles(canonical=False)): the strings differ (docs/data.md), so
      only the means are compared, within 2%, a bound that a writer emitting
      needless branches or ring closures would break.
  mmb_check.py stats SAMPLES P LAMBDA SEED
      the encoder's <MASK> count and masked length against MolBART's
      _mask_span run with its own RNGs (random.choices, torch.poisson) on the
      same unmasked token counts: each mean within 4 standard errors.
"""
import random
import re
import sys

REGEX = r"""\[[^\]]+]|Br?|Cl?|N|O|S|P|F|I|b|c|n|o|s|p|\(|\)|\.|=|#|-|\+|\\\\|\/|:|~|@|\?|>|\*|\$|\%[0-9]{2}|[0-9]"""
PROG = re.compile("(" + REGEX + "|.)")
PAD, UNK, BOS, EOS, MASK = 0, 1, 2, 3, 4


def read_samples(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            c = line.rstrip("\n").split("\t")
            out.append({
                "index": int(c[0]), "molecule": int(c[1]), "where": c[2], "input": c[3],
                "enc_smiles": c[4], "dec_smiles": c[5], "enc_unmasked": int(c[6]),
                "enc_masks": int(c[7]), "enc_trunc": int(c[8]), "dec_trunc": int(c[9]),
                "enc_length": int(c[10]), "enc": [int(x) for x in c[11].split()],
                "dec_length": int(c[12]), "dec": [int(x) for x in c[13].split()],
                "labels": [int(x) for x in c[14].split()], "unknown": int(c[15]),
            })
    return out


def load_vocab(path):
    vocab = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                vocab[line] = len(vocab)
    return vocab


def ids_of(smiles, vocab):
    return [vocab.get(t, UNK) for t in PROG.findall(smiles)]


def mask_matches(masked, orig, cut=False):
    """masked is orig with some spans (possibly empty) replaced by one <MASK>
    each (cut: masked is the start of such a sequence)."""
    pat = "".join(r"(?:\d+ )*?" if t == MASK else f"{t} " for t in masked)
    match = re.match if cut else re.fullmatch
    return match(pat, "".join(f"{t} " for t in orig)) is not None


def check(path, vocab_path, seq, ea, em, da, dm):
    from rdkit import Chem, RDLogger
    RDLogger.DisableLog("rdApp.*")
    vocab = load_vocab(vocab_path)
    samples = read_samples(path)
    canon = lambda s: Chem.MolToSmiles(Chem.MolFromSmiles(s)) if Chem.MolFromSmiles(s) else None
    bad = []
    n_diff_enc = n_diff_dec = n_enc_dec_diff = n_unknown = 0
    for s in samples:
        errs = []
        c_in = canon(s["input"])
        for side in ("enc_smiles", "dec_smiles"):
            if canon(s[side]) != c_in:
                errs.append(f"{side} {s[side]} is not the input molecule {c_in}")
        n_diff_enc += s["enc_smiles"] != s["input"]
        n_diff_dec += s["dec_smiles"] != s["input"]
        n_enc_dec_diff += s["enc_smiles"] != s["dec_smiles"]
        if not ea and s["enc_smiles"] != s["input"]:
            errs.append("encoder_augment off but the encoder SMILES differs from the input")
        if not da and s["dec_smiles"] != s["enc_smiles"]:
            errs.append("decoder_augment off but the decoder SMILES differs from the encoder's")
        e_ids, d_ids = ids_of(s["enc_smiles"], vocab), ids_of(s["dec_smiles"], vocab)
        unknown = e_ids.count(UNK) + d_ids.count(UNK)
        n_unknown += unknown
        if s["unknown"] != unknown:
            errs.append(f"{s['unknown']} tokens mapped to '?', the vocabulary gives {unknown}")
        if s["enc_unmasked"] != len(e_ids):
            errs.append(f"enc_unmasked {s['enc_unmasked']} != {len(e_ids)} tokens")
        # Encoder: the masked or unmasked ids, cut to seq, then <PAD>.
        el, enc = s["enc_length"], s["enc"]
        if len(enc) != seq or any(x != PAD for x in enc[el:]):
            errs.append("encoder not padded with <PAD> to seq_length")
        body = enc[:el]
        if em:
            if s["enc_masks"] != body.count(MASK):
                errs.append("enc_masks does not count the <MASK> tokens")
            ok = mask_matches(body, e_ids, s["enc_trunc"]) and (el == seq or not s["enc_trunc"])
            if not ok:
                errs.append(f"encoder {body} is not a span masking of {e_ids}")
        elif body != e_ids[:seq] or s["enc_trunc"] != (len(e_ids) > seq):
            errs.append(f"encoder {body} != tokens {e_ids[:seq]}")
        # Decoder: ^ + tokens, labels tokens + &, cut before adding them.
        dl, dec, lab = s["dec_length"], s["dec"], s["labels"]
        inner = dec[1:dl]
        if len(dec) != seq + 1 or len(lab) != seq + 1:
            errs.append("decoder arrays are not seq_length + 1 long")
        if dec[0] != BOS or lab[:dl] != inner + [EOS]:
            errs.append("decoder input is not ^ + tokens or labels not tokens + &")
        if any(x != PAD for x in dec[dl:]) or any(x != -1 for x in lab[dl:]):
            errs.append("decoder padding is not <PAD>, labels padding not -1")
        if dm:
            if not mask_matches(inner, d_ids, s["dec_trunc"]):
                errs.append("decoder is not a span masking of its tokens")
        elif inner != d_ids[:seq] or s["dec_trunc"] != (len(d_ids) > seq):
            errs.append(f"decoder {inner} != tokens {d_ids[:seq]}")
        if errs:
            bad.append((s["index"], s["where"], errs))
    n = len(samples)
    print(f"{n} samples: {n - len(bad)} match MegaMolBART's rules and RDKit "
          f"(encoder SMILES rewritten in {n_diff_enc}, decoder in {n_diff_dec}, "
          f"encoder != decoder in {n_enc_dec_diff}; {n_unknown} tokens outside the vocabulary)")
    for i, w, e in bad[:5]:
        print(f"  sample {i} ({w}): " + "; ".join(e))
    return 0 if n > 0 and not bad else 1


def stats(path, p, lam, seed):
    import torch
    random.seed(seed)
    torch.manual_seed(seed)
    samples = read_samples(path)
    samples = [s for s in samples if not s["enc_trunc"]]

    def mask_span(n):  # MolEncTokenizer._mask_span's loop, counts only
        sampled = random.choices([True, False], weights=[p, 1 - p], k=n)
        i = masks = out = 0
        while i < n:
            if sampled[i]:
                i += torch.poisson(torch.tensor(lam)).long().item()
                masks += 1
            else:
                i += 1
            out += 1
        return masks, out

    reps = 4
    sim = [mask_span(s["enc_unmasked"]) for s in samples for _ in range(reps)]
    ok = True
    for k, name, ours in ((0, "<MASK> per sample", [s["enc_masks"] for s in samples]),
                          (1, "encoder length", [s["enc_length"] for s in samples])):
        ref = [x[k] for x in sim]
        m1, m2 = sum(ours) / len(ours), sum(ref) / len(ref)
        v1 = sum((x - m1) ** 2 for x in ours) / (len(ours) - 1)
        v2 = sum((x - m2) ** 2 for x in ref) / (len(ref) - 1)
        z = (m1 - m2) / ((v1 / len(ours) + v2 / len(ref)) ** 0.5)
        print(f"{name}: plait {m1:.4f}, MolBART (p {p}, lambda {lam}) {m2:.4f}, "
              f"{abs(z):.2f} standard errors")
        ok &= abs(z) < 4
    return 0 if ok and samples else 1


def lengths(path):
    import numpy as np
    from rdkit import Chem, RDLogger
    RDLogger.DisableLog("rdApp.*")
    samples = read_samples(path)
    np.random.seed(42)
    ours = mmb = inputs = 0
    for s in samples:
        mol = Chem.MolFromSmiles(s["input"])
        order = list(range(mol.GetNumAtoms()))
        np.random.shuffle(order)
        aug = Chem.MolToSmiles(Chem.RenumberAtoms(mol, order), canonical=False)
        mmb += len(PROG.findall(aug))
        ours += len(PROG.findall(s["enc_smiles"]))
        inputs += len(PROG.findall(s["input"]))
    n = len(samples)
    rel = abs(ours - mmb) / mmb
    print(f"tokens per augmented SMILES: plait {ours / n:.3f}, MegaMolBART (RDKit) {mmb / n:.3f} "
          f"({100 * rel:.2f}% apart); inputs {inputs / n:.3f}")
    return 0 if n and rel < 0.02 else 1


if __name__ == "__main__":
    a = sys.argv
    if a[1] == "lengths":
        sys.exit(lengths(a[2]))
    if a[1] == "check":
        sys.exit(check(a[2], a[3], int(a[4]), *[int(x) for x in a[5:9]]))
    sys.exit(stats(a[2], float(a[3]), float(a[4]), int(a[5])))
