"""Memory read and write placed around base-model layers by forward hooks.

Hooks leave the base model's code and parameter names untouched (so a transformers model keeps
loading and saving as it did). They are registered once, when the ARMT is built, because
registering a hook is a side effect torch.compile cannot trace; they act only inside
`memory_pass`, which holds the pass's `SegmentPass` for its thread. The memory flows in and out
through that value, never through module attributes, so the model stays re-entrant; outside a
pass the base model runs as if the hooks were not there.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from functools import partial

from torch import nn

from ...kernels.assoc_memory import Memory
from ...mixers.assoc_memory import AssociativeMemory

_running = threading.local()  # .segment: the SegmentPass open in this thread, if any


@dataclass
class SegmentPass:
    """One pass of the base model over (part of) a segment.

    owner: the hooks' owner (see install_memory_hooks) whose memories this pass reads and writes;
    the hooks of another owner on the same base model stay idle.
    memory: what each memory layer reads, by layer index (None: empty, the read is skipped).
    write_tokens: M when the pass ends with the M memory tokens, whose outputs each memory layer
    then writes into `written`; 0 for a pass inside a segment.
    """

    owner: object
    memory: dict[int, Memory | None]
    write_tokens: int
    written: dict[int, Memory] = field(default_factory=dict)


def install_memory_hooks(layers: nn.ModuleList, memories: dict[int, AssociativeMemory], owner: object) -> None:
    """From now on, inside a `memory_pass` of `owner`, layer i of `layers` reads memories[i]
    before it runs and writes it after."""
    for index, memory in memories.items():
        layers[index].register_forward_pre_hook(partial(_read, owner, memory, index), with_kwargs=True)
        layers[index].register_forward_hook(partial(_write, owner, memory, index))


@contextlib.contextmanager
def memory_pass(segment: SegmentPass):
    """While open, the hooks of segment.owner read and write segment's memory in this thread."""
    outer = getattr(_running, "segment", None)
    _running.segment = segment
    try:
        yield
    finally:
        _running.segment = outer


def _segment_of(owner: object) -> SegmentPass | None:
    segment = getattr(_running, "segment", None)
    return segment if segment is not None and segment.owner is owner else None


def _read(owner: object, memory: AssociativeMemory, index: int, layer, args: tuple, kwargs: dict):
    """h <- h + read(h) for every token entering the layer; transformers may pass h by keyword."""
    segment = _segment_of(owner)
    state = None if segment is None else segment.memory[index]
    if state is None:
        return None
    if args:
        return (args[0] + memory.read(args[0], state), *args[1:]), kwargs
    hidden = kwargs["hidden_states"]
    return args, {**kwargs, "hidden_states": hidden + memory.read(hidden, state)}


def _write(owner: object, memory: AssociativeMemory, index: int, layer, args: tuple, output):
    """Write the layer's outputs at the memory tokens (the last write_tokens positions)."""
    segment = _segment_of(owner)
    if segment is None or not segment.write_tokens:
        return
    hidden = output[0] if isinstance(output, tuple) else output
    segment.written[index] = memory.write(hidden[:, -segment.write_tokens:], segment.memory[index])
