"""The mixer contract's checks, one function each, on a mixer and an input; `check_mixer`
(mixer_suite.py) runs them all, on drawn inputs too. The project runs them over the whole registry.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Iterable, Sequence

import torch
from torch.overrides import TorchFunctionMode

from ..registry import get_mixer
from .reports import CheckSkipped
from .tolerances import assert_close
from .trees import tensors_in


def make_mixer(mixer: str | type, d_model: int = 32, seed: int = 0, **options: Any) -> torch.nn.Module:
    """An fp32 mixer from a registered name (with its test options) or a class, seeded.

    Args:
        mixer: a registered name or a mixer class.
        d_model: its width.
        seed: the torch seed its weights are drawn with.
        **options: its options, over a registered name's test options.

    Returns:
        The mixer, fp32, on the CPU.
    """
    if isinstance(mixer, str):
        entry = get_mixer(mixer)
        mixer, options = entry.cls, {**entry.test_options, **options}
    torch.manual_seed(seed)
    return mixer(d_model, **options).float()


def state_numel(state: Any) -> int:
    """Total elements of all tensors in a state (dataclass, tuple, list or dict of tensors).

    Args:
        state: a state, or None.

    Returns:
        The number of elements.
    """
    return sum(t.numel() for t in tensors_in(state))


def run_in_pieces(mixer: torch.nn.Module, x: torch.Tensor, pieces: Iterable[int], state: Any = None):
    """Feed x (B, T, ...) through a streaming module (a mixer, or a model on token ids) piece by
    piece along dim 1, threading the state; returns (the outputs concatenated along dim 1, state).

    Args:
        mixer: called as mixer(piece, state=state, return_state=True).
        x: (B, T, ...) input.
        pieces: piece lengths summing to T.
        state: the state to start from; None: empty.

    Returns:
        The pair (y, state): the outputs concatenated along dim 1, and the state after the last
            piece.
    """
    outputs = []
    for piece in x.split(list(pieces), dim=1):
        y, state = mixer(piece, state=state, return_state=True)
        outputs.append(y)
    return torch.cat(outputs, dim=1), state


def prefill_then_decode(length: int, prefill: int, piece: int) -> list[int]:
    """Piece lengths for a prompt of `prefill` tokens read `piece` at a time, then decoding one by one.

    Args:
        length: total tokens T.
        prefill: tokens of the prompt, <= length.
        piece: tokens per prefill call, >= 1.

    Returns:
        Piece lengths summing to length.
    """
    chunks = [min(piece, prefill - start) for start in range(0, prefill, piece)]
    return chunks + [1] * (length - prefill)


def check_shapes(mixer: torch.nn.Module, x: torch.Tensor) -> None:
    """(B, T, d_model) in -> same shape and dtype out, with or without return_state.

    Args:
        mixer: the mixer under test (a Mixer, or any module with the mixer contract).
        x: (B, T, d_model) input in the mixer's dtype.

    Raises:
        AssertionError: the output's shape or dtype is not the input's, return_state=True changes
            the output or returns no state.
    """
    y = mixer(x)
    if y.shape != x.shape or y.dtype != x.dtype:
        raise AssertionError(f"output {tuple(y.shape)} {y.dtype} != input {tuple(x.shape)} {x.dtype}")
    y_state, state = mixer(x, return_state=True)
    assert_close(y_state, y, what="output with return_state=True")
    if state is None:
        raise AssertionError("return_state=True returned no state")


def check_streaming(mixer: torch.nn.Module, x: torch.Tensor, pieces: list[int]) -> None:
    """Any split into pieces with the state threaded through equals one call; so does init_state.

    Args:
        mixer: the mixer under test (a Mixer, or any module with the mixer contract).
        x: (B, T, d_model) input in the mixer's dtype.
        pieces: piece lengths summing to T.

    Raises:
        AssertionError: a streamed output, or the output from init_state, differs from one call's;
            or the final states differ in size.
    """
    full, full_state = mixer(x, return_state=True)
    streamed, streamed_state = run_in_pieces(mixer, x, pieces)
    assert_close(streamed, full, x.dtype, what=f"output streamed in pieces {pieces}", scale=10)
    from_init, _ = mixer(x, state=mixer.init_state(x.shape[0]), return_state=True)
    assert_close(from_init, full, x.dtype, what="output from init_state()")
    if state_numel(streamed_state) != state_numel(full_state):
        raise AssertionError("streamed and one-call final states differ in size")


def check_empty_inputs(mixer: torch.nn.Module, x: torch.Tensor) -> None:
    """Calls without tokens work: T = 0 and B = 0 give empty outputs of the input's shape and dtype;
    T = 0 passes a state on unchanged (continuing from it equals continuing from the state given)
    and from no state gives the empty state; a batch of none holds no state elements.

    Args:
        mixer: the mixer under test (a Mixer, or any module with the mixer contract).
        x: (B, T, d_model) input in the mixer's dtype.

    Raises:
        AssertionError: one of these does not hold.
    """
    for empty in (x[:, :0], x[:0], x[:0, :0]):
        y, state = mixer(empty, return_state=True)
        if y.shape != empty.shape or y.dtype != x.dtype:
            raise AssertionError(f"input {tuple(empty.shape)} gave output {tuple(y.shape)} {y.dtype}")
        if not empty.shape[0] and state_numel(state):
            raise AssertionError("a batch of 0 sequences returned a state with elements")
        y, _ = mixer(empty, state=state, return_state=True)  # and the state it returned takes calls
        if y.shape != empty.shape:
            raise AssertionError(f"input {tuple(empty.shape)} after an empty call gave output {tuple(y.shape)}")
    half = max(x.shape[1] // 2, 1)
    head, tail = x[:, :half], x[:, half:]
    _, state = mixer(head, return_state=True)
    _, passed_on = mixer(x[:, :0], state=state, return_state=True)
    assert_close(mixer(tail, state=passed_on), mixer(tail, state=state), x.dtype, what="continuing after an empty call")
    _, empty_state = mixer(x[:, :0], return_state=True)
    assert_close(mixer(head, state=empty_state), mixer(head), x.dtype, what="starting from the state of an empty call")


def check_reentrant(mixer: torch.nn.Module, x: torch.Tensor) -> None:
    """A state is a value: using it twice gives the same output (nothing is updated in place).

    Args:
        mixer: the mixer under test (a Mixer, or any module with the mixer contract).
        x: (B, T, d_model) input in the mixer's dtype.

    Raises:
        AssertionError: the second use of a state gives another output.
    """
    half = max(x.shape[1] // 2, 1)
    _, state = mixer(x[:, :half], return_state=True)
    rest = x[:, half:] if x.shape[1] > half else x[:, :1]
    first = mixer(rest, state=state)
    second = mixer(rest, state=state)
    if not torch.equal(first, second):
        raise AssertionError("reusing a state gave a different output: the mixer changed it in place")


def check_state_size(mixer: torch.nn.Module, x: torch.Tensor) -> None:
    """state_size(T) counts the elements of the state after T tokens, per sequence.

    Args:
        mixer: the mixer under test (a Mixer, or any module with the mixer contract).
        x: (B, T, d_model) input in the mixer's dtype.

    Raises:
        AssertionError: state_size(t) is not the state's elements per sequence after t tokens, or
            decreases with t.
    """
    batch, length, _ = x.shape
    for t in sorted({1, length // 2 or 1, length}):
        _, state = mixer(x[:, :t], return_state=True)
        per_sequence = state_numel(state) // batch
        if per_sequence != mixer.state_size(t):
            raise AssertionError(f"state_size({t}) = {mixer.state_size(t)} but the state holds {per_sequence} elements per sequence")
    sizes = [mixer.state_size(t) for t in (0, 1, 8, 64, 4096)]
    if any(b < a for a, b in zip(sizes, sizes[1:])):
        raise AssertionError(f"state_size decreases with length: {sizes}")


def check_state_contract(mixer: torch.nn.Module, x: torch.Tensor,
                         dtypes: Sequence[torch.dtype] = (torch.float32, torch.bfloat16)) -> None:
    """In each dtype (of the weights and the input), init_state(B) is the state a call returns, in
    kind: the same tensors with the same dtypes, devices and batch (B rows first); and
    state_size(0) is the size of an empty state.

    Args:
        mixer: the mixer under test (a Mixer, or any module with the mixer contract).
        x: (B, T, d_model) input in the mixer's dtype.
        dtypes: the dtypes the mixer is checked in (a copy where it is not x's).

    Raises:
        AssertionError: init_state's tensors differ in number, dtype, device or rows from a returned
            state's, or state_size(0) is not an empty state's size.
    """
    batch = x.shape[0]
    for dtype in dtypes:
        module = mixer if dtype == x.dtype else copy.deepcopy(mixer).to(dtype)
        _, returned = module(x.to(dtype), return_state=True)
        got, want = tensors_in(module.init_state(batch)), tensors_in(returned)
        if len(got) != len(want):
            raise AssertionError(f"{dtype}: init_state({batch}) holds {len(got)} tensors, a returned state {len(want)}")
        for index, (a, b) in enumerate(zip(got, want)):
            if (a.dtype, a.device) != (b.dtype, b.device) or a.shape[:1] != b.shape[:1]:
                raise AssertionError(f"{dtype}: init_state({batch}) tensor {index} is {tuple(a.shape)} {a.dtype} on "
                                     f"{a.device}, a returned state's {tuple(b.shape)} {b.dtype} on {b.device}")
    _, empty = mixer(x[:, :0], return_state=True)
    if state_numel(empty) // max(batch, 1) != mixer.state_size(0):
        raise AssertionError(f"state_size(0) = {mixer.state_size(0)} but an empty state holds "
                             f"{state_numel(empty) // max(batch, 1)} elements per sequence")


def check_causality(mixer: torch.nn.Module, x: torch.Tensor, position: int) -> None:
    """Changing the tokens from `position` on leaves every earlier output bit-identical: in one
    call, in a padded batch (attention_mask) and in packed sequences (cu_seqlens), so a leak
    through the mixer's own chunking, padding or packing shows too.

    Args:
        mixer: the mixer under test (a Mixer, or any module with the mixer contract).
        x: (B, T, d_model) input in the mixer's dtype.
        position: the first changed token, 0 <= position < T.

    Raises:
        AssertionError: an earlier output changed.
    """
    changed = x.clone()
    changed[:, position:] = torch.randn(changed[:, position:].shape, generator=torch.Generator().manual_seed(11)).to(x.dtype)
    head = slice(0, position)
    if not torch.equal(mixer(changed)[:, head], mixer(x)[:, head]):
        raise AssertionError(f"changing the tokens from position {position} on changed an earlier output")
    mask = torch.ones(x.shape[:2], dtype=torch.long)
    mask[0, :1] = 0  # a padded batch: row 0 starts one token later
    if x.shape[1] > 1 and not torch.equal(mixer(changed, attention_mask=mask)[:, head], mixer(x, attention_mask=mask)[:, head]):
        raise AssertionError(f"in a padded batch, changing the tokens from position {position} on changed an earlier output")
    rows = x.shape[0]
    offsets = torch.arange(0, rows * x.shape[1] + 1, x.shape[1])
    packed = mixer(x.reshape(1, -1, x.shape[-1]), cu_seqlens=offsets).reshape(x.shape)
    packed_changed = mixer(changed.reshape(1, -1, x.shape[-1]), cu_seqlens=offsets).reshape(x.shape)
    if not torch.equal(packed_changed[:, head], packed[:, head]):
        raise AssertionError(f"in packed sequences, changing the tokens from position {position} of each on "
                             "changed an earlier output (of its own sequence or of one before it)")


def check_batch_independence(mixer: torch.nn.Module, x: torch.Tensor) -> None:
    """Each row's output is its own: the same alone, in the batch, and in the batch reversed.

    Args:
        mixer: the mixer under test (a Mixer, or any module with the mixer contract).
        x: (B, T, d_model) input in the mixer's dtype.

    Raises:
        AssertionError: a row's output in the batch differs from its output alone.
    """
    together = mixer(x)
    reversed_rows = mixer(x.flip(0)).flip(0)
    for index in range(x.shape[0]):
        alone = mixer(x[index:index + 1])[0]
        assert_close(together[index], alone, x.dtype, what=f"row {index} in a batch of {x.shape[0]} against alone")
        assert_close(reversed_rows[index], alone, x.dtype, what=f"row {index} in the batch reversed against alone")


def check_reference(mixer: torch.nn.Module, x: torch.Tensor, reference: Callable[[torch.nn.Module, torch.Tensor], torch.Tensor],
                    dtypes: Sequence[torch.dtype] = (torch.float64, torch.float32, torch.bfloat16)) -> None:
    """The mixer against a reference of what it computes, `reference(mixer, x) -> y`, which is
    called on copies in fp64: for each dtype, the mixer in that dtype (weights and input) against
    the reference on the same values in fp64, at the dtype's tolerance. A mixer that computes in
    less precision than its inputs (bf16 inside an fp32 call) fails at fp32.

    Args:
        mixer: the mixer under test (a Mixer, or any module with the mixer contract).
        x: (B, T, d_model) input in the mixer's dtype.
        reference: reference(mixer, x) -> y (B, T, d_model), called in fp64.
        dtypes: the dtypes the mixer runs in.

    Raises:
        AssertionError: the output in a dtype is farther from the reference than that dtype's tolerance.
    """
    for dtype in dtypes:
        low = copy.deepcopy(mixer).to(dtype)
        x_low = x.to(dtype)
        expected = reference(copy.deepcopy(low).double(), x_low.double())
        assert_close(low(x_low).double(), expected, dtype, what=f"{dtype} output against the reference in fp64")


def check_gradients(mixer: torch.nn.Module, x: torch.Tensor) -> None:
    """Backward through one call and through a streamed call gives finite gradients everywhere.

    Args:
        mixer: the mixer under test (a Mixer, or any module with the mixer contract).
        x: (B, T, d_model) input in the mixer's dtype.

    Raises:
        AssertionError: the input's gradient, or a parameter's, is missing or not finite.
    """
    x = x.detach().clone().requires_grad_(True)
    mixer.zero_grad(set_to_none=True)
    half = max(x.shape[1] // 2, 1)
    y, _ = run_in_pieces(mixer, x, [half, x.shape[1] - half] if x.shape[1] > half else [half])
    (y.float() ** 2).mean().backward()
    if x.grad is None or not torch.isfinite(x.grad).all():
        raise AssertionError("the input gradient is missing or not finite")
    for name, parameter in mixer.named_parameters():
        if parameter.requires_grad and (parameter.grad is None or not torch.isfinite(parameter.grad).all()):
            raise AssertionError(f"parameter {name!r} got no finite gradient")


def padded_batch(rows: list[torch.Tensor], side: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequences (T_i, ...) -> a batch (B, max T_i, ...) padded with noise on the `side` ("left" or
    "right") and its attention_mask (B, max T_i), 1 at real tokens. Noise, not zeros, so that a
    pad that leaked anywhere would show.

    Args:
        rows: B sequences (T_i, ...), of one dtype (integer rows get integer noise).
        side: "left" or "right".

    Returns:
        The pair (batch, attention_mask): (B, max T_i, ...) in the rows' dtype, and (B, max T_i)
            int64.
    """
    length = max(len(row) for row in rows)
    batch = torch.randn(len(rows), length, *rows[0].shape[1:], generator=torch.Generator().manual_seed(7))
    batch = batch.to(rows[0].dtype) if rows[0].is_floating_point() else batch.abs().mul(10).long()
    mask = torch.zeros(len(rows), length, dtype=torch.long)
    for index, row in enumerate(rows):
        place = slice(length - len(row), length) if side == "left" else slice(0, len(row))
        batch[index, place], mask[index, place] = row, 1
    return batch, mask


def check_padding(mixer: torch.nn.Module, x: torch.Tensor, lengths: list[int], decode: int = 3) -> None:
    """A padded batch equals its rows one by one, padded on either side: each row's outputs at its
    real tokens (zeros at the padding), and then `decode` more tokens continued from the batch's
    state equal those continued from the row's own state (pieces of one token: decoding).

    Args:
        mixer: the mixer under test.
        x: (B, T, d_model) with T >= max(lengths) + decode; row b is x[b, :lengths[b]].
        lengths: B row lengths, each >= 1.
        decode: tokens decoded after the batch.

    Raises:
        AssertionError: a padded row's outputs, or its decoding after the batch, differ from the
            row's alone, or the padding's outputs are not zero.
    """
    rows = [x[index, :length] for index, length in enumerate(lengths)]
    after = x[:, max(lengths):max(lengths) + decode]
    alone = [mixer(row[None], return_state=True) for row in rows]
    for side in ("left", "right"):
        batch, mask = padded_batch(rows, side)
        y, state = mixer(batch, attention_mask=mask, return_state=True)
        if bool(y[mask == 0].any()):
            raise AssertionError(f"{side}-padded batch: the padding's outputs are not zero")
        for index, (length, (expected, _)) in enumerate(zip(lengths, alone)):
            assert_close(y[index][mask[index] == 1], expected[0], x.dtype, what=f"{side}-padded row {index} ({length} tokens)")
        continued, _ = run_in_pieces(mixer, after, [1] * after.shape[1], state)
        for index, (_, row_state) in enumerate(alone):
            expected, _ = run_in_pieces(mixer, after[index:index + 1], [1] * after.shape[1], row_state)
            assert_close(continued[index], expected[0], x.dtype, what=f"decoding after a {side}-padded row {index}")


def check_packing(mixer: torch.nn.Module, x: torch.Tensor, lengths: list[int], decode: int = 3) -> None:
    """Sequences packed into one row with cu_seqlens equal each run alone: outputs, and `decode`
    more tokens per sequence continued from the packed call's state (one stream per sequence).

    Args:
        mixer: the mixer under test.
        x: (N, T, d_model) with T >= max(lengths) + decode; sequence n is x[n, :lengths[n]].
        lengths: N sequence lengths, each >= 1.
        decode: tokens decoded after the packed call.

    Raises:
        AssertionError: a packed sequence's outputs, or its decoding after the packed call, differ
            from the sequence's alone.
    """
    rows = [x[index, :length] for index, length in enumerate(lengths)]
    packed = torch.cat(rows)[None]
    cu_seqlens = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()])
    y, state = mixer(packed, cu_seqlens=cu_seqlens, return_state=True)
    after = x[:, max(lengths):max(lengths) + decode]
    continued, _ = run_in_pieces(mixer, after, [1] * after.shape[1], state)
    for index, (row, start) in enumerate(zip(rows, cu_seqlens.tolist())):
        expected, row_state = mixer(row[None], return_state=True)
        assert_close(y[0, start:start + len(row)], expected[0], x.dtype, what=f"packed sequence {index} ({len(row)} tokens)")
        expected, _ = run_in_pieces(mixer, after[index:index + 1], [1] * after.shape[1], row_state)
        assert_close(continued[index], expected[0], x.dtype, what=f"decoding after packed sequence {index}")


def check_dtypes(mixer: torch.nn.Module, x: torch.Tensor, dtype: torch.dtype = torch.bfloat16) -> None:
    """In `dtype` (weights and input) the output keeps that dtype and stays close to fp32.

    Args:
        mixer: the mixer under test, fp32 (cast to dtype for the check, then back to fp32).
        x: (B, T, d_model) input; its fp32 copy gives the yardstick.
        dtype: the low-precision dtype.

    Raises:
        AssertionError: the output is of another dtype or farther from fp32 than the dtype's
            tolerance (times 3).
    """
    reference = mixer(x.float())
    low = mixer.to(dtype)
    try:
        y = low(x.to(dtype))
    finally:
        mixer.float()
    if y.dtype != dtype:
        raise AssertionError(f"{dtype} input gave a {y.dtype} output")
    assert_close(y.float(), reference, dtype, what=f"{dtype} output vs fp32", scale=3)


def check_precision(mixer: torch.nn.Module, x: torch.Tensor, gradients: bool = False) -> None:
    """An fp32 call computes in fp32 at least: no torch function inside it returns a float tensor
    narrower than fp32 (a cast to bf16, autocast), and its output equals that of the mixer's copy
    cast to fp64 (the same weights, on x in fp64) at fp32's tolerance, which also sees precision
    lost where no tensor shows it (inside a compiled kernel, or in code that runs only for fp32).
    With `gradients`, the gradients of the input and of every parameter are compared too, at 10
    times that tolerance (a backward sums many rounding errors).

    Args:
        mixer: the mixer under test, fp32.
        x: (B, T, d_model) fp32 input.
        gradients: also compare the gradients of one call.

    Raises:
        AssertionError: the call returns a narrower float tensor somewhere, or its output or a
            gradient is farther from the fp64 copy's than fp32's tolerance.
        CheckSkipped: the fp64 copy does not run (a kernel without fp64), so there is nothing more
            precise to compare with; the watch for narrower tensors has passed.
    """
    with NarrowFloats() as narrow:
        y = mixer(x)
    if narrow.first is not None:
        raise AssertionError(f"an fp32 call computes in {narrow.first}")
    double = copy.deepcopy(mixer).double()
    try:
        expected = double(x.double())
        cotangent = torch.randn(expected.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
        expected_gradients = gradients_of(double, x.double(), cotangent) if gradients else {}
    except Exception as error:
        reason = str(error).splitlines()[0] if str(error) else ""
        raise CheckSkipped(f"its fp64 copy does not run: {type(error).__name__}: {reason}") from error
    assert_close(y, expected, torch.float32, what="fp32 output against the same weights in fp64")
    for name, gradient in (gradients_of(mixer, x, cotangent.float()) if gradients else {}).items():
        assert_close(gradient, expected_gradients[name], torch.float32, scale=10,
                     what=f"the fp32 gradient of {name} against the fp64 copy's")


class NarrowFloats(TorchFunctionMode):
    """Inside it, `first` names the first torch function that returned a float tensor narrower
    than fp32: "bfloat16 (to() returned one)"; None while none has."""

    def __init__(self) -> None:
        super().__init__()
        self.first: str | None = None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if self.first is None:
            narrow = [t.dtype for t in tensors_in(result) if t.is_floating_point() and torch.finfo(t.dtype).bits < 32]
            if narrow:
                name = str(narrow[0]).removeprefix("torch.")
                self.first = f"{name} ({getattr(func, '__name__', func)}() returned one)"
        return result


def gradients_of(mixer: torch.nn.Module, x: torch.Tensor, cotangent: torch.Tensor) -> dict[str, torch.Tensor]:
    """The gradients of sum(mixer(x) * cotangent) in x and in each parameter that takes one, by
    name ("the input", "parameter 'out.weight'", ...); zeros where the output does not depend on it."""
    parameters = {f"parameter {name!r}": p for name, p in mixer.named_parameters() if p.requires_grad}
    inputs = [x.detach().clone().requires_grad_(True), *parameters.values()]
    with torch.enable_grad():
        found = torch.autograd.grad((mixer(inputs[0]) * cotangent).sum(), inputs, allow_unused=True)
    return {name: torch.zeros_like(t) if g is None else g for name, t, g in zip(["the input", *parameters], inputs, found)}
