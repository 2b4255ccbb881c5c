"""Autoregressive generation on the mixers' streaming states."""

from __future__ import annotations

import math
from typing import Any, Iterable

import torch

from ..blocks.packing import Packing


@torch.no_grad()
def generate(model, input_ids: torch.Tensor, max_new_tokens: int, *, temperature: float = 0.0,
             top_k: int | None = None, generator: torch.Generator | None = None,
             prefill_chunk_size: int | None = None, attention_mask: torch.Tensor | None = None,
             state: Any = None, stop_ids: Iterable[int] | None = None) -> torch.Tensor:
    """Continue `input_ids` (B, T) by up to `max_new_tokens`; returns (B, T + n), n <= max_new_tokens.

    temperature 0 is greedy argmax; otherwise sample from softmax(logits / temperature), restricted
    to the top_k most likely tokens when top_k is set. The prompt is read once (in pieces of
    prefill_chunk_size tokens when given, which bounds activation memory for long prompts), then
    each new token is one length-1 step on the carried state, so a model whose mixers all have
    constant-size states decodes in constant memory.

    attention_mask (B, T): prompts of different lengths in one batch, 1 at real tokens and 0 at
    padding (left padding keeps each row's new tokens next to its prompt). Each row continues
    from its own last real token and generates what it would alone.

    state: what the model returned after reading earlier tokens of these rows (a prefix read in
    pieces, a conversation so far); input_ids continue it. None: the rows start here.

    stop_ids: a row stops at the first of these end tokens it generates (kept in its output) and
    is filled with that token after it; generation ends when every row has stopped. None: the
    model's own end tokens (`model.end_token_ids()` where it has one, else none).

    Args:
        model: a CausalLM or an ARMT (`model.generate(...)` passes itself).
        input_ids: (B, T >= 1) int64 prompt token ids in [0, vocab_size).
        max_new_tokens: tokens to add, an int >= 0.
        temperature: 0 for greedy argmax, else a finite number > 0.
        top_k: sample from the top_k most likely tokens only, an int >= 1; None: from all.
        generator: the torch.Generator sampling draws from; None: the global one.
        prefill_chunk_size: tokens per call while reading the prompt, an int >= 1; None: one call.
        attention_mask: (B, T) of 1 at real tokens and 0 at padding, a real token in every row;
            None: every token real.
        state: the state to continue, or None.
        stop_ids: end token ids (ints in the vocabulary); None: the model's own; () never stops.

    Returns:
        (B, T + n) token ids: the prompt, then the new tokens; n is max_new_tokens, or fewer when
            every row reached an end token.

    Raises:
        ValueError: (one line, before any work) input_ids not a (B, T >= 1) tensor of ids in the
            vocabulary; max_new_tokens, temperature, top_k or prefill_chunk_size out of range; a
            malformed attention_mask, or a row of padding only; a stop id that is not a token id.
    """
    vocab_size = getattr(model.config, "vocab_size", None)
    check_generate_arguments(input_ids, max_new_tokens, temperature, top_k, prefill_chunk_size, vocab_size)
    stops = end_tokens(model, stop_ids, vocab_size, input_ids.device)
    if attention_mask is not None:
        check_prompt_mask(attention_mask, input_ids.shape)
    last = None
    chunk = prefill_chunk_size or input_ids.shape[1]
    masks = [None] * len(input_ids.split(chunk, dim=1)) if attention_mask is None else attention_mask.split(chunk, dim=1)
    for piece, mask in zip(input_ids.split(chunk, dim=1), masks):
        keep = _tail_to_read(mask, piece.shape[1])  # the head's logits of every prompt token: a waste
        logits, state = model(piece, state=state, return_state=True, attention_mask=mask, logits_to_keep=keep)
        last = _last_real(logits, None if mask is None else mask[:, mask.shape[1] - keep:], last)
    tokens = [input_ids]
    stopped = None  # (B, 1): the end token each row stopped at, -1 while it goes on
    for _ in range(max_new_tokens):
        next_token = _pick(last.float(), temperature, top_k, generator)
        if len(stops):
            if stopped is not None:
                next_token = torch.where(stopped >= 0, stopped, next_token)
            stopped = torch.where(torch.isin(next_token, stops), next_token, -1)
            if bool((stopped >= 0).all()):  # one synchronisation a step, only when stopping is asked for
                tokens.append(next_token)
                break
        tokens.append(next_token)
        logits, state = model(next_token, state=state, return_state=True)
        last = logits[:, -1]
    return torch.cat(tokens, dim=1)


def end_tokens(model, stop_ids: Iterable[int] | None, vocab_size: int | None, device: torch.device) -> torch.Tensor:
    """The end token ids generation stops at, as a 1-d tensor (empty: never stops): stop_ids,
    or with None the model's `end_token_ids()` where it has one. A one-line ValueError for an id
    that is not an int in [0, vocab_size)."""
    if stop_ids is None:
        stop_ids = model.end_token_ids() if hasattr(model, "end_token_ids") else ()
    stop_ids = list(stop_ids)
    for token in stop_ids:
        if isinstance(token, bool) or not isinstance(token, int) or token < 0 or (vocab_size is not None and token >= vocab_size):
            raise ValueError(f"stop_ids must be token ids in [0, {vocab_size}), got {token!r}")
    return torch.tensor(stop_ids, dtype=torch.long, device=device)


def check_generate_arguments(input_ids: Any, max_new_tokens: Any, temperature: Any, top_k: Any,
                             prefill_chunk_size: Any, vocab_size: int | None) -> None:
    """A one-line ValueError naming the first malformed argument of generate, before any work:
    max_new_tokens must be an integer >= 0, temperature a finite number >= 0, top_k and
    prefill_chunk_size integers >= 1 or None; input_ids as check_token_ids says."""
    check_token_ids(input_ids, vocab_size)
    check_integer("max_new_tokens", max_new_tokens, 0)
    if not is_number(temperature) or not (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    for name, value in (("top_k", top_k), ("prefill_chunk_size", prefill_chunk_size)):
        if value is not None:
            check_integer(name, value, 1, " or None")


def check_token_ids(input_ids: Any, vocab_size: int | None) -> None:
    """A one-line ValueError unless input_ids is a (batch, length >= 1) tensor of integer ids in
    [0, vocab_size) (when vocab_size is given: one device synchronisation, for the range)."""
    what = "input_ids must be a (batch, length >= 1) tensor of token ids"
    if not isinstance(input_ids, torch.Tensor):
        raise ValueError(f"{what}, got {type(input_ids).__name__}")
    if input_ids.is_floating_point() or input_ids.is_complex() or input_ids.dtype == torch.bool:
        raise ValueError(f"{what}, got {str(input_ids.dtype).removeprefix('torch.')}")
    if input_ids.dim() != 2 or input_ids.shape[1] == 0:
        raise ValueError(f"{what}, got shape {tuple(input_ids.shape)}")
    if vocab_size is not None and input_ids.numel():
        low, high = (int(v) for v in input_ids.aminmax())
        if low < 0 or high >= vocab_size:
            raise ValueError(f"input_ids must be token ids in [0, {vocab_size}) (the vocabulary), "
                             f"got {low if low < 0 else high}")


def check_prompt_mask(attention_mask: torch.Tensor, shape: torch.Size | None) -> None:
    """A one-line ValueError unless attention_mask is a (batch, length) mask of 0 and 1 for
    prompts of `shape` (when given), with a real token in every row (a row of padding has nothing
    to continue)."""
    Packing.from_mask(attention_mask, shape)  # its one-line errors
    if not bool(attention_mask.bool().any(dim=1).all()):
        raise ValueError("attention_mask: every prompt needs at least one real token")


def check_integer(name: str, value: Any, minimum: int, alternative: str = "") -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}{alternative}, got {value!r}")


def is_number(value: Any) -> bool:
    """A real number (an int or a float, not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _tail_to_read(mask: torch.Tensor | None, length: int) -> int:
    """How many of a piece's last positions hold every row's last real token (1 without a mask;
    all of them where no row has one)."""
    if mask is None:
        return 1
    real = mask.bool()
    if not bool(real.any()):
        return length
    last = length - 1 - real.flip(1).int().argmax(dim=1)
    return length - int(last[real.any(dim=1)].min())


def _last_real(logits: torch.Tensor, mask: torch.Tensor | None, last: torch.Tensor | None) -> torch.Tensor:
    """Each row's logits (B, V) at its last real token so far: in this piece (logits (B, T, V),
    mask (B, T) or None: all real) where it has one, else `last`, from earlier pieces."""
    if mask is None:
        return logits[:, -1]
    mask = mask.bool()
    position = mask.shape[1] - 1 - mask.flip(1).int().argmax(dim=1)
    here = logits[torch.arange(len(logits), device=logits.device), position]
    has = mask.any(dim=1)[:, None]
    return here if last is None else torch.where(has, here, last)


def _pick(logits: torch.Tensor, temperature: float, top_k: int | None, generator: torch.Generator | None) -> torch.Tensor:
    """logits (B, V) -> next tokens (B, 1)."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    # Measured from the largest logit, a tiny temperature sends the others to -inf instead of
    # overflowing to inf; below the dtype's smallest normal number it would round to 0, so it stops there.
    temperature = max(temperature, torch.finfo(logits.dtype).tiny)
    logits = (logits - logits.amax(dim=-1, keepdim=True)) / temperature
    if top_k is not None:
        kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.multinomial(logits.softmax(dim=-1), 1, generator=generator)
