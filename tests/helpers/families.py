"""The built-in kernel families as layerzoo.testing.KernelFamily adapters, and the backends of each
that run on this machine (tests/kernels/test_kernel_conformance.py checks every one of them)."""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import os
from dataclasses import dataclass
from typing import Callable, ContextManager, Sequence
from unittest import mock

import pytest
import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from layerzoo.kernels import MLSTMState, gated_delta_rule, kda, mlstm, sliding_window_attention, ssd
from layerzoo.kernels.assoc_memory import NU, associative_read, associative_update, empty_memory
from layerzoo.kernels.gated_delta_rule import native
from layerzoo.kernels.kda import native as kda_native
from layerzoo.kernels.mlstm import native as mlstm_native
from layerzoo.kernels.sliding_window import native as swa_native
from layerzoo.kernels.common.native_build import CompiledOps
from layerzoo.kernels.ssd import native as ssd_native
from layerzoo.kernels.common.backends import triton_can_run
from layerzoo.testing import KernelCase, KernelFamily

DTYPES = (torch.float32, torch.float64, torch.bfloat16)  # the input dtypes the checks draw


def generator(draw) -> torch.Generator:
    return torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))


# Sliding-window attention. Its streaming state is the caller's: the last window - 1 keys and values
# (all of them without a window); queries are end-aligned, so a call attends over [cache; new keys].
@st.composite
def swa_cases(draw, batch: int, length: int, dtype: torch.dtype) -> KernelCase:
    heads, kv_heads = draw(st.sampled_from([(1, 1), (2, 1), (2, 2), (4, 2)]))
    dim = draw(st.sampled_from([4, 8]))
    window = draw(st.one_of(st.none(), st.integers(2, 8)))  # window 1 would leave dq, dk zero
    cached = draw(st.integers(1, 8 if window is None else window - 1))
    gen = generator(draw)

    def randn(*shape):
        return torch.randn(*shape, generator=gen).to(dtype)

    inputs = {"q": randn(batch, length, heads, dim), "k": randn(batch, length, kv_heads, dim),
              "v": randn(batch, length, kv_heads, dim)}
    state = (randn(batch, cached, kv_heads, dim), randn(batch, cached, kv_heads, dim))
    return KernelCase(inputs, state, {"window": window})


def run_swa(inputs, state, backend, options):
    if options.get("cu_seqlens") is not None:
        return run_swa_packed(inputs, state, backend, options)
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    if state is not None and state[0].shape[1]:
        k, v = torch.cat((state[0], k), dim=1), torch.cat((state[1], v), dim=1)
    out = sliding_window_attention(q, k, v, options["window"], backend=backend)
    return out, kept_keys(k, v, options["window"])


def kept_keys(k, v, window):
    """The streaming state after keys k, v (B, Tk, Hkv, D): the last window - 1 (all without a window)."""
    first = 0 if window is None else max(k.shape[1] - (window - 1), 0)
    return k[:, first:], v[:, first:]


def run_swa_packed(inputs, state, backend, options):
    """Packed sequences, each after its own cache (a state row, as a batch of them would be): the
    keys of sequence s are [cache s; its new keys], given by cu_seqlens_k. The final state is the
    tuple of the sequences' kept keys, which may differ in length."""
    q, k, v, offsets = inputs["q"], inputs["k"], inputs["v"], options["cu_seqlens"]
    if state is None:  # the keys are the queries' own tokens: cu_seqlens_k defaults to cu_seqlens
        out = sliding_window_attention(q, k, v, options["window"], backend=backend, cu_seqlens=offsets)
        keys = [(k[:, start:end], v[:, start:end]) for start, end in itertools.pairwise(offsets.tolist())]
    else:
        keys = [(torch.cat((state[0][index:index + 1], k[:, start:end]), dim=1),
                 torch.cat((state[1][index:index + 1], v[:, start:end]), dim=1))
                for index, (start, end) in enumerate(itertools.pairwise(offsets.tolist()))]
        key_offsets = torch.tensor([0, *itertools.accumulate(key.shape[1] for key, _ in keys)], dtype=offsets.dtype)
        k, v = (torch.cat(parts, dim=1) for parts in zip(*keys))
        out = sliding_window_attention(q, k, v, options["window"], backend=backend, cu_seqlens=offsets,
                                       cu_seqlens_k=key_offsets)
    return out, tuple(kept_keys(*pair, options["window"]) for pair in keys)


SLIDING_WINDOW = KernelFamily(
    "sliding_window_attention", swa_cases, run_swa, dtypes=DTYPES, free_length=("q",), same_dtype=("q", "k", "v"),
    checked_state=None, joined_states=tuple,
)


# mLSTM: states compare in one stabiliser frame (C exp(m - m_like), n exp(m - m_like)), which is the
# true state up to one factor, so implementations carrying different stabilisers compare equal.
@st.composite
def mlstm_cases(draw, batch: int, length: int, dtype: torch.dtype) -> KernelCase:
    heads, key_dim, value_dim = draw(st.integers(1, 2)), draw(st.sampled_from([2, 4])), draw(st.sampled_from([3, 4]))
    gen = generator(draw)
    shape = (batch, length, heads)
    q, k = (torch.randn(*shape, key_dim, generator=gen) for _ in range(2))
    if dtype != torch.float64:  # no cancellation in q . n, where rounding would decide the result
        q, k = q.abs(), k.abs()
    inputs = {"q": q, "k": k, "v": torch.randn(*shape, value_dim, generator=gen),
              "i": 3 * torch.randn(shape, generator=gen), "f": 2 + 3 * torch.randn(shape, generator=gen)}
    inputs = {name: t.to(dtype) for name, t in inputs.items()}
    state_dtype = torch.promote_types(dtype, torch.float32)
    state = MLSTMState(torch.randn(batch, heads, key_dim, value_dim, generator=gen),
                       torch.randn(batch, heads, key_dim, generator=gen).abs(),  # a sum of k >= 0
                       2 * torch.randn(batch, heads, generator=gen))
    state = MLSTMState(*(t.to(state_dtype) for t in state))
    return KernelCase(inputs, state, {"chunk_size": draw(st.sampled_from([1, 3, 16]))})


def run_mlstm(inputs, state, backend, options):
    return mlstm(**inputs, initial_state=state, output_final_state=True, chunk_size=options["chunk_size"], backend=backend,
                 cu_seqlens=options.get("cu_seqlens"))


def in_frame(state: MLSTMState, m: torch.Tensor, dtype: torch.dtype | None = None) -> list[torch.Tensor]:
    """(C, n) rescaled to the stabiliser m, C exp(state.m - m) and n exp(state.m - m), computed in
    `dtype` (default the state's): the true state up to one factor, the same for every implementation."""
    C, n, own_m = (t.to(dtype or state.m.dtype) for t in state)
    factor = torch.exp(own_m - m.to(own_m))
    return [C * factor[..., None, None], n * factor[..., None]]


MLSTM = KernelFamily(
    "mlstm", mlstm_cases, run_mlstm, dtypes=DTYPES, comparable=lambda state, like: in_frame(state, like.m.detach()),
    same_dtype=("q", "k", "v"),
)


# The gated delta rule, with L2-normalised keys and typical gates (as Gated DeltaNet feeds it).
@st.composite
def gated_delta_rule_cases(draw, batch: int, length: int, dtype: torch.dtype) -> KernelCase:
    heads, key_dim, value_dim = draw(st.integers(1, 2)), draw(st.sampled_from([2, 4])), draw(st.sampled_from([3, 4]))
    gen = generator(draw)
    shape = (batch, length, heads)
    inputs = {
        "q": torch.randn(*shape, key_dim, generator=gen).to(dtype),
        "k": F.normalize(torch.randn(*shape, key_dim, generator=gen), dim=-1).to(dtype),
        "v": torch.randn(*shape, value_dim, generator=gen).to(dtype),
        "g": F.logsigmoid(torch.randn(shape, generator=gen) + 2).to(dtype),
        "beta": torch.rand(shape, generator=gen).to(dtype),
    }
    state = torch.randn(batch, heads, key_dim, value_dim, generator=gen).to(torch.promote_types(dtype, torch.float32))
    return KernelCase(inputs, state, {"chunk_size": draw(st.sampled_from([2, 3, 16]))})


def run_gated_delta_rule(inputs, state, backend, options):
    return gated_delta_rule(**inputs, initial_state=state, output_final_state=True, chunk_size=options["chunk_size"],
                            backend=backend, cu_seqlens=options.get("cu_seqlens"))


GATED_DELTA_RULE = KernelFamily(
    "gated_delta_rule", gated_delta_rule_cases, run_gated_delta_rule, dtypes=DTYPES, same_dtype=("q", "k", "v"),
)


# SSD and KDA: the gated delta rule's cases with their own gates. SSD's keys are not normalised
# (Mamba-2's are dt B); KDA decays each key channel on its own.
@st.composite
def ssd_cases(draw, batch: int, length: int, dtype: torch.dtype) -> KernelCase:
    case = draw(gated_delta_rule_cases(batch, length, dtype))
    inputs = {name: case.inputs[name] for name in ("q", "v", "g")}
    inputs["k"] = torch.randn(case.inputs["k"].shape, generator=generator(draw)).to(dtype)
    return KernelCase(inputs, case.state, case.options)


def run_ssd(inputs, state, backend, options):
    return ssd(inputs["q"], inputs["k"], inputs["v"], inputs["g"], initial_state=state, output_final_state=True,
               chunk_size=options["chunk_size"], backend=backend, cu_seqlens=options.get("cu_seqlens"))


@st.composite
def kda_cases(draw, batch: int, length: int, dtype: torch.dtype) -> KernelCase:
    case = draw(gated_delta_rule_cases(batch, length, dtype))
    g = F.logsigmoid(torch.randn(case.inputs["k"].shape, generator=generator(draw)) + 2).to(dtype)
    return KernelCase({**case.inputs, "g": g}, case.state, case.options)


def run_kda(inputs, state, backend, options):
    return kda(**inputs, initial_state=state, output_final_state=True, chunk_size=options["chunk_size"],
               backend=backend, cu_seqlens=options.get("cu_seqlens"))


SSD = KernelFamily("ssd", ssd_cases, run_ssd, dtypes=DTYPES, same_dtype=("q", "k", "v"))
KDA = KernelFamily("kda", kda_cases, run_kda, dtypes=DTYPES, same_dtype=("q", "k", "v"))


# The associative memory as the mixer streams it: every token reads the memory of its segment's
# start and writes against it; the state is (that memory, the increments written so far), since
# updates against one memory add up.
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


# Segment-level reads and writes of one memory per row: packed sequences do not apply (see the
# associative memory kernels' docstring).
ASSOCIATIVE_MEMORY = KernelFamily(
    "associative_memory", memory_cases, run_memory, free_length=("q",), checked_state=lambda state: state[0],
    packs=False,
)


def built(compiled: CompiledOps):
    """A family's compiled CPU ops (its native.COMPILED), built if need be; the test fails without them."""
    ops = compiled.load()
    if ops is None:
        pytest.fail(f"the compiled CPU kernels {compiled.name} did not build (see the warning logged above)")
    return ops


@contextlib.contextmanager
def compiled_present(compiled: CompiledOps):
    """Within the block the "native" backend runs its compiled kernel, not the chunkwise code it
    falls back to where the kernel is not built (the test fails then) or turned off."""
    built(compiled)
    with mock.patch.dict(os.environ, {"LAYERZOO_NATIVE": "1"}):
        yield


def running(backend: str, compiled: CompiledOps):
    """Where `backend` runs its own code: "native" with its compiled kernel (compiled_present); any
    other as it is."""
    return compiled_present(compiled) if backend == "native" else contextlib.nullcontext()


def compiled_gated_delta_rule():
    return built(native.COMPILED)


@dataclass(frozen=True)
class Backend:
    """One backend of a family as the conformance tests run it: under `context`, on inputs of
    `dtypes` (default: the family's)."""

    family: KernelFamily
    name: str
    context: Callable[[], ContextManager] = contextlib.nullcontext
    dtypes: Sequence[torch.dtype] | None = None

    def __str__(self) -> str:
        return f"{self.family.name}-{self.name}"


BACKENDS = [
    Backend(SLIDING_WINDOW, "reference"),
    Backend(SLIDING_WINDOW, "chunkwise"),
    Backend(SLIDING_WINDOW, "native", context=lambda: compiled_present(swa_native.COMPILED)),
    Backend(SLIDING_WINDOW, "sdpa"),
    Backend(MLSTM, "reference"),
    Backend(MLSTM, "chunkwise"),
    Backend(MLSTM, "native", context=lambda: compiled_present(mlstm_native.COMPILED)),
    Backend(GATED_DELTA_RULE, "reference"),
    Backend(GATED_DELTA_RULE, "chunkwise"),
    Backend(GATED_DELTA_RULE, "native", context=lambda: compiled_present(native.COMPILED)),
    Backend(ASSOCIATIVE_MEMORY, "reference"),
    Backend(ASSOCIATIVE_MEMORY, "chunkwise"),
    Backend(SSD, "reference"),
    Backend(SSD, "chunkwise"),
    # SSD's, KDA's and the mLSTM's native kernel is a forward: a call autograd records runs chunkwise
    Backend(SSD, "native", context=lambda: compiled_present(ssd_native.COMPILED)),
    Backend(KDA, "reference"),
    Backend(KDA, "chunkwise"),
    Backend(KDA, "native", context=lambda: compiled_present(kda_native.COMPILED)),
]
# "auto" picks among the above by length ("reference" for a single token) and device.
AUTO = [Backend(family, "auto") for family in (SLIDING_WINDOW, MLSTM, GATED_DELTA_RULE, ASSOCIATIVE_MEMORY, SSD, KDA)]
# The Triton backends run here under the interpreter (tests/conftest.py), which costs milliseconds
# per tile op: one sequence of a few tokens, in the dtypes each kernel takes.
TRITON = importlib.util.find_spec("triton") is not None and triton_can_run(torch.zeros(0))
TRITON_BACKENDS = [
    Backend(SLIDING_WINDOW, "triton", dtypes=(torch.float32, torch.bfloat16)),
    Backend(MLSTM, "triton", dtypes=(torch.float32, torch.float64)),
] if TRITON else []
