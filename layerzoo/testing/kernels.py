"""Conformance checks any kernel family must pass: the kernel-level twin of `check_mixer`.

Describe a family once with a KernelFamily (how to draw its inputs, how to run one streaming call),
then check a backend of it::

    from layerzoo.testing import check_kernel_family
    check_kernel_family(MY_FAMILY, "chunkwise")

Each check also runs on its own on a drawn case (`kernel_cases`, `packed_cases` for packed
sequences); the project runs them under hypothesis over every built-in family and backend
(tests/kernels/test_kernel_conformance.py).
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import hypothesis
import torch
from hypothesis import given
from hypothesis import strategies as st

from .reports import Report, bounded_settings, failing_check, shapes_of
from .tolerances import assert_close
from .trees import map_tensors, tensors_in

Inputs = dict[str, torch.Tensor]


@dataclass(frozen=True)
class KernelCase:
    """One call's worth of a family's inputs.

    Attributes:
        inputs: name -> tensor (B, T, ...), the sequence along dim 1.
        state: an initial state reachable by the family's recurrence, its tensors batch first, or
            None (the empty state).
        options: the call's other arguments (chunk_size, window...).
    """

    inputs: Inputs
    state: Any
    options: dict[str, Any] = field(default_factory=dict)


def _all_tensors(state: Any, like: Any) -> list[torch.Tensor]:
    return tensors_in(state)


def _whole(state: Any) -> Any:
    return state


def _rows_joined(states: list[Any]) -> Any:
    """States of one sequence each, as one state with a row per sequence (tensors concatenated)."""
    joined = iter([torch.cat(parts) for parts in zip(*(tensors_in(state) for state in states))])
    return map_tensors(lambda _: next(joined), states[0])


@dataclass(frozen=True)
class KernelFamily:
    """How the kernel checks drive one family.

    Attributes:
        name: the family's name in reports.
        cases: cases(batch, length, dtype): a hypothesis strategy of KernelCase with inputs of
            that size and dtype and a drawn state (never None) of that batch size.
        run: run(inputs, state, backend, options) -> (out (B, T, ...), final state): one streaming
            call, starting from `state` (None: the empty state), on the backend of that name.
        dtypes: the input dtypes the checks draw.
        comparable: comparable(state, like): the tensors by which `state` is compared with a state
            `like` it should equal (default: all of its tensors); e.g. mLSTM states, read in one
            stabiliser frame.
        free_length: inputs whose length need not match the others' (attention's queries).
        same_dtype: inputs that must share one dtype.
        checked_state: checked_state(state): the part of the state the kernel takes and validates
            (default: all of it), or None where the state is the caller's (attention's key cache).
        packs: whether the kernel takes packed sequences: with options["cu_seqlens"] (fla's
            convention), run takes inputs (1, T, ...) of N sequences one after another, a state of
            N rows (one per sequence, as `cases` draws for B = N) or None, and gives their outputs
            and final states.
        joined_states: joined_states(states): the final state of a packed call, from the final
            states of one call per sequence (default: their tensors concatenated, a row per
            sequence).
        reference: the backend that is the family's truth (a step loop, a dense mask), which the
            others are compared with in fp64; None for a family without one.
    """

    name: str
    cases: Callable[[int, int, torch.dtype], st.SearchStrategy[KernelCase]]
    run: Callable[[Inputs, Any, str, dict], tuple[torch.Tensor, Any]]
    dtypes: Sequence[torch.dtype] = (torch.float32, torch.float64)
    comparable: Callable[[Any, Any], list[torch.Tensor]] = _all_tensors
    free_length: Sequence[str] = ()
    same_dtype: Sequence[str] = ()
    checked_state: Callable[[Any], Any] | None = _whole
    packs: bool = True
    joined_states: Callable[[list[Any]], Any] = _rows_joined
    reference: str | None = "reference"


@st.composite
def kernel_cases(draw, family: KernelFamily, dtypes: Sequence[torch.dtype] | None = None, max_batch: int = 2,
                 min_length: int = 1, max_length: int = 12, initial_state: bool | None = None) -> KernelCase:
    """A KernelCase of `family` with B in [1, max_batch], T in [min_length, max_length] and a dtype
    of `dtypes` (default family.dtypes); with its drawn initial state, without it (None), or
    either (initial_state None).

    Args:
        family: the KernelFamily.
        dtypes: the input dtypes to draw from; None: family.dtypes.
        max_batch: the most sequences B.
        min_length: the fewest tokens T.
        max_length: the most tokens T.
        initial_state: True: with the drawn state; False: None; None: either.

    Returns:
        A strategy of KernelCase (a hypothesis composite: hypothesis passes `draw`).
    """
    batch = draw(st.integers(1, max_batch))
    length = draw(st.integers(min_length, max_length))
    case = draw(family.cases(batch, length, draw(st.sampled_from(list(dtypes or family.dtypes)))))
    keep = draw(st.booleans()) if initial_state is None else initial_state
    return case if keep else dataclasses.replace(case, state=None)


def check_kernel_streaming(family: KernelFamily, case: KernelCase, backend: str, split: int) -> None:
    """Two calls, the second starting from the first's final state, equal one call: the sequence
    cut at `split` (0 <= split <= T); outputs and final states.

    Args:
        family: the KernelFamily.
        case: a KernelCase of it (kernel_cases draws them).
        backend: the backend's name.
        split: where the sequence is cut, 0 <= split <= T.

    Raises:
        AssertionError: the two calls' output or final state differs from one call's.
    """
    run = _runner(family, case, backend)
    full, full_state = run(case.inputs, case.state)
    first, middle = run(_steps(case.inputs, slice(0, split)), case.state)
    second, final = run(_steps(case.inputs, slice(split, None)), middle)
    what = f"{family.name} {backend}, split at {split} of {_length(case)}"
    assert_close(torch.cat((first, second), dim=1), full, what=f"{what}: output", scale=10)
    _assert_states_close(family, final, full_state, f"{what}: final state", scale=10)


def check_kernel_empty_inputs(family: KernelFamily, case: KernelCase, backend: str) -> None:
    """Calls without tokens work: T = 0 and B = 0 give empty outputs (of the dtype and trailing
    dims a call with tokens gives) and batch-first states of B sequences; T = 0 passes the state on
    unchanged, gradients included, and from no state gives the empty state.

    Args:
        family: the KernelFamily.
        case: a KernelCase of it (kernel_cases draws them).
        backend: the backend's name.

    Raises:
        AssertionError: an empty call's output or state has the wrong shape or dtype, does not pass
            the state on, or no gradient reaches the initial state.
    """
    run = _runner(family, case, backend)
    out, _ = run(case.inputs, case.state)
    no_batch = None if case.state is None else map_tensors(lambda t: t[:0], case.state)
    for label, inputs, state in (("T = 0", _steps(case.inputs, slice(0, 0)), case.state),
                                 ("B = 0", _batch(case.inputs, 0), no_batch),
                                 ("B = T = 0", _steps(_batch(case.inputs, 0), slice(0, 0)), no_batch)):
        y, final = run(inputs, state)
        batch, length = next(iter(inputs.values())).shape[:2]
        expected = (batch, length, *out.shape[2:])
        what = f"{family.name} {backend}, {label}"
        if tuple(y.shape) != expected or y.dtype != out.dtype:
            raise AssertionError(f"{what}: output {tuple(y.shape)} {y.dtype}, expected {expected} {out.dtype}")
        shapes = [tuple(t.shape) for t in tensors_in(final)]
        if any(shape[0] != batch for shape in shapes):
            raise AssertionError(f"{what}: state shapes {shapes} are not of {batch} sequences")
    no_steps = _steps(case.inputs, slice(0, 0))
    _, empty = run(no_steps, None)
    from_empty, from_empty_state = run(case.inputs, empty)
    from_none, from_none_state = run(case.inputs, None)
    assert_close(from_empty, from_none, what=f"{family.name} {backend}: output after the state of an empty call")
    _assert_states_close(family, from_empty_state, from_none_state, f"{family.name} {backend}: state after an empty call's")
    if case.state is None:
        return
    leaves = map_tensors(lambda t: t.detach().clone().requires_grad_(t.is_floating_point()), case.state)
    _, passed_on = run(no_steps, leaves)
    _assert_states_close(family, passed_on, case.state, f"{family.name} {backend}: state passed on by T = 0")
    sum(t.double().sum() for t in tensors_in(passed_on) if t.requires_grad).backward()
    if any(t.requires_grad and t.grad is None for t in tensors_in(leaves)):
        raise AssertionError(f"{family.name} {backend}: no gradient reaches the initial state through a call of T = 0")


def check_kernel_reference(family: KernelFamily, case: KernelCase, backend: str) -> None:
    """The backend against the family's reference backend run in fp64 on the same values: the
    output, the final state and the gradients of every input and of the initial state, at the
    tolerance of the case's dtype (gradients, sums of many rounded products, at 10x), so a kernel
    that computes something else (a scale ignored, a gate off by one) or in less precision than
    its inputs fails.

    Args:
        family: the KernelFamily.
        case: a KernelCase of it (kernel_cases draws them).
        backend: the backend's name.

    Raises:
        AssertionError: the output, final state or a gradient is farther from the reference's than
            the case dtype's tolerance, or a gradient is missing where the reference has one.
    """
    if family.reference is None:
        return
    dtype = next(iter(case.inputs.values())).dtype
    what = f"{family.name} {backend} against {family.reference} in fp64"
    truth = _outputs_and_gradients(family, case, family.reference, torch.float64)
    got = _outputs_and_gradients(family, case, backend, None, like=truth[1])
    assert_close(got[0], truth[0], dtype, what=f"{what}: output")
    for index, (a, b) in enumerate(zip(family.comparable(got[1], truth[1]), family.comparable(truth[1], truth[1]))):
        assert_close(a, b, dtype, what=f"{what}: final state [{index}]", scale=10)
    for name, expected in truth[2].items():
        if (got[2][name] is None) != (expected is None):
            raise AssertionError(f"{what}: the gradient of {name} is {'missing' if got[2][name] is None else 'unexpected'}")
        if expected is not None:
            assert_close(got[2][name], expected, dtype, what=f"{what}: the gradient of {name}", scale=10)


def _outputs_and_gradients(family: KernelFamily, case: KernelCase, backend: str, to: torch.dtype | None,
                           like: Any = None) -> tuple[torch.Tensor, Any, dict[str, torch.Tensor | None]]:
    """(output, final state, {input or initial state tensor: its gradient}) of one call on the
    case's values (in `to`, when given), the gradients of a fixed random weighting of the output
    and the final state (compared as family.comparable(final, like), like default the final state)."""
    def leaf(t: torch.Tensor) -> torch.Tensor:
        t = t.to(to) if to is not None and t.is_floating_point() else t
        return t.detach().clone().requires_grad_(t.is_floating_point())

    inputs = {name: leaf(t) for name, t in case.inputs.items()}
    state = map_tensors(leaf, case.state)
    out, final = family.run(inputs, state, backend, case.options)
    targets = [out, *family.comparable(final, final if like is None else like)]
    generator = torch.Generator().manual_seed(0)
    loss = sum((t.double() * torch.randn(t.shape, generator=generator, dtype=torch.float64).to(t.device)).sum()
               for t in targets)
    if loss.requires_grad:
        loss.backward()
    named = {**inputs, **{f"initial state [{i}]": t for i, t in enumerate(tensors_in(state))}}
    return out.detach(), map_tensors(torch.Tensor.detach, final), {name: t.grad for name, t in named.items()}


# Memory layouts with the values of a (B, T, ...) tensor: every other element of a wider last dim,
# and time-major storage (T, B, ...) seen as (B, T, ...).
LAYOUTS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "strided": lambda t: torch.stack((t, torch.zeros_like(t)), dim=-1)[..., 0],
    "time-major": lambda t: t.transpose(0, 1).contiguous().transpose(0, 1) if t.dim() > 1 else t,
}


def check_kernel_layouts(family: KernelFamily, case: KernelCase, backend: str) -> None:
    """Inputs and states in other memory layouts (strided, time-major) give the same outputs and
    final states as contiguous ones.

    Args:
        family: the KernelFamily.
        case: a KernelCase of it (kernel_cases draws them).
        backend: the backend's name.

    Raises:
        AssertionError: a layout changes the output or the final state.
    """
    run = _runner(family, case, backend)
    expected, expected_state = run(case.inputs, case.state)
    for name, layout in LAYOUTS.items():
        inputs = {key: layout(t) for key, t in case.inputs.items()}
        out, state = run(inputs, map_tensors(layout, case.state))
        assert_close(out, expected, what=f"{family.name} {backend}, {name} inputs: output")
        _assert_states_close(family, state, expected_state, f"{family.name} {backend}, {name} inputs: final state")


def check_kernel_gradients(family: KernelFamily, case: KernelCase, backend: str) -> None:
    """Gradients of the output and the final state reach every input and the initial state:
    present, finite and, for random inputs, not all zero.

    Args:
        family: the KernelFamily.
        case: a KernelCase of it (kernel_cases draws them).
        backend: the backend's name.

    Raises:
        AssertionError: a gradient is missing, not finite or all zero.
    """
    leaves = {name: t.detach().clone().requires_grad_() for name, t in case.inputs.items()}
    state = map_tensors(lambda t: t.detach().clone().requires_grad_(), case.state)
    out, final = family.run(leaves, state, backend, case.options)
    generator = torch.Generator().manual_seed(0)
    targets = [out, *family.comparable(final, final)]
    loss = sum((t.double() * torch.randn(t.shape, generator=generator, dtype=torch.float64)).sum() for t in targets)
    loss.backward()
    named = {**leaves, **{f"initial state [{i}]": t for i, t in enumerate(tensors_in(state))}}
    for name, t in named.items():
        what = f"{family.name} {backend}: the gradient of {name} {tuple(t.shape)}"
        if t.grad is None:
            raise AssertionError(f"{what} is missing")
        if not torch.isfinite(t.grad).all():
            raise AssertionError(f"{what} is not finite")
        if t.numel() and not t.grad.any():
            raise AssertionError(f"{what} is all zero")


# Inputs no kernel takes: each must get a one-line ValueError.
MUTATIONS: dict[str, Callable[[torch.Tensor], Any]] = {
    "not a tensor": lambda t: t.tolist(),
    "one dim fewer": lambda t: t[..., 0],
    "one dim more": lambda t: t[..., None],
    "an integer dtype": lambda t: t.to(torch.int32),
    "another batch size": lambda t: t[:-1],
    "a last dim that does not fit": lambda t: t[..., :-1],
}
STATE_MUTATIONS = ("one dim fewer", "an integer dtype", "another batch size", "a last dim that does not fit")


def check_kernel_bad_inputs(family: KernelFamily, case: KernelCase, backend: str) -> None:
    """Every input and state tensor the kernel takes, made wrong in one way at a time (see
    MUTATIONS; also another length, and another dtype among same_dtype), gets a one-line
    ValueError.

    Args:
        family: the KernelFamily.
        case: a KernelCase of it (kernel_cases draws them).
        backend: the backend's name.

    Raises:
        AssertionError: a wrong input gets no error, another error, or a ValueError of several lines.
    """
    _, empty = family.run(_steps(case.inputs, slice(0, 0)), None, backend, case.options)
    for name, t in case.inputs.items():
        wrong = {f"{name} as {label}": mutate(t) for label, mutate in MUTATIONS.items()}
        if name not in family.free_length:
            wrong[f"{name} of another length"] = t[:, :-1]
        if name in family.same_dtype:
            other = torch.float32 if t.dtype == torch.float64 else torch.float64
            wrong[f"{name} in {other}"] = t.to(other)
        for what, value in wrong.items():
            _expect_value_error(family, backend, what, {**case.inputs, name: value}, empty, case.options)
    if family.checked_state is None:
        return
    state = empty if case.state is None else case.state
    for index, target in enumerate(tensors_in(family.checked_state(state))):
        for label in STATE_MUTATIONS:
            bad = map_tensors(lambda t: MUTATIONS[label](t) if t is target else t, state)
            _expect_value_error(family, backend, f"state tensor {index} as {label}", case.inputs, bad, case.options)


@st.composite
def packed_cases(draw, family: KernelFamily, dtypes: Sequence[torch.dtype] | None = None, max_sequences: int = 3,
                 max_length: int = 12) -> tuple[KernelCase, list[int]]:
    """(a KernelCase of B = N sequences, their lengths): N in [1, max_sequences], each length in
    [0, max_length], often 1; the case's inputs are max(lengths) long and row s keeps the first
    lengths[s] steps; with or without its drawn initial state.

    Args:
        family: the KernelFamily.
        dtypes: the input dtypes to draw from; None: family.dtypes.
        max_sequences: the most sequences N.
        max_length: the longest sequence.

    Returns:
        A strategy of (KernelCase, lengths) pairs (a hypothesis composite: hypothesis passes
            `draw`).
    """
    lengths = draw(st.lists(st.one_of(st.just(1), st.integers(0, max_length)), min_size=1, max_size=max_sequences))
    case = draw(family.cases(len(lengths), max(lengths), draw(st.sampled_from(list(dtypes or family.dtypes)))))
    return (case if draw(st.booleans()) else dataclasses.replace(case, state=None)), lengths


def check_kernel_packed(family: KernelFamily, case: KernelCase, backend: str, lengths: Sequence[int],
                        offsets_dtype: torch.dtype = torch.int64) -> None:
    """One call on packed sequences (cu_seqlens; see KernelFamily.packs) equals one call per
    sequence: outputs, final states (with autograd recording and without), and the gradients of
    both with respect to every input and the initial state.

    Args:
        family: the KernelFamily.
        case: a KernelCase of N rows (packed_cases draws it with the lengths).
        backend: the backend's name.
        lengths: N sequence lengths, each in [0, T]; row s of the case's inputs, its first
            lengths[s] steps, is sequence s.
        offsets_dtype: the dtype of cu_seqlens (int32 or int64).

    Raises:
        AssertionError: the packed call's output, final state or a gradient differs from those of
            one call per sequence.
    """
    generator = torch.Generator().manual_seed(0)
    device = next(iter(case.inputs.values())).device
    offsets = torch.tensor([0, *itertools.accumulate(lengths)], dtype=offsets_dtype, device=device)

    def leaves():
        inputs = {name: t.detach().clone().requires_grad_() for name, t in case.inputs.items()}
        return inputs, map_tensors(lambda t: t.detach().clone().requires_grad_(), case.state)

    def backward(out, final, frame):
        targets = [out, *family.comparable(final, frame)]
        weights = [torch.randn(t.shape, generator=generator.manual_seed(index), dtype=torch.float64).to(t.device)
                   for index, t in enumerate(targets)]
        loss = sum((t.double() * w).sum() for t, w in zip(targets, weights))
        if loss.requires_grad:  # not when no sequence has a token and no state was given
            loss.backward()

    alone, alone_state = leaves()
    outputs, finals = [], []
    for index, length in enumerate(lengths):
        inputs = {name: t[index:index + 1, :length] for name, t in alone.items()}
        out, final = family.run(inputs, map_tensors(lambda t: t[index:index + 1], alone_state), backend, case.options)
        outputs.append(out)
        finals.append(final)
    expected, expected_state = torch.cat(outputs, dim=1), family.joined_states(finals)
    backward(expected, expected_state, expected_state)

    packed, packed_state = leaves()
    inputs = _packed(packed, lengths)
    out, final = family.run(inputs, packed_state, backend, {**case.options, "cu_seqlens": offsets})
    what = f"{family.name} {backend}, sequences of {list(lengths)}"
    assert_close(out, expected, what=f"{what}: output", scale=10)
    _assert_states_close(family, final, expected_state, f"{what}: final state", scale=10)
    backward(out, final, expected_state)
    # Without autograd a kernel may run other code (a compiled forward): it must agree too.
    with torch.no_grad():
        out, final = family.run(_packed(case.inputs, lengths), case.state, backend, {**case.options, "cu_seqlens": offsets})
    assert_close(out, expected, what=f"{what}: output without autograd", scale=10)
    _assert_states_close(family, final, expected_state, f"{what}: final state without autograd", scale=10)
    named = [(name, packed[name], alone[name]) for name in packed]
    named += [(f"initial state [{i}]", a, b) for i, (a, b) in enumerate(zip(tensors_in(packed_state), tensors_in(alone_state)))]
    for name, got, want in named:
        if (got.grad is None) != (want.grad is None):
            raise AssertionError(f"{what}: the gradient of {name} is {'missing' if got.grad is None else 'unexpected'}")
        if got.grad is not None:
            assert_close(got.grad, want.grad, what=f"{what}: the gradient of {name}", scale=10)


def check_kernel_bad_offsets(family: KernelFamily, case: KernelCase, backend: str, lengths: Sequence[int]) -> None:
    """Packed calls with malformed cu_seqlens (see OFFSETS_MUTATIONS), with a batch of two rows, or
    with an initial state whose rows are not one per sequence, get one-line ValueErrors.

    Args:
        family: the KernelFamily.
        case: a KernelCase of N rows (packed_cases draws it with the lengths).
        backend: the backend's name.
        lengths: N sequence lengths, as check_kernel_packed takes them.

    Raises:
        AssertionError: a malformed call gets no error, another error, or a ValueError of several lines.
    """
    offsets = torch.tensor([0, *itertools.accumulate(lengths)], device=next(iter(case.inputs.values())).device)
    inputs = _packed(case.inputs, lengths)
    for label, mutate in OFFSETS_MUTATIONS.items():
        _expect_value_error(family, backend, f"cu_seqlens as {label}", inputs, None,
                            {**case.options, "cu_seqlens": mutate(offsets)})
    options = {**case.options, "cu_seqlens": offsets}
    two_rows = {name: torch.cat((t, t)) for name, t in inputs.items()}
    _expect_value_error(family, backend, "cu_seqlens with two rows", two_rows, None, options)
    if family.checked_state is None or case.state is None:
        return
    for index, target in enumerate(tensors_in(family.checked_state(case.state))):
        bad = map_tensors(lambda t: t[:-1] if t is target else t, case.state)
        _expect_value_error(family, backend, f"cu_seqlens and state tensor {index} with a row too few", inputs, bad,
                            options)


# Offsets [0, l1, l1 + l2, ..., T] no kernel takes: each must get a one-line ValueError.
OFFSETS_MUTATIONS: dict[str, Callable[[torch.Tensor], Any]] = {
    "a list": lambda offsets: offsets.tolist(),
    "a float tensor": lambda offsets: offsets.double(),
    "a 2-d tensor": lambda offsets: offsets[None],
    "an empty tensor": lambda offsets: offsets[:0],
    "a meta tensor": lambda offsets: offsets.to("meta"),
    "not starting at 0": lambda offsets: torch.cat((offsets[:1] + 1, offsets[1:])),
    "not ending at T": lambda offsets: torch.cat((offsets[:-1], offsets[-1:] + 1)),
    "decreasing": lambda offsets: torch.cat((offsets[:1], offsets[-1:] + 1, offsets[1:])),
}


def check_kernel_family(family: KernelFamily, backend: str, dtypes: Sequence[torch.dtype] | None = None,
                        max_batch: int = 2, max_length: int = 12, max_examples: int | None = None,
                        max_sequences: int = 3, settings: hypothesis.settings | None = None) -> Report:
    """All kernel checks on one backend of a family (against the family's reference backend too),
    on cases of up to max_batch sequences (up to max_sequences packed ones) of up to max_length
    tokens in `dtypes` (default family.dtypes).

    Runs under `settings` when given (yours to choose), else under the active hypothesis
    profile's max_examples (or max_examples) with no deadline and no shrinking: a failure is
    reported at its first example, as one AssertionError naming the check, the case's shapes and
    what differed. Returns (and prints) a one-line report of what was checked.

    Args:
        family: the KernelFamily.
        backend: the backend's name, as family.run takes it.
        dtypes: the input dtypes drawn; None: family.dtypes.
        max_batch: the most sequences of a case.
        max_length: the most tokens of a sequence.
        max_examples: hypothesis examples, when settings is None; None: the active profile's.
        max_sequences: the most packed sequences of a case.
        settings: hypothesis settings to run under; None: the active profile's, bounded.

    Returns:
        The Report of what was checked.

    Raises:
        AssertionError: a check failed; one error naming it, the case's shapes and what differed.
    """
    sizes = {"dtypes": dtypes, "max_batch": max_batch, "max_length": max_length}
    checked = ["streaming", "empty inputs", "layouts", "bad inputs", "gradients"]
    checked += ["reference"] if family.reference is not None else []
    checked += ["packed", "bad offsets"] if family.packs else []
    start = time.perf_counter()

    @given(data=st.data())
    def checks(data):
        case = data.draw(kernel_cases(family, **sizes))
        split = data.draw(st.integers(0, _length(case)))
        with _named("streaming", family, backend, case):
            check_kernel_streaming(family, case, backend, split)
        with _named("empty inputs", family, backend, case):
            check_kernel_empty_inputs(family, case, backend)
        with _named("layouts", family, backend, case):
            check_kernel_layouts(family, case, backend)
        with _named("bad inputs", family, backend, case):
            check_kernel_bad_inputs(family, case, backend)
        case = data.draw(kernel_cases(family, min_length=2, initial_state=True, **sizes))
        with _named("gradients", family, backend, case):
            check_kernel_gradients(family, case, backend)
        if family.reference is not None:
            with _named("reference", family, backend, case):
                check_kernel_reference(family, case, backend)
        if family.packs:
            case, lengths = data.draw(packed_cases(family, dtypes, max_sequences, max_length))
            offsets_dtype = data.draw(st.sampled_from([torch.int32, torch.int64]))
            with _named(f"packed {list(lengths)}", family, backend, case):
                check_kernel_packed(family, case, backend, lengths, offsets_dtype)
                check_kernel_bad_offsets(family, case, backend, lengths)

    runs = settings or bounded_settings(max_examples)
    runs(checks)()
    return Report(f"check_kernel_family({family.name}, {backend!r})", checked, runs.max_examples,
                  time.perf_counter() - start).printed()


def _runner(family: KernelFamily, case: KernelCase, backend: str):
    return lambda inputs, state: family.run(inputs, state, backend, case.options)


def _steps(inputs: Inputs, steps: slice) -> Inputs:
    return {name: t[:, steps] for name, t in inputs.items()}


def _batch(inputs: Inputs, size: int) -> Inputs:
    return {name: t[:size] for name, t in inputs.items()}


def _packed(inputs: Inputs, lengths: Sequence[int]) -> Inputs:
    """Row s's first lengths[s] steps, the rows one after another: inputs (1, sum(lengths), ...)."""
    return {name: torch.cat([t[index:index + 1, :length] for index, length in enumerate(lengths)], dim=1)
            for name, t in inputs.items()}


def _length(case: KernelCase) -> int:
    return next(iter(case.inputs.values())).shape[1]


def _assert_states_close(family: KernelFamily, state: Any, like: Any, what: str, scale: float = 1.0) -> None:
    got, expected = family.comparable(state, like), family.comparable(like, like)
    if len(got) != len(expected):
        raise AssertionError(f"{what}: {len(got)} tensors, expected {len(expected)}")
    for index, (a, b) in enumerate(zip(got, expected)):
        assert_close(a, b, what=f"{what} [{index}]", scale=scale)


def _expect_value_error(family: KernelFamily, backend: str, what: str, inputs: Any, state: Any, options: dict) -> None:
    what = f"{family.name} {backend}: {what}"
    try:
        family.run(inputs, state, backend, options)
    except ValueError as error:
        if "\n" in str(error):
            raise AssertionError(f"{what}: the error has several lines: {error}") from error
        return
    except Exception as error:
        raise AssertionError(f"{what}: {type(error).__name__} instead of a one-line ValueError: {error}") from error
    raise AssertionError(f"{what}: no error")


def _named(check: str, family: KernelFamily, backend: str, case: KernelCase):
    """Failures inside the block reported as the check's, with the case's shapes."""
    return failing_check(f"{family.name} {backend}: {check}",
                         f"inputs {shapes_of(case.inputs)}, initial state {shapes_of(case.state)}, options {case.options}")
