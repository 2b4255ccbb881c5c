"""Issue 32, item 5: a pretrained transformer converted into three hybrids and distilled, each
with a fixed and a stochastic window where it has SWA layers, 3 seeds (docs/results.md, (d)).

  run      convert the teacher (a transformers folder: `layerzoo export` of a transformer-text-tiny
           run) into each layout once per seed, distil each arm x seed with
           docs/studies/conversion-distill.yaml, then score everything with `layerzoo eval`: the
           students beside the teacher at their window (64) and at a short test window (16), and
           the converted folders, never distilled, as controls. Every step is the `layerzoo`
           command it prints (its output in OUT/logs/); a finished conversion or distillation is
           skipped, so an interrupted study resumes.
  report   three tables (Markdown) and their numbers (JSON), and one figure: perplexity against
           context length at each test window, each arm's mean over seeds with its min-max band,
           and the held-out loss increase with each layer's mixer zeroed. The reliance measure a
           run reports zeroes the recurrent layers; to read it against something, the report also
           zeroes every layer of each student and of the teacher (the library's `reliance` with
           every layer, on the windows the run's own measure used), cached in each run folder as
           reliance-every-layer.json.

Run from the repository root with the text extra installed:
  python docs/studies/conversion.py run TEACHER_FOLDER --out studies/conversion --jobs 2
  python docs/studies/conversion.py report studies/conversion --out docs/results/conversion
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import yaml

CONFIG = Path(__file__).with_name("conversion-distill.yaml")
WINDOW = 64  # every SWA layer's window after conversion: a quarter of the teacher's training length
SHORT = 16  # the stochastic schedule's short window, and the second test window
LENGTHS = [256 * factor for factor in (1, 2, 4, 8, 16)]  # the teacher's training length times 1 to 16
TEXT = "stdlib:**/*.py"  # the teacher's corpus (conversion-distill.yaml's distill.data)
# layout: (rule, its SWA window or None, its label). The two "swa" layouts are controls: the
# teacher's attention cut to a window and nothing new, converted and never distilled.
LAYOUTS = {
    "swa-gdn": ("swa,gated_deltanet", WINDOW, "(SWA, Gated DeltaNet) x 2"),
    "swax": ("swa,mlstm", WINDOW, "(SWA, mLSTM) x 2"),
    "gdn-attention": ("gated_deltanet*3,attention", None, "(Gated DeltaNet x 3, attention)"),
    "swa": ("swa", WINDOW, f"SWA x 4: the teacher at window {WINDOW}"),
    "swa-short": ("swa", SHORT, f"SWA x 4: the teacher at window {SHORT}"),
}
FIXED = f"{{schedule: fixed, long: {WINDOW}}}"
STOCHASTIC = f"{{schedule: stochastic, short: {SHORT}, long: {WINDOW}, p_short: 0.5, anneal_fraction: 0.1}}"
NO_SWA = "{schedule: fixed, long: null}"
# arm: (layout, distill.window, how its label goes on)
ARMS = {
    "swa-gdn-fixed": ("swa-gdn", FIXED, f"fixed window {WINDOW}"),
    "swa-gdn-stochastic": ("swa-gdn", STOCHASTIC, f"stochastic {SHORT} / {WINDOW}"),
    "swax-fixed": ("swax", FIXED, f"fixed window {WINDOW}"),
    "swax-stochastic": ("swax", STOCHASTIC, f"stochastic {SHORT} / {WINDOW}"),
    "gdn-attention": ("gdn-attention", NO_SWA, ""),
}


def label(arm: str) -> str:
    layout, _, schedule = ARMS[arm]
    return ", ".join(filter(None, (LAYOUTS[layout][2], schedule)))


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
    logs = out / "logs"
    for seed in range(seeds):
        for layout, (rule, window, _) in LAYOUTS.items():
            folder = out / "converted" / f"{layout}-seed{seed}"
            if not (folder / "conversion.json").is_file():
                options = [] if window is None else ["--set", f"swa.window={window}"]
                layerzoo(logs / f"{folder.name}.log", "convert", str(teacher), "--pattern", rule, *options,
                         "--seed", str(seed), "--out", str(folder))

    def distil(arm: str, seed: int) -> None:
        layout, window, _ = ARMS[arm]
        run_dir = out / f"{arm}-seed{seed}"
        if not (run_dir / "distill-report.json").is_file():
            layerzoo(logs / f"{run_dir.name}.log", "distill", str(out / "converted" / f"{layout}-seed{seed}"),
                     "--out", str(run_dir), "--config", str(CONFIG), "--set", f"distill.window={window}",
                     "--set", f"distill.seed={seed}", "--overwrite", "--no-progress")

    with ThreadPoolExecutor(jobs) as pool:
        for done in [pool.submit(distil, arm, seed) for seed in range(seeds) for arm in ARMS]:
            done.result()
    runs = [str(out / f"{arm}-seed{seed}") for arm in ARMS for seed in range(seeds)]
    with_swa = [run_dir for run_dir in runs if not Path(run_dir).name.startswith("gdn-attention")]
    converted = [str(out / "converted" / f"{layout}-seed{seed}") for layout in LAYOUTS for seed in range(seeds)]
    layerzoo(logs / "eval.log", "eval", *runs, "--out", str(out))
    layerzoo(logs / "eval-short.log", "eval", *with_swa, "--window", str(SHORT), "--out", str(out / "short"))
    layerzoo(logs / "eval-converted.log", "eval", *converted, "--text", TEXT, "--lengths", *map(str, LENGTHS),
             "--out", str(out / "converted"))


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


def spread(values: list[float]) -> dict:
    return {"mean": float(np.mean(values)), "min": float(np.min(values)), "max": float(np.max(values))}


def curve(paths: list[Path]) -> dict[int, dict | None]:
    """Perplexity per context length, mean [min, max] over the reports at `paths` (None where one
    has no document that long)."""
    rows = [{row["length"]: row["perplexity"] for row in read_json(path)["lengths"]} for path in paths]
    return {length: None if any(row[length] is None for row in rows) else spread([row[length] for row in rows])
            for length in sorted(rows[0])}


def every_layer(model, teacher, run_dir: Path) -> dict:
    """The reliance measure of `model` with each of its layers zeroed in turn (attention layers
    too), KL to `teacher`, on the held-out sequences the run's own measure read (heldout_seed)."""
    from layerzoo.tasks import heldout_seed, make_task
    from layerzoo.training.distill.reliance import reliance

    distill = yaml.safe_load((run_dir / "spec.yaml").read_text())["distill"]
    task = make_task("text", {**distill["data"], "tokenizer": str(run_dir / "tokenizer")}, model.config.vocab_size)
    task.prepare(progress=False)
    return reliance(model, dataclasses.replace(task, split="eval"), distill["end_to_end"]["seq_len"], teacher=teacher,
                    layers=range(model.config.n_layers), samples=distill["eval"]["samples"],
                    batch_size=distill["eval"]["batch_size"], seed=heldout_seed(distill["seed"]))


def zeroed_layers(run_dir: Path) -> dict:
    """{"student", "teacher"}: the run's student and its teacher with every layer zeroed in turn (cached)."""
    cached = run_dir / "reliance-every-layer.json"
    if not cached.is_file():
        from layerzoo.evaluation.reading import load_model_folder

        teacher = load_model_folder(Path(read_json(run_dir / "distill-report.json")["teacher"]))
        student = load_model_folder(run_dir / "model")
        measures = {"student": every_layer(student, teacher, run_dir), "teacher": every_layer(teacher, teacher, run_dir)}
        cached.write_text(json.dumps(measures, indent=1))
    return read_json(cached)


def by_layer(measures: list[dict]) -> list[dict]:
    """Per layer: its mixer and the loss increase when it is zeroed, mean [min, max] over runs."""
    return [{"layer": rows[0]["layer"], "mixer": rows[0]["mixer"] or "attention",
             "loss_increase": spread([row["loss_increase"] for row in rows])}
            for rows in zip(*(measure["layers"] for measure in measures))]


def summarise(out: Path) -> dict:
    """The teacher's measures, and per arm and per control each measure's mean [min, max] over seeds."""
    arms, teacher_layers = {}, []
    for arm, (layout, window, _) in ARMS.items():
        runs = sorted(run_dir for run_dir in out.glob(f"{arm}-seed*") if (run_dir / "distill-report.json").is_file())
        if not runs:
            continue
        stem = "perplexity-windowspec.json" if window == NO_SWA else f"perplexity-window{WINDOW}.json"
        missing = [str(run_dir) for run_dir in runs if not (run_dir / stem).is_file()]
        if missing:
            raise SystemExit(f"{', '.join(missing)}: no {stem}; `run` ends with the `layerzoo eval` that writes it")
        reports = [read_json(run_dir / "distill-report.json") for run_dir in runs]
        zeroed = [zeroed_layers(run_dir) for run_dir in runs]
        teacher_layers += [measure["teacher"] for measure in zeroed]
        recurrent = {}
        for report in reports:
            for row in report["reliance"]["layers"]:
                recurrent.setdefault(f"{row['layer']} {row['mixer']}", []).append(row["loss_increase"])
        short = [run_dir / f"perplexity-window{SHORT}.json" for run_dir in runs]  # `layerzoo eval --window 16`
        arms[arm] = {
            "label": label(arm), "runs": [str(run_dir) for run_dir in runs], "window": window,
            "per_run": [{"run": run_dir.name, "intact": report["reliance"]["intact"], "layers": report["reliance"]["layers"]}
                        for run_dir, report in zip(runs, reports)],
            "perplexity": curve([run_dir / stem for run_dir in runs]),
            "perplexity_short": curve(short) if all(path.is_file() for path in short) else None,
            "kl": spread([report["heldout"]["end_to_end"]["eval_kl"] for report in reports]),
            "reliance": {layer: spread(increases) for layer, increases in recurrent.items()},
            "every_layer": by_layer([measure["student"] for measure in zeroed]),
            "tokens": reports[0]["tokens"],
            "state": read_json(runs[0] / stem)["state"],
        }
    if not arms:
        raise SystemExit(f"{out}: no finished run of the study")
    first = Path(next(iter(arms.values()))["runs"][0])
    teacher = read_json(first / "perplexity-teacher-windowspec.json")
    controls = {}
    for layout, (_, _, name) in LAYOUTS.items():  # the converted folders, never distilled
        paths = sorted((out / "converted").glob(f"perplexity-{layout}-seed*-windowspec.json"))
        if paths:
            controls[layout] = {"label": f"{name}, converted only", "perplexity": curve(paths),
                                "state": read_json(paths[0])["state"]}
    return {"teacher": {"source": Path(teacher["source"]).name, "perplexity": curve([first / "perplexity-teacher-windowspec.json"]),
                        "state": teacher["state"], "every_layer": by_layer(teacher_layers)},
            "arms": arms, "controls": controls}


def cell(summary: dict | None, digits: int = 2, signed: bool = False) -> str:
    if summary is None:
        return "-"
    number = f"{{:{'+' if signed else ''}.{digits}f}}"
    if summary["min"] == summary["max"]:
        return number.format(summary["mean"])
    return f"{number.format(summary['mean'])} [{number.format(summary['min'])}, {number.format(summary['max'])}]"


def kib(state: dict) -> str:
    return f"{4 * state['elements'] / 1024:.1f} KiB"


def perplexity_table(summary: dict) -> str:
    """The teacher, each arm at window 64 and each control: perplexity by length, state, KL, reliance."""
    lengths = sorted(summary["teacher"]["perplexity"])
    head = ["model", *map(str, lengths), f"state@{max(lengths)} (fp32)", "held-out KL to the teacher",
            "reliance: recurrent layer zeroed, loss increase"]
    rows = [("teacher (`transformer-text-tiny`)", summary["teacher"], "-", "-")]
    rows += [(arm["label"], arm, cell(arm["kl"], 4),
              "; ".join(f"{layer}: {cell(value, 3, signed=True)}" for layer, value in arm["reliance"].items()))
             for arm in summary["arms"].values()]
    rows += [(control["label"], control, "", "") for name, control in summary["controls"].items()
             if name != "swa-short"]  # the short window's table has it
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 2) + "---|"]
    for name, entry, kl, reliance in rows:
        lines.append(f"| {name} | " + " | ".join(cell(entry["perplexity"][length]) for length in lengths)
                     + f" | {kib(entry['state'])} | {kl} | {reliance} |")
    return "\n".join(lines) + "\n"


def short_window_table(summary: dict) -> str:
    """Test window 16: the students with SWA layers (distilled at 64 or at 16 / 64) and the teacher cut to 16."""
    lengths = sorted(summary["teacher"]["perplexity"])
    lines = ["| model at test window 16 | " + " | ".join(map(str, lengths)) + " |", "|---|" + "---:|" * len(lengths)]
    control = summary["controls"].get("swa-short")
    rows = [(control["label"], control["perplexity"])] if control else []
    rows += [(arm["label"], arm["perplexity_short"]) for arm in summary["arms"].values() if arm["perplexity_short"]]
    for name, perplexity in rows:
        lines.append(f"| {name} | " + " | ".join(cell(perplexity[length]) for length in lengths) + " |")
    return "\n".join(lines) + "\n"


def layer_table(summary: dict) -> str:
    """Held-out loss increase (nats/token) with one layer's mixer zeroed, every layer, each model."""
    n_layers = len(summary["teacher"]["every_layer"])
    lines = ["| model | " + " | ".join(f"layer {i}" for i in range(n_layers)) + " |", "|---|" + "---:|" * n_layers]
    rows = [("teacher", summary["teacher"]["every_layer"])]
    rows += [(arm["label"], arm["every_layer"]) for arm in summary["arms"].values()]
    for name, layers in rows:
        lines.append(f"| {name} | " + " | ".join(f"{layer['mixer']}: {cell(layer['loss_increase'], 3, signed=True)}"
                                                for layer in layers) + " |")
    return "\n".join(lines) + "\n"


def runs_table(summary: dict) -> str:
    """Every run's own reliance measure: held-out loss and KL intact, and each recurrent layer zeroed."""
    lines = ["| run | loss intact | KL intact | recurrent layer zeroed: loss (KL) increase |", "|---|---:|---:|---|"]
    for arm in summary["arms"].values():
        for run in arm["per_run"]:
            zeroed = "; ".join(f"{row['layer']} {row['mixer']}: {row['loss_increase']:+.3f} ({row['kl_increase']:+.3f})"
                               for row in run["layers"])
            lines.append(f"| {run['run']} | {run['intact']['loss']:.3f} | {run['intact']['kl']:.4f} | {zeroed} |")
    return "\n".join(lines) + "\n"


def tables(summary: dict) -> str:
    tokens = next(iter(summary["arms"].values()))["tokens"]
    return (f"{perplexity_table(summary)}\nTokens of distillation per run: {tokens['total']:,} (stage 1 "
            f"{tokens['align']:,}, stage 2 {tokens['end_to_end']:,}).\n\n{short_window_table(summary)}\n"
            f"{layer_table(summary)}\nEach run's reliance measure ({next(iter(summary['arms'].values()))['per_run'][0]['run']} "
            f"and the others: 32 held-out windows of 256 tokens):\n\n{runs_table(summary)}")


# one colour per arm in every panel; the teacher black, the undistilled controls grey
COLOURS = {arm: f"C{index}" for index, arm in enumerate(ARMS)} | {"teacher": "k", "swa": "0.5", "swa-short": "0.5"}


def plot_curves(axes, entries: list[tuple[str, str, dict, str]], title: str) -> None:
    """Perplexity against length: (name, label, {length: spread or None}, line style) per entry,
    bands for spreads."""
    from matplotlib.ticker import NullLocator

    for name, text, perplexity, style in entries:
        points = [(length, value) for length, value in sorted(perplexity.items()) if value is not None]
        xs = [length for length, _ in points]
        axes.plot(xs, [value["mean"] for _, value in points], style, marker="o", markersize=3, label=text,
                  color=COLOURS[name])
        axes.fill_between(xs, [value["min"] for _, value in points], [value["max"] for _, value in points],
                          color=COLOURS[name], alpha=0.2)
    axes.set(xscale="log", xlabel="context length L (tokens)", ylabel="perplexity over the first L tokens", title=title)
    axes.xaxis.set_minor_locator(NullLocator())
    axes.set_xticks(LENGTHS, [str(length) for length in LENGTHS])
    axes.legend(fontsize=6)


def figure(summary: dict, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (own, short, zeroed) = plt.subplots(1, 3, figsize=(17, 5))
    arms, controls = summary["arms"], summary["controls"]
    def control(name: str) -> list:
        return [(name, controls[name]["label"], controls[name]["perplexity"], ":")] if name in controls else []

    plot_curves(own, [("teacher", "teacher", summary["teacher"]["perplexity"], "--")]
                + [(name, arm["label"], arm["perplexity"], "-") for name, arm in arms.items()] + control("swa"),
                f"held-out text, test window {WINDOW} (the teacher: its own)")
    plot_curves(short, control("swa-short") + [(name, arm["label"], arm["perplexity_short"], "-")
                                               for name, arm in arms.items() if arm["perplexity_short"]],
                f"test window {SHORT}")
    models = [("teacher", summary["teacher"]["every_layer"])] + [(name, arm["every_layer"]) for name, arm in arms.items()]
    width = 0.8 / len(models)
    for index, (name, layers) in enumerate(models):
        xs = [layer["layer"] + (index - (len(models) - 1) / 2) * width for layer in layers]
        values = [layer["loss_increase"] for layer in layers]
        zeroed.bar(xs, [value["mean"] for value in values], width, label=name, color=COLOURS[name],
                   yerr=[[value["mean"] - value["min"] for value in values],
                         [value["max"] - value["mean"] for value in values]])
    n_layers = len(models[0][1])
    zeroed.set_xticks(range(n_layers), [f"layer {i}" for i in range(n_layers)])
    zeroed.set_yscale("symlog", linthresh=0.01)  # a zeroed layer can help a little: increases below 0
    zeroed.set(ylabel="held-out loss increase (nats/token)", title="one layer's mixer zeroed")
    zeroed.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def report(out: Path, to: Path) -> None:
    summary = summarise(out)
    to.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{to}.json").write_text(json.dumps(summary, indent=1))
    Path(f"{to}.md").write_text(tables(summary))
    figure(summary, Path(f"{to}.png"))
    print(tables(summary))
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
