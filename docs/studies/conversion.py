"""Issue 32, item 5: a pretrained transformer converted into three hybrids and distilled, each
with a fixed and a stochastic window where it has SWA layers, 3 seeds (docs/results.md, (d)).

  run      convert the teacher (a transformers folder, `layerzoo export` of a transformer-text-tiny
           run) once per pattern and seed, then distil each arm x seed with
           docs/studies/conversion-distill.yaml; every step is the `layerzoo` command it prints,
           and a run that has its distill-report.json is skipped (so an interrupted study resumes)
  report   after `layerzoo eval` of the runs (the results page has the command): two tables
           (Markdown) and their numbers (JSON), and one figure: perplexity against context length,
           each arm's mean over seeds with its min-max band beside the teacher, and the held-out
           loss increase with each layer's mixer zeroed. The reliance measure zeroes the recurrent
           layers; to read it against something, the report also zeroes every layer of each
           student and of the teacher (the library's `reliance` with layers=all, on the windows the
           run's own measure used), cached in each run folder as reliance-every-layer.json

Run from the repository root with the text extra installed:
  python docs/studies/conversion.py run TEACHER_FOLDER --out studies/conversion --jobs 2
  python docs/studies/conversion.py report studies/conversion --out docs/results/conversion
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

CONFIG = Path(__file__).with_name("conversion-distill.yaml")
WINDOW = 64  # every SWA layer's window after conversion: a quarter of the teacher's training length
FIXED = f"{{schedule: fixed, long: {WINDOW}}}"
STOCHASTIC = f"{{schedule: stochastic, short: 16, long: {WINDOW}, p_short: 0.5, anneal_fraction: 0.1}}"
NO_SWA = "{schedule: fixed, long: null}"
PATTERNS = {"swa-gdn": "swa,gated_deltanet", "swax": "swa,mlstm", "gdn-attention": "gated_deltanet*3,attention"}
# pattern: its rows' label when converted and not distilled
UNDISTILLED = {"swa-gdn": "(SWA, Gated DeltaNet) x 2, converted only", "swax": "(SWA, mLSTM) x 2, converted only",
               "gdn-attention": "(Gated DeltaNet x 3, attention), converted only"}
# arm: (pattern, distill.window, its row's label)
ARMS = {
    "swa-gdn-fixed": ("swa-gdn", FIXED, f"(SWA, Gated DeltaNet) x 2, fixed window {WINDOW}"),
    "swa-gdn-stochastic": ("swa-gdn", STOCHASTIC, f"(SWA, Gated DeltaNet) x 2, stochastic 16 / {WINDOW}"),
    "swax-fixed": ("swax", FIXED, f"(SWA, mLSTM) x 2, fixed window {WINDOW}"),
    "swax-stochastic": ("swax", STOCHASTIC, f"(SWA, mLSTM) x 2, stochastic 16 / {WINDOW}"),
    "gdn-attention": ("gdn-attention", NO_SWA, "(Gated DeltaNet x 3, attention)"),
}


def layerzoo(log: Path, *args: str) -> None:
    """One `layerzoo` command, printed, run single-threaded (two at a time, as sweeps run), its
    output to `log`."""
    sys.stdout.write("layerzoo " + " ".join(f"'{arg}'" if " " in arg or "*" in arg else arg for arg in args) + "\n")
    sys.stdout.flush()
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as output:
        subprocess.run([sys.executable, "-m", "layerzoo", *args], check=True, stdout=output, stderr=subprocess.STDOUT,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})


def run(teacher: Path, out: Path, seeds: int, jobs: int) -> None:
    for seed in range(seeds):
        for name, pattern in PATTERNS.items():
            folder = out / "converted" / f"{name}-seed{seed}"
            if not (folder / "conversion.json").is_file():
                window = ["--set", f"swa.window={WINDOW}"] if "swa" in pattern else []
                layerzoo(out / "logs" / f"{folder.name}.log", "convert", str(teacher), "--pattern", pattern, *window,
                         "--seed", str(seed), "--out", str(folder))

    def distil(arm: str, seed: int) -> None:
        pattern, window, _ = ARMS[arm]
        run_dir = out / f"{arm}-seed{seed}"
        if (run_dir / "distill-report.json").is_file():
            return
        layerzoo(out / "logs" / f"{run_dir.name}.log", "distill", str(out / "converted" / f"{pattern}-seed{seed}"),
                 "--out", str(run_dir), "--config", str(CONFIG), "--set", f"distill.window={window}",
                 "--set", f"distill.seed={seed}", "--overwrite", "--no-progress")

    with ThreadPoolExecutor(jobs) as pool:
        for done in [pool.submit(distil, arm, seed) for seed in range(seeds) for arm in ARMS]:
            done.result()


def every_layer(model, teacher, data: dict, tokenizer: Path, seed: int) -> dict:
    """The reliance measure of `model` with each of its layers zeroed in turn (attention layers
    too), on the held-out windows a distill run of `seed` measures (its seed + 1), KL to `teacher`."""
    import dataclasses

    from layerzoo.tasks import make_task
    from layerzoo.training.evaluation.reliance import reliance

    task = make_task("text", {**data, "tokenizer": str(tokenizer)}, model.config.vocab_size)
    task.prepare(progress=False)
    config = read_yaml(CONFIG)["distill"]
    return reliance(model, dataclasses.replace(task, split="eval"), config["end_to_end"]["seq_len"], teacher=teacher,
                    layers=range(model.config.n_layers), samples=config["eval"]["samples"],
                    batch_size=config["eval"]["batch_size"], seed=seed + 1)


def zeroed_layers(runs: list[Path]) -> tuple[list[dict], list[dict]]:
    """Each run's student and the teacher (per run seed) with every layer zeroed in turn; cached."""
    import layerzoo.hf  # noqa: F401 (registers the layerzoo model type)
    from layerzoo.hf import LayerzooForCausalLM
    from layerzoo.side_by_side import load_model_folder

    students, teachers = [], []
    for run_dir in runs:
        cached = run_dir / "reliance-every-layer.json"
        if not cached.is_file():
            report = read_json(run_dir / "distill-report.json")
            distill = read_yaml(run_dir / "spec.yaml")["distill"]
            teacher = load_model_folder(Path(report["teacher"]))
            student = LayerzooForCausalLM.from_pretrained(run_dir / "model").model.float().eval()
            measures = {"student": every_layer(student, teacher, distill["data"], run_dir / "tokenizer", distill["seed"]),
                        "teacher": every_layer(teacher, teacher, distill["data"], run_dir / "tokenizer", distill["seed"])}
            cached.write_text(json.dumps(measures, indent=1))
        measures = read_json(cached)
        students.append(measures["student"])
        teachers.append(measures["teacher"])
    return students, teachers


def read_yaml(path: Path) -> dict:
    import yaml

    return yaml.safe_load(path.read_text())


def by_layer(measures: list[dict]) -> list[dict]:
    """Per layer: its mixer and the loss increase when it is zeroed, mean [min, max] over runs."""
    return [{"layer": rows[0]["layer"], "mixer": rows[0]["mixer"] or "attention",
             "loss_increase": spread([row["loss_increase"] for row in rows])}
            for rows in zip(*(measure["layers"] for measure in measures))]


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


def spread(values: list[float]) -> dict:
    return {"mean": float(np.mean(values)), "min": float(np.min(values)), "max": float(np.max(values))}


def cell(summary: dict | None, digits: int = 2, signed: bool = False) -> str:
    if summary is None:
        return "-"
    number = f"{{:{'+' if signed else ''}.{digits}f}}"
    return f"{number.format(summary['mean'])} [{number.format(summary['min'])}, {number.format(summary['max'])}]"


def perplexities(report: dict) -> dict[int, float | None]:
    return {row["length"]: row["perplexity"] for row in report["lengths"]}


def summarise(out: Path) -> dict:
    """The teacher's perplexity and, per arm, each measure's mean [min, max] over its seeds."""
    arms, teacher, every_teacher = {}, None, None
    for arm, (_, window, label) in ARMS.items():
        runs = sorted(out.glob(f"{arm}-seed*"))
        runs = [run_dir for run_dir in runs if (run_dir / "distill-report.json").is_file()]
        if not runs:
            continue
        stem = f"perplexity-window{WINDOW}.json" if window != NO_SWA else "perplexity-windowspec.json"
        missing = [str(run_dir) for run_dir in runs if not (run_dir / stem).is_file()]
        if missing:
            raise SystemExit(f"{', '.join(missing)}: no {stem}; run `layerzoo eval` on the runs first (docs/results.md)")
        reports = [read_json(run_dir / "distill-report.json") for run_dir in runs]
        curves = [perplexities(read_json(run_dir / stem)) for run_dir in runs]
        teacher = teacher or read_json(runs[0] / "perplexity-teacher-windowspec.json")
        layers = {}
        for report in reports:
            for row in report["reliance"]["layers"]:
                layers.setdefault(f"{row['layer']} {row['mixer']}", []).append(row["loss_increase"])
        students, teachers = zeroed_layers(runs)
        every_teacher = every_teacher or teachers
        lengths = sorted(curves[0])
        arms[arm] = {
            "label": label, "runs": [str(run_dir) for run_dir in runs], "window": window,
            "perplexity": {length: spread([curve[length] for curve in curves]) if all(curve[length] is not None
                                                                                   for curve in curves) else None
                           for length in lengths},
            "kl": spread([report["heldout"]["end_to_end"]["eval_kl"] for report in reports]),
            "intact_loss": spread([report["reliance"]["intact"]["loss"] for report in reports]),
            "reliance": {layer: spread(increases) for layer, increases in layers.items()},
            "every_layer": by_layer(students),
            "tokens": reports[0]["tokens"],
            "state": read_json(runs[0] / stem)["state"],
        }
    if not arms:
        raise SystemExit(f"{out}: no finished run of the study")
    undistilled = {}
    for pattern, label in UNDISTILLED.items():  # what `layerzoo eval` of the converted folders wrote, if it ran
        paths = sorted((out / "converted").glob(f"perplexity-{pattern}-seed*.json"))
        curves = [perplexities(read_json(path)) for path in paths]
        if curves:
            undistilled[pattern] = {"label": label, "perplexity": {length: spread([curve[length] for curve in curves])
                                                                   for length in sorted(curves[0])}}
    return {"teacher": {"source": teacher["source"], "perplexity": perplexities(teacher), "state": teacher["state"],
                        "every_layer": by_layer(every_teacher)},
            "arms": arms, "undistilled": undistilled}


def kib(state: dict) -> str:
    return f"{4 * state['elements'] / 1024:.1f} KiB"


def table(summary: dict) -> str:
    teacher = summary["teacher"]
    lengths = sorted(teacher["perplexity"])
    longest = max(lengths)
    head = ["model", *map(str, lengths), f"state@{longest} (fp32)", "held-out KL", "recurrent layer zeroed: loss increase"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 2) + "---|"]
    lines.append("| teacher (transformer-text-tiny) | " + " | ".join(
        "-" if teacher["perplexity"][length] is None else f"{teacher['perplexity'][length]:.2f}" for length in lengths)
        + f" | {kib(teacher['state'])} | - | - |")
    for arm in summary["arms"].values():
        reliance = "; ".join(f"{layer}: {cell(value, 3, signed=True)}" for layer, value in arm["reliance"].items())
        lines.append(f"| {arm['label']} | " + " | ".join(cell(arm["perplexity"][length]) for length in lengths)
                     + f" | {kib(arm['state'])} | {cell(arm['kl'], 3)} | {reliance} |")
    for row in summary["undistilled"].values():
        lines.append(f"| {row['label']} | " + " | ".join(cell(row["perplexity"][length]) for length in lengths)
                     + " | | | |")
    tokens = next(iter(summary["arms"].values()))["tokens"]
    return "\n".join(lines) + (f"\n\nTokens of distillation per run: {tokens['total']:,} (stage 1 {tokens['align']:,}, "
                               f"stage 2 {tokens['end_to_end']:,}).\n\n{layer_table(summary)}")


def layer_table(summary: dict) -> str:
    """Held-out loss increase (nats/token) with one layer's mixer zeroed, every layer, each model."""
    n_layers = len(summary["teacher"]["every_layer"])
    lines = ["| model (layer 0, 1, ... mixers) | " + " | ".join(f"layer {i}" for i in range(n_layers)) + " |",
             "|---|" + "---:|" * n_layers]
    rows = [("teacher", summary["teacher"]["every_layer"])]
    rows += [(arm["label"], arm["every_layer"]) for arm in summary["arms"].values()]
    for label, layers in rows:
        lines.append(f"| {label} | " + " | ".join(f"{layer['mixer']}: {cell(layer['loss_increase'], 3, signed=True)}"
                                                  for layer in layers) + " |")
    return "\n".join(lines) + "\n"


def figure(summary: dict, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [3, 2]})
    teacher = summary["teacher"]["perplexity"]
    lengths = [length for length in sorted(teacher) if teacher[length] is not None]
    left.plot(lengths, [teacher[length] for length in lengths], "k--", marker="o", label="teacher")
    for arm in summary["arms"].values():
        points = [(length, value) for length, value in sorted(arm["perplexity"].items()) if value is not None]
        xs = [length for length, _ in points]
        line, = left.plot(xs, [value["mean"] for _, value in points], marker="o", label=arm["label"])
        left.fill_between(xs, [value["min"] for _, value in points], [value["max"] for _, value in points],
                          color=line.get_color(), alpha=0.2)
    left.set(xscale="log", yscale="log", xlabel="context length L (tokens)",
             ylabel="perplexity over the first L tokens", title="held-out text, beside the teacher")
    left.set_xticks(lengths, [str(length) for length in lengths])
    left.legend(fontsize=7)
    models = [("teacher", summary["teacher"]["every_layer"])]
    models += [(name, arm["every_layer"]) for name, arm in summary["arms"].items()]
    width = 0.8 / len(models)
    for index, (name, layers) in enumerate(models):
        xs = [layer["layer"] + (index - (len(models) - 1) / 2) * width for layer in layers]
        values = [layer["loss_increase"] for layer in layers]
        right.bar(xs, [value["mean"] for value in values], width,
                  yerr=[[value["mean"] - value["min"] for value in values],
                        [value["max"] - value["mean"] for value in values]],
                  color="k" if name == "teacher" else None, label=name)
    n_layers = len(models[0][1])
    right.set_xticks(range(n_layers), [f"layer {i}" for i in range(n_layers)])
    right.set_yscale("symlog", linthresh=0.01)  # a zeroed layer can help a little: increases below 0
    right.set(ylabel="held-out loss increase (nats/token)", title="one layer's mixer zeroed")
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)


def report(out: Path, to: Path) -> None:
    summary = summarise(out)
    to.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{to}.json").write_text(json.dumps(summary, indent=1))
    Path(f"{to}.md").write_text(table(summary))
    figure(summary, Path(f"{to}.png"))
    print(table(summary))
    print(f"wrote {to}.md, {to}.json and {to}.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    running = commands.add_parser("run")
    running.add_argument("teacher", type=Path)
    running.add_argument("--out", type=Path, required=True)
    running.add_argument("--seeds", type=int, default=3)
    running.add_argument("--jobs", type=int, default=2)
    reporting = commands.add_parser("report")
    reporting.add_argument("study", type=Path)
    reporting.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.command == "run":
        run(args.teacher, args.out, args.seeds, args.jobs)
    else:
        report(args.study, args.out)


if __name__ == "__main__":
    main()
