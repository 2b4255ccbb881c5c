"""Autoregressive generation on the mixers' streaming states."""

from __future__ import annotations

import math
from typing import Any

import torch

from ..blocks.packing import Packing


@torch.no_grad()
def generate(model, input_ids: torch.Tensor, max_new_tokens: int, *, temperature: float = 0.0,
             top_k: int | None = None, generator: torch.Generator | None = None,
             prefill_chunk_size: int | None = None, attention_mask: torch.Tensor | None = None,
             state: Any = None) -> torch.Tensor:
    """Continue `input_ids` (B, T) by `max_new_tokens`; returns (B, T + max_new_tokens).

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
    """
    if input_ids.dim() != 2 or input_ids.shape[1] == 0:
        raise ValueError(f"input_ids must be (batch, length >= 1), got shape {tuple(input_ids.shape)}")
    if not (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature}")
    if max_new_tokens < 0 or (top_k is not None and top_k < 1):
        raise ValueError(f"max_new_tokens must be >= 0 and top_k >= 1, got {max_new_tokens} and {top_k}")
    if attention_mask is not None:
        Packing.from_mask(attention_mask, input_ids.shape)  # its one-line errors, before any work
        if not bool(attention_mask.bool().any(dim=1).all()):
            raise ValueError("attention_mask: every prompt needs at least one real token")
    last = None
    chunk = prefill_chunk_size or input_ids.shape[1]
    masks = [None] * len(input_ids.split(chunk, dim=1)) if attention_mask is None else attention_mask.split(chunk, dim=1)
    for piece, mask in zip(input_ids.split(chunk, dim=1), masks):
        logits, state = model(piece, state=state, return_state=True, attention_mask=mask)
        last = _last_real(logits, mask, last)
    tokens = [input_ids]
    for _ in range(max_new_tokens):
        next_token = _pick(last.float(), temperature, top_k, generator)
        tokens.append(next_token)
        logits, state = model(next_token, state=state, return_state=True)
        last = logits[:, -1]
    return torch.cat(tokens, dim=1)


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
