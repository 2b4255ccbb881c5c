"""The Triton mLSTM backend against the fp64 step loop: outputs, final states and every gradient.

Without a GPU the kernels run through the Triton interpreter (tests/conftest.py sets
TRITON_INTERPRET), which is slow, so the properties keep to T <= 150, small head dims and few
examples; on a GPU the same properties run the compiled kernels on CUDA. The triton backend rounds
chunk_size up to a power of two >= 16, so the cases draw 16, 32 and 64 (one test checks the
rounding). The truth and the tolerances are those of test_mlstm.py, whose helpers these reuse.
"""

from __future__ import annotations

import importlib.util
import types
from functools import partial
from unittest import mock

import pytest
import torch
from hypothesis import given, settings

from layerzoo.kernels import MLSTMState, choose_mlstm_backend, mlstm
from layerzoo.kernels.mlstm import BACKENDS, mlstm_triton
from layerzoo.kernels.common.backends import Backend, triton_can_run
from layerzoo.testing import assert_close
from layerzoo.testing.families import in_frame

from tests.helpers.mlstm_cases import check_against_truth, mlstm_case

# Where the kernels run: CPU under the interpreter, else CUDA.
DEVICE = "cpu" if triton_can_run(torch.zeros(1)) else "cuda"
pytestmark = [pytest.mark.skipif(
    importlib.util.find_spec("triton") is None or (DEVICE == "cuda" and not torch.cuda.is_available()),
    reason="needs triton, and CUDA or TRITON_INTERPRET=1",
), pytest.mark.usefixtures("nan_filled_allocations")]  # outputs start as NaN: every element must be written
CHUNKS = (16, 32, 64)
# The interpreter runs every program of a grid in turn: one or two heads keep it quick.
SMALL = {"chunk_sizes": CHUNKS, "head_counts": (1, 2)}
ALL_DTYPES = (torch.float64, torch.float32, torch.bfloat16, torch.float16)


@given(case=mlstm_case(dtypes=ALL_DTYPES, max_length=150, **SMALL))
def test_triton_matches_reference_outputs_states_and_gradients(case):
    check_against_truth("triton", *case, device=DEVICE)


@settings(max_examples=8)
@given(case=mlstm_case(dtypes=(torch.float32, torch.bfloat16), extreme_gates=True, max_length=150, **SMALL))
def test_extreme_gates_stay_finite_and_agree(case):
    """Forget gates near 0 and 1, input gates exp(+-30): no overflow, and still the same function."""
    check_against_truth("triton", *case, device=DEVICE)  # assert_close also fails on NaN or Inf


@settings(max_examples=6)
@given(case=mlstm_case(dtypes=(torch.float64, torch.float32), max_length=80, chunk_sizes=(16, 32),
                       head_counts=(1,), key_dims=(17, 32), value_dims=(20, 40)))
def test_head_dims_split_into_several_tiles(case):
    """16-wide Dk and Dv tiles: 2-3 of each, partial ones masked, their shares of dv and the gate
    gradients summed outside the kernel."""
    tiles = partial(mlstm_triton, block_k=16, block_v=16)
    with mock.patch.dict(BACKENDS, {"triton-16": Backend(tiles, takes=("chunk_size",))}):
        check_against_truth("triton-16", *case, device=DEVICE)


def test_gradcheck_in_fp64_including_the_returned_stabiliser():
    """Every input's gradient, the initial state's included, against finite differences, with the
    final m read directly: its gradient takes the max stabiliser's argmax path. Two chunks of 16,
    the second partial; fast mode (random directions) keeps the interpreter's forwards few."""
    gen = torch.Generator().manual_seed(0)
    shape = (1, 21, 1)
    inputs = [
        torch.randn(*shape, 3, generator=gen), torch.randn(*shape, 3, generator=gen),
        torch.randn(*shape, 2, generator=gen), 3 * torch.randn(shape, generator=gen),
        2 + 2 * torch.randn(shape, generator=gen),
        torch.randn(1, 1, 3, 2, generator=gen), torch.randn(1, 1, 3, generator=gen), torch.randn(1, 1, generator=gen),
    ]
    inputs = [t.to(DEVICE, torch.float64).requires_grad_() for t in inputs]

    def fn(q, k, v, i, f, C, n, m):
        h, final = mlstm(q, k, v, i, f, initial_state=(C, n, m), output_final_state=True, chunk_size=16,
                         backend="triton")
        return h, final.C, final.n, final.m

    assert torch.autograd.gradcheck(fn, inputs, fast_mode=True)


@pytest.mark.parametrize("chunk_size", [1, 3, 17, 100, 1000])
def test_chunk_sizes_the_kernels_cannot_tile_are_rounded_not_refused(chunk_size):
    gen = torch.Generator().manual_seed(0)
    q, k = (torch.randn(1, 40, 1, 4, generator=gen, dtype=torch.float64).to(DEVICE) for _ in range(2))
    v = torch.randn(1, 40, 1, 6, generator=gen, dtype=torch.float64).to(DEVICE)
    i, f = (3 * torch.randn(1, 40, 1, generator=gen, dtype=torch.float64).to(DEVICE) for _ in range(2))
    got = mlstm(q, k, v, i, f, chunk_size=chunk_size, backend="triton")
    assert_close(got, mlstm(q, k, v, i, f, backend="reference"), what=f"chunk_size {chunk_size}")


def test_auto_picks_triton_for_cuda_tensors_and_not_on_cpu():
    assert choose_mlstm_backend(torch.zeros(1, 4, 2, 8)) in ("native", "chunkwise")  # even under the interpreter
    cuda_like = types.SimpleNamespace(is_cuda=True, device=torch.device("cuda"), shape=(1, 4, 2, 8))
    assert choose_mlstm_backend(cuda_like) == "triton"
    assert choose_mlstm_backend(cuda_like, "chunkwise") == "chunkwise"
    assert "triton" in BACKENDS


def test_triton_on_cpu_without_the_interpreter_is_a_one_line_value_error(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    q = torch.zeros(1, 4, 2, 8)
    with pytest.raises(ValueError, match=r"mlstm: the 'triton' backend needs CUDA tensors \(got cpu\)") as info:
        mlstm(q, q, q, q[..., 0], q[..., 0], backend="triton")
    assert "\n" not in str(info.value)


# On a GPU the kernels use exact (not TF32) fp32 products, and bf16/fp16 products with fp32
# accumulation for bf16/fp16 inputs; the reference is PyTorch's chunkwise kernel in fp32 on the very
# same rounded inputs. Scales on assert_close's per-dtype tolerance (gradients: 10x more).
CUDA_SCALE = {torch.float32: 10.0, torch.bfloat16: 1.0, torch.float16: 2.0}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
class TestOnCuda:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
    def test_realistic_shapes_match_chunkwise_in_fp32(self, dtype):
        gen = torch.Generator().manual_seed(0)
        batch, length, heads, key_dim, value_dim = 2, 2048, 4, 128, 256
        shape = (batch, length, heads)
        # q, k >= 0 and n0 >= 0: no cancellation in q . n (see test_mlstm.py's docstring).
        inputs = {
            "q": torch.randn(*shape, key_dim, generator=gen).abs().to(dtype),
            "k": torch.randn(*shape, key_dim, generator=gen).abs().to(dtype),
            "v": torch.randn(*shape, value_dim, generator=gen).to(dtype),
            "i": 3 * torch.randn(shape, generator=gen),
            "f": 2 + 3 * torch.randn(shape, generator=gen),
        }
        state = MLSTMState(
            torch.randn(batch, heads, key_dim, value_dim, generator=gen),
            torch.randn(batch, heads, key_dim, generator=gen).abs(),
            torch.randn(batch, heads, generator=gen),
        )
        inputs = {name: t.cuda() for name, t in inputs.items()}
        state = MLSTMState(*(t.cuda() for t in state))
        assert choose_mlstm_backend(inputs["q"]) == "triton"
        expected, m_frame = self._run("chunkwise", inputs, state, to=torch.float32)
        got, _ = self._run("auto", inputs, state, m_frame=m_frame)
        assert got["h"].dtype == dtype
        for name, want in expected.items():
            scale = CUDA_SCALE[dtype] * (10 if name.startswith("d") else 1)
            assert_close(got[name].float(), want.float(), dtype, what=f"triton {dtype}: {name}", scale=scale)

    @staticmethod
    def _run(backend, inputs, state, to=None, m_frame=None):
        """({h, final C and n in the frame m_frame (default: this run's m), every gradient}, m_frame)."""
        leaves = {name: t.detach().to(to or t.dtype).requires_grad_() for name, t in inputs.items()}
        state_leaves = MLSTMState(*(t.detach().clone().requires_grad_() for t in state))
        h, final = mlstm(**leaves, initial_state=state_leaves, output_final_state=True, backend=backend)
        m_frame = final.m.detach().double() if m_frame is None else m_frame
        C, n = in_frame(final, m_frame, torch.float64)
        gen = torch.Generator(device="cuda").manual_seed(1)
        loss = sum((t.double() * torch.randn(t.shape, generator=gen, device="cuda", dtype=torch.float64)).sum()
                   for t in (h, C, n))
        loss.backward()
        results = {"h": h, "C": C, "n": n} | {f"d{name}": t.grad for name, t in leaves.items()}
        return results | {f"d{name}0": t.grad for name, t in zip("Cnm", state_leaves)}, m_frame
