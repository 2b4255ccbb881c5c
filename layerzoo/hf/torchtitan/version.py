"""The one torchtitan release this package is written against."""

from importlib import metadata

from ..errors import HFError

SUPPORTED = "0.3.0"


def check_version(installed: str | None = None) -> None:
    """Raise HFError unless torchtitan `installed` (None: the installed one) is SUPPORTED."""
    if installed is None:
        try:
            installed = metadata.version("torchtitan")
        except metadata.PackageNotFoundError:
            raise HFError(f"layerzoo.hf.torchtitan needs torchtitan {SUPPORTED}: pip install 'layerzoo[torchtitan]'") from None
    if installed != SUPPORTED:
        raise HFError(f"torchtitan {installed} is installed; layerzoo.hf.torchtitan supports {SUPPORTED} only "
                      f"(pip install torchtitan=={SUPPORTED})")
