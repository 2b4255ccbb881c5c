"""Issue 45, study (e): ARMT around SmolLM2-135M-Instruct past its 8k window (docs/results.md).

Arms (ARMT: segments of 512 tokens, 16 memory tokens, d_mem 64; the base frozen, only the memory
trains):
  memory-all   memory in every layer, after continued pretraining
  memory-20    memory in 6 of the 30 layers (the middle to the last), after continued pretraining
  untrained    memory-20's layers as wrapped: no continued pretraining (the memory starts neutral)
  segments     the base reading each 512-token segment alone: no memory at all
  base         the base with full attention over the whole context (its RoPE and training end at 8k)

Continued pretraining: `layerzoo train armt-hf-text` on the qa task with score_text (passages of
the standard library's training split read as one stream, facts among them and a question at the
end, every token scored: language modelling on real text and recall across segments at once),
the curriculum 2 -> 4 -> 8 segments, bf16 autocast.

Each arm is measured at 2k, 8k, 16k and 32k tokens, each length in a process of its own: perplexity
over held-out standard-library files that long, QA exact match and the answer's loss on held-out
passages (the asked fact at depth 0.5), the process's peak resident memory, FLOPs per token counted, tokens per
second timed.

  run     GGUF --out OUT [--cells CELLS] [--only ARM...]: train, then measure; finished steps are skipped
  measure GGUF ARM LENGTH --out OUT [--cells CELLS]: one arm at one length (what `run` starts per cell)
  peak    GGUF ARM LENGTH --out OUT [--cells CELLS]: add the streamed peak to a cell measured without it
  trace   GGUF ARM LENGTH --out OUT [--cells CELLS]: each segment's loss and each memory layer's |A|
          along the perplexity documents (CELLS/traces/ARM-LENGTH.json): where a memory goes wrong
  report  GGUF CELLS --to docs/results/armt-smollm2: the table (Markdown) with the FLOPs counted, its
          numbers (JSON), a figure, and one of the traces (TO-trace.png) where CELLS/traces has any
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # benchmarks' FLOP counts

SEGMENT, MEMORY_TOKENS, D_MEM = 512, 16, 64
MIDDLE_TO_LAST = [15, 18, 21, 24, 27, 29]  # 6 of SmolLM2's 30 layers: about 20%
LENGTHS = (2048, 8192, 16384, 32768)
TEXT = "stdlib:**/*.py"
HOLDOUT = 0.1
PERPLEXITY_DOCUMENTS, QA_SAMPLES = 2, 4
TRAINED = {"memory-all": "all", "memory-20": MIDDLE_TO_LAST}
ARMS = ("memory-all", "memory-20", "untrained", "segments", "base")
STEPS = 300  # continued pretraining: 3 stages of 100 steps, one sequence of 1k, 2k, 4k tokens a step


def training_overrides(steps: int) -> list[str]:
    """The spec's training section for this study: the curriculum, bf16, a checkpoint per stage."""
    return [f"training.steps={steps}", "training.batch_size=1", "training.precision=bf16",
            "training.curriculum.segments=[2, 4, 8]", f"training.eval.every={steps}", "training.eval.samples=4",
            "training.eval.lengths=[4096]", "training.eval.documents=2", "training.eval.batch_size=1",
            f"training.checkpoint_every={max(steps // 3, 1)}", "training.log_every=10",
            f"armt.segment_size={SEGMENT}", f"armt.num_mem_tokens={MEMORY_TOKENS}", f"armt.d_mem={D_MEM}"]


def folder_of(gguf: Path) -> Path:
    from layerzoo.hf.gguf import gguf_folder

    return gguf_folder(gguf)


def train(gguf: Path, arm: str, out: Path, steps: int) -> None:
    from layerzoo.training.runs.run_checkpoints import run_checkpoints

    folder = folder_of(gguf)
    task = {"name": "qa", "files": [TEXT], "tokenizer": str(folder), "holdout": HOLDOUT, "score_text": True}
    layers = list(range(30)) if TRAINED[arm] == "all" else TRAINED[arm]
    overrides = [f"base.hf_checkpoint={folder}", f"training.task={json.dumps(task)}", f"armt.memory_layers={layers}",
                 *training_overrides(steps)]
    flags = [flag for override in overrides for flag in ("--set", override)]
    # a checkpoint: go on from it; a folder without one was cut off before its first: start over
    again = ["--resume"] if run_checkpoints(out / arm) else ["--overwrite"] if (out / arm).exists() else []
    subprocess.run([sys.executable, "-m", "layerzoo", "train", "armt-hf-text", *flags, "--out", str(out / arm),
                    *again, "--no-progress"], check=True)


def model_of(gguf: Path, arm: str, out: Path):
    """The arm's model: (ids, state=, return_state=) -> logits, as layerzoo's evaluation reads models."""
    from layerzoo.assemblies.armt import wrap
    from layerzoo.evaluation.reading import load_model_folder, load_run

    folder = folder_of(gguf)
    if arm in TRAINED:
        return load_run(str(out / arm))[1].eval()
    if arm == "untrained":
        return wrap(folder, segment_size=SEGMENT, num_mem_tokens=MEMORY_TOKENS, d_mem=D_MEM,
                    memory_layers=MIDDLE_TO_LAST).eval()
    base = load_model_folder(folder)
    return Segments(base) if arm == "segments" else base


class Delegate:
    """A model's stand-in: what it does not define, the model answers."""

    def __init__(self, base):
        self.base = base

    def __getattr__(self, name):
        return getattr(self.base, name)


class Segments(Delegate):
    """The base on each segment of SEGMENT tokens alone: no state crosses a segment's end."""

    def __call__(self, ids, state=None, return_state=False, **kwargs):
        import torch

        first = -(state or 0) % SEGMENT  # tokens of this call that end a segment begun by earlier calls
        pieces = [ids[:, :first]] if first else []
        pieces += list(ids[:, first:].split(SEGMENT, dim=1))
        logits = torch.cat([self.base(piece) for piece in pieces if piece.shape[1]], dim=1)
        return (logits, (state or 0) + ids.shape[1]) if return_state else logits


def flops_per_token(arm: str, length: int, base) -> float:
    """Forward FLOPs a token costs: 2N and attention's scores and sums over the keys it reads (within
    its segment and the segment's memory tokens, or over the whole context for the base); ARMT's
    memory tokens run every layer too, and each memory layer reads and writes (memory_flops)."""
    from benchmarks.real_model import attention_flops, parameters_per_token

    n = parameters_per_token(base)
    if arm == "base":
        return 2 * n + attention_flops(base, length)
    read = SEGMENT + (0 if arm == "segments" else MEMORY_TOKENS)
    layers = {"memory-all": 30, "memory-20": len(MIDDLE_TO_LAST), "untrained": len(MIDDLE_TO_LAST)}.get(arm, 0)
    return read / SEGMENT * (2 * n + attention_flops(base, read)) + layers * memory_flops(base.config.hidden_size)


def memory_flops(d_model: int) -> float:
    """One memory layer's forward FLOPs per text token (one head, as wrapped here): every token of a
    segment and its memory tokens reads (the query projection, then phi(q) against the matrix A
    and the normaliser z), and the memory tokens write (key, value and beta projections, the
    retrieval of what A holds for phi(k), the update of A and z), once per segment."""
    from layerzoo.kernels.assoc_memory import NU

    features = 2 * NU * D_MEM  # DPFP's phi
    read = 2 * d_model * D_MEM + 2 * features * (d_model + 1)
    write = 2 * d_model * (D_MEM + d_model + 1) + 2 * 2 * features * (d_model + 1)
    return (read * (SEGMENT + MEMORY_TOKENS) + write * MEMORY_TOKENS) / SEGMENT


def measure(gguf: Path, arm: str, length: int, out: Path) -> dict:
    """One arm at one context length: perplexity, QA exact match and the answer's loss (nats a token:
    graded where exact match is all or nothing, and less tied to the answer's format), peak
    memory, time per token and the process's fp32 matmul rate (a cell's tokens/s is read against it:
    cells run in processes of their own, perhaps sessions apart)."""
    import torch

    from benchmarks.runner.timing import matmul_gflops, time_cells
    from layerzoo.assemblies import CausalLM
    from layerzoo.evaluation.perplexity import perplexity_by_length
    from layerzoo.training.objectives.language_model import score_heldout

    torch.set_num_threads(2)
    rate = matmul_gflops(time_cells([], rounds=5, budget=None))  # this process's reference, beside its tokens/s
    model = model_of(gguf, arm, out)
    loaded = peak_bytes()
    text, qa = heldout_task(gguf, "text", model), heldout_task(gguf, "qa", model)
    start = time.perf_counter()
    perplexity = perplexity_by_length(model, text, [length], samples=PERPLEXITY_DOCUMENTS, chunk_size=SEGMENT)
    seconds = time.perf_counter() - start
    streamed = peak_bytes()  # before QA, whose one call holds every position's logits (32k x 49k floats)
    answers = score_heldout(model, qa, length, QA_SAMPLES, 0, depth=0.5, batch_size=1,
                            scored_tail=isinstance(model, CausalLM))  # a layerzoo model runs its head on the answer only
    row = perplexity["lengths"][0]
    return {"arm": arm, "length": length, "perplexity": row["perplexity"], "documents": row["documents"],
            "document_perplexities": [math.exp(loss) for loss in row["document_losses"]], "qa_accuracy": answers["accuracy"], "qa_answer_loss": answers["loss"], "qa_samples": QA_SAMPLES,
            "stream_peak_bytes": streamed, "peak_bytes": peak_bytes(), "loaded_bytes": loaded,
            "tokens_per_s": row["documents"] * length / seconds if row["documents"] else None, "matmul_gflops": rate}


def streamed_peak(gguf: Path, arm: str, length: int, out: Path) -> dict:
    """The two peaks a cell keeps beside QA's (the model loaded; the context then read in SEGMENT-token
    pieces), in a process of their own: for a cell measured before they were kept apart. Nothing is
    timed, so this may run beside other work."""
    from layerzoo.evaluation.perplexity import perplexity_by_length

    model = model_of(gguf, arm, out)
    loaded = peak_bytes()
    perplexity_by_length(model, heldout_task(gguf, "text", model), [length], samples=PERPLEXITY_DOCUMENTS,
                         chunk_size=SEGMENT)
    return {"loaded_bytes": loaded, "stream_peak_bytes": peak_bytes(), "stream_measured_apart": True}


def trace(gguf: Path, arm: str, length: int, out: Path) -> dict:
    """Along each perplexity document read in SEGMENT-token pieces: each piece's mean loss over its
    own next tokens (SEGMENT - 1 of its predictions; the last one's target is in the next piece)
    and, for an ARMT, each memory layer's |A| (Frobenius) after the piece. Nothing is timed."""
    import torch
    import torch.nn.functional as F

    from layerzoo.evaluation.perplexity import perplexity_by_length

    model = model_of(gguf, arm, out)
    pieces: list[dict] = []

    class Traced(Delegate):
        def __call__(self, ids, state=None, return_state=False, **kwargs):
            logits, state = self.base(ids, state=state, return_state=True, **kwargs)
            loss = F.cross_entropy(logits[0, :-1].float(), ids[0, 1:])
            norms = [None if m is None else float(torch.linalg.norm(m.matrix)) for m in getattr(state, "memory", ())]
            pieces.append({"loss": float(loss), "memory_norms": norms})
            return (logits, state) if return_state else logits

    perplexity_by_length(Traced(model), heldout_task(gguf, "text", model), [length], samples=PERPLEXITY_DOCUMENTS,
                         chunk_size=SEGMENT)
    per_document = length // SEGMENT
    documents = [pieces[i:i + per_document] for i in range(0, len(pieces), per_document)]
    return {"arm": arm, "length": length, "segment": SEGMENT, "documents": documents}


def heldout_task(gguf: Path, name: str, model):
    """The task `name` (text or qa) on the held-out standard-library files, in the model's vocabulary."""
    from layerzoo.tasks import make_task

    options = {"files": [TEXT], "tokenizer": str(folder_of(gguf)), "holdout": HOLDOUT, "split": "eval"}
    return make_task(name, options, model.config.vocab_size)  # ARMT's and Segments': the wrapped model's


def peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def run(gguf: Path, out: Path, only: list[str] | None, steps: int, lengths: list[int], cells: Path) -> None:
    for arm in only or ARMS:
        if arm in TRAINED and not trained(out / arm, steps):
            train(gguf, arm, out, steps)
        if arm in TRAINED:  # its log outlives the run folder, as the cells do
            cells.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(out / arm / "metrics.jsonl", cells / f"training-{arm}.jsonl")
        for length in lengths:
            if not (cells / f"{arm}-{length}.json").is_file():
                subprocess.run([sys.executable, __file__, "measure", str(gguf), arm, str(length), "--out", str(out),
                                "--cells", str(cells)], check=True)


def trained(run_dir: Path, steps: int) -> bool:
    """Whether the run's last step is in its metrics (so `run` does not train it again)."""
    metrics = run_dir / "metrics.jsonl"
    if not metrics.is_file():
        return False
    logged = [json.loads(line).get("step", 0) for line in metrics.read_text().splitlines()]
    return max(logged, default=0) >= steps


def report(gguf: Path, cells_dir: Path, to: Path) -> None:
    """The cells as one table (arm x length) with the FLOPs counted, its JSON, and a figure of
    perplexity and the QA measures against length."""
    from layerzoo.assemblies.armt import load_hf_checkpoint

    base_model = load_hf_checkpoint(folder_of(gguf))
    cells = [json.loads(path.read_text()) for path in sorted(cells_dir.glob("*.json"))]
    for cell in cells:
        cell["flops_per_token"] = flops_per_token(cell["arm"], cell["length"], base_model)
    base = {cell["length"]: cell for cell in cells if cell["arm"] == "base"}
    lines = [("| arm | length | perplexity [per document] | QA exact match | QA answer loss "
              "| memory read in 512-token pieces: rise over the loaded model | peak with QA's whole call "
              "| FLOPs per token counted (vs base) | tokens/s timed (vs base) | share of the matmul rate |"),
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for arm in ARMS:
        for cell in sorted((c for c in cells if c["arm"] == arm), key=lambda c: c["length"]):
            against = base.get(cell["length"])
            spread = ", ".join(number(value) for value in cell["document_perplexities"])
            lines.append(f"| {arm} | {cell['length']:,} | {number(cell['perplexity'])} [{spread}] | "
                         f"{100 * cell['qa_accuracy']:.0f}% of {cell['qa_samples']} | {number(cell['qa_answer_loss'])} | "
                         f"{streamed_rise(cell)} | {cell['peak_bytes'] / 2**30:.2f} GiB | "
                         f"{cell['flops_per_token'] / 1e9:.2f} G{versus(cell, against, 'flops_per_token')} | "
                         f"{number(cell['tokens_per_s'], 0)}{versus(cell, against, 'tokens_per_s')} | "
                         f"{share(cell)} |")
    to.parent.mkdir(parents=True, exist_ok=True)
    if any(cell.get("stream_measured_apart") for cell in cells):
        lines += ["", ("\\* measured in a process of its own after the cell (`peak`), the model loaded and the "
                       "context read as in the cell")]
    lines += ["", *training_table(cells_dir)]
    Path(f"{to}.json").write_text(json.dumps(cells, indent=1))
    Path(f"{to}.md").write_text("\n".join(lines) + "\n")
    figure(cells, Path(f"{to}.png"))
    traces = [json.loads(path.read_text()) for path in sorted((cells_dir / "traces").glob("*.json"))]
    if traces:
        trace_figure(traces, Path(f"{to}-trace.png"))
    print("\n".join(lines))


def training_table(cells_dir: Path) -> list[str]:
    """Each trained arm's continued pretraining: tokens, the training loss as each curriculum stage
    ends (the mean of its last 3 logs), the held-out loss at the end."""
    lines = ["| arm | tokens | training loss at the end of each stage (2, 4, 8 segments) | held-out loss |",
             "|---|---:|---|---:|"]
    for arm in TRAINED:
        path = cells_dir / f"training-{arm}.jsonl"
        if not path.is_file():
            continue
        logs = [json.loads(line) for line in path.read_text().splitlines()]
        steps = [log for log in logs if "loss" in log]
        stages = [[log["loss"] for log in steps if log["seq_len"] == length][-3:]
                  for length in sorted({log["seq_len"] for log in steps})]
        held_out = [log["eval_loss"] for log in logs if "eval_loss" in log]
        lines.append(f"| {arm} | {steps[-1]['tokens']:,} | {', '.join(f'{sum(s) / len(s):.3f}' for s in stages)} | "
                     f"{number(held_out[-1] if held_out else None, 3)} |")
    return lines


def versus(cell: dict, base: dict | None, key: str) -> str:
    """' (0.70x)': the cell's value over the base's at the same length; '' without one."""
    if base is None or cell is base or not cell.get(key) or not base.get(key):
        return ""
    return f" ({cell[key] / base[key]:.2f}x)"


def streamed_rise(cell: dict) -> str:
    """How far reading the context piece by piece (state carried) raised the peak over the loaded model."""
    if "stream_peak_bytes" not in cell:
        return "-"  # a cell measured before the stream's peak was kept apart
    apart = " *" if cell.get("stream_measured_apart") else ""
    return f"{(cell['stream_peak_bytes'] - cell['loaded_bytes']) / 2**20:,.0f} MiB{apart}"


def share(cell: dict) -> str:
    """The cell's counted FLOP/s over its own process's fp32 matmul rate, in percent."""
    if not cell["tokens_per_s"] or not cell["matmul_gflops"]:
        return "-"
    return f"{100 * cell['tokens_per_s'] * cell['flops_per_token'] / (cell['matmul_gflops'] * 1e9):.0f}%"


def number(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def figure(cells: list[dict], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    panels = {"perplexity": lambda c: c["perplexity"], "QA answer loss (nats/token)": lambda c: c["qa_answer_loss"],
              "QA exact match (%)": lambda c: 100 * c["qa_accuracy"]}
    fig, axes_row = plt.subplots(1, len(panels), figsize=(17, 4.5))
    for arm in ARMS:
        mine = sorted((c for c in cells if c["arm"] == arm), key=lambda c: c["length"])
        for axes, value in zip(axes_row, panels.values()):
            if mine:
                axes.plot([c["length"] for c in mine], [value(c) for c in mine], marker="o", label=arm,
                          color=f"C{ARMS.index(arm)}")  # an arm keeps its colour whichever arms are in
    lengths = sorted({cell["length"] for cell in cells})
    for axes, what in zip(axes_row, panels):
        axes.set(xscale="log", xlabel="context length (tokens)", ylabel=what)
        axes.xaxis.set_minor_locator(NullLocator())
        axes.set_xticks(lengths, [f"{length / 1024:g}k" for length in lengths])
        axes.axvline(8192, color="0.7", linestyle=":")  # the base's training context
        axes.legend(fontsize=7)
    axes_row[0].set_yscale("log")  # the base past its 8k would flatten the rest
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def trace_figure(traces: list[dict], png: Path) -> None:
    """Per document of each trace: each segment's loss, and the largest memory layer's |A|, along the context."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (losses, norms) = plt.subplots(1, 2, figsize=(12, 4))
    for trace in traces:
        for index, pieces in enumerate(trace["documents"]):
            ends = [(i + 1) * trace["segment"] for i in range(len(pieces))]
            style = {"color": f"C{ARMS.index(trace['arm'])}", "linestyle": ("-", "--")[index % 2],
                     "label": f"{trace['arm']}, document {index + 1}"}
            losses.plot(ends, [piece["loss"] for piece in pieces], **style)
            norms.plot(ends, [max(n for n in piece["memory_norms"] if n is not None) for piece in pieces], **style)
    losses.set(xlabel="tokens read", ylabel="segment's loss (nats/token)")
    norms.set(xlabel="tokens read", ylabel="largest memory layer's |A| (Frobenius)", yscale="log")
    for axes in (losses, norms):
        axes.axvline(4096, color="0.7", linestyle=":")  # continued pretraining's longest sequence
        axes.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    running = commands.add_parser("run")
    running.add_argument("gguf", type=Path)
    running.add_argument("--out", type=Path, required=True)
    running.add_argument("--only", nargs="+", choices=ARMS)
    running.add_argument("--steps", type=int, default=STEPS, help=f"continued pretraining's steps (default {STEPS})")
    running.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS), help="context lengths measured")
    measuring, peaking, tracing = (commands.add_parser(name) for name in ("measure", "peak", "trace"))
    for command in (measuring, peaking, tracing):
        command.add_argument("gguf", type=Path)
        command.add_argument("arm", choices=ARMS)
        command.add_argument("length", type=int)
        command.add_argument("--out", type=Path, required=True)
    for command in (running, measuring, peaking, tracing):
        command.add_argument("--cells", type=Path, help="where each measured cell's JSON goes (default OUT/cells): "
                                                       "a folder kept with the results outlives the runs")
    reporting = commands.add_parser("report")
    reporting.add_argument("gguf", type=Path)
    reporting.add_argument("cells", type=Path, help="the cells' folder")
    reporting.add_argument("--to", type=Path, required=True)
    args = parser.parse_args()
    if args.command == "report":
        report(args.gguf, args.cells, args.to)
        return
    cells = args.cells or args.out / "cells"
    if args.command == "run":
        run(args.gguf, args.out, args.only, args.steps, args.lengths, cells)
    elif args.command == "peak":
        path = cells / f"{args.arm}-{args.length}.json"
        cell = json.loads(path.read_text()) | streamed_peak(args.gguf, args.arm, args.length, args.out)
        path.write_text(json.dumps(cell, indent=1))
    elif args.command == "trace":
        path = cells / "traces" / f"{args.arm}-{args.length}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(trace(args.gguf, args.arm, args.length, args.out)))
    else:
        cell = measure(args.gguf, args.arm, args.length, args.out)
        path = cells / f"{args.arm}-{args.length}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cell, indent=1))
        print(json.dumps(cell))


if __name__ == "__main__":
    main()
