"""mLSTM's exchange: its memory is linear in true scale (C exp(m) decays by the product F of the
forget gates), its stabiliser m a max-plus recursion, m_end = max(log F + m_start, m_inner) with
m_inner = max_t (i_t + the log forget gates after t). Each rank runs its piece from the empty
state (C_ext, n_ext, m_ext) and computes log F and m_inner from the gates; one all-gather; each
merges the ranks since its sequence began, in true scale, to the stabiliser one process would
have; then reruns its piece from that state. Every rank works at once: about two runs of the piece.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ....kernels.mlstm import MLSTMState
from ....mixers.mlstm import MLSTM
from ....mixers.states import concat_streams, select_streams
from .collectives import all_gather
from .exchanges import register_exchange
from .pieces import Pieces


def _gate_sums(mixer: MLSTM, x: torch.Tensor, pieces: Pieces) -> tuple[torch.Tensor, torch.Tensor]:
    """(log F, m_inner), (B, n_heads) each, of the sequence this rank hands on, over its tokens here."""
    input_gate, forget_gate = mixer.gate_preactivations(x)
    begin = pieces.last_stream_start(pieces.group.rank) - pieces.mine[0]
    log_f, input_gate = F.logsigmoid(forget_gate[:, begin:]), input_gate[:, begin:]
    total = log_f.sum(1)
    after = total[:, None] - log_f.cumsum(1)  # the log forget gates after each token
    return total, (input_gate + after).amax(1)


@register_exchange(MLSTM)
def merge_stabilised_states(mixer: MLSTM, forward, x: torch.Tensor, pieces: Pieces, link: torch.Tensor):
    rank = pieces.group.rank
    cu_seqlens = pieces.local_cu_seqlens(x.device)
    streams = 1 if cu_seqlens is None else len(cu_seqlens) - 1
    _, ext = forward(x, None, True, cu_seqlens=cu_seqlens)
    if cu_seqlens is not None:
        ext = select_streams(ext, streams - 1, streams)
    log_decay, inner = _gate_sums(mixer, x, pieces)
    link, (memories, normalisers, stabilisers, log_decays, inners) = all_gather(
        pieces.group, link, ext.C, ext.n, ext.m, log_decay.to(ext.m.dtype), inner.to(ext.m.dtype))
    if not pieces.continues(rank):
        y, state = forward(x, None, True, cu_seqlens=cu_seqlens)
        return y, state, link
    begun = max(source for source in range(rank) if pieces.start(source) <= pieces.sequence_start(pieces.start(rank)))
    memory, normaliser, stabiliser = memories[begun], normalisers[begun], stabilisers[begun]
    for source in range(begun + 1, rank):
        carried = log_decays[source] + stabiliser
        new = torch.maximum(carried, inners[source])
        old_scale, ext_scale = torch.exp(carried - new), torch.exp(stabilisers[source] - new)
        memory = old_scale[..., None, None] * memory + ext_scale[..., None, None] * memories[source]
        normaliser = old_scale[..., None] * normaliser + ext_scale[..., None] * normalisers[source]
        stabiliser = new
    first = MLSTMState(memory, normaliser, stabiliser)
    start = first if streams == 1 else concat_streams([first, mixer.init_state(streams - 1)])
    y, state = forward(x, start, True, cu_seqlens=cu_seqlens)
    return y, state, link
