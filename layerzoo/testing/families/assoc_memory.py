"""The associative memory as a KernelFamily, as the mixer streams it: every token reads the memory
of its segment's start and writes against it; the state is (that memory, the increments written
so far), since updates against one memory add up. Reads and writes are of one memory per row, a
segment at a time: packed sequences do not apply (see layerzoo.kernels.assoc_memory)."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from ...kernels.assoc_memory import NU, associative_read, associative_update, empty_memory
from ..kernels import KernelCase, KernelFamily
from .draws import generator


@st.composite
def memory_cases(draw, batch: int, length: int, dtype: torch.dtype) -> KernelCase:
    # DPFP is degenerate below d = 3: all zero at d = 1; at d = 2 the normalised features take a
    # few fixed values, so a read does not depend on the query continuously (no gradient).
    heads, dim, value_dim = draw(st.integers(1, 2)), draw(st.integers(3, 4)), draw(st.integers(1, 4))
    gen = generator(draw)

    def tokens(count):
        return (torch.randn(batch, count, heads, dim, generator=gen).to(dtype),
                torch.randn(batch, count, heads, value_dim, generator=gen).to(dtype),
                torch.rand(batch, count, heads, generator=gen).to(dtype))

    normalize = draw(st.booleans())
    q = torch.randn(batch, length, heads, dim, generator=gen).to(dtype)
    k, v, beta = tokens(length)
    inputs = {"q": q, "k": k, "v": v, "beta": beta}
    # A reachable memory (z sums non-negative features) that has seen keys like the queries: DPFP
    # features are sparse, and a query sharing none with the memory would read 0 whatever it is.
    written_k, written_v, written_beta = tokens(length)
    memory = associative_update(torch.cat((q, written_k), 1), torch.cat((v, written_v), 1),
                                torch.cat((beta, written_beta), 1), normalize=normalize)
    pending = associative_update(*tokens(2), memory, normalize=normalize)
    return KernelCase(inputs, (memory, pending), {"normalize": normalize})


def run_memory(inputs, state, backend, options):
    if state is None:
        batch, _, heads, dim = inputs["q"].shape
        empty = empty_memory(batch, heads, 2 * NU * dim, inputs["v"].shape[-1], device=inputs["q"].device)
        state = (empty, empty)
    memory, pending = state
    out = associative_read(inputs["q"], memory, normalize=options["normalize"], backend=backend)
    update = associative_update(inputs["k"], inputs["v"], inputs["beta"], memory, normalize=options["normalize"],
                                backend=backend)
    return out, (memory, pending.plus(update))


ASSOCIATIVE_MEMORY = KernelFamily(
    "associative_memory", memory_cases, run_memory, free_length=("q",), checked_state=lambda state: state[0],
    packs=False,
)
