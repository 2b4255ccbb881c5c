"""transformers' modeling modules on their pure-PyTorch functions."""

from __future__ import annotations

import contextlib
from types import ModuleType
from typing import Iterator


@contextlib.contextmanager
def pure_pytorch(module: ModuleType, names: tuple[str, ...]) -> Iterator[None]:
    """Within it, each of `module`'s functions `names` is its PyTorch body: transformers binds a
    kernel (fla's, mamba_ssm's, causal-conv1d's) over it at import when one is installed, keeping
    the body as __wrapped__ (functools.wraps)."""
    saved = {name: getattr(module, name) for name in names}
    try:
        for name, function in saved.items():
            body = getattr(function, "__wrapped__", function)
            assert body.__module__ == module.__name__, f"{name} unwraps to {body.__module__}.{body.__name__}"
            setattr(module, name, body)
        yield
    finally:
        for name, function in saved.items():
            setattr(module, name, function)
