"""The compiled gated delta rule ops' fakes (native_ops.py) against the ops themselves.

torch.library.opcheck runs an op on real tensors and on fake ones and compares every output's
shape, dtype and strides; it also checks the schema's mutation claims against what the op does,
and traces the functional ops through AOTAutograd with dynamic shapes, as torch.compile does.
"""

from __future__ import annotations

import pytest
import torch

from tests.helpers.kernel_backends import compiled_gated_delta_rule
from tests.helpers.layouts import relayout

# The raw forward updates its state in place and returns a list: compile cannot functionalise it
# (it traces the functional form instead), so its checks stop at the schema and the fake.
MUTATING_OP_CHECKS = ("test_schema", "test_faketensor")


def inputs(length: int, layout: str, dtype: torch.dtype) -> list:
    """q, k (1, T, 2, 4), v (1, T, 2, 3), g, beta (1, T, 2) in `layout`, and the scale."""
    gen = torch.Generator().manual_seed(0)
    shapes = [(1, length, 2, 4), (1, length, 2, 4), (1, length, 2, 3), (1, length, 2), (1, length, 2)]
    q, k, v, g, beta = (relayout(torch.randn(shape, generator=gen, dtype=dtype), layout) for shape in shapes)
    return [q, k, v, -g.abs(), beta.sigmoid(), 0.5]


@pytest.mark.parametrize("length,chunk,layout,dtype", [(5, 2, "channel_major", torch.float32),
                                                     (4, 4, "token_major", torch.float64)])
def test_fakes_agree_with_the_compiled_ops(length, chunk, layout, dtype):
    """Both forwards, with and without the workspace, and the backward (whose gradients are laid
    out as their inputs), at a chunk that divides T and one that leaves a partial chunk."""
    ops = compiled_gated_delta_rule()
    args = inputs(length, layout, dtype)
    state = torch.randn(2, 4, 3, dtype=dtype)
    for keep in (False, True):
        torch.library.opcheck(ops.gated_delta_rule_forward, (*args, state.clone(), chunk, keep),
                              test_utils=MUTATING_OP_CHECKS)
        torch.library.opcheck(ops.gated_delta_rule_forward_functional, (*args, state, chunk, keep))
    _, final_state, *workspace = ops.gated_delta_rule_forward_functional(*args, state, chunk, True)
    d_out = relayout(torch.randn(1, length, 2, 3, dtype=dtype), layout)
    torch.library.opcheck(ops.gated_delta_rule_backward, (*args, *workspace, d_out, torch.randn_like(final_state)))
