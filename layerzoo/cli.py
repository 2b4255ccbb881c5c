"""The `layerzoo` command: list mixers and specs, describe, train and evaluate a spec's model, sweep and compare
runs, export a model to transformers, convert a transformer into a hybrid and distil it.

Errors a user can fix (a bad spec, option or file) print as one line, without a traceback.
"""

from __future__ import annotations

import argparse
import sys

from . import __version__
from .errors import LayerzooError


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)  # help and argument errors end here, before torch is imported
    try:
        return COMMANDS[args.command](args)
    except (LayerzooError, ValueError, OSError) as error:
        print(f"layerzoo: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as stop:  # training's says what it saved, and carries the signal's exit code
        print(f"layerzoo: {stop or 'interrupted'}", file=sys.stderr)
        return getattr(stop, "exit_code", 130)


def build_parser() -> argparse.ArgumentParser:
    """The command line: every subcommand and its arguments. Building it imports nothing heavy; each
    command imports what it needs when it runs."""
    parser = argparse.ArgumentParser(
        prog="layerzoo", description="List mixers and specs; describe, train and evaluate the model a spec declares.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("specs", help="list the shipped specs")
    mixers = commands.add_parser("mixers", help="list registered mixers, or one mixer's options")
    mixers.add_argument("name", nargs="?", help="a registered mixer: print its options (type, default, bounds, description)")
    mixers.add_argument("--markdown", action="store_true", help="print the options tables as Markdown (the docs' tables)")
    describe = commands.add_parser("describe", help="per-layer mixers, parameters and state sizes of a spec")
    describe.add_argument("spec", help="a shipped spec name or a YAML path")
    describe.add_argument("--seq-len", type=int, default=4096, help="length at which to report state sizes (default 4096)")
    describe.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                          help="override a spec value, e.g. --set model.d_model=256 (repeatable)")
    describe.add_argument("--dump", action="store_true", help="print the resolved spec as YAML instead")
    add_training_commands(commands)
    add_text_commands(commands)
    add_comparison_commands(commands)
    add_hf_commands(commands)
    add_distill_commands(commands)
    add_kernel_commands(commands)
    return parser


def list_specs(args: argparse.Namespace) -> int:
    from .specs import load_spec, shipped_specs

    names = shipped_specs()
    width = max(map(len, names))
    for name in names:
        print(f"{name:<{width}}  {load_spec(name).description or ''}")
    return 0


def list_mixers(args: argparse.Namespace) -> int:
    from .options import markdown_table, option_rows, text_table
    from .registry import get_mixer, list_mixers as registered

    names = [args.name] if args.name else registered()
    entries = [get_mixer(name) for name in names]  # an unknown name fails here, naming the closest
    if args.markdown:
        print("\n\n".join(f"## `{entry.name}`\n\n{entry.summary}\n\n{markdown_table(option_rows(entry.options.values()))}"
                          for entry in entries))
    elif args.name:
        entry = entries[0]
        print(f"{entry.name}: {entry.summary}\n\n{text_table(option_rows(entry.options.values()))}")
    else:
        width = max(map(len, names))
        for entry in entries:
            print(f"{entry.name:<{width}}  {entry.summary}")
        print("\n`layerzoo mixers NAME` lists a mixer's options.")
    return 0


def describe(args: argparse.Namespace) -> int:
    from .assemblies import build
    from .registry import get_mixer
    from .specs import load_spec

    check_at_least_one("--seq-len", args.seq_len)
    spec = load_spec(args.spec, args.overrides)
    if args.dump:
        print(spec.to_yaml(), end="")
        return 0
    if spec.model is None:
        raise ValueError(f"{spec.name}: describe needs a model: section; this spec wraps a Hugging Face checkpoint")
    model = build(spec, device="meta")  # counts parameters without allocating them
    stack = getattr(model, "base", model)  # ARMT wraps a CausalLM layer stack
    config = spec.model
    # ARMT attends within a segment (plus its memory tokens); across segments only (A, z) remain
    span = args.seq_len if spec.armt is None else min(args.seq_len, spec.armt.segment_size + spec.armt.num_mem_tokens)
    memories = getattr(model, "memories", {})
    rows = []
    for index, (layer, block) in enumerate(zip(config.layers, stack.blocks)):
        defaults = get_mixer(layer.type).options
        options = ", ".join(f"{k}={v}" for k, v in layer.options.items() if v != defaults[k].default)
        name = layer.name + (" + memory" if str(index) in memories else "")
        params = count(block) + (count(memories[str(index)]) if str(index) in memories else 0)
        rows.append((str(index), name, f"{params:,}", f"{block.mixer.state_size(span):,}",
                     "-" if layer.ffn_hidden is None else str(layer.ffn_hidden), options))
    header = ("layer", "mixer", "params", f"state@{span}", "ffn", "options")
    widths = [max(len(row[i]) for row in rows + [header]) for i in range(len(header))]
    print(f"{spec.name or spec.source}: {spec.description or ''}".rstrip(": "))
    for row in [header] + rows:
        print("  ".join(cell.ljust(width) if i in (1, 5) else cell.rjust(width) for i, (cell, width) in enumerate(zip(row, widths))).rstrip())
    total = count(model)
    embedding = stack.embedding.weight.numel()
    head = 0 if config.tie_embeddings else stack.head.weight.numel()
    print(f"d_model {config.d_model}, {config.n_layers} layers, vocab {config.vocab_size}, "
          f"embeddings {'tied' if config.tie_embeddings else 'untied'}")
    print(f"parameters: {total:,} ({human(total)}); without embedding and head: {human(total - embedding - head)}")
    if spec.armt is not None:
        print(f"ARMT: segments of {spec.armt.segment_size} tokens + {spec.armt.num_mem_tokens} memory tokens, "
              f"associative memory in layers {sorted(map(int, memories))}; the state column is within one segment")
    else:
        print(f"state per sequence at {args.seq_len:,} tokens: {model.state_size(args.seq_len):,} elements")
    return 0


def check_at_least_one(flag: str, value: int | list[int] | None) -> None:
    """A size or count flag (None: not given) must be >= 1; a ValueError naming the flag otherwise."""
    for item in value if isinstance(value, list) else [] if value is None else [value]:
        if item < 1:
            raise ValueError(f"{flag} must be >= 1, got {item}")


def count(module) -> int:
    return sum(p.numel() for p in module.parameters())


def human(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return str(n)


def add_training_commands(commands) -> None:
    train = commands.add_parser("train", help="train a spec on its training: section, then evaluate it (torchrun for DDP)")
    train.add_argument("spec", help="a shipped spec name or a YAML path with a training: section")
    train.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="override a spec value, e.g. --set training.steps=100 (repeatable)")
    train.add_argument("--out", help="run folder (default: training.out_dir, else runs/<spec name>)")
    used = train.add_mutually_exclusive_group()  # a run folder that holds anything needs one of them
    used.add_argument("--resume", action="store_true", help="continue the run folder's run from its newest usable checkpoint")
    used.add_argument("--overwrite", action="store_true",
                      help="replace the run folder's run (its spec, metrics, checkpoints and reports; other files stay)")
    train.add_argument("--no-progress", action="store_true", help="no progress bar")
    train.add_argument("--compile", action="store_true",
                       help="torch.compile the model (training.compile: true): faster steps after a one-time compile")
    evaluate = commands.add_parser("eval", help="length x depth accuracy of a checkpoint (table, JSON, heatmap PNG), "
                                                "or its perplexity against context length on held-out text; a distill "
                                                "run's student beside its teacher; model folders side by side")
    evaluate.add_argument("checkpoint", nargs="+", metavar="RUN_OR_MODEL",
                          help="a checkpoint folder, a run folder (its latest checkpoint), a distill run folder (its "
                               "student and its teacher) or a model folder (layerzoo's, or a Llama, Mistral or Qwen "
                               "one `layerzoo convert` reads); several are drawn on one plot")
    evaluate.add_argument("--metric", choices=("accuracy", "perplexity"),
                          help="default: accuracy for training runs of a synthetic task, else perplexity")
    evaluate.add_argument("--lengths", type=int, nargs="+",
                          help="context lengths (default: the spec's training.eval.lengths; a distill run's "
                               "distillation length times 1, 2, 4, 8, 16; model folders: the first run's)")
    evaluate.add_argument("--text", nargs="+", metavar="FILES",
                          help="perplexity: the text to score every model on (files, globs, stdlib:GLOB), each read "
                               "with its own tokenizer (default: each run's own text; model folders the first run's)")
    evaluate.add_argument("--field", help="with --text: the text field of .jsonl records / column of .parquet files")
    evaluate.add_argument("--holdout", type=float, help="with --text: the fraction of documents held out and scored "
                                                        "(default 0.05, the text task's)")
    evaluate.add_argument("--depths", type=float, nargs="+", help="needle depths in [0, 1] (default: the spec's)")
    evaluate.add_argument("--window", type=int, help="test window of the SWA layers (default: the training's or "
                                                     "distillation's long window; a distill run's teacher keeps its own)")
    evaluate.add_argument("--samples", type=int, help="examples per cell (default: training.eval.samples); perplexity: "
                                                      "documents per length (default: training.eval.documents)")
    evaluate.add_argument("--chunk-size", type=int, default=1024,
                          help="perplexity: tokens per piece streamed through the model (default 1024)")
    evaluate.add_argument("--out", help="folder for the JSON and PNG (default: the first run folder; perplexity: the "
                                        "PNG of all, each run's JSON stays in its folder, a model folder's goes here)")


def train(args: argparse.Namespace) -> int:
    import contextlib

    from .training.parallel.distributed import teardown
    from .training.reports.report import grid_report
    from .training.loop.trainer import autocast_context, train as run
    from .training.sweeps.processes import follow_sweep

    follow_sweep()
    overrides = [*args.overrides, *(["training.compile=true"] if args.compile else [])]
    with contextlib.ExitStack() as holding:  # the run folder stays locked until its reports are written
        result = run(args.spec, overrides, run_dir=args.out, resume=args.resume, overwrite=args.overwrite,
                     progress=not args.no_progress, holding=holding)
        try:
            autocast = autocast_context(result.spec.training, result.context)
            if result.task.name == "text":
                from .training.reports.text_report import text_report

                text_report(result.model, result.spec, result.task, result.run_dir, result.metrics,
                            context=result.context, autocast=autocast)
            else:
                grid_report(result.model, result.spec, result.task, result.run_dir, context=result.context,
                            autocast=autocast)
        finally:
            teardown(result.context)
    return 0


def evaluate(args: argparse.Namespace) -> int:
    from .side_by_side import evaluate as run

    for flag in ("lengths", "samples", "window", "chunk_size"):
        check_at_least_one(f"--{flag.replace('_', '-')}", getattr(args, flag))
    if any(not 0 <= depth <= 1 for depth in args.depths or []):
        raise ValueError(f"--depths must lie in [0, 1], got {args.depths}")
    if args.holdout is not None and not 0 < args.holdout <= 0.5:
        raise ValueError(f"--holdout must lie in (0, 0.5], got {args.holdout}")
    return run(args)


def add_text_commands(commands) -> None:
    tokenizer = commands.add_parser("tokenizer", help="train a byte-level BPE tokenizer on local text")
    actions = tokenizer.add_subparsers(dest="action", required=True)
    training = actions.add_parser("train", help="train a byte-level BPE on files and write a tokenizer folder")
    training.add_argument("files", nargs="+", help="text, .jsonl or .parquet files, globs, or stdlib:GLOB")
    training.add_argument("--vocab-size", type=int, required=True, help="tokens: 256 bytes, EOS and merges (>= 257)")
    training.add_argument("--out", required=True, help="folder to write tokenizer.json and tokenizer_config.json to")
    training.add_argument("--field", default="text", help="the text field of .jsonl records / column of .parquet files")
    plot = commands.add_parser("plot", help="training and validation loss, learning rate and window of runs, as a PNG")
    plot.add_argument("runs", nargs="+", help="run folders (their metrics.jsonl), drawn on one figure")
    plot.add_argument("--out", help="PNG path (default: <first run>/loss.png)")


def train_tokenizer(args: argparse.Namespace) -> int:
    from .tasks.text import documents, resolve_files, train_bpe

    files = resolve_files(tuple(args.files))
    out = train_bpe(documents(files, args.field), args.vocab_size, args.out, progress=True)
    print(f"wrote {out / 'tokenizer.json'} ({args.vocab_size} tokens, from {len(files)} files)")
    return 0


def plot_runs(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .training.reports.loss_plot import plot_runs as plot

    out = plot(args.runs, args.out or Path(args.runs[0]) / "loss.png")
    print(f"wrote {out}")
    return 0


def tokenizer_command(args: argparse.Namespace) -> int:
    return {"train": train_tokenizer}[args.action](args)


def add_comparison_commands(commands) -> None:
    sweep = commands.add_parser("sweep", help="train a spec at every point of a grid of overrides x seeds, J runs at a "
                                              "time, then compare them")
    sweep.add_argument("spec", help="a shipped spec name or a YAML path with a training: section")
    sweep.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...",
                       help="a spec key and its values (YAML; commas inside [] or {} do not split), e.g. "
                            "training.window.long=16,32,64 (repeatable: the cartesian product)")
    sweep.add_argument("--seeds", type=int, default=1, metavar="N",
                       help="runs per grid point, with training.seed = the spec's seed + 0 .. N-1 (default 1)")
    sweep.add_argument("--out", required=True, metavar="DIR", help="the sweep folder: sweep.json, a run folder per run, compare-*")
    sweep.add_argument("--jobs", type=int, default=1, metavar="J",
                       help="training processes at a time; the threads are divided between them (default 1)")
    sweep.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="override a spec value in every run, e.g. --set training.steps=100 (repeatable)")
    sweep.add_argument("--max-runs", type=int, metavar="N",
                       help="refuse a sweep of more runs than this (grid points x seeds; default 10000)")
    comparison = commands.add_parser("compare", help="runs and sweeps side by side: metric against context length "
                                                     "(mean, min-max over seeds), loss, tokens/s, state size")
    comparison.add_argument("folders", nargs="+", metavar="RUN_OR_SWEEP",
                            help="run folders (each its own group), sweep folders (a group per grid point) and "
                                 "SWEEP/GROUP (one grid point of a sweep)")
    comparison.add_argument("--metric", choices=("niah", "perplexity", "loss"),
                            help="niah: the accuracy grid's mean over depths; perplexity: what `eval --metric "
                                 "perplexity` wrote; loss: training loss (default: niah, else perplexity, else loss, "
                                 "by what the first run has)")
    comparison.add_argument("--window", type=int, metavar="W", help="the test window whose reports to read (default: each run's own)")
    comparison.add_argument("--out", metavar="PREFIX",
                            help="write PREFIX.md, PREFIX.json and PREFIX.png (default: <first folder>/compare-<metric>)")


def sweep(args: argparse.Namespace) -> int:
    from .training.sweeps.sweep import run_sweep

    check_at_least_one("--seeds", args.seeds)
    check_at_least_one("--jobs", args.jobs)
    check_at_least_one("--max-runs", args.max_runs)
    outcomes = run_sweep(args.spec, args.grid, args.seeds, args.out, jobs=args.jobs, overrides=args.overrides,
                         **({} if args.max_runs is None else {"max_runs": args.max_runs}))
    return 1 if any(outcome.status == "failed" for outcome in outcomes) else 0


def compare(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .training.sweeps.compare import compare as run, to_markdown, write_comparison

    check_at_least_one("--window", args.window)
    comparison = run(args.folders, args.metric, args.window)
    paths = write_comparison(comparison, args.out or Path(args.folders[0]) / f"compare-{comparison['metric']}")
    print(to_markdown(comparison), end="")
    print(f"wrote {', '.join(map(str, paths))}")
    return 0


def add_hf_commands(commands) -> None:
    export = commands.add_parser("export", help="a run's newest checkpoint (and tokenizer) as a transformers folder")
    export.add_argument("run", help="a run folder (its newest usable checkpoint) or a checkpoint folder")
    export.add_argument("out_dir", help="the folder to write (new or empty): config.json, model.safetensors, tokenizer")
    conversion = commands.add_parser(
        "convert", help="a pretrained Hugging Face transformer as a hybrid: attention layers replaced by other "
                        "mixers initialised from their weights", epilog=CONVERT_PATTERNS,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    conversion.add_argument("teacher", metavar="HF_FOLDER", help="a local folder of a Llama (SmolLM2), Mistral, Qwen2 "
                            "or Qwen3 causal LM (config.json, safetensors; its code is never run), or a layerzoo "
                            "folder of attention layers")
    conversion.add_argument("--pattern", required=True, help="a rule or a YAML spec file (below)")
    conversion.add_argument("--set", dest="options", action="append", default=[], metavar="MIXER.OPTION=VALUE",
                            help="an option of a pattern's mixer, e.g. --set swa.window=512 (repeatable)")
    conversion.add_argument("--out", required=True, help="the folder to write (new or empty)")
    conversion.add_argument("--seed", type=int, default=0, help="seed of what the new mixers initialise themselves")
    # No option prefix that lm_eval's arguments could start with: every one of them is passed on as it is.
    harness = commands.add_parser(
        "lm-eval", prefix_chars="\0", add_help=False,
        help="lm-evaluation-harness's command line (lm_eval ARGS...) with layerzoo models registered",
        description="Runs lm-evaluation-harness's command line, `lm_eval ARGS...`, in a process where layerzoo's "
                    "model type is registered, so that --model hf --model_args pretrained=DIR reads an exported "
                    "folder. ARGS are lm_eval's own: `lm_eval --help` lists them.")
    harness.add_argument("arguments", nargs=argparse.REMAINDER, metavar="ARGS")
    harness.set_defaults(parser=harness)


CONVERT_PATTERNS = """\
patterns (which mixer each of the teacher's layers becomes):
  gated_deltanet*3,attention        names cycled over the layers: a 3:1 hybrid, attention last in each four
  gated_deltanet; attention@0,-1    every layer gated_deltanet, then attention at layers 0 and -1 (the last)
  swa                               every layer sliding-window attention (--set swa.window=512)
  hybrid.yaml                       a spec file's model: section: mixers (name: {type, options}) and pattern
                                    or layers; d_model, vocab_size and n_layers are the teacher's
targets: attention (kept), swa, gated_deltanet, mlstm, mamba2, kda. Their head counts and widths
come from the teacher's attention, whose weights initialise them (docs/convert.md); other options
keep their defaults unless --set. The output folder holds the student, the teacher's tokenizer
and conversion.json."""


def convert(args: argparse.Namespace) -> int:
    try:
        from .convert import convert
        from .convert.pattern import with_options
    except ImportError as error:  # transformers is an extra; its absence is one line too
        raise LayerzooError(str(error)) from None
    conversion = convert(args.teacher, with_options(args.pattern, args.options), args.out, seed=args.seed)
    layers = ", ".join(map(str, conversion.converted)) or "none"
    print(f"converted layers {layers} of {len(conversion.student.blocks)} into {args.out}; load it with "
          "`import layerzoo.hf` and AutoModelForCausalLM.from_pretrained")
    return 0


def export(args: argparse.Namespace) -> int:
    try:
        from .hf.export import export_run
    except ImportError as error:  # transformers is an extra; its absence is one line too
        raise LayerzooError(str(error)) from None
    checkpoint = export_run(args.run, args.out_dir)
    print(f"exported {checkpoint} to {args.out_dir}; load it with `import layerzoo.hf` and "
          "AutoModelForCausalLM.from_pretrained")
    return 0


def lm_eval(args: argparse.Namespace) -> int:
    if args.arguments in ([], ["-h"], ["--help"]):  # this command's own help, before transformers and torch load
        if not args.arguments:
            args.parser.error("give lm_eval's arguments, e.g. --model hf --model_args pretrained=DIR --tasks hellaswag")
        args.parser.print_help()
        return 0
    try:
        from .hf.harness import run_lm_eval

        return run_lm_eval(args.arguments)
    except ImportError as error:  # transformers or lm-evaluation-harness missing: the extra to install, in one line
        raise LayerzooError(str(error)) from None


def add_distill_commands(commands) -> None:
    distill = commands.add_parser("distill", help="distil a converted model from its teacher (per-layer alignment, then "
                                                  "KL end to end), measure its reliance on its recurrent layers, and "
                                                  "write it as a transformers folder")
    distill.add_argument("converted", help="a folder `layerzoo convert` wrote")
    distill.add_argument("--out", required=True, metavar="RUN_DIR",
                         help="the run folder: spec.yaml, a folder per stage, reports, the student in model/")
    distill.add_argument("--config", metavar="FILE", help="a YAML file with a distill: section (default: its defaults)")
    distill.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                         help="override a distill: value, e.g. --set distill.align.steps=100 (repeatable)")
    used = distill.add_mutually_exclusive_group()  # a run folder that holds anything needs one of them
    used.add_argument("--resume", action="store_true", help="continue the run from its newest usable checkpoint")
    used.add_argument("--overwrite", action="store_true", help="replace the run folder's run (other files stay)")
    distill.add_argument("--no-progress", action="store_true", help="no progress bars, no tables")


def distill_command(args: argparse.Namespace) -> int:
    try:
        from .distill import distill_folder
    except ImportError as error:  # transformers is an extra; its absence is one line too
        raise LayerzooError(str(error)) from None
    distill_folder(args.converted, args.out, args.config, args.overrides, resume=args.resume, overwrite=args.overwrite,
                   progress=not args.no_progress)
    return 0


def add_kernel_commands(commands) -> None:
    kernels = commands.add_parser("kernels", help="the compiled CPU kernels: which are built in this Python "
                                                  "environment, and where; `kernels build` builds them all up front")
    kernels.add_argument("action", nargs="?", choices=("list", "build"), default="list",
                         help="list (the default), or build every kernel not built yet, several at a time")
    kernels.add_argument("--jobs", type=int, metavar="J",
                         help="build: builds at a time (default: the CPUs available, at most one per kernel)")


def kernels_command(args: argparse.Namespace) -> int:
    """`kernels`: a table of the compiled kernels; `kernels build`: build them, a line each as it ends."""
    check_at_least_one("--jobs", args.jobs)  # before torch is imported, as argument errors are
    from .kernels.compiled import KERNELS

    if args.action == "build":
        return build_kernels(KERNELS, args.jobs)
    rows = [("compiled CPU kernel", "built", "folder")]
    rows += [(kernel.what, "yes" if kernel.built() else "no", str(kernel.build_directory())) for kernel in KERNELS]
    width = [max(len(row[i]) for row in rows) for i in range(2)]
    for row in rows:
        print(f"{row[0]:<{width[0]}}  {row[1]:<{width[1]}}  {row[2]}")
    print(f"\nfolders of the Python environment {sys.prefix}; each kernel is built on first use, or all at once "
          "by `layerzoo kernels build`")
    return 0


def build_kernels(kernels, jobs: int | None) -> int:
    """`kernels build`: one line on what builds, then one per kernel as it ends; 1 if any failed."""
    from .kernels.common.native_build import reporting_builds
    from .kernels.compiled import build_all, builds_at_once

    missing = [kernel.what for kernel in kernels if not kernel.built()]
    jobs = jobs or builds_at_once(kernels)
    if missing:
        print(f"building {len(missing)} compiled CPU kernels, {jobs} at a time (a minute or two each): "
              f"{', '.join(missing)}", flush=True)

    def done(built) -> None:
        if not built.ok:
            outcome = "not built (see the warning above); its PyTorch code runs instead"
        elif built.was_built:
            outcome = "already built"
        else:
            outcome = f"built in {built.seconds:.0f} s"
        print(f"{built.kernel.what}: {outcome}", flush=True)

    with reporting_builds(lambda notice: None):  # the line above says what builds; each kernel's says when it ends
        results = build_all(kernels, jobs, done)
    return 0 if all(built.ok for built in results) else 1


COMMANDS = {"specs": list_specs, "mixers": list_mixers, "describe": describe, "train": train, "eval": evaluate,
            "tokenizer": tokenizer_command, "plot": plot_runs, "sweep": sweep, "compare": compare, "export": export,
            "convert": convert, "distill": distill_command, "lm-eval": lm_eval, "kernels": kernels_command}

if __name__ == "__main__":
    sys.exit(main())
