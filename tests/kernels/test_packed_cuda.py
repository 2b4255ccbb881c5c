"""Packed sequences (cu_seqlens) on the CUDA paths: a packed call equals one call per sequence.

The same property as the conformance check on CPU (check_kernel_packed: outputs, final states and
the gradients of every input and the initial state), at realistic head sizes and lengths: one
token, an empty sequence, and lengths that are multiples of no chunk or tile. Marked gpu: they
run where CUDA is (benchmarks/gpu_check.sh).
"""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F

from layerzoo.kernels import MLSTMState, sliding_window_attention
from layerzoo.testing import KernelCase, assert_close, check_kernel_packed
from layerzoo.testing.families import GATED_DELTA_RULE, MLSTM, SLIDING_WINDOW

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

LENGTHS = [1, 300, 0, 77, 1000, 64, 1]
DEVICE = "cuda"


def _randn(*shape, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def attention_case(dtype: torch.dtype, window: int | None, cached: int) -> KernelCase:
    """q (N, T, 8, 64), k, v (N, T, 2, 64) and a cache of `cached` keys per sequence (None: no cache)."""
    batch, length = len(LENGTHS), max(LENGTHS)
    inputs = {"q": _randn(batch, length, 8, 64, seed=0), "k": _randn(batch, length, 2, 64, seed=1),
              "v": _randn(batch, length, 2, 64, seed=2)}
    state = None if not cached else (_randn(batch, cached, 2, 64, seed=3), _randn(batch, cached, 2, 64, seed=4))
    inputs = {name: t.to(DEVICE, dtype) for name, t in inputs.items()}
    state = None if state is None else tuple(t.to(DEVICE, dtype) for t in state)
    return KernelCase(inputs, state, {"window": window})


@pytest.mark.parametrize("backend", ["triton", "flex", "sdpa", "chunkwise", "auto"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("window,cached", [(128, 0), (128, 127), (None, 0), (None, 50)])
def test_attention(backend, dtype, window, cached):
    check_kernel_packed(SLIDING_WINDOW, attention_case(dtype, window, cached), backend, LENGTHS, torch.int32)


@pytest.mark.parametrize("backend", ["triton", "flex", "sdpa", "chunkwise", "auto"])
def test_attention_decode_step_of_many_streams(backend):
    """One query per stream after caches of different lengths (the mixers' batched decode; the
    conformance adapter gives every stream one cache length), against the packed reference."""
    gen = torch.Generator().manual_seed(5)
    streams = 64
    key_lengths = (torch.randint(0, 2048, (streams,), generator=gen) + 1).tolist()
    q = torch.randn(1, streams, 8, 64, generator=gen)
    k, v = (torch.randn(1, sum(key_lengths), 2, 64, generator=gen) for _ in range(2))
    q, k, v = (t.to(DEVICE, torch.bfloat16) for t in (q, k, v))
    offsets = {"cu_seqlens": torch.arange(streams + 1, dtype=torch.int32, device=DEVICE),
               "cu_seqlens_k": torch.tensor([0, *itertools.accumulate(key_lengths)], dtype=torch.int32, device=DEVICE)}
    out = sliding_window_attention(q, k, v, 1024, backend=backend, **offsets)
    expected = sliding_window_attention(q.float(), k.float(), v.float(), 1024, backend="reference", **offsets)
    assert_close(out.float(), expected, torch.bfloat16, what=f"{backend}, a decode step of {streams} streams", scale=2)


def mlstm_case(dtype: torch.dtype) -> KernelCase:
    batch, length, heads = len(LENGTHS), max(LENGTHS), 4
    shape = (batch, length, heads)
    # q, k >= 0 (no cancellation in q . n, see test_mlstm.py) and a reachable state: n >= 0
    inputs = {"q": _randn(*shape, 128, seed=0).abs(), "k": _randn(*shape, 128, seed=1).abs(),
              "v": _randn(*shape, 256, seed=2), "i": 3 * _randn(*shape, seed=3), "f": 2 + 3 * _randn(*shape, seed=4)}
    state = MLSTMState(_randn(batch, heads, 128, 256, seed=5), _randn(batch, heads, 128, seed=6).abs(),
                       2 * _randn(batch, heads, seed=7))
    return KernelCase({name: t.to(DEVICE, dtype) for name, t in inputs.items()},
                      MLSTMState(*(t.to(DEVICE) for t in state)), {"chunk_size": 64})


@pytest.mark.parametrize("backend", ["triton", "chunkwise", "auto"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_mlstm(backend, dtype):
    check_kernel_packed(MLSTM, mlstm_case(dtype), backend, LENGTHS)


def gated_delta_rule_case(dtype: torch.dtype) -> KernelCase:
    batch, length, heads = len(LENGTHS), max(LENGTHS), 4
    shape = (batch, length, heads)
    inputs = {"q": _randn(*shape, 64, seed=0), "k": F.normalize(_randn(*shape, 64, seed=1), dim=-1),
              "v": _randn(*shape, 128, seed=2), "g": F.logsigmoid(_randn(*shape, seed=3) + 2),
              "beta": torch.rand(shape, generator=torch.Generator().manual_seed(4))}
    state = _randn(batch, heads, 64, 128, seed=5)
    return KernelCase({name: t.to(DEVICE, dtype) for name, t in inputs.items()}, state.to(DEVICE), {"chunk_size": 64})


@pytest.mark.parametrize("backend", ["fla", "chunkwise", "auto"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gated_delta_rule(backend, dtype):
    check_kernel_packed(GATED_DELTA_RULE, gated_delta_rule_case(dtype), backend, LENGTHS)
