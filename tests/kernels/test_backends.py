"""One naming scheme for every family's backends (kernels/common/backends.py): each family names
its backends from NAMES, in its order; the compiled CPU kernel is "native" wherever there is one;
an old name is refused with its new one as the did-you-mean."""

from __future__ import annotations

import importlib

import pytest
import torch

from layerzoo.kernels import compiled
from layerzoo.kernels.common.backends import NAMES, Backend, choose_backend, taking

FAMILIES = ("sliding_window", "mlstm", "gated_delta_rule", "ssd", "kda", "assoc_memory")


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_names_its_backends_from_the_one_list_in_its_order(family):
    backends = list(importlib.import_module(f"layerzoo.kernels.{family}").BACKENDS)
    assert backends == [name for name in NAMES if name in backends]
    assert backends[:2] == ["reference", "chunkwise"]  # the truth, and PyTorch that runs everywhere


def test_each_compiled_kernel_is_its_familys_native_backend():
    for function, kernel in zip(compiled.FUNCTIONS, compiled.KERNELS):
        family = kernel.name.removeprefix("layerzoo_").split("_cpu_")[0]
        module = importlib.import_module(f"layerzoo.kernels.{family}")
        assert "native" in module.BACKENDS and callable(getattr(module, function))
    with_native = {family for family in FAMILIES if "native" in importlib.import_module(f"layerzoo.kernels.{family}").BACKENDS}
    assert len(with_native) == len(compiled.KERNELS)
    assert [row[:2] for row in compiled.table()[1:]] == [(function, "native") for function in compiled.FUNCTIONS]


def test_an_old_name_is_refused_with_its_new_one():
    from layerzoo.kernels.assoc_memory import associative_read, empty_memory

    with pytest.raises(ValueError) as info:
        associative_read(torch.randn(1, 2, 1, 4), empty_memory(1, 1, 24, 3), backend="vectorized")
    assert str(info.value) == ("unknown associative memory backend 'vectorized'; did you mean 'chunkwise'? "
                               "(known: auto, chunkwise, reference)")


def test_auto_asks_for_the_fast_backend_only_when_it_chooses():
    asked = []

    def fast():
        asked.append(True)
        return "chunkwise"

    assert choose_backend("toy backend", "reference", ["reference", "chunkwise"], fast) == "reference"
    assert choose_backend("toy backend", "auto", ["reference", "chunkwise"], fast, length=1) == "reference"
    assert not asked  # a named backend, or one token, never builds a compiled kernel to find out
    assert choose_backend("toy backend", "auto", ["reference", "chunkwise"], fast, length=5) == "chunkwise"
    assert asked == [True]


def test_a_backend_gets_the_optional_arguments_it_takes_by_keyword():
    def run(*, q, chunk_size, bounds=None):
        return q, chunk_size, bounds

    backend = Backend(run, takes=("chunk_size",))
    assert backend(q=1, optional={"chunk_size": 4, "bounds": [0, 3], "sinks": None}) == (1, 4, None)
    assert taking({"a": backend, "b": Backend(run, takes=("chunk_size", "bounds"))}, "bounds") == ("b",)
