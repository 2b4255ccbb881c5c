"""KDA kernel (the delta rule with a decay per key channel): chunkwise, native (and fla on CUDA)
against the step loop, and against flash-linear-attention's naive references; the tests it shares
with SSD are tests/helpers/matrix_state_suite.py's.

The kernel contract (streaming, empty inputs, layouts, gradients reaching every input, packed
sequences, bad inputs) is checked by test_kernel_conformance.py.
"""

from __future__ import annotations

from layerzoo.kernels import choose_kda_backend, kda, kda_reference
from layerzoo.kernels.kda import native
from layerzoo.kernels.kda.fla import kda_fla

from tests.helpers.matrix_state_suite import Op, matrix_state_tests


KDA = Op("kda", kda, kda_reference, choose_kda_backend, delta_rule=True, channel_decay=True, fla_op="kda",
         fla_chunk="chunk_kda", fla=kda_fla, compiled=native.COMPILED)
TestKDA = matrix_state_tests(KDA)
