"""RDKit side of tests/scripts/smiles_augment.sh.

  rdkit_check.py stereo DATA_DIR OUT.smi N
      Writes N stereo SMILES made by RDKit from the shipped sets: stereoisomers
      of molecules with stereocentres or stereo double bonds (EnumerateStereoisomers,
      so every @/@@ and / \\ combination occurs), each written once canonically
      and once as RDKit's own random SMILES (doRandom=True), so plait parses ring
      closures with marks on them as RDKit writes them.
  rdkit_check.py compare AUGMENTED.tsv
      Each line: input TAB output... (plait data smiles-augment --keep-input).
      Every output must parse in RDKit and give the input's canonical
      isomeric SMILES (and be rejected where RDKit rejects the input, a
      valence error). Prints the counts; exits 1 on any mismatch.
  rdkit_check.py flip chiral|ez AUGMENTED.tsv OUT.tsv
      The negative control: outputs with their chirality (all @ <-> @@) or
      one cis/trans mark flipped, which compare must reject.
  rdkit_check.py mapped DATA_DIR OUT.smi
      Writes one molecule with every atom numbered by an atom class (RDKit
      atom map numbers 1..n), for the root-distribution check.
  rdkit_check.py roots MAPPED.tsv SEED
      Each line holds many outputs of the mapped molecule: counts which atom
      each starts with, and checks every atom is a root, the counts fit a
      uniform distribution (chi-square), and each root is the atom
      MegaMolBART's augmentation starts at with numpy seeded with SEED.
"""
import random
import sys

from rdkit import Chem, RDLogger
from rdkit.Chem.EnumerateStereoisomers import EnumerateStereoisomers, StereoEnumerationOptions

RDLogger.DisableLog("rdApp.*")


def canon(smi):
    m = Chem.MolFromSmiles(smi)
    return None if m is None else Chem.MolToSmiles(m, isomericSmiles=True)


def shipped(data_dir):
    """SMILES of the shipped sets, in file order."""
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


def stereo(data_dir, path, n):
    rng = random.Random(7)
    opts = StereoEnumerationOptions(onlyUnassigned=False, maxIsomers=4, rand=rng, unique=True)
    out = []
    for smi in shipped(data_dir):
        m = Chem.MolFromSmiles(smi)
        if m is None:
            continue
        for iso in EnumerateStereoisomers(m, options=opts):
            s = Chem.MolToSmiles(iso, isomericSmiles=True)
            if "@" not in s and "/" not in s and "\\" not in s:
                continue
            out.append(s)
            out.append(Chem.MolToSmiles(iso, isomericSmiles=True, doRandom=True))
            if len(out) >= n:
                break
        if len(out) >= n:
            break
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("".join(s + "\n" for s in out))
    chiral = sum("@" in s for s in out)
    ez = sum("/" in s or "\\" in s for s in out)
    print(f"stereo set: {len(out)} SMILES, {chiral} with @/@@, {ez} with / or \\")


def compare(path):
    mols = outs = bad = rdkit_rejects_input = 0
    rand = []
    distinct_sum = 0
    multi = 0
    shown = 0
    for line in open(path, encoding="utf-8"):
        f = line.rstrip("\n").split("\t")
        src, rand = f[0], f[1:]
        want = canon(src)
        if want is None:
            # RDKit refuses the molecule (valence): it must refuse every output too.
            rdkit_rejects_input += 1
            for r in rand:
                outs += 1
                if canon(r) is not None:
                    bad += 1
                    print(f"  RDKit rejects input {src} but accepts output {r}")
            continue
        mols += 1
        distinct_sum += len(set(rand))
        multi += len(set(rand)) > 1
        for r in rand:
            outs += 1
            got = canon(r)
            if got != want:
                bad += 1
                if shown < 10:
                    shown += 1
                    print(f"  MISMATCH input {src}\n           output {r}\n"
                          f"           rdkit  {want}\n           got    {got}")
    print(f"{path.rsplit('/', 1)[-1]}: {mols} molecules, {outs} randomised SMILES, "
          f"{bad} mismatches with RDKit's canonical SMILES; {rdkit_rejects_input} inputs RDKit "
          f"rejects (their outputs rejected too); {multi}/{mols} molecules got more than one distinct output, "
          f"{distinct_sum / max(mols, 1):.2f} distinct of {len(rand)} on average")
    return 0 if bad == 0 and outs > 0 else 1


def flip(kind, src, dst):
    """Negative control: the first output of each line with a stereo mark,
    every @ and @@ swapped (kind chiral) or its first / or \\ swapped (kind ez)."""
    import re
    with open(dst, "w", encoding="utf-8") as fh:
        for line in open(src, encoding="utf-8"):
            f = line.rstrip("\n").split("\t")
            for r in f[1:]:
                if kind == "chiral" and "@" in r:
                    r = re.sub("@@?", lambda x: "@" if x.group(0) == "@@" else "@@", r)
                elif kind == "ez" and "@" not in r and re.search(r"[/\\]", r):
                    i = re.search(r"[/\\]", r).start()
                    r = r[:i] + ("\\" if r[i] == "/" else "/") + r[i + 1:]
                else:
                    continue
                fh.write(f"{f[0]}\t{r}\n")
                break


def mapped(data_dir, path):
    for smi in shipped(data_dir):
        m = Chem.MolFromSmiles(smi)
        if m is not None and 20 <= m.GetNumAtoms() <= 30 and len(Chem.GetSSSR(m)) >= 2:
            for a in m.GetAtoms():
                a.SetAtomMapNum(a.GetIdx() + 1)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(Chem.MolToSmiles(m) + "\n")
            print(f"mapped molecule: {m.GetNumAtoms()} atoms")
            return


def roots(path, seed):
    """Also: each root is the one MegaMolBART's augmentation starts from with
    numpy's stream seeded alike (np.random.shuffle of the atom indices,
    Chem.RenumberAtoms, MolToSmiles(canonical=False))."""
    import re
    import numpy as np
    line = open(path, encoding="utf-8").readline().rstrip("\n").split("\t")
    src, outs = line[0], line[1:]
    mol = Chem.MolFromSmiles(src)
    n = mol.GetNumAtoms()
    rs = np.random.RandomState(seed)
    first = re.compile(r"\[[^\]:]*:(\d+)\]")
    counts = [0] * (n + 1)
    same_root = 0
    for o in outs:
        root = int(first.match(o).group(1))
        counts[root] += 1
        order = list(range(n))
        rs.shuffle(order)
        mmb = Chem.MolToSmiles(Chem.RenumberAtoms(mol, order), canonical=False)
        same_root += int(first.match(mmb).group(1)) == root
    print(f"roots: {same_root}/{len(outs)} outputs start at the atom MegaMolBART's augmentation "
          f"starts at for the same numpy seed")
    counts = counts[1:]
    expect = len(outs) / n
    chi2 = sum((c - expect) ** 2 / expect for c in counts)
    # 99.99th percentile of chi-square with n - 1 degrees of freedom (Wilson-Hilferty).
    k = n - 1
    z = 3.719
    limit = k * (1 - 2 / (9 * k) + z * (2 / (9 * k)) ** 0.5) ** 3
    print(f"roots over {len(outs)} outputs of a {n}-atom molecule: min {min(counts)}, "
          f"max {max(counts)} (uniform: {expect:.1f} each); chi-square {chi2:.1f}, "
          f"99.99% limit {limit:.1f}")
    return 0 if min(counts) > 0 and chi2 < limit and same_root == len(outs) else 1


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "stereo":
        stereo(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif cmd == "compare":
        sys.exit(compare(sys.argv[2]))
    elif cmd == "flip":
        flip(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "mapped":
        mapped(sys.argv[2], sys.argv[3])
    elif cmd == "roots":
        sys.exit(roots(sys.argv[2], int(sys.argv[3])))
    else:
        sys.exit(f"unknown command {cmd}")
