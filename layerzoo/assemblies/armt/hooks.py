"""Memory read and write placed around base-model layers for one pass, by forward hooks.

Hooks leave the base model's code and parameter names untouched (so a transformers model keeps
loading and saving as it did) and live only for the pass: the memory flows in and out through a
`SegmentPass` value, never through module attributes, so the model stays re-entrant.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from functools import partial

from torch import nn

from ...kernels.assoc_memory import Memory
from ...mixers.assoc_memory import AssociativeMemory


@dataclass
class SegmentPass:
    """One pass of the base model over (part of) a segment.

    memory: what each memory layer reads, by layer index (None: empty, the read is skipped).
    write_tokens: M when the pass ends with the M memory tokens, whose outputs each memory layer
    then writes into `written`; 0 for a pass inside a segment.
    """

    memory: dict[int, Memory | None]
    write_tokens: int
    written: dict[int, Memory] = field(default_factory=dict)


@contextlib.contextmanager
def memory_hooks(layers: nn.ModuleList, memories: dict[int, AssociativeMemory], segment: SegmentPass):
    """While open, layer i of `layers` reads memories[i] before it runs and writes after it."""
    handles = []
    try:
        for index, memory in memories.items():
            handles.append(layers[index].register_forward_pre_hook(partial(_read, memory, segment, index), with_kwargs=True))
            if segment.write_tokens:
                handles.append(layers[index].register_forward_hook(partial(_write, memory, segment, index)))
        yield
    finally:
        for handle in handles:
            handle.remove()


def _read(memory: AssociativeMemory, segment: SegmentPass, index: int, layer, args: tuple, kwargs: dict):
    """h <- h + read(h) for every token entering the layer; transformers may pass h by keyword."""
    state = segment.memory[index]
    if state is None:
        return None
    if args:
        return (args[0] + memory.read(args[0], state), *args[1:]), kwargs
    hidden = kwargs["hidden_states"]
    return args, {**kwargs, "hidden_states": hidden + memory.read(hidden, state)}


def _write(memory: AssociativeMemory, segment: SegmentPass, index: int, layer, args: tuple, output):
    """Write the layer's outputs at the memory tokens (the last write_tokens positions)."""
    hidden = output[0] if isinstance(output, tuple) else output
    segment.written[index] = memory.write(hidden[:, -segment.write_tokens:], segment.memory[index])
