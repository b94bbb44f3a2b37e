"""RDKit side of tests/scripts/smiles_chem.sh (plait's molecule checks, src/data/smiles_chem.h).

  rdkit_check.py inputs DATA_DIR EXTRA.smi... OUT.smi STEREO.smi N
      OUT.smi: every SMILES of the shipped sets, then of the extra files (the
      adversarial list, smiles_augment's cases and fuzz finds), one a line.
      FORMS.tsv (STEREO.smi with .forms): each valid shipped SMILES, its RDKit
      canonical (aromatic) SMILES and RDKit's Kekulé SMILES, tab-separated.
      RAND.smi (STEREO.smi with .rand): every valid shipped molecule as RDKit's
      canonical SMILES and two of its random SMILES (aromatic, RDKit's writer).
      STEREO.smi: N stereo SMILES RDKit makes from the shipped sets: up to 4
      stereoisomers of a molecule with stereo, each as RDKit's canonical SMILES
      and as two of its random SMILES (doRandom), so the three lines of one
      isomer are one molecule and the isomers distinct molecules.
  rdkit_check.py valences SMILES_SANITIZE.c
      The C valence table equals RDKit's GetValenceList for every element.
  rdkit_check.py figures PAIRS.tsv PLAIT.json [I,J]
      Columns I and J (default 0,1) of PAIRS.tsv are input and output SMILES;
      plait's validity / reconstruction / uniqueness counts (PLAIT.json) must
      equal RDKit's (bench/megamolbart_eval.sh's definitions).
  rdkit_check.py groups IN.smi OUT.smi
      OUT.smi: each SMILES of IN as RDKit's canonical and two random SMILES (for
      stereo, read as groups of 3 lines).
  rdkit_check.py verdicts IN.smi PLAIT.tsv
      PLAIT.tsv: tests/tools/smiles_chem's lines for IN.smi. plait's
      valid/invalid verdict must equal RDKit's (MolFromSmiles is not None) on
      every line; disagreements are printed; exit 1 on any.
  rdkit_check.py identity IN.smi PLAIT.tsv
      Among plait-valid lines: molecules with different RDKit canonical SMILES
      must have different plait keys (collisions printed, ring-stereo ones
      counted apart, exit 1 on any), and the
      number of RDKit molecules plait splits into several keys (Kekulé vs
      aromatic writings and the other classes of docs/training.md) is printed.
  rdkit_check.py same_key ORIG.smi ORIG.tsv AUG.tsv
      AUG.tsv: plait's lines for the outputs of `plait data smiles-augment`
      (one output per input line, the same order): every valid input's
      randomised SMILES has its input's key.
  rdkit_check.py stereo STEREO.smi STEREO.tsv   (and RAND.smi RAND.tsv)
      Groups of 3 lines (canonical, random, random): one key per group, and
      distinct groups with distinct RDKit canonical SMILES have distinct keys.
"""
import random
import sys

from rdkit import Chem, RDLogger
from rdkit.Chem.EnumerateStereoisomers import EnumerateStereoisomers, StereoEnumerationOptions

RDLogger.DisableLog("rdApp.*")


def shipped(data_dir):
    import csv
    out = []
    for name in ("first_5K.smi", "CHEMBL2321810.smi"):
        for line in open(f"{data_dir}/{name}", encoding="utf-8"):
            f = line.split()
            if f:
                out.append(f[0])
    with open(f"{data_dir}/wehi_mols.csv", encoding="utf-8", newline="") as fh:
        for row in csv.reader(fh):
            if row:
                out.append(row[0])
    return out


def lines(path):
    return [l.rstrip("\n") for l in open(path, encoding="utf-8")]


def plait_lines(path):
    out = []
    for l in lines(path):
        kind, _, rest = l.partition("\t")
        out.append((kind, rest))
    return out


def inputs(data_dir, extras, out_path, stereo_path, n):
    smis = shipped(data_dir)
    for e in extras:
        smis += [l.split()[0] for l in lines(e) if l.split() and not l.startswith("#")]
    with open(out_path, "w", encoding="utf-8") as fh:
        fh.write("".join(s + "\n" for s in smis))
    rng = random.Random(11)
    opts = StereoEnumerationOptions(onlyUnassigned=False, maxIsomers=4, rand=rng, unique=True)
    out = []
    for smi in shipped(data_dir):
        m = Chem.MolFromSmiles(smi)
        if m is None:
            continue
        isos = list(EnumerateStereoisomers(m, options=opts))
        if len(isos) < 2:
            continue
        for iso in isos:
            out += [Chem.MolToSmiles(iso), Chem.MolToSmiles(iso, doRandom=True),
                    Chem.MolToSmiles(iso, doRandom=True)]
        if len(out) >= n:
            break
    with open(stereo_path, "w", encoding="utf-8") as fh:
        fh.write("".join(s + "\n" for s in out))
    rand, forms = [], []
    for smi in shipped(data_dir):
        m = Chem.MolFromSmiles(smi)
        if m is not None:
            rand += [Chem.MolToSmiles(m), Chem.MolToSmiles(m, doRandom=True),
                     Chem.MolToSmiles(m, doRandom=True)]
            forms.append(f"{smi}\t{Chem.MolToSmiles(m)}\t{Chem.MolToSmiles(m, kekuleSmiles=True)}")
    with open(stereo_path + ".forms", "w", encoding="utf-8") as fh:
        fh.write("".join(s + "\n" for s in forms))
    with open(stereo_path + ".rand", "w", encoding="utf-8") as fh:
        fh.write("".join(s + "\n" for s in rand))
    print(f"{len(smis)} SMILES; stereo set {len(out)} SMILES ({len(out) // 3} isomers)")


def groups(in_path, out_path):
    """Each SMILES of IN as RDKit's canonical SMILES and two of its random SMILES."""
    out = []
    for smi in lines(in_path):
        m = Chem.MolFromSmiles(smi)
        out += [Chem.MolToSmiles(m), Chem.MolToSmiles(m, doRandom=True),
                Chem.MolToSmiles(m, doRandom=True)]
    with open(out_path, "w", encoding="utf-8") as fh:
        fh.write("".join(s + "\n" for s in out))
    return 0


def verdicts(in_path, tsv):
    smis, got = lines(in_path), plait_lines(tsv)
    assert len(smis) == len(got), (len(smis), len(got))
    bad = 0
    counts = {}
    for s, (kind, msg) in zip(smis, got):
        r = Chem.MolFromSmiles(s) is not None
        counts[(r, kind)] = counts.get((r, kind), 0) + 1
        if r != (kind == "valid"):
            bad += 1
            if bad <= 20:
                print(f"disagree: {s}  RDKit {'valid' if r else 'invalid'}, plait {kind}: {msg}")
    print(f"{len(smis)} SMILES: RDKit valid {sum(v for (r, k), v in counts.items() if r)}; "
          f"plait valid {counts.get((True, 'valid'), 0) + counts.get((False, 'valid'), 0)}, "
          f"invalid {sum(v for (r, k), v in counts.items() if k == 'invalid')}, "
          f"syntax {sum(v for (r, k), v in counts.items() if k == 'syntax')}; disagreements {bad}")
    return 1 if bad else 0


def identity(in_path, tsv):
    smis, got = lines(in_path), plait_lines(tsv)
    key_to_can, can_to_keys = {}, {}
    collide = ring_stereo = 0
    for s, (kind, key) in zip(smis, got):
        if kind != "valid":
            continue
        m = Chem.MolFromSmiles(s)
        if m is None:
            continue
        can = Chem.MolToSmiles(m)
        can_to_keys.setdefault(can, set()).add(key)
        prev = key_to_can.setdefault(key, can)
        if prev != can:
            flat = [Chem.MolToSmiles(Chem.MolFromSmiles(x), isomericSmiles=False) for x in (prev, can)]
            ring_stereo += flat[0] == flat[1] and not is_chain_stereo(prev) and not is_chain_stereo(can)
            collide += 1
            if collide <= 10:
                print(f"one plait key for two RDKit molecules: {prev}  {can}")
    split = sum(len(k) > 1 for k in can_to_keys.values())
    print(f"{len(can_to_keys)} RDKit molecules, {len(key_to_can)} plait keys; collisions {collide} "
          f"({ring_stereo} of them stereoisomers by ring stereo only); RDKit molecules written with more than one key "
          f"(Kekulé/aromatic etc.) {split}")
    return 1 if collide else 0


def is_chain_stereo(smi):
    """Has a stereocentre with no ring bond or a stereo double bond: stereo plait must keep."""
    m = Chem.MolFromSmiles(smi)
    for a in m.GetAtoms():
        if a.GetChiralTag() != Chem.ChiralType.CHI_UNSPECIFIED and not a.IsInRing():
            return True
    return any(b.GetStereo() != Chem.BondStereo.STEREONONE for b in m.GetBonds())


def valence_table(c_source):
    """The valence_rows table of src/data/smiles_sanitize.c against GetValenceList."""
    import re
    text = open(c_source, encoding="utf-8").read()
    body = text[text.index("valence_rows[] = {"):text.index("static const int any_valence")]
    rows = {int(z): [int(x) for x in v.split(",")]
            for z, v in re.findall(r"\{(\d+), \{([-\d, ]+)\}, \d+\}", body)}
    pt = Chem.GetPeriodicTable()
    bad = 0
    for z in range(1, 119):
        want = list(pt.GetValenceList(z))
        got = rows.get(z, [-1])
        if want != got:
            bad += 1
            print(f"Z {z}: RDKit {want}, plait {got}")
    print(f"118 elements, {len(rows)} with a valence list; {bad} differ from RDKit's")
    return 1 if bad else 0


def rdkit_figures(pairs):
    """MOSES/MegaMolBART's validity, reconstruction, uniqueness with RDKit (as
    bench/megamolbart_eval.sh computes them) over (input, output) pairs."""
    valid = same = 0
    canon = set()
    for src, gen in pairs:
        m = Chem.MolFromSmiles(gen) if gen else None
        if m is None:
            continue
        valid += 1
        c = Chem.MolToSmiles(m)
        canon.add(c)
        ms = Chem.MolFromSmiles(src)
        same += ms is not None and c == Chem.MolToSmiles(ms)
    return {"molecules": len(pairs), "valid": valid, "reconstructed": same, "unique_valid": len(canon)}


def figures(pairs_tsv, plait_json, cols="0,1"):
    """plait's figures (a JSON object) equal RDKit's on the same pairs."""
    import json
    i, j = (int(x) for x in cols.split(","))
    rows = [l.rstrip("\n").split("\t") for l in open(pairs_tsv, encoding="utf-8")]
    want = rdkit_figures([(r[i], r[j] if len(r) > j else "") for r in rows])
    got = json.load(open(plait_json))
    print(f"RDKit {want}")
    print(f"plait {dict((k, got[k]) for k in want)}")
    return 0 if all(got[k] == v for k, v in want.items()) else 1


def same_key(orig_path, orig_tsv, aug_tsv):
    orig, a, b = lines(orig_path), plait_lines(orig_tsv), plait_lines(aug_tsv)
    assert len(a) == len(b) == len(orig)
    n = bad = 0
    for s, (ka, keya), (kb, keyb) in zip(orig, a, b):
        if ka != "valid":
            continue
        n += 1
        if kb != "valid" or keya != keyb:
            bad += 1
            if bad <= 10:
                print(f"randomised SMILES of {s} has another key ({kb})")
    print(f"{n} valid molecules, each randomised once: {n - bad} identified as their input, {bad} not")
    return 1 if bad or n == 0 else 0


def stereo(path, tsv):
    smis, got = lines(path), plait_lines(tsv)
    groups = bad = 0
    key_to_can = {}
    collide = 0
    for i in range(0, len(smis) - 2, 3):
        keys = {got[j][1] for j in range(i, i + 3)}
        kinds = {got[j][0] for j in range(i, i + 3)}
        groups += 1
        if kinds != {"valid"} or len(keys) != 1:
            bad += 1
            if bad <= 10:
                print(f"one isomer, several keys: {smis[i]} {smis[i + 1]} {smis[i + 2]}")
            continue
        can = Chem.MolToSmiles(Chem.MolFromSmiles(smis[i]))
        prev = key_to_can.setdefault(keys.pop(), can)
        if prev != can:
            collide += 1
            if collide <= 10:
                print(f"two stereoisomers, one key: {prev}  {can}")
    print(f"{groups} molecules (3 writings each): {groups - bad} one key each; "
          f"{collide} pairs of distinct isomers with one key")
    return 1 if bad or collide or groups == 0 else 0


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "inputs":
        sys.exit(inputs(args[0], args[1:-3], args[-3], args[-2], int(args[-1])))
    sys.exit({"groups": groups, "figures": figures, "valences": valence_table, "verdicts": verdicts, "identity": identity, "same_key": same_key,
              "stereo": stereo}[cmd](*args))
