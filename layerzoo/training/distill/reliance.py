"""The reliance measure: how much a hybrid's held-out loss (and KL to a teacher) rises when one
recurrent layer's mixer output is zeroed, layer by layer, against the model intact.

A converted model that learnt to bypass its linear branch (leaning on the attention window and
the MLPs) loses little when that branch is zeroed: a small difference is the sign of it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ...tasks import Task
from ..objectives.divergence import heldout_divergence
from ..parallel.distributed import Context

RECURRENT = "linear_attention"  # the layer_type of the recurrent mixers (transformers' name)


def recurrent_layers(model: nn.Module) -> list[int]:
    """The indices of the model's blocks whose mixer is recurrent (not attention of any kind)."""
    return [index for index, block in enumerate(model.blocks) if getattr(block.mixer, "layer_type", "") == RECURRENT]


@contextlib.contextmanager
def zeroed(model: nn.Module, layer: int) -> Iterator[None]:
    """Inside the block, blocks[layer]'s mixer outputs zeros of its output's shape (its state, when
    it returns one, unchanged): the residual stream passes that layer's mixer by."""
    def zero(module: nn.Module, inputs: Any, output: Any) -> Any:
        if isinstance(output, tuple):
            return (torch.zeros_like(output[0]), *output[1:])
        return torch.zeros_like(output)

    handle = model.blocks[layer].mixer.register_forward_hook(zero)
    try:
        yield
    finally:
        handle.remove()


def reliance(model: nn.Module, task: Task, seq_len: int, *, teacher: nn.Module | None = None,
             layers: Sequence[int] | None = None, samples: int = 16, batch_size: int = 8, seed: int = 0,
             device: torch.device | str = "cpu", autocast=contextlib.nullcontext(), progress: bool = False,
             context: Context | None = None) -> dict[str, Any]:
    """The held-out loss (nats per token) and KL to `teacher` (None without one) of `model`
    (a CausalLM) intact, and with each of `layers` (default: every recurrent layer) zeroed in turn,
    on `samples` seeded sequences of seq_len tokens of `task`'s split.

    Returns {"seq_len", "samples", "intact": {"loss", "kl"}, "layers": [{"layer", "mixer", "loss",
    "kl", "loss_increase", "kl_increase"}, ...]}: each increase is the zeroed value minus the intact
    one (None for the KL without a teacher). autocast: the context every forward runs in (bf16
    autocast, precision.py). progress: a bar on stderr counting the forwards. context: the ranks the
    sequences split over, each on its device (None: this process alone, on `device`).
    """
    layers = recurrent_layers(model) if layers is None else list(layers)
    for layer in layers:
        if not 0 <= layer < len(model.blocks):
            raise ValueError(f"layer {layer} is out of range: the model has {len(model.blocks)} layers")
    variants = {"intact": contextlib.nullcontext,
                **{str(layer): (lambda layer=layer: zeroed(model, layer)) for layer in layers}}
    scores = heldout_divergence(model, teacher, task, seq_len, samples, seed, batch_size=batch_size,
                                variants=variants, device=device, autocast=autocast,
                                progress="reliance" if progress else None, context=context)
    intact = scores["intact"]
    rows = []
    for layer in layers:
        row = scores[str(layer)]
        rows.append({"layer": layer, "mixer": getattr(model.blocks[layer].mixer, "registry_name", ""), **row,
                     "loss_increase": row["loss"] - intact["loss"],
                     "kl_increase": None if teacher is None else row["kl"] - intact["kl"]})
    return {"seq_len": seq_len, "samples": samples, "intact": intact, "layers": rows}


def format_reliance(result: dict[str, Any]) -> str:
    """The reliance measure as a table: a row intact, then a row per zeroed layer."""
    def number(value: float | None, signed: bool = False) -> str:
        return "-" if value is None else f"{value:+.4f}" if signed else f"{value:.4f}"

    head = ["layer zeroed", "mixer", "loss", "loss increase", "KL to teacher", "KL increase"]
    intact = result["intact"]
    rows = [["none (intact)", "", number(intact["loss"]), "", number(intact["kl"]), ""]]
    rows += [[str(row["layer"]), row["mixer"], number(row["loss"]), number(row["loss_increase"], True),
              number(row["kl"]), number(row["kl_increase"], True)] for row in result["layers"]]
    widths = [max(len(row[i]) for row in [head] + rows) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(width) if i < 2 else cell.rjust(width) for i, (cell, width) in enumerate(zip(row, widths)))
             for row in [head] + rows]
    if not result["layers"]:
        lines.append("(no recurrent layers: nothing to zero)")
    return "\n".join(line.rstrip() for line in lines)


def reliance_report(model: nn.Module, task: Task, seq_len: int, out_dir: str | Path | None, *,
                    teacher: nn.Module | None = None, samples: int = 16, batch_size: int = 8, seed: int = 0,
                    device: torch.device | str = "cpu", autocast=contextlib.nullcontext(),
                    echo: Callable[[str], Any] | None = print, context: Context | None = None) -> dict[str, Any]:
    """Measure reliance (every recurrent layer zeroed in turn; context: as reliance's), write
    <out_dir>/reliance.json (None: not written, on a rank other than 0), and echo the table (None:
    silently, and no progress bar); returns the measure."""
    if echo is not None:  # before the measure, which runs a forward per recurrent layer and batch
        echo(f"reliance: held-out loss and KL to the teacher with each recurrent layer's mixer output zeroed "
             f"({samples} sequences of {seq_len} tokens):")
    result = reliance(model, task, seq_len, teacher=teacher, samples=samples, batch_size=batch_size, seed=seed,
                      device=device, autocast=autocast, progress=echo is not None, context=context)
    if out_dir is not None:
        (Path(out_dir) / "reliance.json").write_text(json.dumps(result, indent=1))
    if echo is not None:
        echo(format_reliance(result))
        if out_dir is not None:
            echo(f"wrote {Path(out_dir) / 'reliance.json'}")
    return result
