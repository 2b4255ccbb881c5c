"""Public test helpers: the mixer and kernel conformance suites (check_mixer, check_kernel_family,
and mixer_test / kernel_test for your pytest files), their checks one by one, hypothesis
strategies, dtype-aware comparisons.

Needs the `test` extra (hypothesis).
"""

from .conformance import (
    check_batch_independence, check_causality, check_dtypes, check_empty_inputs, check_gradients, check_packing,
    check_padding, check_precision, check_reentrant, check_reference, check_shapes, check_state_contract, check_state_size,
    check_streaming, make_mixer, padded_batch, prefill_then_decode, run_in_pieces, state_numel,
)
from .kernels import (
    KernelCase, KernelFamily, check_kernel_bad_inputs, check_kernel_bad_offsets, check_kernel_empty_inputs,
    check_kernel_family, check_kernel_gradients, check_kernel_layouts, check_kernel_packed, check_kernel_reference,
    check_kernel_streaming, kernel_cases, packed_cases,
)
from .mixer_suite import check_mixer
from .reports import CheckSkipped, Report
from .strategies import mixer_inputs, mixer_specs, sequence_splits
from .suites import kernel_test, mixer_test
from .tolerances import TOLERANCES, assert_close, relative_rms_error

__all__ = [
    "CheckSkipped", "KernelCase", "KernelFamily", "Report", "TOLERANCES", "assert_close", "check_batch_independence",
    "check_causality", "check_dtypes", "check_empty_inputs", "check_gradients", "check_kernel_bad_inputs",
    "check_kernel_bad_offsets", "check_kernel_empty_inputs", "check_kernel_family", "check_kernel_gradients",
    "check_kernel_layouts", "check_kernel_packed", "check_kernel_reference", "check_kernel_streaming", "check_mixer",
    "check_packing", "check_padding", "check_precision", "check_reentrant", "check_reference", "check_shapes", "check_state_contract",
    "check_state_size", "check_streaming", "kernel_cases", "kernel_test", "make_mixer", "mixer_inputs", "mixer_specs", "mixer_test",
    "packed_cases", "padded_batch", "prefill_then_decode", "relative_rms_error", "run_in_pieces", "sequence_splits",
    "state_numel",
]
