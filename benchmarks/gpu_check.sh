#!/usr/bin/env bash
# The GPU check, one command on a CUDA machine (about 5 minutes on an H100/H200):
#   bash benchmarks/gpu_check.sh [--out gpu.json]
# 1. the tests marked gpu (Triton kernels at realistic shapes in fp32/bf16/fp16, fla, causal-conv1d);
# 2. the kernel table of `python -m benchmarks gpu_kernels` (extra arguments go to it; its JSON goes
#    to benchmarks/results/gpu_kernels.json unless --out says otherwise).
# On a machine without CUDA it stops with a one-line message instead of skipping everything.
set -euo pipefail
cd "$(dirname "$0")/.."
python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'gpu_check: no CUDA device here; the CPU checks are: python -m pytest')"
python -m pytest -m gpu -q -p no:cacheprovider
python -m benchmarks gpu_kernels "$@"
