"""Both conformance suites as tests of your own test suite: one line each in a pytest file.

    # test_my_layers.py
    from layerzoo.testing import kernel_test, mixer_test
    test_my_mixer = mixer_test("my_mixer", reference=my_mixer_dense)   # a registered name, or a class
    test_my_kernel = kernel_test(MY_KERNEL_FAMILY, "chunkwise")

Each is a test function pytest collects by its name, running check_mixer or check_kernel_family
with the arguments given; hypothesis runs under your settings (pass settings=, or load a profile
in your conftest.py: the suites take its max_examples).
"""

from __future__ import annotations

from typing import Any, Callable

from .kernels import KernelFamily, check_kernel_family
from .mixer_suite import check_mixer


def mixer_test(mixer: str | type, **arguments: Any) -> Callable[[], None]:
    """A test function that runs check_mixer(mixer, **arguments).

    Args:
        mixer: a registered name or a mixer class.
        **arguments: check_mixer's other arguments (reference, d_model, options...).

    Returns:
        The test function, for a pytest module's namespace (`test_my_mixer = mixer_test(...)`).
    """
    def test() -> None:
        check_mixer(mixer, **arguments)

    test.__doc__ = f"check_mixer({mixer if isinstance(mixer, str) else mixer.__name__!r})"
    return test


def kernel_test(family: KernelFamily, backend: str, **arguments: Any) -> Callable[[], None]:
    """A test function that runs check_kernel_family(family, backend, **arguments).

    Args:
        family: the KernelFamily.
        backend: the backend's name.
        **arguments: check_kernel_family's other arguments (dtypes, max_length, ...).

    Returns:
        The test function, for a pytest module's namespace (`test_my_kernel = kernel_test(...)`).
    """
    def test() -> None:
        check_kernel_family(family, backend, **arguments)

    test.__doc__ = f"check_kernel_family({family.name}, {backend!r})"
    return test
