"""The conformance suites catch realistic bugs: each bug planted, one at a time, in a user's mixer
and a user's chunkwise kernel (tests/helpers/toy_mixer.py, toy_kernel.py) fails its suite, and the
unmutated copies pass."""

import hypothesis
import pytest

from layerzoo.testing import check_kernel_family, check_mixer

from tests.helpers import toy_kernel, toy_mixer

# Fixed draws, so that each mutant meets the same examples in every run; enough of them that a bug
# needing a particular shape (a partial last chunk, two sequences, rows with different states)
# meets one.
MUTANT_SETTINGS = hypothesis.settings(max_examples=25, derandomize=True, deadline=None, database=None,
                                      phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
                                      report_multiple_bugs=False)


def test_the_unmutated_mixer_passes_check_mixer():
    report = check_mixer(toy_mixer.toy_mixer(), reference=toy_mixer.toy_dense)
    assert {"causality", "reference", "init_state", "decoding after a prefill", "fp32 precision"} <= set(report.checks)


@pytest.mark.parametrize("bug", sorted(toy_mixer.BUGS))
def test_check_mixer_catches_a_mixer_that(bug):
    with pytest.raises(AssertionError, match=r"^ToyMixer\[.*\]: .* failed on x \("):
        check_mixer(toy_mixer.toy_mixer({bug}), reference=toy_mixer.toy_dense, settings=MUTANT_SETTINGS)


def test_the_unmutated_kernel_passes_check_kernel_family():
    report = check_kernel_family(toy_kernel.toy_family(), "chunkwise")
    assert {"reference", "packed", "layouts", "gradients"} <= set(report.checks)


@pytest.mark.parametrize("bug", sorted(toy_kernel.BUGS))
def test_check_kernel_family_catches_a_kernel_that(bug):
    with pytest.raises(AssertionError, match=r"^toy chunkwise: .* failed on inputs \{q: \("):
        check_kernel_family(toy_kernel.toy_family({bug}), "chunkwise", settings=MUTANT_SETTINGS)
