"""mLSTM kernel inputs drawn by hypothesis, and the check of a backend against the fp64 step loop
(outputs, final states in the truth's frame, every gradient)."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from layerzoo.kernels import MLSTMState, mlstm
from layerzoo.testing import assert_close
from layerzoo.testing.families import in_frame
from layerzoo.testing.tolerances import rms


STATE = ("C", "n", "m")
EXTREME = 30.0


@st.composite
def mlstm_case(
    draw, dtypes=(torch.float64, torch.float32, torch.bfloat16), extreme_gates=False, max_length=300,
    chunk_sizes=(1, 3, 16, 32, 64), key_dims=(4, 8, 16), value_dims=(4, 6, 8, 16), head_counts=(1, 2, 3),
    padding=False,
):
    """(inputs dict q, k, v, i, f, initial state or None, chunk_size); Dk != Dv.

    padding: runs of padding tokens (i = -inf, f = +inf: write nothing, forget nothing), often
    longer than a chunk, and sometimes every token.
    """
    # Most cases short (cheap, chunk edges everywhere); a quarter cross many chunks.
    long = draw(st.sampled_from([False, False, False, True]))
    length = draw(st.integers(65, max_length) if long else st.integers(1, 64))
    batch, heads = draw(st.integers(1, 2)), draw(st.sampled_from(head_counts))
    key_dim = draw(st.sampled_from(key_dims))
    value_dim = draw(st.sampled_from([d for d in value_dims if d != key_dim]))
    dtype = draw(st.sampled_from(dtypes))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    shape = (batch, length, heads)
    if extreme_gates:
        # Each gate all -30, all +30, or a mix: forget nothing / everything, write 1e13x / 1e-13x.
        def gate():
            values = torch.tensor(draw(st.sampled_from([[-EXTREME], [EXTREME], [-EXTREME, EXTREME]])))
            return values[torch.randint(len(values), shape, generator=gen)]

        i, f = gate(), gate()
    else:
        i = 3 * torch.randn(shape, generator=gen)
        f = 2 + 3 * torch.randn(shape, generator=gen)
    if padding:
        pad = torch.zeros(shape, dtype=torch.bool)
        for _ in range(draw(st.integers(1, 3))):
            start = draw(st.integers(0, length - 1))
            pad[:, start:start + draw(st.integers(1, length))] = True
        i, f = i.masked_fill(pad, float("-inf")), f.masked_fill(pad, float("inf"))
    q, k = (torch.randn(*shape, key_dim, generator=gen) for _ in range(2))
    if dtype != torch.float64:
        q, k = q.abs(), k.abs()
    inputs = {"q": q, "k": k, "v": torch.randn(*shape, value_dim, generator=gen), "i": i, "f": f}
    inputs = {name: t.to(dtype) for name, t in inputs.items()}
    state = None
    if draw(st.booleans()):  # states are fp32, fp64 for fp64 inputs
        state = MLSTMState(
            torch.randn(batch, heads, key_dim, value_dim, generator=gen),
            torch.randn(batch, heads, key_dim, generator=gen),
            2 * torch.randn(batch, heads, generator=gen),
        )
        state = MLSTMState(*(t.to(torch.promote_types(dtype, torch.float32)) for t in state))
    return inputs, state, draw(st.sampled_from(chunk_sizes))


def run(backend: str, inputs: dict, state: MLSTMState | None, chunk_size: int, to=None):
    """Output, final state and input gradients of one backend, inputs cast `to` a dtype if given.

    The loss reads h and the final state. The state is read in the frame of the fp64 truth's m
    (C exp(m - m_truth)), which is the true state up to one constant factor, so every gradient
    path through m counts without depending on which stabiliser an implementation carries.
    """
    leaves = {name: t.detach().to(to or t.dtype).requires_grad_() for name, t in inputs.items()}
    state_leaves = None if state is None else MLSTMState(*(t.detach().to(to or t.dtype).requires_grad_() for t in state))
    h, final = mlstm(**leaves, initial_state=state_leaves, output_final_state=True, chunk_size=chunk_size, backend=backend)
    return h, final, leaves, state_leaves


def outputs_and_gradients(backend, inputs, state, chunk_size, to=None, m_truth=None):
    """{name: tensor} of h, the final (C, n) in the truth's frame, and every input's gradient."""
    h, final, leaves, state_leaves = run(backend, inputs, state, chunk_size, to)
    m_truth = final.m.detach().double() if m_truth is None else m_truth
    C, n = in_frame(final, m_truth, torch.float64)
    gen = torch.Generator().manual_seed(1)
    weights = (torch.randn(t.shape, generator=gen, dtype=torch.float64).to(t.device) for t in (h, C, n))
    loss = sum((t * w).sum() for t, w in zip((h.double(), C, n), weights))
    loss.backward()
    results = {"h": h, "C": C, "n": n} | {f"d{name}": t.grad for name, t in leaves.items()}
    if state_leaves is not None:
        results |= {f"d{name}0": t.grad for name, t in zip(STATE, state_leaves)}
    return results, m_truth


def check_against_truth(backend, inputs, state, chunk_size, device=None):
    """backend's output, final state and gradients against the fp64 step loop on the same inputs.

    The truth runs where the inputs are; the backend on `device` (default: there too).
    """
    dtype = inputs["q"].dtype
    truth, m_truth = outputs_and_gradients("reference", inputs, state, chunk_size, to=torch.float64)
    if device is not None:
        inputs = {name: t.to(device) for name, t in inputs.items()}
        state = None if state is None else MLSTMState(*(t.to(device) for t in state))
    got, _ = outputs_and_gradients(backend, inputs, state, chunk_size, m_truth=m_truth)
    assert got["h"].dtype == dtype
    what = f"{backend}, T={inputs['q'].shape[1]}, chunk {chunk_size}"
    # A kernel that rounds its matmul operands to bf16 / fp16 (the Triton one) leaves a gradient
    # that cancels to almost nothing with the rounding error of the terms that cancelled: dq at
    # T = 1 under a saturated input gate, where h = v sign(q . k) hardly depends on q, is 1e-3 of
    # the other gradients. There, the size of the call's largest input gradient sets the bound.
    low_precision = dtype in (torch.bfloat16, torch.float16)
    magnitude = max(rms(truth[f"d{name}"]) for name in ("q", "k", "v")) if low_precision else 0.0
    for name, expected in truth.items():
        # Gradients sum many rounded products: a few times the output tolerance, as elsewhere.
        gradient = name.startswith("d")
        assert_close(got[name].double().to(expected.device), expected, dtype, what=f"{what}: {name}",
                     scale=10 if gradient else 1, magnitude=magnitude if gradient else 0.0)
