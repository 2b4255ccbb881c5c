"""The Triton kernels' fp32 products as a GPU computes them: at the input_precision the kernels pick
on a GPU ("tf32x3"), with tl.dot rounding its operands as tensor cores do (hardware_like.py), the
interpreter runs agree with the fp64 reference at fp32 tolerance; plain TF32 would not."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from layerzoo.kernels import mlstm, mlstm_reference, sliding_window_attention, sliding_window_attention_reference
from layerzoo.kernels.common.backends import triton_can_run
from layerzoo.testing import assert_close

from tests.helpers.hardware_like import hardware_dot_precision, tf32

pytestmark = pytest.mark.skipif(not triton_can_run(torch.empty(0)), reason="needs the Triton interpreter (no CUDA here)")


def test_tf32_keeps_ten_mantissa_bits_rounding_to_nearest_even():
    one = np.float32(1.0)
    assert tf32(np.array([one + np.float32(2.0**-10)]))[0] == one + np.float32(2.0**-10)  # representable
    assert tf32(np.array([one + np.float32(2.0**-12)]))[0] == one  # below half a step: down
    assert tf32(np.array([one + np.float32(3 * 2.0**-11)]))[0] == one + np.float32(2.0**-9)  # a tie: to even


@pytest.fixture
def gpu_precision(monkeypatch):
    """The kernels' fp32 dots at the precision they would pick on a GPU, set by the test."""
    def use(precision: str) -> None:
        from layerzoo.kernels.mlstm.triton import config
        from layerzoo.kernels.sliding_window.triton import function

        monkeypatch.setattr(function, "_fp32_precision", lambda: precision)
        real = config.kernel_dtypes
        monkeypatch.setattr(config, "kernel_dtypes", lambda dtype: {**real(dtype), "PRECISION": precision})

    return use


def inputs(*shapes: tuple[int, ...]) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(*shape, generator=generator) for shape in shapes]


@pytest.mark.parametrize("precision, accurate", [("tf32x3", True), ("tf32", False)])
def test_sliding_window_attention_in_fp32(gpu_precision, precision, accurate):
    gpu_precision(precision)
    q, k, v = inputs((1, 40, 2, 32), (1, 40, 1, 32), (1, 40, 1, 32))
    expected = sliding_window_attention_reference(q.double(), k.double(), v.double(), 24)
    with hardware_dot_precision():
        out = sliding_window_attention(q, k, v, 24, backend="triton")
    if accurate:
        assert_close(out, expected, torch.float32, what=f"{precision} output")
    else:
        with pytest.raises(AssertionError):
            assert_close(out, expected, torch.float32, what=f"{precision} output")


@pytest.mark.parametrize("precision, accurate", [("tf32x3", True), ("tf32", False)])
def test_mlstm_in_fp32(gpu_precision, precision, accurate):
    gpu_precision(precision)
    q, k, v, i, f = inputs((1, 40, 1, 32), (1, 40, 1, 32), (1, 40, 1, 32), (1, 40, 1), (1, 40, 1))
    f = f + 3
    expected, _ = mlstm_reference(*(t.double() for t in (q, k, v, i, f)))
    with hardware_dot_precision():
        out, _ = mlstm(q, k, v, i, f, output_final_state=True, chunk_size=16, backend="triton")
    if accurate:
        assert_close(out, expected, torch.float32, what=f"{precision} output")
    else:
        with pytest.raises(AssertionError):
            assert_close(out, expected, torch.float32, what=f"{precision} output")
