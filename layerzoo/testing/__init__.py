"""Public test helpers: hypothesis strategies, mixer and kernel conformance checks, dtype-aware
comparisons.

Needs the `test` extra (hypothesis) for the strategies.
"""

from .conformance import (
    check_dtypes, check_empty_inputs, check_gradients, check_mixer, check_reentrant, check_shapes,
    check_state_size, check_streaming, make_mixer, prefill_then_decode, run_in_pieces, state_numel,
)
from .kernels import (
    KernelCase, KernelFamily, check_kernel_bad_inputs, check_kernel_bad_offsets, check_kernel_empty_inputs,
    check_kernel_family, check_kernel_gradients, check_kernel_layouts, check_kernel_packed, check_kernel_streaming,
    kernel_cases, packed_cases,
)
from .strategies import mixer_inputs, mixer_specs, sequence_splits
from .tolerances import TOLERANCES, assert_close, relative_rms_error

__all__ = [
    "KernelCase", "KernelFamily", "TOLERANCES", "assert_close", "check_dtypes", "check_empty_inputs",
    "check_gradients", "check_kernel_bad_inputs", "check_kernel_bad_offsets", "check_kernel_empty_inputs",
    "check_kernel_family", "check_kernel_gradients", "check_kernel_layouts", "check_kernel_packed",
    "check_kernel_streaming", "check_mixer", "check_reentrant", "check_shapes", "check_state_size", "check_streaming",
    "kernel_cases", "make_mixer", "mixer_inputs", "mixer_specs", "packed_cases", "prefill_then_decode",
    "relative_rms_error", "run_in_pieces", "sequence_splits", "state_numel",
]
