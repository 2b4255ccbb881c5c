"""Keys and values appended in place: a decoding step writes its token's keys after the cached ones
instead of copying the whole cache (torch.cat) once per token and layer, a copy that costs
O(context) memory traffic per step before any attention runs.

The keys a state keeps are a view of a buffer with spare columns, noted on the tensor with where
it starts. The next call writes into the spare columns only when nothing has been written after
this view yet, so states stay immutable: a call from an older state (a benchmark repeating a
decode, a search trying two continuations) finds the columns taken and copies instead. A tensor
without the note (a state selected, concatenated or cloned, one made under autograd) is copied
the first time, into a buffer with room.
"""

from __future__ import annotations

import torch

_NOTE = "_layerzoo_kv_room"  # (buffer, first column) on a kept view; the buffer's _END: its columns written
_END = "_layerzoo_kv_end"
MIN_ROOM = 64  # spare columns at least, so short caches do not copy every few steps


def extend(cached: torch.Tensor | None, new: torch.Tensor, keep: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The cached keys followed by the new ones, and the last `keep` of them for the next state.

    Args:
        cached: (N, L, H, D) keys (or values) a state holds, or None for none.
        new: (N, T, H, D) this call's keys.
        keep: columns the next state keeps (sliding-window attention's window - 1), None: all.

    Returns:
        (every key (N, L + T, H, D), equal to torch.cat((cached, new), 1); the kept ones
        (N, min(L + T, keep), H, D)). Both may be views of a shared buffer; under autograd or
        torch.compile they are fresh tensors, as torch.cat makes them.
    """
    if cached is None or not cached.shape[1]:
        return new, _last(new, keep)
    if (torch.is_grad_enabled() and (cached.requires_grad or new.requires_grad)) or torch.compiler.is_compiling():
        every = torch.cat((cached.to(new.dtype), new), dim=1)
        return every, _last(every, keep)
    length, total = cached.shape[1], cached.shape[1] + new.shape[1]
    buffer, start = _room(cached, new) or _fresh_buffer(cached, new, keep)
    buffer[:, start + length:start + total] = new
    setattr(buffer, _END, start + total)
    every = buffer[:, start:start + total]
    first = start if keep is None or total <= keep else start + total - keep
    kept = buffer[:, first:start + total]
    setattr(kept, _NOTE, (buffer, first))
    return every, kept


def _room(cached: torch.Tensor, new: torch.Tensor) -> tuple[torch.Tensor, int] | None:
    """(cached's buffer, its first column) when `new` may be written right after it."""
    note = getattr(cached, _NOTE, None)
    if note is None:
        return None
    buffer, start = note
    end = start + cached.shape[1]
    fits = end + new.shape[1] <= buffer.shape[1] and buffer.dtype == new.dtype and buffer.device == new.device
    return note if fits and getattr(buffer, _END) == end else None


def _fresh_buffer(cached: torch.Tensor, new: torch.Tensor, keep: int | None) -> tuple[torch.Tensor, int]:
    """A buffer holding `cached` from column 0, with room for `new` and spare columns: a quarter
    more for a growing cache (so copies amortise to a few per key), a window more for a window's."""
    total = cached.shape[1] + new.shape[1]
    spare = max(total // 4 if keep is None else keep, MIN_ROOM)
    buffer = new.new_empty(new.shape[0], total + spare, *new.shape[2:])
    buffer[:, :cached.shape[1]] = cached
    return buffer, 0


def _last(keys: torch.Tensor, keep: int | None) -> torch.Tensor:
    """The last `keep` columns of keys (N, L, ...), cloned when fewer than all, so the state
    does not hold the whole (possibly long) tensor alive through a view."""
    if keep is None or keys.shape[1] <= keep:
        return keys
    return keys[:, keys.shape[1] - keep:].clone()
