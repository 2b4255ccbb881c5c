"""What a GPU does that the Triton interpreter does not, brought into interpreter tests.

- nan_filled_allocations(): torch.empty, torch.empty_like and Tensor.new_empty give NaN-filled
  floating-point tensors (as flash-linear-attention's tests do), so a kernel that leaves an element
  of its output unwritten fails instead of passing on memory that happened to be zero.
- hardware_dot_precision(): tl.dot rounds fp32 operands as tensor cores do for its
  input_precision: "tf32" to TF32 (10 mantissa bits), "tf32x3" as three TF32 products (the
  operands split into a TF32 high part and a TF32 remainder), "ieee" exactly. The interpreter
  multiplies exactly whatever input_precision says.
"""

from __future__ import annotations

import contextlib
from typing import Iterator
from unittest import mock

import numpy as np
import torch


def _nan_filled(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.fill_(float("nan")) if tensor.is_floating_point() else tensor


@contextlib.contextmanager
def nan_filled_allocations() -> Iterator[None]:
    empty, empty_like, new_empty = torch.empty, torch.empty_like, torch.Tensor.new_empty
    with mock.patch.object(torch, "empty", lambda *args, **kwargs: _nan_filled(empty(*args, **kwargs))), \
         mock.patch.object(torch, "empty_like", lambda *args, **kwargs: _nan_filled(empty_like(*args, **kwargs))), \
         mock.patch.object(torch.Tensor, "new_empty", lambda self, *args, **kwargs: _nan_filled(new_empty(self, *args, **kwargs))):
        yield


def tf32(values: np.ndarray) -> np.ndarray:
    """fp32 values rounded to TF32 (to nearest, ties to even): the low 13 of 23 mantissa bits cleared."""
    bits = values.astype(np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0xFFF) + ((bits >> np.uint32(13)) & np.uint32(1))) & np.uint32(0xFFFFE000)
    return rounded.view(np.float32)


def _product(a: np.ndarray, b: np.ndarray, precision: str, out_dtype) -> np.ndarray:
    if precision == "TF32":
        return np.matmul(tf32(a), tf32(b), dtype=out_dtype)
    if precision == "TF32x3":
        a_high, b_high = tf32(a), tf32(b)
        a_low, b_low = tf32(a - a_high), tf32(b - b_high)
        return (np.matmul(a_high, b_high, dtype=out_dtype) + np.matmul(a_high, b_low, dtype=out_dtype)
                + np.matmul(a_low, b_high, dtype=out_dtype))
    return np.matmul(a, b, dtype=out_dtype)


@contextlib.contextmanager
def hardware_dot_precision() -> Iterator[None]:
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    exact = builder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        precision = getattr(input_precision, "name", str(input_precision)).upper()
        if a.data.dtype != np.float32 or b.data.dtype != np.float32 or precision not in ("TF32", "TF32X3"):
            return exact(self, a, b, d, input_precision, max_num_imprecise_acc)
        product = _product(a.data, b.data, "TF32x3" if precision == "TF32X3" else "TF32", d.data.dtype)
        return interpreter.TensorHandle(product + d.data, d.dtype.scalar)

    with mock.patch.object(builder, "create_dot", create_dot):
        yield
