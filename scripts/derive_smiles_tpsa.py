#!/usr/bin/env python3
"""A regression task on real molecules: the topological polar surface area
(TPSA, Ertl et al. 2000) that RDKit computes for each SMILES of
data/smiles/first_5K.smi (one "SMILES<TAB>id" a line). The target is computed,
not measured: it is RDKit's rdMolDescriptors.CalcTPSA with its defaults
(N and O contributions only), so a fine-tuned model learns a known function of
the structure — a check that regression fine-tuning works, not a benchmark.

Rules: molecules RDKit cannot parse are skipped (counted); line numbers
(1-based) divisible by 10 go to dev, the others to train; the target is
written with 2 decimals. Output: smiles-tpsa.{train,dev}.tsv with the header
"smiles\ttpsa"; counts, mean and population std of each split on stdout as JSON
(the std is the RMSE of always predicting the mean).

  derive_smiles_tpsa.py FILE.smi OUT_DIR
"""
import json
import math
import sys

from rdkit import Chem, RDLogger
from rdkit.Chem import rdMolDescriptors


def main():
    src, out = sys.argv[1:3]
    RDLogger.DisableLog('rdApp.*')
    rows = {'train': [], 'dev': []}
    skipped = 0
    with open(src, encoding='utf-8') as f:
        for line_no, line in enumerate(f, 1):
            fields = line.split()
            if not fields:
                continue
            mol = Chem.MolFromSmiles(fields[0])
            if mol is None:
                skipped += 1
                continue
            tpsa = round(rdMolDescriptors.CalcTPSA(mol), 2)
            rows['dev' if line_no % 10 == 0 else 'train'].append((fields[0], tpsa))
    stats = {'skipped': skipped, 'rdkit': Chem.rdBase.rdkitVersion}
    for split, r in rows.items():
        with open(f'{out}/smiles-tpsa.{split}.tsv', 'w', encoding='utf-8') as f:
            f.write('smiles\ttpsa\n')
            for smi, v in r:
                f.write(f'{smi}\t{v:.2f}\n')
        vals = [float(f'{v:.2f}') for _, v in r]
        mean = sum(vals) / len(vals)
        stats[split] = {'n': len(vals), 'mean': round(mean, 6),
                        'std': round(math.sqrt(sum((v - mean) ** 2 for v in vals) / len(vals)), 6)}
    print(json.dumps(stats))


if __name__ == '__main__':
    main()
