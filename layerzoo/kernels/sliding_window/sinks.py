"""Attention sinks on top of any SDPA call: one extra logit per head in every softmax denominator.

With a sink logit s_h, query i of head h attends as softmax over [its visible scores, s_h] with
the sink's column dropped afterwards, so its weights sum to less than one and a head can attend
to "nothing". The SDPA-based backends get this from one extra key that every query sees: its
value is zero (it adds only to the denominator) and its score is s_h through one extra channel,
holding s_h / scale in each query of head h, 1 in the sink key and 0 in every real key. Real
scores are unchanged and torch's fused kernels, masks and GQA all still apply.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..common.dtypes import compute_dtype


def with_sink_key(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, sinks: torch.Tensor,
                  scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The inputs of an SDPA call with the sink key appended.

    q: (N, H, Tq, D); k: (N, Hkv, Tk, D); v: (N, Hkv, Tk, Dv); mask: boolean, broadcastable to
    (N, H, Tq, Tk), True where a query sees a key; sinks: (H,) logits; scale: the scale the SDPA
    call multiplies q·k by. Returns q (N, H, Tq, D + 1), k (N, Hkv, Tk + 1, D + 1),
    v (N, Hkv, Tk + 1, Dv) and the mask (..., Tq, Tk + 1), with the sink key last.
    """
    batch, heads, q_len, _ = q.shape
    kv_heads, dim = k.shape[1], k.shape[3]
    logit = (sinks.to(compute_dtype(q.dtype)) / scale).to(q.dtype).view(1, heads, 1, 1).expand(batch, heads, q_len, 1)
    q = torch.cat((q, logit), dim=-1)
    sink_key = F.pad(k.new_ones(batch, kv_heads, 1, 1), (dim, 0))
    k = torch.cat((F.pad(k, (0, 1)), sink_key), dim=2)
    v = F.pad(v, (0, 0, 0, 1))
    return q, k, v, F.pad(mask, (0, 1), value=True)
