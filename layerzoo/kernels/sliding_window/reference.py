"""Dense masked sliding-window attention: the slow, obviously-correct truth the fast paths match."""

from __future__ import annotations

import torch

from ..common.dtypes import compute_dtype


def sliding_window_mask(
    q_len: int, k_len: int, window: int | None, device: torch.device | str | None = None
) -> torch.Tensor:
    """Boolean (q_len, k_len) mask, True where query i may attend key s.

    Queries are aligned to the end of the keys: query i sits at key position p = k_len - q_len + i
    and sees keys s with p - window < s <= p (all s <= p when window is None).

    Args:
        q_len: queries Tq.
        k_len: keys Tk, >= q_len.
        window: keys each query sees, itself included; None: every key up to its own.
        device: where the mask is made; None: the default device.

    Returns:
        The (q_len, k_len) bool mask.
    """
    pos_q = torch.arange(k_len - q_len, k_len, device=device)[:, None]
    pos_k = torch.arange(k_len, device=device)[None, :]
    mask = pos_k <= pos_q
    if window is not None:
        mask &= pos_k > pos_q - window
    return mask


def packed_positions(bounds_q: list[int], bounds_k: list[int], device: torch.device | str | None = None
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Where the queries and keys of packed sequences sit: (sequence of each query (Tq,), sequence
    of each key (Tk,), key position of each query (Tq,)), int64.

    bounds_q, bounds_k: the offsets of each sequence's queries and keys (cu_seqlens and
    cu_seqlens_k as ints). Within a sequence queries are aligned to the end of its keys: its
    query j of ql sits at key position k_end - ql + j.
    """
    q_lengths = torch.tensor(bounds_q[1:]) - torch.tensor(bounds_q[:-1])
    k_lengths = torch.tensor(bounds_k[1:]) - torch.tensor(bounds_k[:-1])
    sequences = torch.arange(len(q_lengths))
    sequence_q = torch.repeat_interleave(sequences, q_lengths)
    sequence_k = torch.repeat_interleave(sequences, k_lengths)
    # query t of sequence s: k_end_s - ql_s + (t - q_start_s)
    shift = torch.tensor(bounds_k[1:]) - torch.tensor(bounds_q[1:])
    position = torch.arange(bounds_q[-1]) + shift[sequence_q]
    return sequence_q.to(device), sequence_k.to(device), position.to(device)


def packed_window_mask(bounds_q: list[int], bounds_k: list[int], window: int | None,
                       device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean (Tq, Tk) mask of packed sequences: sliding_window_mask within each sequence (its
    queries end-aligned to its keys), False between sequences."""
    sequence_q, sequence_k, pos_q = packed_positions(bounds_q, bounds_k, device)
    pos_k = torch.arange(bounds_k[-1], device=device)[None, :]
    mask = (sequence_q[:, None] == sequence_k[None, :]) & (pos_k <= pos_q[:, None])
    if window is not None:
        mask &= pos_k > pos_q[:, None] - window
    return mask


def sliding_window_attention_weights(
    q: torch.Tensor,
    k: torch.Tensor,
    window: int | None,
    scale: float | None = None,
    *,
    bounds: tuple[list[int], list[int]] | None = None,
    sinks: torch.Tensor | None = None,
) -> torch.Tensor:
    """The attention weights (B, H, Tq, Tk) after the softmax, in the compute dtype (fp32, fp64
    for fp64): zero outside each query's window; with sinks, a row sums to less than one.

    q: (B, Tq, H, D); k: (B, Tk, Hkv, D) with H % Hkv == 0 and Tk >= Tq; bounds and sinks as in
    sliding_window_attention_reference. Inputs are not validated here.
    """
    heads, kv_heads, dim = q.shape[2], k.shape[2], q.shape[3]
    scale = dim**-0.5 if scale is None else scale
    dtype = compute_dtype(q.dtype)
    # Query head h reads kv head h // group.
    kf = k.to(dtype).repeat_interleave(heads // kv_heads, dim=2)
    scores = torch.einsum("bqhd,bkhd->bhqk", q.to(dtype), kf) * scale
    if bounds is None:
        mask = sliding_window_mask(q.shape[1], k.shape[1], window, device=q.device)
    else:
        mask = packed_window_mask(*bounds, window, device=q.device)
    scores = scores.masked_fill(~mask, float("-inf"))
    if sinks is None:
        return scores.softmax(dim=-1)
    sink_column = sinks.to(dtype).view(1, heads, 1, 1).expand(*scores.shape[:3], 1)
    return torch.cat((scores, sink_column), dim=-1).softmax(dim=-1)[..., :-1]


def sliding_window_attention_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    window: int | None,
    scale: float | None = None,
    *,
    bounds: tuple[list[int], list[int]] | None = None,
    sinks: torch.Tensor | None = None,
) -> torch.Tensor:
    """Sliding-window attention by materialising every score; O(Tq * Tk) time and memory.

    q: (B, Tq, H, D); k, v: (B, Tk, Hkv, D) with H % Hkv == 0 and Tk >= Tq; any float dtype.
    bounds: None, or packed sequences (B = 1): the offsets of their queries and of their keys
    (packed_window_mask). sinks: None, or (H,) logits that join every softmax denominator of
    their head (a column of the scores that no value follows). Returns (B, Tq, H, D) in q's dtype.
    Arithmetic runs in fp32 (fp64 stays fp64), so this is the accuracy yardstick for
    low-precision inputs. Inputs are not validated here.

    Args:
        q: (B, Tq, H, D) queries, any float dtype.
        k: (B, Tk, Hkv, D) keys, H % Hkv == 0, Tk >= Tq.
        v: (B, Tk, Hkv, D) values.
        window: keys each query attends to, itself included; None: full causal attention.
        scale: the factor on the scores; None: D ** -0.5.
        bounds: None, or packed sequences (B = 1): the offsets of their queries and of their keys,
            as lists of ints.
        sinks: None, or (H,) sink logits, one per query head.

    Returns:
        (B, Tq, H, D) in q's dtype.
    """
    weights = sliding_window_attention_weights(q, k, window, scale, bounds=bounds, sinks=sinks)
    vf = v.to(weights.dtype).repeat_interleave(q.shape[2] // v.shape[2], dim=2)
    return torch.einsum("bhqk,bkhd->bqhd", weights, vf).to(q.dtype)
