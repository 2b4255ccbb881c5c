"""A user's kernel for the mutation tests: linear attention with a scalar decay per head, as a step
loop (the truth) and chunkwise, each bug of BUGS plantable in the chunkwise one.

    S_t = exp(g_t) S_{t-1} + k_t v_t^T,    o_t = scale q_t S_t

q, k (B, T, H, K), v (B, T, H, V), g (B, T, H) log decays <= 0; the state S (B, H, K, V) in fp32
(fp64 for fp64). Written as a user would, on layerzoo's shared input checks.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from layerzoo.kernels.common.checks import check_cu_seqlens, check_tensors
from layerzoo.kernels.common.dtypes import compute_dtype
from layerzoo.testing import KernelCase, KernelFamily

# The bugs a chunkwise kernel plausibly has, each one a mutant the kernel suite must catch.
BUGS = {
    "scale": "ignores its scale",
    "gate at the chunk boundary": "the carried state misses the decay of each chunk's first step",
    "chunk padding": "the padding of the last chunk decays the final state",
    "initial state gradient": "no gradient reaches the initial state",
    "cu_seqlens": "the state runs on across packed sequences",
    "low precision": "computes in bf16 inside an fp32 call",
    "empty calls": "a call without tokens drops the initial state",
    "batch": "every row starts from row 0's initial state",
    "layout": "reads strided inputs as if contiguous",
    "input checks": "takes malformed inputs without a one-line error",
}


def toy_reference(q, k, v, g, scale=None, initial_state=None):
    """The step loop: out (B, T, H, V) in q's dtype, final state (B, H, K, V) in the compute dtype."""
    dtype = compute_dtype(q.dtype)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    batch, length, heads, key_dim = q.shape
    state = q.new_zeros(batch, heads, key_dim, v.shape[-1], dtype=dtype) if initial_state is None else initial_state.to(dtype)
    outputs = []
    for t in range(length):
        state = state * g[:, t].to(dtype).exp()[..., None, None] + k[:, t].to(dtype)[..., None] * v[:, t].to(dtype)[..., None, :]
        outputs.append(scale * torch.einsum("bhk,bhkv->bhv", q[:, t].to(dtype), state))
    out = torch.stack(outputs, 1) if outputs else q.new_zeros(batch, 0, heads, v.shape[-1], dtype=dtype)
    return out.to(q.dtype), state


def toy_chunkwise(q, k, v, g, scale=None, initial_state=None, chunk_size=4, cu_seqlens=None, bugs=frozenset()):
    """The same, chunk by chunk (chunk_size steps at a time); packed sequences with cu_seqlens."""
    if "input checks" not in bugs:
        sizes = check_tensors("toy", {"q": (q, "B T H K"), "k": (k, "B T H K"), "v": (v, "B T H V"), "g": (g, "B T H"),
                                      "initial_state": (initial_state, "N H K V")}, same_dtype=("q", "k", "v"))
        bounds = check_cu_seqlens("toy", cu_seqlens, sizes, q.device)
        if bounds is None and initial_state is not None and sizes["N"] != sizes["B"]:
            raise ValueError(f"toy: initial_state must hold one row per batch row ({sizes['B']}), got {sizes['N']}")
    else:
        bounds = None if cu_seqlens is None else cu_seqlens.tolist()
    if "layout" in bugs:
        q, k, v, g = (torch.as_strided(t, t.shape, torch.empty(t.shape).stride()) for t in (q, k, v, g))
    scale = q.shape[-1] ** -0.5 if scale is None or "scale" in bugs else scale
    if bounds is None:
        return _rows(q, k, v, g, scale, initial_state, chunk_size, bugs)
    if "cu_seqlens" in bugs:  # one run through all the sequences, their states read at each end
        first = None if initial_state is None else initial_state[:1]
        out, _ = _rows(q, k, v, g, scale, first, chunk_size, bugs)
        ends = [_rows(*(t[:, :end] for t in (q, k, v, g)), scale, first, chunk_size, bugs)[1] for end in bounds[1:]]
        return out, torch.cat(ends)
    pieces = [_rows(*(t[:, start:end] for t in (q, k, v, g)), scale,
                    None if initial_state is None else initial_state[index:index + 1], chunk_size, bugs)
              for index, (start, end) in enumerate(zip(bounds, bounds[1:]))]
    return torch.cat([out for out, _ in pieces], 1), torch.cat([state for _, state in pieces])


def _rows(q, k, v, g, scale, initial_state, chunk_size, bugs):
    """Rows of one sequence each, from their initial states (None: zeros)."""
    dtype = compute_dtype(q.dtype)
    work = torch.bfloat16 if "low precision" in bugs and dtype == torch.float32 else dtype
    batch, length, heads, key_dim = q.shape
    if initial_state is None or ("empty calls" in bugs and length == 0):
        state = q.new_zeros(batch, heads, key_dim, v.shape[-1], dtype=dtype)
    else:
        state = initial_state.to(dtype)
        if "initial state gradient" in bugs:
            state = state.detach()
        if "batch" in bugs:
            state = state[:1].expand_as(state)
    pad = -length % chunk_size
    decay_pad = g[:, -1:].expand(-1, pad, -1) if "chunk padding" in bugs and length else g.new_zeros(batch, pad, heads)
    q, k, v = (F.pad(t, (0, 0, 0, 0, 0, pad)) for t in (q, k, v))
    g = torch.cat((g, decay_pad), 1)
    causal = torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=q.device).tril()
    outputs = []
    for start in range(0, length + pad, chunk_size):
        qc, kc, vc, gc = (t[:, start:start + chunk_size].to(work) for t in (q, k, v, g))
        cumulative = gc.cumsum(1)  # (B, C, H)
        carried = cumulative - gc[:, :1] if "gate at the chunk boundary" in bugs else cumulative
        within = (cumulative[:, :, None] - cumulative[:, None]).masked_fill(~causal[None, :, :, None], float("-inf")).exp()
        scores = torch.einsum("bihk,bjhk->bijh", qc, kc) * within
        out = torch.einsum("bijh,bjhv->bihv", scores, vc) + torch.einsum("bihk,bhkv->bihv", qc * carried.exp()[..., None], state.to(work))
        outputs.append((scale * out).to(dtype))
        last = cumulative[:, -1:]
        state = (state * last[:, 0].exp().to(dtype)[..., None, None]
                 + torch.einsum("bjhk,bjhv->bhkv", (kc * (last - cumulative).exp()[..., None]).to(dtype), vc.to(dtype)))
    out = torch.cat(outputs, 1)[:, :length] if outputs else q.new_zeros(batch, 0, heads, v.shape[-1], dtype=dtype)
    return out.to(q.dtype), state


@st.composite
def toy_cases(draw, batch: int, length: int, dtype: torch.dtype) -> KernelCase:
    heads, key_dim, value_dim = draw(st.integers(1, 2)), draw(st.sampled_from([2, 4])), draw(st.sampled_from([3, 4]))
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    shape = (batch, length, heads)
    inputs = {"q": torch.randn(*shape, key_dim, generator=generator), "k": torch.randn(*shape, key_dim, generator=generator),
              "v": torch.randn(*shape, value_dim, generator=generator),
              "g": -torch.rand(shape, generator=generator) * 2}
    inputs = {name: t.to(dtype) for name, t in inputs.items()}
    state = torch.randn(batch, heads, key_dim, value_dim, generator=generator).to(compute_dtype(dtype))
    return KernelCase(inputs, state, {"chunk_size": draw(st.sampled_from([1, 3, 4])), "scale": draw(st.sampled_from([None, 0.3]))})


def toy_family(bugs: frozenset[str] = frozenset()) -> KernelFamily:
    """The toy kernel as a KernelFamily: "reference" the step loop, "chunkwise" with `bugs` planted."""
    def run(inputs, state, backend, options):
        if backend == "reference":
            return toy_reference(**inputs, scale=options["scale"], initial_state=state)
        return toy_chunkwise(**inputs, initial_state=state, bugs=bugs, **options)

    return KernelFamily("toy", toy_cases, run, dtypes=(torch.float32, torch.float64), same_dtype=("q", "k", "v"))
