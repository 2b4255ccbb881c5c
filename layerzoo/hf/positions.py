"""transformers' `position_ids` read against what a layerzoo model already knows: each row's
positions live in its mixers' states (counted from the attention mask), so position_ids either
repeat them or mark sequences packed into rows without padding (transformers' padding-free
collator restarts them at 0 at each sequence's start), which run as cu_seqlens.
"""

from __future__ import annotations

import torch

from .errors import HFError


def implied_positions(attention_mask: torch.Tensor | None, shape: tuple[int, int], columns: int) -> torch.Tensor:
    """(B or 1, T) int64: the positions of this call's T tokens, counted over transformers' growing
    mask (B, M >= T) as its generate counts them, or after the cache's `columns` without a mask."""
    length = shape[1]
    if attention_mask is None:
        return torch.arange(columns, columns + length)[None]
    return (attention_mask.long().cumsum(-1) - 1)[:, -length:]


def packed_sequences(position_ids: torch.Tensor, attention_mask: torch.Tensor | None, shape: tuple[int, int],
                     columns: int) -> torch.Tensor | None:
    """None when position_ids (B or 1, T) equal the positions the mask implies at every real token
    (padding's are not read); else the (N + 1,) offsets of the N sequences they pack into the rows
    flattened (B * T): no cache, no padding, each sequence counting 0, 1, 2, ...

    Raises:
        HFError: position_ids of another shape or dtype, or positions neither of those.
    """
    batch, length = shape
    if (not isinstance(position_ids, torch.Tensor) or position_ids.dim() != 2 or position_ids.shape[0] not in (1, batch)
            or position_ids.shape[1] != length or position_ids.is_floating_point() or position_ids.is_complex()):
        got = tuple(position_ids.shape) if isinstance(position_ids, torch.Tensor) else type(position_ids).__name__
        raise HFError(f"position_ids must be integers of shape {tuple(shape)} or (1, {length}), got {got}")
    position_ids = position_ids.long().expand(batch, length)
    implied = implied_positions(attention_mask, shape, columns).to(position_ids.device)
    real = None if attention_mask is None else attention_mask[:, -length:].to(position_ids.device).bool()
    differ = position_ids != implied
    if not bool((differ if real is None else differ & real).any()):
        return None
    starts = position_ids == 0
    counts_up = position_ids[:, 1:] == position_ids[:, :-1] + 1
    if columns == 0 and (real is None or bool(real.all())) and bool(starts[:, 0].all() and (starts[:, 1:] | counts_up).all()):
        end = torch.tensor([batch * length], device=position_ids.device)
        return torch.cat((starts.flatten().nonzero().squeeze(1), end))
    row = int(((differ if real is None else differ & real).any(1)).nonzero()[0])
    raise HFError(f"position_ids row {row} is {position_ids[row].tolist()}: neither the positions its attention mask "
                  f"and cache imply ({implied[min(row, len(implied) - 1)].tolist()} at its real tokens) nor sequences "
                  "packed without padding or cache (each restarting at 0 and counting up by 1); a layerzoo model keeps "
                  "each row's positions in its states and cannot move them")
