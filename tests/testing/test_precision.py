"""check_mixer sees silent low precision without a reference: copies of shipped mixers that
compute part of an fp32 call in bf16 fail its "fp32 precision" check, whether a bf16 tensor shows
it or only the numbers do; a mixer whose fp64 copy cannot run has the comparison skipped, the
reason in its report, instead of failed."""

import sys
from unittest import mock

import pytest
import torch

import layerzoo
from layerzoo.blocks.short_conv import ShortConvolution
from layerzoo.testing import check_mixer

from tests.helpers import toy_mixer


def with_kernel(name: str, kernel_name: str, wrap) -> type:
    """A copy of the registered mixer `name` whose calls to `kernel_name` (as its module names the
    kernel) go through wrap(kernel)."""
    cls = layerzoo.get_mixer(name).cls
    module = sys.modules[cls.__module__]

    def mix(self, x, state, cu_seqlens):
        with mock.patch.object(module, kernel_name, wrap(getattr(module, kernel_name))):
            return cls.mix(self, x, state, cu_seqlens)

    return type(f"{cls.__name__}[{kernel_name} wrapped]", (cls,), {"mix": mix})


def swa_with_qkv_in_bf16() -> type:
    """SWA whose q, k and v are cast to bf16 around the attention kernel, its output back."""
    def wrap(kernel):
        return lambda q, k, v, *args, **kwargs: kernel(*(t.bfloat16() for t in (q, k, v)), *args, **kwargs).to(q.dtype)

    return with_kernel("swa", "sliding_window_attention", wrap)


def gated_deltanet_with_gates_in_bf16() -> type:
    """Gated DeltaNet whose beta and decay gate g reach the kernel through bf16."""
    def wrap(kernel):
        def through_bf16(t):
            return t.to(torch.bfloat16).to(t.dtype)

        return lambda q, k, v, g, beta, **kwargs: kernel(q, k, v, through_bf16(g), through_bf16(beta), **kwargs)

    return with_kernel("gated_deltanet", "gated_delta_rule", wrap)


class ShortConvolutionInBf16(ShortConvolution):
    """The short convolution (a learned shift over the last few tokens) under bf16 autocast."""

    def forward(self, x, state=None, cu_seqlens=None):
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            y, new_state = super().forward(x, state, cu_seqlens)
        return y.to(x.dtype), new_state


def mamba2_with_token_shift_in_bf16() -> type:
    """Mamba-2 whose short convolution over x, B and C computes in bf16."""
    cls = layerzoo.get_mixer("mamba2").cls

    def __init__(self, d_model, **options):
        cls.__init__(self, d_model, **options)
        self.conv1d.__class__ = ShortConvolutionInBf16

    return type(f"{cls.__name__}[bf16 token shift]", (cls,), {"__init__": __init__})


def swa_on_a_kernel_computing_in_bf16() -> type:
    """SWA on an fp32 kernel that computes in bf16 where no tensor shows it (a compiled kernel's
    inside): its fp32 output keeps bf16's 8 bits of mantissa, its gradients pass through; fp64
    goes to another kernel."""
    def wrap(kernel):
        def attend(q, k, v, *args, **kwargs):
            out = kernel(q, k, v, *args, **kwargs)
            if out.dtype != torch.float32:
                return out
            return out + ((out.view(torch.int32) & -65536).view(torch.float32) - out).detach()

        return attend

    return with_kernel("swa", "sliding_window_attention", wrap)


MUTANTS = {
    "swa": swa_with_qkv_in_bf16,
    "gated_deltanet": gated_deltanet_with_gates_in_bf16,
    "mamba2": mamba2_with_token_shift_in_bf16,
}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_check_mixer_catches_a_shipped_mixer_computing_in_bf16_inside_fp32(name):
    with pytest.raises(AssertionError, match=r"\]: fp32 precision failed on x \(.*: an fp32 call computes in bfloat16 \("):
        check_mixer(MUTANTS[name](), max_examples=1, **layerzoo.get_mixer(name).test_options)


def test_check_mixer_catches_bf16_that_only_the_numbers_show():
    with pytest.raises(AssertionError, match=r"\]: fp32 precision failed on x \(.*: fp32 output against the same "
                                             r"weights in fp64: rms error"):
        check_mixer(swa_on_a_kernel_computing_in_bf16(), max_examples=1, **layerzoo.get_mixer("swa").test_options)


def test_a_users_mixer_passes_without_a_reference():
    report = check_mixer(toy_mixer.ToyMixer, max_examples=2)
    assert "fp32 precision" in report.checks and not report.skipped


def test_a_users_mixer_computing_in_bf16_fails_without_a_reference():
    with pytest.raises(AssertionError, match=r"^ToyMixer\[low precision\]: fp32 precision failed on x \("):
        check_mixer(toy_mixer.toy_mixer({"low precision"}), max_examples=1)


class Fp32Only(toy_mixer.ToyMixer):
    """The toy mixer on a kernel that, like Triton's, takes no fp64."""

    def mix(self, x, state, cu_seqlens):
        if x.dtype == torch.float64:
            raise TypeError("this kernel takes fp32 and bf16\nits second line")
        return super().mix(x, state, cu_seqlens)


def test_a_mixer_that_cannot_run_in_fp64_is_skipped_with_the_reason():
    report = check_mixer(Fp32Only, max_examples=2)
    why = "its fp64 copy does not run: TypeError: this kernel takes fp32 and bf16"
    assert "fp32 precision" not in report.checks and "gradients" in report.checks
    assert report.skipped == {"fp32 precision": why}
    assert str(report).endswith(f"; skipped: fp32 precision ({why})")
