"""The reports of a language model trained on text: validation loss against the unigram baseline,
and loss, perplexity and bits per byte against context length (table, JSON and PNG)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from pathlib import Path

from torch import nn

from ...specs import Spec
from ...tasks import Text
from ..evaluation.evaluate import LOCAL
from ..evaluation.perplexity import format_perplexity, perplexity_by_length
from ..parallel.distributed import Context
from ..runs.folder import report_stem
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
    result = perplexity_by_length(model, task, lengths, samples=samples, chunk_size=chunk_size, window=window,
                                  seed=spec.training.seed + 2, device=context.device, autocast=autocast)
    result = {"run": label or spec.name, "spec": spec.name, "tokenizer": task.tokenizer,
              "train_length": spec.training.seq_len, **result}
    if context.is_main:
        stem = Path(out_dir) / report_stem("perplexity", window)
        stem.parent.mkdir(parents=True, exist_ok=True)
        Path(f"{stem}.json").write_text(json.dumps(result, indent=1))
        print(f"{result['run']}: held-out documents streamed in pieces of {chunk_size} tokens, "
              f"test window {window or 'as in spec'}, trained at length {result['train_length']}:")
        print(format_perplexity(result))
        written = f"{stem}.json"
        if plot:
            plot_perplexity({result["run"]: result}, f"{stem}.png", title=f"{result['run']}: held-out text")
            written += f" and {stem}.png"
        print(f"wrote {written}")
    return result
