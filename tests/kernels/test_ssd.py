"""SSD kernel (Mamba-2's scalar decay): chunkwise, native (and fla on CUDA) against the step loop,
and against flash-linear-attention's naive references; the tests it shares with KDA are
tests/helpers/matrix_state_suite.py's.

The kernel contract (streaming, empty inputs, layouts, gradients reaching every input, packed
sequences, bad inputs) is checked by test_kernel_conformance.py.
"""

from __future__ import annotations

from layerzoo.kernels import choose_ssd_backend, ssd, ssd_reference
from layerzoo.kernels.ssd import native
from layerzoo.kernels.ssd.fla import ssd_fla

from tests.helpers.matrix_state_suite import Op, matrix_state_tests


SSD = Op("ssd", ssd, ssd_reference, choose_ssd_backend, delta_rule=False, channel_decay=False, fla_op="simple_gla",
         fla_chunk="chunk_simple_gla", fla=ssd_fla, compiled=native.COMPILED)
TestSSD = matrix_state_tests(SSD)
