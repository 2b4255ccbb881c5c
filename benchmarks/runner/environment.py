"""The GPU check's first stage: what the machine holds, as JSON on stdout.

    python -m benchmarks.runner.environment
"""

from __future__ import annotations

import json

import torch

from .context import run_context

# What the GPU check uses when it is there: the image's, and the peers the wheel folder brings.
PACKAGES = ("triton", "transformers", "numpy", "fla-core", "mlstm_kernels", "causal-conv1d", "flash-attn", "layerzoo")


def environment() -> dict:
    """run_context on the device there is, with CUDA's version and the device's compute capability."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    context = run_context(device, PACKAGES)
    context["cuda"] = {"version": torch.version.cuda,
                       "capability": list(torch.cuda.get_device_capability()) if device == "cuda" else None}
    return context


if __name__ == "__main__":
    print(json.dumps(environment(), indent=1, default=str))
