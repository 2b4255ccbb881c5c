"""Autoregressive generation on the mixers' streaming states."""

from __future__ import annotations

import math

import torch


@torch.no_grad()
def generate(model, input_ids: torch.Tensor, max_new_tokens: int, *, temperature: float = 0.0,
             top_k: int | None = None, generator: torch.Generator | None = None,
             prefill_chunk_size: int | None = None) -> torch.Tensor:
    """Continue `input_ids` (B, T) by `max_new_tokens`; returns (B, T + max_new_tokens).

    temperature 0 is greedy argmax; otherwise sample from softmax(logits / temperature), restricted
    to the top_k most likely tokens when top_k is set. The prompt is read once (in pieces of
    prefill_chunk_size tokens when given, which bounds activation memory for long prompts), then
    each new token is one length-1 step on the carried state, so a model whose mixers all have
    constant-size states decodes in constant memory.
    """
    if input_ids.dim() != 2 or input_ids.shape[1] == 0:
        raise ValueError(f"input_ids must be (batch, length >= 1), got shape {tuple(input_ids.shape)}")
    if not (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature}")
    if max_new_tokens < 0 or (top_k is not None and top_k < 1):
        raise ValueError(f"max_new_tokens must be >= 0 and top_k >= 1, got {max_new_tokens} and {top_k}")
    state = None
    chunk = prefill_chunk_size or input_ids.shape[1]
    for piece in input_ids.split(chunk, dim=1):
        logits, state = model(piece, state=state, return_state=True)
    tokens = [input_ids]
    for _ in range(max_new_tokens):
        next_token = _pick(logits[:, -1].float(), temperature, top_k, generator)
        tokens.append(next_token)
        logits, state = model(next_token, state=state, return_state=True)
    return torch.cat(tokens, dim=1)


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
