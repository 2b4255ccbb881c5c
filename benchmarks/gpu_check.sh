#!/usr/bin/env bash
# The GPU check, one command on a bare CUDA machine (no network, nothing installed but its image):
#   bash benchmarks/gpu_check.sh --out DIR [--wheels DIR] [--cpu] [ARGS for gpu_kernels...]
# with the wheel folder of benchmarks/gpu_wheels.sh beside the repository (default .gpu-wheels/).
# Stages, in order of value, each cut off at its budget so that the whole check ends inside 8
# minutes whatever happens; each writes its log into DIR as it runs, and DIR/summary.json says
# after every stage how each went, so a check cut short still leaves what it did:
#   environment  (10 s)  versions and the device              -> environment.json
#   install      (30 s)  the wheels and layerzoo, no network  -> install.log
#   tests       (210 s)  the tests marked gpu, our kernels'   -> tests.log, tests.xml
#                        first, 8 processes (Triton compiles
#                        on the CPU), each test cut at 120 s
#   benchmark   (150 s)  python -m benchmarks gpu_kernels,    -> benchmark.log, gpu_kernels.json
#                        the mLSTM and SWA rows
#   torchtitan   (80 s)  two torchtitan steps of a small      -> torchtitan.log, torchtitan/
#                        SWAX on the standard library's json
#                        sources, torchtitan as it is
# fla's kernels autotune on first use, about 90 s per model on a fresh H200: its tests come last
# and its Gated DeltaNet row is left to `python -m benchmarks gpu_kernels` run on its own.
# --cpu rehearses it all on a machine without CUDA: the Triton kernels' tests under the
# interpreter and the benchmark at its smoke size. Exit status 0 when every stage passed (or was
# skipped, saying why).
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
out="" wheels=.gpu-wheels cpu=0 extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --wheels) wheels=$2; shift 2 ;;
    --cpu) cpu=1; shift ;;
    *) extra+=("$1"); shift ;;
  esac
done
if [ -z "$out" ]; then echo "gpu_check: --out DIR is required (the folder the logs and results go to)" >&2; exit 2; fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
python=${PYTHON:-python3}
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PIP_BREAK_SYSTEM_PACKAGES=1
if [ "$cpu" = 1 ]; then export TRITON_INTERPRET=1; fi
status=0

# stage NAME BUDGET_SECONDS LOG COMMAND...: run it under its budget, teeing its output into LOG,
# then add its outcome to summary.json.
stage() {
  local name=$1 budget=$2 log=$3; shift 3
  local start=$SECONDS rc
  echo "== gpu_check: $name (budget ${budget} s)"
  timeout --kill-after=10 "$budget" "$@" 2>&1 | tee "$out/$log"
  rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || [ "$rc" = 77 ] || status=1  # 77: skipped, saying why
  "$python" -m benchmarks.runner.gpu_summary "$out/summary.json" "$name" "$rc" "$((SECONDS - start))" "$log" \
    "$([ "$cpu" = 1 ] && echo cpu || echo gpu)"
}

if [ "$cpu" = 0 ] && ! "$python" -c "import torch, sys; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
  echo "gpu_check: no CUDA device here; rehearse with --cpu, or run the CPU checks: python -m pytest" >&2
  exit 2
fi
stage environment 10 environment.json "$python" -m benchmarks.runner.environment
install() {  # the wheel folder's peers (for each, the wheel this Python takes), then layerzoo itself, all without network
  local found=("$wheels"/*.whl)
  if [ -e "${found[0]}" ]; then
    "$python" -m pip install --no-index --no-deps --quiet --find-links "$wheels" \
      $(for wheel in "${found[@]}"; do basename "$wheel" | cut -d- -f1; done | sort -u) || return
  else
    echo "no wheels in $wheels (benchmarks/gpu_wheels.sh makes them): the peers that are missing stay missing"
  fi
  "$python" -m pip install --no-index --no-deps --no-build-isolation --quiet -e "$repo"
}
export -f install
export python wheels repo
stage install 30 install.log bash -c install
# Our kernels' tests first, then every other test marked gpu (pytest collects a file once).
gpu_tests="-m gpu -p no:cacheprovider --timeout 120 tests/kernels/test_mlstm_triton.py
  tests/kernels/test_sliding_window_triton.py tests/kernels/test_packed_cuda.py tests/kernels/test_sliding_window.py
  tests/assemblies tests"
cpu_tests() {  # what a GPU run collects must collect here, with its options (the image lacks the
  # test extra's other packages), then the Triton kernels' tests run under the interpreter
  "$python" -m pytest -q $gpu_tests -n 0 --collect-only >"$out/collect.log" 2>&1 ||
    { tail -20 "$out/collect.log"; echo "collecting the gpu tests failed (collect.log)"; return 1; }
  "$python" -m pytest -q -p no:cacheprovider -k triton --junitxml="$out/tests.xml" \
    tests/kernels/test_mlstm_triton.py tests/kernels/test_sliding_window_triton.py tests/kernels/test_kernel_conformance.py
}
export -f cpu_tests
# Two torchtitan steps (docs/training-at-scale.md) on one process: swax-text-tiny at 128 tokens on
# bytes. On a GPU, torchtitan runs as it is; the CPU rehearsal needs the tests' patches, as the
# torchtitan tests do (torchtitan assumes an accelerator). torchtitan 0.3.0 imports what torch
# 2.12 added: on an older torch the stage is skipped (exit 77), saying so.
titan_steps() {
  local patches=""
  [ "$cpu" = 1 ] && patches="$repo/tests/torchtitan/cpu_patches:"
  if ! "$python" -c "import torch.distributed.fsdp as f; exit(not hasattr(f, 'DataParallelMeshDims'))"; then
    echo "skipped: torchtitan 0.3.0 needs torch 2.12 or later (torch.distributed.fsdp.DataParallelMeshDims);" \
      "this machine's torch is $("$python" -c 'import torch; print(torch.__version__)')"
    return 77
  fi
  LAYERZOO_SPEC=swax-text-tiny PYTHONPATH="$patches$PYTHONPATH" LAYERZOO_SET='training.task.tokenizer=bytes
model.vocab_size=257
training.task.files=["stdlib:json/*.py"]
training.seq_len=128
training.batch_size=2' "$python" -m torch.distributed.run --nproc-per-node 1 -m torchtitan.train \
    --module layerzoo.hf.torchtitan --config layerzoo_spec --dump_folder "$out/torchtitan" \
    --training.steps 2 --metrics.log_freq 1
}
export -f titan_steps
export out gpu_tests cpu
if [ "$cpu" = 1 ]; then
  stage tests 210 tests.log bash -c cpu_tests
  stage benchmark 150 benchmark.log "$python" -m benchmarks gpu_kernels --smoke --out "$out/gpu_kernels.json" "${extra[@]}"
else
  stage tests 210 tests.log "$python" -m pytest -q -ra -n 8 --junitxml="$out/tests.xml" $gpu_tests
  stage benchmark 150 benchmark.log "$python" -m benchmarks gpu_kernels --kernels mlstm swa --out "$out/gpu_kernels.json" "${extra[@]}"
fi
stage torchtitan 80 torchtitan.log bash -c titan_steps
echo "== gpu_check: $( [ $status = 0 ] && echo "every stage passed or was skipped" || echo "a stage failed" ) (see $out/summary.json)"
exit $status
