#!/usr/bin/env bash
# The wheels the GPU check installs on a machine without network, fetched here (a CPU machine with
# the package registry):
#   bash benchmarks/gpu_wheels.sh [DIR]          # default .gpu-wheels/, ignored by git
# Pure-Python wheels only (none-any), pinned to the versions the rehearsal tests with: the
# peers the GPU image lacks (flash-linear-attention, NX-AI's mlstm_kernels), setuptools, to
# install layerzoo itself with --no-build-isolation, and torchtitan 0.3.0 with what it imports
# that the image lacks (the image has its pandas, pyarrow and tensorboard). For the image's
# Python (3.12) and this one's, for the rehearsal: multiprocess has a wheel per Python version.
# Everything that travels to a GPU machine (the repository and this folder) must stay under
# 64 MiB; the folder is refused above 16 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.gpu-wheels}
wheels=(fla-core==0.6.0 mlstm_kernels==2.0.6 "setuptools>=77"
  torchtitan==0.3.0 tyro==1.0.17 docstring-parser==0.18.0 typeguard==4.6.1 spmd_types==0.2.3 torchdata==0.11.0
  datasets==4.7.0 dill==0.4.0 multiprocess==0.70.18)
mkdir -p "$out"
for version in 3.12 "$(python -c 'import sys; print("%d.%d" % sys.version_info[:2])')"; do
  python -m pip download --quiet --no-deps --only-binary=:all: --python-version "$version" --dest "$out" "${wheels[@]}"
done
for wheel in "$out"/*.whl; do
  case "$wheel" in
    *-none-any.whl) ;;
    *) echo "gpu_wheels: $wheel is not a pure-Python wheel; only those install on any GPU image" >&2; exit 1 ;;
  esac
done
size=$(du -sk "$out" | cut -f1)
if [ "$size" -gt 16384 ]; then
  echo "gpu_wheels: $out holds ${size} KiB, over the 16 MiB share of the 64 MiB that travels" >&2
  exit 1
fi
echo "gpu_wheels: ${size} KiB in $out: $(cd "$out" && ls *.whl | tr '\n' ' ')"
