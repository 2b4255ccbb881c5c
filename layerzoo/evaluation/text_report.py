"""The reports of a language model trained on text: validation loss against the unigram baseline,
and loss, perplexity and bits per byte against context length (table, JSON and PNG)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from pathlib import Path

from torch import nn

from ..mixers import at_window
from ..specs import Spec
from ..tasks import Text, report_seed
from ..training.objectives.batches import LOCAL
from ..training.parallel.distributed import Context
from ..training.runs.folder import report_stem
from .perplexity import format_perplexity, perplexity_by_length
from .perplexity_plot import plot_perplexity


def text_report(model: nn.Module, spec: Spec, task: Text, out_dir: str | Path, metrics: dict, *,
                context: Context = LOCAL, autocast=contextlib.nullcontext()) -> dict:
    """After training: print the final validation loss beside the unigram entropy of the training
    tokens and write <out_dir>/text-report.json (rank 0), then the perplexity report at the spec's
    training.eval.lengths when it has any. Returns the summary."""
    baseline = dataclasses.replace(task, split="train").unigram_entropy()
    loss = metrics.get("eval_loss")
    summary = {"spec": spec.name, "step": metrics.get("step"), "tokenizer": task.tokenizer,
               "validation_loss": loss, "unigram_entropy": baseline,
               "validation_over_unigram": None if loss is None else loss / baseline}
    if context.is_main:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / "text-report.json").write_text(json.dumps(summary, indent=1))
        print(f"validation loss {loss:.4f} nats/token; unigram baseline (entropy of the training tokens) "
              f"{baseline:.4f}: {100 * summary['validation_over_unigram']:.1f}% of it")
    lengths = spec.training.eval.lengths
    if lengths:
        perplexity_report(model, spec, task, out_dir, list(lengths), window=spec.training.test_window,
                          samples=spec.training.eval.documents, context=context, autocast=autocast)
    return summary


def perplexity_report(model: nn.Module, spec: Spec, task: Text, out_dir: str | Path, lengths: list[int], *,
                      window: int | None = None, samples: int = 8, chunk_size: int = 1024, label: str | None = None,
                      context: Context = LOCAL, autocast=contextlib.nullcontext(), plot: bool = True) -> dict:
    """perplexity_by_length on task's held-out documents; print the table and (rank 0) write
    <out_dir>/perplexity-window<W>.json, and its PNG when `plot`. Every rank runs the model (an
    FSDP forward needs them all)."""
    return write_perplexity(model, task, Path(out_dir) / report_stem("perplexity", window), lengths,
                            label=label or spec.name, spec=spec.name, train_length=spec.training.seq_len,
                            seed=report_seed(spec.training.seed), window=window, samples=samples, chunk_size=chunk_size,
                            context=context, autocast=autocast, plot=plot)


def write_perplexity(model: nn.Module, task: Text, stem: str | Path, lengths: list[int], *, label: str,
                     spec: str | None = None, train_length: int | None = None, seed: int = 2, window: int | None = None,
                     samples: int = 8, chunk_size: int = 1024, context: Context = LOCAL,
                     autocast=contextlib.nullcontext(), plot: bool = True, about: dict | None = None,
                     progress: bool = False) -> dict:
    """perplexity_by_length of `model` (named `label`; `seed` chooses the documents; `progress`: its
    bar and time estimate on stderr) on task's held-out documents, with its state per sequence at
    the longest length; print the table and (rank 0) write <stem>.json (with `about`'s keys too),
    and <stem>.png when `plot`."""
    result = perplexity_by_length(model, task, lengths, samples=samples, chunk_size=chunk_size, window=window,
                                  seed=seed, device=context.device, autocast=autocast, label=label,
                                  progress=progress and context.is_main)
    result = {"run": label, "spec": spec, **(about or {}), "tokenizer": task.tokenizer, "train_length": train_length,
              **result, "state": state_at(model, max(lengths), window)}
    if context.is_main:
        stem = Path(stem)
        stem.parent.mkdir(parents=True, exist_ok=True)
        Path(f"{stem}.json").write_text(json.dumps(result, indent=1))
        trained = "" if train_length is None else f", trained at length {train_length}"
        print(f"{label}: held-out documents streamed in pieces of {chunk_size} tokens, "
              f"test window {window or 'as in spec'}{trained}:")
        print(format_perplexity(result))
        written = f"{stem}.json"
        if plot:
            plot_perplexity({label: result}, f"{stem}.png", title=f"{label}: held-out text")
            written += f" and {stem}.png"
        print(f"wrote {written}")
    return result


def state_at(model: nn.Module, length: int, window: int | None) -> dict | None:
    """{"length", "elements"}: the model's state per sequence after `length` tokens at test window
    `window` (its mixers' states: full attention's KV cache grows with the length), or None for a
    model that does not say (ARMT)."""
    if not hasattr(model, "state_size"):
        return None
    with at_window(model, window):
        return {"length": length, "elements": int(model.state_size(length))}


def format_comparison(results: dict[str, dict]) -> str:
    """A table of several models' perplexity reports: a row per model (its label), its state per
    sequence at the longest length, then its perplexity at each context length."""
    lengths = sorted({row["length"] for result in results.values() for row in result["lengths"]})
    longest = max(lengths)
    head = ("model", f"state@{longest} (floats)", *map(str, lengths))
    rows = []
    for label, result in results.items():
        by_length = {row["length"]: row["perplexity"] for row in result["lengths"]}
        state = result.get("state")
        rows.append((label, "-" if state is None or state["length"] != longest else f"{state['elements']:,}",
                     *("-" if by_length.get(length) is None else f"{by_length[length]:.2f}" for length in lengths)))
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]
    return "\n".join("  ".join(cell.ljust(width) if i == 0 else cell.rjust(width) for i, (cell, width)
                               in enumerate(zip(row, widths))).rstrip() for row in [head, *rows])
