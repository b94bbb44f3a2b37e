#!/usr/bin/env bash
# Every benchmark, in turn (minutes; run on an otherwise idle machine).
set -u
cd "$(dirname "$0")/.."
echo "#### tokenization: plait preprocess vs gpt-3-encoder"; bench/preprocess_vs_node.sh
echo "#### training: plait vs PyTorch"; bench/compare_torch.sh
echo "#### data-parallel scaling"; bench/dp_scaling.sh
