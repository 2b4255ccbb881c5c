"""The `layerzoo` command: list specs and mixers, describe a spec. Errors print as one line."""

from __future__ import annotations

import argparse
import sys

from .errors import LayerzooError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="layerzoo", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("specs", help="list the shipped specs")
    commands.add_parser("mixers", help="list registered mixers with their options and defaults")
    describe = commands.add_parser("describe", help="per-layer mixers, parameters and state sizes of a spec")
    describe.add_argument("spec", help="a shipped spec name or a YAML path")
    describe.add_argument("--seq-len", type=int, default=4096, help="length at which to report state sizes (default 4096)")
    describe.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                          help="override a spec value, e.g. --set model.d_model=256 (repeatable)")
    describe.add_argument("--dump", action="store_true", help="print the resolved spec as YAML instead")
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except (LayerzooError, ValueError, OSError) as error:
        print(f"layerzoo: error: {error}", file=sys.stderr)
        return 2


def list_specs(args: argparse.Namespace) -> int:
    from .specs import load_spec, shipped_specs

    names = shipped_specs()
    width = max(map(len, names))
    for name in names:
        print(f"{name:<{width}}  {load_spec(name).description or ''}")
    return 0


def list_mixers(args: argparse.Namespace) -> int:
    from .registry import get_mixer, list_mixers as registered
    from .specs.options import type_name

    for name in registered():
        entry = get_mixer(name)
        print(f"{name}: {entry.summary}")
        for option in entry.options.values():
            default = "(required)" if option.required else f"= {option.default!r}"
            print(f"    {option.name}: {type_name(option.annotation)} {default}")
    return 0


def describe(args: argparse.Namespace) -> int:
    from .assemblies import build
    from .registry import get_mixer
    from .specs import load_spec

    spec = load_spec(args.spec, args.overrides)
    if args.dump:
        print(spec.to_yaml(), end="")
        return 0
    model = build(spec, device="meta")  # counts parameters without allocating them
    config = spec.model
    rows = []
    for index, (layer, block) in enumerate(zip(config.layers, model.blocks)):
        defaults = get_mixer(layer.type).options
        options = ", ".join(f"{k}={v}" for k, v in layer.options.items() if v != defaults[k].default)
        rows.append((str(index), layer.name, f"{count(block):,}", f"{block.mixer.state_size(args.seq_len):,}",
                     "-" if layer.ffn_hidden is None else str(layer.ffn_hidden), options))
    header = ("layer", "mixer", "params", f"state@{args.seq_len}", "ffn", "options")
    widths = [max(len(row[i]) for row in rows + [header]) for i in range(len(header))]
    print(f"{spec.name or spec.source}: {spec.description or ''}".rstrip(": "))
    for row in [header] + rows:
        print("  ".join(cell.ljust(width) if i in (1, 5) else cell.rjust(width) for i, (cell, width) in enumerate(zip(row, widths))).rstrip())
    total = count(model)
    embedding = model.embedding.weight.numel()
    head = 0 if config.tie_embeddings else model.head.weight.numel()
    print(f"d_model {config.d_model}, {config.n_layers} layers, vocab {config.vocab_size}, "
          f"embeddings {'tied' if config.tie_embeddings else 'untied'}")
    print(f"parameters: {total:,} ({human(total)}); without embedding and head: {human(total - embedding - head)}")
    print(f"state per sequence at {args.seq_len:,} tokens: {model.state_size(args.seq_len):,} elements")
    return 0


def count(module) -> int:
    return sum(p.numel() for p in module.parameters())


def human(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return str(n)


COMMANDS = {"specs": list_specs, "mixers": list_mixers, "describe": describe}

if __name__ == "__main__":
    sys.exit(main())
