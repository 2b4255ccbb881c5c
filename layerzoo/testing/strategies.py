"""Public hypothesis strategies for fuzzing mixers, kernels and specs.

Each is a hypothesis composite: call it without `draw` (hypothesis passes that) and draw from the
strategy it returns, `data.draw(sequence_splits(12))` or `@given(x=mixer_inputs(32))`.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from ..registry import get_mixer, list_mixers


@st.composite
def sequence_splits(draw, length: int, max_pieces: int | None = None) -> list[int]:
    """Piece lengths (each >= 1) summing to `length`: how a stream is cut into calls.

    Lengths of 1 (decoding steps) are as likely as long prefill pieces.

    Args:
        length: the total T, >= 0.
        max_pieces: the most pieces; None: any number.

    Returns:
        A strategy of piece lengths.
    """
    pieces: list[int] = []
    remaining = length
    while remaining:
        if max_pieces is not None and len(pieces) == max_pieces - 1:
            piece = remaining
        else:
            piece = draw(st.one_of(st.just(1), st.integers(1, remaining)))
        pieces.append(piece)
        remaining -= piece
    return pieces


@st.composite
def mixer_inputs(draw, d_model: int, max_batch: int = 2, max_length: int = 24,
                 dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A (B, T, d_model) input with a seeded standard-normal body; B and T drawn.

    Args:
        d_model: the width.
        max_batch: the most rows B (at least 1).
        max_length: the most tokens T (at least 1).
        dtype: the input's dtype.

    Returns:
        A strategy of (B, T, d_model) tensors.
    """
    batch = draw(st.integers(1, max_batch))
    length = draw(st.integers(1, max_length))
    seed = draw(st.integers(0, 2**31 - 1))
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(batch, length, d_model, generator=generator).to(dtype)


@st.composite
def mixer_specs(draw, mixers: list[str] | None = None, d_model: int = 32, max_layers: int = 4,
                vocab_size: int = 64) -> dict[str, Any]:
    """A small spec dict over registered mixers (each with its conformance test options), with or
    without an FFN (SwiGLU or GeGLU), post-norms and scaled embeddings.

    Args:
        mixers: the mixer names to draw the pattern from; None: every registered one.
        d_model: the model's width.
        max_layers: the most layers (and pattern entries).
        vocab_size: the model's vocabulary.

    Returns:
        A strategy of spec dicts (`{"model": {...}}`) that `load_spec` and `build` take.
    """
    names = mixers or list_mixers()
    pattern = draw(st.lists(st.sampled_from(names), min_size=1, max_size=max_layers))
    n_layers = draw(st.integers(len(pattern), max_layers))
    return {
        "model": {
            "d_model": d_model,
            "n_layers": n_layers,
            "vocab_size": vocab_size,
            "mixers": {name: dict(get_mixer(name).test_options) for name in set(pattern)},
            "pattern": pattern,
            "ffn": draw(st.one_of(st.just(False), st.builds(lambda activation: {"hidden": 2 * d_model, "activation": activation},
                                                            st.sampled_from(["silu", "gelu_tanh"])))),
            "norm": {"post": draw(st.booleans())},  # Gemma's block and embeddings, as often as not
            "scale_embeddings": draw(st.booleans()),
            "tie_embeddings": draw(st.booleans()),
        }
    }
