#!/usr/bin/env bash
# The wheels the GPU check installs on a machine without network, fetched here (a CPU machine with
# the package registry):
#   bash benchmarks/gpu_wheels.sh [DIR]          # default .gpu-wheels/, ignored by git
# Pure-Python wheels only (py3-none-any), pinned to the versions the rehearsal tests with: the
# peers the GPU image lacks (flash-linear-attention, NX-AI's mlstm_kernels) and setuptools, to
# install layerzoo itself with --no-build-isolation. Everything that travels to a GPU machine
# (the repository and this folder) must stay under 64 MiB; the folder is refused above 16 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.gpu-wheels}
wheels=(fla-core==0.6.0 mlstm_kernels==2.0.6 "setuptools>=77")
mkdir -p "$out"
python -m pip download --quiet --no-deps --only-binary=:all: --dest "$out" "${wheels[@]}"
for wheel in "$out"/*.whl; do
  case "$wheel" in
    *-py3-none-any.whl) ;;
    *) echo "gpu_wheels: $wheel is not a pure-Python wheel; only those install on any GPU image" >&2; exit 1 ;;
  esac
done
size=$(du -sk "$out" | cut -f1)
if [ "$size" -gt 16384 ]; then
  echo "gpu_wheels: $out holds ${size} KiB, over the 16 MiB share of the 64 MiB that travels" >&2
  exit 1
fi
echo "gpu_wheels: ${size} KiB in $out: $(cd "$out" && ls *.whl | tr '\n' ' ')"
