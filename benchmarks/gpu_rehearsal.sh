#!/usr/bin/env bash
# The GPU check rehearsed on a CPU machine, every step it can take there:
#   bash benchmarks/gpu_rehearsal.sh [WORK_DIR]
#   TORCH=2.11.0 bash benchmarks/gpu_rehearsal.sh   # the image's torch too (PyPI's CUDA build: ~4 GB)
# a fresh venv holding the GPU image's versions of triton and transformers (torch: this machine's
# CPU build, 2.13.0, unless TORCH says otherwise), the wheel folder built by gpu_wheels.sh,
# installed from it with no network, and the whole check run in its --cpu mode; it fails unless
# every stage passed or was skipped (the torchtitan stage, on torch 2.11).
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-$(mktemp -d)}
python3 -m venv "$work/venv"
. "$work/venv/bin/activate"
pip install --quiet "torch==${TORCH:-2.13.0}"
# The image's triton and transformers, and its packages torchtitan imports; numpy below 2, which
# triton 3.6's interpreter needs (on a GPU nothing is interpreted), so pyarrow 21, the first
# datasets 4.7 takes, which runs on numpy 1 (later ones ask for numpy 2).
pip install --quiet triton==3.6.0 transformers==5.17.0 "numpy<2" pyyaml safetensors tqdm matplotlib ninja einops \
  hypothesis pytest pytest-xdist pytest-timeout pandas pyarrow==21.0.0 tensorboard xxhash requests
bash benchmarks/gpu_wheels.sh "$work/wheels"
PYTHON="$work/venv/bin/python" bash benchmarks/gpu_check.sh --cpu --wheels "$work/wheels" --out "$work/check"
python -c "import json, sys; s = json.load(open(sys.argv[1])); sys.exit(not s['passed'])" "$work/check/summary.json"
echo "gpu_rehearsal: every stage of the check passed on CPU ($work/check)"
