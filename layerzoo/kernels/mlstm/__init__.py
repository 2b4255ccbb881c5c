"""mLSTM (xLSTM's matrix memory) with interchangeable backends.

Layout follows flash-linear-attention: q, k (B, T, H, Dk), v (B, T, H, Dv), gates (B, T, H).
Semantics are NX-AI mlstm_kernels' stabilised mLSTM (see reference.py): exp input gate, sigmoid
forget gate in log space, max stabiliser m, normaliser n, q scaled by Dk^-0.5. The public
function and its backends: dispatch.py.
"""

from .chunkwise import mlstm_chunkwise
from .dispatch import BACKENDS, PACKED, choose_mlstm_backend, mlstm
from .native import mlstm_native
from .reference import EPS, MLSTMState, mlstm_reference, mlstm_step
from .triton import mlstm_triton

__all__ = [
    "BACKENDS",
    "EPS",
    "MLSTMState",
    "PACKED",
    "choose_mlstm_backend",
    "mlstm",
    "mlstm_chunkwise",
    "mlstm_native",
    "mlstm_reference",
    "mlstm_step",
    "mlstm_triton",
]
