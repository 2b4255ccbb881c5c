"""`check_mixer`: every contract check on one mixer, on a fixed input and on inputs hypothesis draws.

Run it on your own mixer after registering it (it needs the `test` extra, for hypothesis)::

    from layerzoo.testing import check_mixer
    check_mixer("my_mixer")                        # or check_mixer(MyMixer, d_model=32, n_heads=2)
    check_mixer("my_mixer", reference=my_dense)    # and against what it should compute, in fp64
"""

from __future__ import annotations

import time
from typing import Any, Callable

import hypothesis
import torch
from hypothesis import given
from hypothesis import strategies as st

from ..registry import get_mixer, read_options
from .conformance import (
    check_batch_independence, check_causality, check_dtypes, check_empty_inputs, check_gradients, check_packing,
    check_padding, check_precision, check_reentrant, check_reference, check_shapes, check_state_contract,
    check_state_size, check_streaming, make_mixer, prefill_then_decode,
)
from .reports import CheckSkipped, Report, bounded_settings, failing_check
from .strategies import sequence_splits

Reference = Callable[[torch.nn.Module, torch.Tensor], torch.Tensor]
WIDTHS = (16, 24, 32, 48, 64)  # the d_model hypothesis draws from, those the options allow


def check_mixer(mixer: str | type, d_model: int | None = None, batch: int = 2, length: int = 13, seed: int = 0,
                pieces: list[int] | None = None, reference: str | Reference | None = None,
                settings: hypothesis.settings | None = None, max_examples: int | None = None, **options: Any) -> Report:
    """All contract checks on one mixer: a registered name (with its test options) or a class,
    with `options` on top.

    First on one input (batch x length tokens of width d_model, default 32): shapes and dtypes,
    calls without tokens, streaming in `pieces` and in a prefill followed by one-token calls,
    re-entrant states, state sizes (state_size(0) too) and init_state, causality (bit-identical
    earlier outputs, padded and packed too), batch composition, bf16, padded and packed batches,
    gradients, and fp32 precision (check_precision: no tensor narrower than fp32 inside an fp32
    call, and its output and gradients within fp32's tolerance of the same weights run in fp64;
    skipped, with the reason in the report, for a mixer whose fp64 copy does not run). Then again
    under hypothesis on drawn widths, batches, lengths, splits into pieces and positions, under
    `settings` when given (yours to choose), else the active profile's max_examples (or
    max_examples) without deadline or shrinking.

    reference: what the mixer should compute, compared in fp64 and at each dtype's tolerance: a
    callable reference(mixer, x) -> y, or the name of a backend (the same mixer, same weights, on
    that backend: "reference" for the built-ins).
    Raises one AssertionError naming the check and the input it failed on; returns (and prints)
    a one-line report of what was checked.

    Args:
        mixer: a registered name or a mixer class.
        d_model: the width of the fixed input and of every drawn one; None: 32 for the fixed
            input, and the widths of 16, 24, 32, 48, 64 the options allow for the drawn ones.
        batch: rows B of the fixed input.
        length: tokens T of the fixed input.
        seed: the seed of the fixed input and of the mixer's weights.
        pieces: the split of the fixed input into calls; None: [1, T // 2, the rest].
        reference: None, a callable reference(mixer, x) -> y, or a backend's name.
        settings: hypothesis settings to run under; None: the active profile's, bounded.
        max_examples: hypothesis examples, when settings is None; None: the active profile's.
        **options: the mixer's options, over a registered name's test options.

    Returns:
        The Report of what was checked.

    Raises:
        AssertionError: a check failed; one error naming it and the input.
    """
    cls, options = resolved(mixer, options)
    name = cls.registry_name or cls.__name__
    started = time.perf_counter()
    compare = as_reference(cls, options, reference, seed)
    outcomes = run_checks(cls, options, d_model or 32, batch, length, seed, pieces, compare)
    widths = [d_model] if d_model is not None else [width for width in WIDTHS if fits(cls, options, width)]
    runs = settings or bounded_settings(max_examples)

    @given(width=st.sampled_from(widths), rows=st.integers(1, 3), data=st.data())
    def drawn(width, rows, data):
        tokens = data.draw(st.integers(1, 24), label="length")
        run_checks(cls, options, width, rows, tokens, data.draw(st.integers(0, 2**16), label="seed"),
                   data.draw(sequence_splits(tokens), label="pieces"), compare, position=data.draw(st.integers(0, tokens - 1)),
                   lengths=data.draw(st.lists(st.integers(1, tokens), min_size=rows, max_size=rows), label="lengths"),
                   full=False)

    runs(drawn)()
    checked = [check_name for check_name, skipped in outcomes.items() if skipped is None]
    skipped = {check_name: why for check_name, why in outcomes.items() if why is not None}
    return Report(f"check_mixer({name!r})", checked, runs.max_examples, time.perf_counter() - started, skipped).printed()


def resolved(mixer: str | type, options: dict[str, Any]) -> tuple[type, dict[str, Any]]:
    """The class and its options: a registered name's test options under the given ones."""
    if isinstance(mixer, str):
        entry = get_mixer(mixer)
        return entry.cls, {**entry.test_options, **options}
    return mixer, dict(options)


def fits(cls: type, options: dict[str, Any], d_model: int) -> bool:
    """Whether the options build the mixer at width d_model."""
    try:
        read_options(cls, options).check(d_model)
    except ValueError:
        return False
    return True


def as_reference(cls: type, options: dict[str, Any], reference: str | Reference | None, seed: int) -> Reference | None:
    """A reference(mixer, x) -> y from check_mixer's argument: a backend name is the same mixer,
    its weights copied, on that backend."""
    if reference is None or callable(reference):
        return reference

    def on_backend(mixer: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        twin = make_mixer(cls, mixer.d_model, seed, **{**options, "backend": reference}).to(x.dtype)
        twin.load_state_dict(mixer.state_dict())
        return twin(x)

    return on_backend


def run_checks(cls: type, options: dict[str, Any], d_model: int, batch: int, length: int, seed: int,
               pieces: list[int] | None, reference: Reference | None, position: int | None = None,
               lengths: list[int] | None = None, full: bool = True) -> dict[str, str | None]:
    """Every check on one input; returns each check's name with the reason it was skipped (None:
    it passed). full: also the checks whose result does not depend on the input's shape enough to
    draw them (empty inputs, bf16, gradients, gradients against fp64...)."""
    mixer = make_mixer(cls, d_model, seed, **options)
    x = torch.randn(batch, length, d_model, generator=torch.Generator().manual_seed(seed))
    example = f"x {tuple(x.shape)} (seed {seed}) with options {options}"
    lengths = lengths or [max(length - 3 - 2 * index, 1) for index in range(batch)]
    splits = pieces or [1, length // 2, length - length // 2 - 1]
    prefill = prefill_then_decode(length, max(length - 3, 1), max(length // 2, 1))
    position = length // 2 if position is None else position
    checks: dict[str, Callable[[], None]] = {
        "shapes": lambda: check_shapes(mixer, x),
        "streaming": lambda: check_streaming(mixer, x, [piece for piece in splits if piece]),
        "decoding after a prefill": lambda: check_streaming(mixer, x, prefill),
        "causality": lambda: check_causality(mixer, x, position),
        "batch composition": lambda: check_batch_independence(mixer, x),
        "padding": lambda: check_padding(mixer, torch.cat((x, x[:, :3]), dim=1), lengths),
        "packing": lambda: check_packing(mixer, torch.cat((x, x[:, :3]), dim=1), lengths),
        "fp32 precision": lambda: check_precision(mixer, x, gradients=full),
    }
    if reference is not None:
        checks["reference"] = lambda: check_reference(mixer, x, reference)
    if full:
        checks |= {
            "empty inputs": lambda: check_empty_inputs(mixer, x),
            "re-entrant states": lambda: check_reentrant(mixer, x),
            "state sizes": lambda: check_state_size(mixer, x),
            "init_state": lambda: check_state_contract(mixer, x),
            "bf16": lambda: check_dtypes(mixer, x),
            "gradients": lambda: torch.enable_grad()(check_gradients)(mixer, x),
        }
    outcomes: dict[str, str | None] = {}
    for check_name, check in checks.items():
        with failing_check(f"{cls.__name__}: {check_name}", example), torch.no_grad():
            try:
                check()
                outcomes[check_name] = None
            except CheckSkipped as skipped:
                outcomes[check_name] = str(skipped)
    return outcomes
