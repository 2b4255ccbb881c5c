"""Synthetic and file-based training tasks, generated on the fly from seeds (no downloads)."""

from __future__ import annotations

from typing import Any

from ..errors import OptionError, unknown_name_message
from ..options import make_section
from .base import IGNORE, Batch, Task
from .byte_lm import ByteLM
from .mqar import MQAR
from .niah import NIAH, VARIANTS
from .qa import QA
from .seeds import example_seed, heldout_seed, report_seed
from .text import Text

TASKS: dict[str, type[Task]] = {task.name: task for task in (MQAR, NIAH, ByteLM, Text, QA)}


def make_task(name: str, options: dict[str, Any], vocab_size: int) -> Task:
    """The task `name` with `options`, bound and checked against a model of `vocab_size` tokens.

    Raises OptionError(key, message) for an unknown name or option, or a value the task cannot take.
    """
    if name not in TASKS:
        raise OptionError("name", unknown_name_message("task", name, TASKS))
    task = make_section(TASKS[name], options).bind(vocab_size)
    task.check(vocab_size)
    return task


__all__ = ["IGNORE", "TASKS", "VARIANTS", "Batch", "ByteLM", "MQAR", "NIAH", "QA", "Task", "Text", "example_seed", "heldout_seed", "make_task",
           "report_seed"]
