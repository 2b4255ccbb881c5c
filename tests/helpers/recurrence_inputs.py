"""Inputs and harness shared by the tests of the linear-recurrence kernels (gated delta rule, SSD,
KDA): gates at typical and extreme values, gradients of every input, fla's naive references."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from layerzoo.testing import assert_close

from layerzoo.testing.peers import load_fla_naive

# How the log decay g and the write strength beta are drawn: typical values and the extremes
# where exp underflows, nothing decays, nothing is written or everything is overwritten.
G_REGIMES = ("typical", "near_zero", "zero", "very_negative", "mixed")
BETA_REGIMES = ("uniform", "near_zero", "near_one", "exact")

# fla's chunk kernels run TF32 dot products for fp32, and round intermediates to bf16 for bf16:
# on CUDA they are held to a scale of assert_close's tolerance.
CUDA_TOLERANCES = {torch.float32: 1e-2 / 1e-5, torch.bfloat16: 3.0}


def make_gates(regime: str, shape, gen) -> torch.Tensor:
    uniform = torch.rand(shape, generator=gen)
    if regime == "typical":
        return F.logsigmoid(torch.randn(shape, generator=gen) + 2)
    if regime == "near_zero":
        return -1e-6 * uniform
    if regime == "zero":
        return torch.zeros(shape)
    if regime == "very_negative":
        return -30 - 1000 * uniform
    # a few steps that wipe the memory among steps that keep it
    return torch.where(uniform < 0.1, torch.full(shape, -200.0), -1e-3 * uniform)


def make_beta(regime: str, shape, gen) -> torch.Tensor:
    uniform = torch.rand(shape, generator=gen)
    if regime == "uniform":
        return uniform
    if regime == "near_zero":
        return 1e-6 * uniform
    if regime == "near_one":
        return 1 - 1e-6 * uniform
    return (uniform < 0.5).float()  # exactly 0 or 1


def run_with_grads(fn, inputs: dict, grad_out: torch.Tensor, grad_state: torch.Tensor):
    """fn(**inputs) -> (out, state); returns out, state and the gradients of every input."""
    leaves = {name: t.detach().clone().requires_grad_() for name, t in inputs.items()}
    out, state = fn(**leaves)
    # The final state's gradient path counts too: streaming backpropagates through it.
    ((out.float() * grad_out).sum() + (state * grad_state).sum()).backward()
    return out, state, {name: t.grad for name, t in leaves.items()}


def seeded_like(t: torch.Tensor, seed: int) -> torch.Tensor:
    return torch.randn(t.shape, generator=torch.Generator().manual_seed(seed))


def fla_naive(op: str = "gated_delta_rule"):
    """fla's naive.py of `op` (see peers.load_fla_naive); the test skips without fla."""
    naive = load_fla_naive(op)
    if naive is None:
        pytest.skip("flash-linear-attention is not installed")
    return naive


def check_cuda_backend(kernel, truth, inputs: dict, backend: str, dtype: torch.dtype) -> None:
    """kernel(**inputs, output_final_state=True, backend=backend) on CUDA against truth(**inputs)
    -> (out, state) on CPU: outputs, final states and the gradients of every input, within
    CUDA_TOLERANCES for fla ("auto" picks it) and 10x assert_close's for the chunkwise kernel."""
    cuda_inputs = {name: t.cuda() for name, t in inputs.items()}
    grad_out, grad_state = seeded_like(inputs["v"], 1), seeded_like(inputs["initial_state"], 2)
    out, state, grads = run_with_grads(lambda **leaves: kernel(**leaves, output_final_state=True, backend=backend),
                                       cuda_inputs, grad_out.cuda(), grad_state.cuda())
    expected_out, expected_state, expected_grads = run_with_grads(truth, inputs, grad_out.double(), grad_state.double())
    scale = CUDA_TOLERANCES[dtype] if backend != "chunkwise" else 10
    assert out.dtype == dtype and state.dtype == torch.float32
    assert_close(out.float().cpu(), expected_out, dtype, what=f"{backend} output", scale=scale)
    assert_close(state.cpu(), expected_state, dtype, what=f"{backend} final state", scale=scale)
    for name, grad in grads.items():
        assert_close(grad.float().cpu(), expected_grads[name], dtype, what=f"{backend} d{name}", scale=3 * scale)
