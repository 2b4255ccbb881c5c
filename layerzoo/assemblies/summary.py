"""A spec's model described layer by layer: each layer's mixer, parameters, state size and the
options that differ from the mixer's defaults; then the model's totals."""

from __future__ import annotations

from torch import nn

from ..registry import get_mixer
from ..specs import Spec
from .build import build


def describe(spec: Spec, seq_len: int = 4096) -> str:
    """The table `layerzoo describe` prints: a row per layer (state sizes after `seq_len` tokens,
    within one segment for ARMT), then widths, parameter counts and the state per sequence. The
    model is built on the meta device, so nothing is allocated."""
    if spec.model is None:
        raise ValueError(f"{spec.name}: describe needs a model: section; this spec wraps a Hugging Face checkpoint")
    model = build(spec, device="meta")
    stack = getattr(model, "base", model)  # ARMT wraps a CausalLM layer stack
    config = spec.model
    # ARMT attends within a segment (plus its memory tokens); across segments only (A, z) remain
    span = seq_len if spec.armt is None else min(seq_len, spec.armt.segment_size + spec.armt.num_mem_tokens)
    memories = getattr(model, "memories", {})
    rows = []
    for index, (layer, block) in enumerate(zip(config.layers, stack.blocks)):
        defaults = get_mixer(layer.type).options
        options = ", ".join(f"{k}={v}" for k, v in layer.options.items() if v != defaults[k].default)
        memory = memories[str(index)] if str(index) in memories else None
        params = count(block) + (0 if memory is None else count(memory))
        rows.append((str(index), layer.name + ("" if memory is None else " + memory"), f"{params:,}",
                     f"{block.mixer.state_size(span):,}", "-" if layer.ffn_hidden is None else str(layer.ffn_hidden),
                     options))
    header = ("layer", "mixer", "params", f"state@{span}", "ffn", "options")
    widths = [max(len(row[i]) for row in rows + [header]) for i in range(len(header))]
    lines = [f"{spec.name or spec.source}: {spec.description or ''}".rstrip(": ")]
    lines += ["  ".join(cell.ljust(width) if i in (1, 5) else cell.rjust(width)
                        for i, (cell, width) in enumerate(zip(row, widths))).rstrip() for row in [header] + rows]
    total = count(model)
    embedding = stack.embedding.weight.numel()
    head = 0 if config.tie_embeddings else stack.head.weight.numel()
    lines.append(f"d_model {config.d_model}, {config.n_layers} layers, vocab {config.vocab_size}, "
                 f"embeddings {'tied' if config.tie_embeddings else 'untied'}")
    lines.append(f"parameters: {total:,} ({human(total)}); without embedding and head: {human(total - embedding - head)}")
    if spec.armt is not None:
        lines.append(f"ARMT: segments of {spec.armt.segment_size} tokens + {spec.armt.num_mem_tokens} memory tokens, "
                     f"associative memory in layers {sorted(map(int, memories))}; the state column is within one segment")
    else:
        lines.append(f"state per sequence at {seq_len:,} tokens: {model.state_size(seq_len):,} elements")
    return "\n".join(lines)


def count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def human(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return str(n)
