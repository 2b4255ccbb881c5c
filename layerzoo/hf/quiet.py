"""transformers' progress bars off for a block: loading a model layerzoo builds in memory is no
download or read a user waits for."""

from __future__ import annotations

import contextlib
from typing import Iterator

from transformers.utils import logging


@contextlib.contextmanager
def no_transformers_bars() -> Iterator[None]:
    """transformers' progress bars off inside the block, then as they were."""
    enabled = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            logging.enable_progress_bar()
