"""A pretrained transformer converted into hybrids and distilled, each with a fixed and a
stochastic window where it has SWA layers (docs/results.md): two plans of the same study.

  tiny     issue 32, study (d): transformer-text-tiny (4 layers, trained here; `layerzoo export` of
           its run) into three hybrids, 3 seeds, windows 64 and 16, lengths 256 to 4096.
  smollm2  issue 45, study (f): SmolLM2-135M-Instruct (its GGUF file) into (SWA, Gated DeltaNet)
           1:1 with a fixed window of 512 or SWAX's stochastic 128 / 512, and Gated DeltaNet 3:1
           attention; one seed; lengths 2k to 32k (the teacher's RoPE and cache end at 8k); NIAH
           in its tokens (2k to 16k) beside perplexity.

  run      convert the teacher into each layout once per seed, distil each arm x seed with the
           plan's config, then score everything with `layerzoo eval` on the documents the
           distillation held out: the teacher once, each student at its window and at the short
           test window, and the converted folders, never distilled, as controls. Every step is the `layerzoo` command it prints (its output in
           OUT/logs/); a finished conversion, distillation or evaluation is skipped, so an
           interrupted study resumes.
  report   tables (Markdown) and their numbers (JSON), and one figure: perplexity against context
           length at each test window, each arm's mean over seeds with its min-max band, and (tiny)
           the held-out loss increase with each layer's mixer zeroed. The reliance measure a run
           reports zeroes the recurrent layers; to read it against something, the tiny plan's
           report also zeroes every layer of each student and of the teacher (the library's
           `reliance` with every layer, on the windows the run's own measure used), cached in each
           run folder as reliance-every-layer.json.

Run from the repository root with the text extra installed:
  python docs/studies/conversion.py run TEACHER_FOLDER --out studies/conversion --jobs 2
  python docs/studies/conversion.py report studies/conversion --out docs/results/conversion
  python docs/studies/conversion.py run SmolLM2-135M-Instruct.Q4_1.gguf --plan smollm2 --out studies/smollm2
  python docs/studies/conversion.py report studies/smollm2 --plan smollm2 --out docs/results/conversion-smollm2
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

HERE = Path(__file__).parent


@dataclass(frozen=True)
class Plan:
    """One plan of the study. layouts: {name: (rule, its SWA window or None, label)}; the "swa"
    and "swa-short" layouts are controls, the teacher's attention cut to a window and nothing
    new, converted and never distilled. arms: {name: (layout, distill.window, how its label
    goes on)}."""

    name: str
    teacher: str  # the teacher's name in the tables
    config: Path  # the distillation's config
    window: int  # every SWA layer's window after conversion
    short: int  # the stochastic schedule's short window, and the second test window
    lengths: tuple[int, ...]  # perplexity's context lengths
    seeds: int
    layouts: dict
    arms: dict
    jobs: int = 2  # distillations at a time (the cores shared among them)
    eval_options: tuple[str, ...] = ()  # more `layerzoo eval` flags (documents per length)
    niah: tuple[int, ...] = ()  # NIAH's lengths in the teacher's tokens (none: not scored)
    every_layer: bool = True  # the report's reliance with every layer zeroed, in turn
    undistilled: bool = True  # every converted layout scored as a control, never distilled (else: the "swa" ones)

    def label(self, arm: str) -> str:
        layout, _, schedule = self.arms[arm]
        return ", ".join(filter(None, (self.layouts[layout][2], schedule)))

    def text_flags(self) -> list[str]:
        """`layerzoo eval`'s flags for the distillation's text (the config's distill.data): every
        model, teacher, student or control, is scored on the documents the distillation held out."""
        data = yaml.safe_load(self.config.read_text())["distill"]["data"]
        flags = ["--text", *data["files"]]
        for key in ("field", "holdout"):
            flags += [f"--{key}", str(data[key])] if key in data else []
        return flags


def schedules(window: int, short: int) -> tuple[str, str, str]:
    """distill.window: fixed at `window`, SWAX's stochastic short / window, and none (no SWA)."""
    return (f"{{schedule: fixed, long: {window}}}",
            f"{{schedule: stochastic, short: {short}, long: {window}, p_short: 0.5, anneal_fraction: 0.1}}",
            "{schedule: fixed, long: null}")


def conversion_plan(name: str, teacher: str, config: str, layers: int, window: int, short: int, swax: bool,
                    **more) -> Plan:
    """A plan converting a teacher of `layers` layers: (SWA, Gated DeltaNet) 1:1 (and SWAX's (SWA,
    mLSTM) 1:1 with `swax`), each distilled at a fixed and at the stochastic window; Gated
    DeltaNet 3:1 attention; the teacher cut to `window` and to `short` as controls."""
    fixed, stochastic, no_swa = schedules(window, short)
    hybrids = {"swa-gdn": ("swa,gated_deltanet", window, f"(SWA, Gated DeltaNet) x {layers // 2}")}
    if swax:
        hybrids["swax"] = ("swa,mlstm", window, f"(SWA, mLSTM) x {layers // 2}")
    repeats = "" if layers == 4 else f" x {layers / 4:g}"
    layouts = {**hybrids, "gdn-attention": ("gated_deltanet*3,attention", None, f"(Gated DeltaNet x 3, attention){repeats}"),
               "swa": ("swa", window, f"SWA x {layers}: the teacher at window {window}"),
               "swa-short": ("swa", short, f"SWA x {layers}: the teacher at window {short}")}
    arms = {f"{layout}-{kind}": (layout, schedule, label) for layout in hybrids
            for kind, schedule, label in (("fixed", fixed, f"fixed window {window}"),
                                          ("stochastic", stochastic, f"stochastic {short} / {window}"))}
    arms["gdn-attention"] = ("gdn-attention", no_swa, "")
    return Plan(name=name, teacher=teacher, config=HERE / config, window=window, short=short, layouts=layouts,
                arms=arms, **more)


def tiny_plan() -> Plan:
    # SWA at a quarter of the teacher's training length (256)
    return conversion_plan("tiny", "teacher (`transformer-text-tiny`)", "conversion-distill.yaml", layers=4, window=64,
                           short=16, swax=True, lengths=tuple(256 * f for f in (1, 2, 4, 8, 16)), seeds=3)


def smollm2_plan() -> Plan:
    return conversion_plan("smollm2", "teacher (SmolLM2-135M-Instruct)", "conversion-smollm2-distill.yaml", layers=30,
                           window=512, short=128, swax=False, lengths=tuple(2048 * f for f in (1, 2, 4, 8, 16)),
                           seeds=1, jobs=1, eval_options=("--samples", "2"), niah=(2048, 8192, 16384),
                           every_layer=False, undistilled=False)


PLANS = {"tiny": tiny_plan, "smollm2": smollm2_plan}


def layerzoo(log: Path, *args: str, jobs: int = 1) -> None:
    """One `layerzoo` command, printed, its output to `log`, on the machine's cores shared by the
    `jobs` commands that run at once (distillations two at a time run single-threaded on 2 cores,
    as sweeps run)."""
    sys.stdout.write("layerzoo " + " ".join(f"'{arg}'" if " " in arg or "*" in arg else arg for arg in args) + "\n")
    sys.stdout.flush()
    log.parent.mkdir(parents=True, exist_ok=True)
    threads = str(max(1, (os.cpu_count() or 1) // jobs))
    with log.open("w") as output:
        subprocess.run([sys.executable, "-m", "layerzoo", *args], check=True, stdout=output, stderr=subprocess.STDOUT,
                       env={**os.environ, "OMP_NUM_THREADS": threads})


def run(plan: Plan, teacher: Path, out: Path, seeds: int, jobs: int, only: list[str] | None = None) -> None:
    """The plan's conversions, distillations and evaluations, or with `only` those of the named arms
    and control layouts."""
    plan = selected(plan, only)
    logs = out / "logs"
    for seed in range(seeds):
        for layout, (rule, window, _) in plan.layouts.items():
            folder = out / "converted" / f"{layout}-seed{seed}"
            if not (folder / "conversion.json").is_file():
                options = [] if window is None else ["--set", f"swa.window={window}"]
                layerzoo(logs / f"{folder.name}.log", "convert", str(teacher), "--pattern", rule, *options,
                         "--seed", str(seed), "--out", str(folder))

    def distil(arm: str, seed: int) -> None:
        layout, window, _ = plan.arms[arm]
        run_dir = out / f"{arm}-seed{seed}"
        if not (run_dir / "distill-report.json").is_file():
            layerzoo(logs / f"{run_dir.name}.log", "distill", str(out / "converted" / f"{layout}-seed{seed}"),
                     "--out", str(run_dir), "--config", str(plan.config), "--set", f"distill.window={window}",
                     "--set", f"distill.seed={seed}", "--overwrite", "--no-progress", jobs=jobs)

    with ThreadPoolExecutor(jobs) as pool:
        for done in [pool.submit(distil, arm, seed) for seed in range(seeds) for arm in plan.arms]:
            done.result()

    def evaluate(log: str, paths: list[Path], reports: list[Path], *flags: str) -> None:
        """`layerzoo eval` of `paths` on the distillation's held-out text, unless every report it
        writes is there already."""
        if paths and not all(report.is_file() for report in reports):
            layerzoo(logs / log, "eval", *map(str, paths), *plan.text_flags(), *flags)

    # The teacher once, into its own folder; each student as the model folder it is (a distill run
    # folder would score its teacher again, at every window).
    lengths = ["--lengths", *map(str, plan.lengths), *plan.eval_options]
    niah = ["--metric", "accuracy", "--lengths", *map(str, plan.niah), "--depths", "0.5", "--samples", "5"]
    teacher_out = out / "teacher"
    evaluate("eval-teacher.log", [teacher], [teacher_out / f"perplexity-{model_name(teacher)}-windowspec.json"],
             *lengths, "--out", str(teacher_out))
    if plan.niah:
        evaluate("eval-teacher-niah.log", [teacher], [teacher_out / f"eval-{model_name(teacher)}-windowspec.json"],
                 *niah, "--out", str(teacher_out))
    for run_dir in [out / f"{arm}-seed{seed}" for arm in plan.arms for seed in range(seeds)]:
        arm = arm_of(run_dir)
        window = plan.layouts[plan.arms[arm][0]][1]
        at_window = ["--window", str(window)] if window else []
        evaluate(f"eval-{run_dir.name}.log", [run_dir / "model"], [run_dir / stem(plan, arm)], *lengths, *at_window,
                 "--out", str(run_dir))
        if window:
            evaluate(f"eval-{run_dir.name}-short.log", [run_dir / "model"],
                     [run_dir / f"perplexity-model-window{plan.short}.json"], *lengths, "--window", str(plan.short),
                     "--out", str(run_dir))
        if plan.niah:
            evaluate(f"eval-{run_dir.name}-niah.log", [run_dir / "model"],
                     [run_dir / f"eval-model-{window_name(plan, arm)}.json"], *niah, *at_window, "--out", str(run_dir))
    used = {layout for layout, _, _ in plan.arms.values()}
    controls = [out / "converted" / f"{layout}-seed{seed}" for layout in plan.layouts for seed in range(seeds)
                if plan.undistilled or layout not in used]
    evaluate("eval-converted.log", controls,
             [out / "converted" / f"perplexity-{folder.name}-windowspec.json" for folder in controls],
             *lengths, "--out", str(out / "converted"))


def model_name(path: Path) -> str:
    """The infix of `layerzoo eval`'s reports of a model folder or GGUF file."""
    return path.stem if path.suffix.lower() == ".gguf" else path.name


def selected(plan: Plan, only: list[str] | None) -> Plan:
    """The plan cut to the arms and control layouts `only` names (with the layouts those arms
    convert), or whole."""
    if not only:
        return plan
    unknown = set(only) - set(plan.arms) - set(plan.layouts)
    if unknown:
        raise SystemExit(f"--only: no arm or layout {', '.join(sorted(unknown))} in the {plan.name} plan")
    arms = {arm: plan.arms[arm] for arm in plan.arms if arm in only}
    layouts = {layout for layout, _, _ in arms.values()} | set(only)
    return dataclasses.replace(plan, arms=arms, layouts={name: plan.layouts[name] for name in plan.layouts
                                                         if name in layouts})


def arm_of(run_dir: Path) -> str:
    return run_dir.name.rsplit("-seed", 1)[0]


def keep(out: Path, to: Path) -> None:
    """Copy the study's measures (its JSON reports, none of its models) from `out` to `to`, where
    `report` reads them as it reads `out`: a study that takes several sessions on machines that
    keep nothing between them gathers its finished runs there."""
    for folder in [out / "teacher", out / "converted", *sorted(out.glob("*-seed*"))]:
        for pattern in ("distill-report.json", "perplexity-*.json", "eval-*.json"):
            for path in folder.glob(pattern):
                target = to / path.relative_to(out)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)


def window_name(plan: Plan, name: str) -> str:
    """The infix of the reports `layerzoo eval` writes for a run or converted folder `name` at its
    own window: window<W> where it has SWA layers, else windowspec."""
    base = name.rsplit("-seed", 1)[0]
    window = plan.layouts[plan.arms[base][0] if base in plan.arms else base][1]
    return f"window{window}" if window else "windowspec"


def stem(plan: Plan, name: str) -> str:
    """A run's student's perplexity report at its own window."""
    return f"perplexity-model-{window_name(plan, name)}.json"


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


def niah_curve(paths: list[Path]) -> dict[int, dict]:
    """NIAH accuracy per length (the mean over depths), mean [min, max] over the grids at `paths`."""
    rows = [{length: float(np.mean(column)) for length, column in zip(grid["lengths"], zip(*grid["accuracy"]))}
            for grid in map(read_json, paths)]
    return {length: spread([row[length] for row in rows]) for length in sorted(rows[0])}


def summarise(plan: Plan, out: Path) -> dict:
    """The teacher's measures, and per arm and per control each measure's mean [min, max] over seeds."""
    arms, teacher_layers = {}, []
    for arm, (layout, window, _) in plan.arms.items():
        runs = sorted(run_dir for run_dir in out.glob(f"{arm}-seed*") if (run_dir / "distill-report.json").is_file())
        if not runs:
            continue
        own = stem(plan, arm)
        missing = [str(run_dir) for run_dir in runs if not (run_dir / own).is_file()]
        if missing:
            raise SystemExit(f"{', '.join(missing)}: no {own}; `run` ends with the `layerzoo eval` that writes it")
        reports = [read_json(run_dir / "distill-report.json") for run_dir in runs]
        zeroed = [zeroed_layers(run_dir) for run_dir in runs] if plan.every_layer else []
        teacher_layers += [measure["teacher"] for measure in zeroed]
        recurrent = {}
        for report in reports:
            for row in report["reliance"]["layers"]:
                recurrent.setdefault(f"{row['layer']} {row['mixer']}", []).append(row["loss_increase"])
        short = [run_dir / f"perplexity-model-window{plan.short}.json" for run_dir in runs]  # `layerzoo eval --window SHORT`
        grids = [run_dir / f"eval-model-{window_name(plan, arm)}.json" for run_dir in runs]
        arms[arm] = {
            "label": plan.label(arm), "runs": [str(run_dir) for run_dir in runs], "window": window,
            "per_run": [{"run": run_dir.name, "intact": report["reliance"]["intact"], "layers": report["reliance"]["layers"]}
                        for run_dir, report in zip(runs, reports)],
            "perplexity": curve([run_dir / own for run_dir in runs]),
            "perplexity_short": curve(short) if all(path.is_file() for path in short) else None,
            "niah": niah_curve(grids) if plan.niah and all(path.is_file() for path in grids) else None,
            "kl": spread([report["heldout"]["end_to_end"]["eval_kl"] for report in reports]),
            "reliance": {layer: spread(increases) for layer, increases in recurrent.items()},
            "every_layer": by_layer([measure["student"] for measure in zeroed]) if zeroed else None,
            "tokens": reports[0]["tokens"],
            "state": read_json(runs[0] / own)["state"],
        }
    if not arms:
        raise SystemExit(f"{out}: no finished run of the study")
    (teacher_curve,) = (out / "teacher").glob("perplexity-*-windowspec.json")
    teacher = read_json(teacher_curve)
    teacher_grids = list((out / "teacher").glob("eval-*-windowspec.json"))
    controls = {}
    for layout, (_, _, name) in plan.layouts.items():  # the converted folders, never distilled
        paths = sorted((out / "converted").glob(f"perplexity-{layout}-seed*-windowspec.json"))
        if paths:
            controls[layout] = {"label": f"{name}, converted only", "perplexity": curve(paths),
                                "state": read_json(paths[0])["state"]}
    return {"plan": plan.name, "teacher": {
                "label": plan.teacher, "source": Path(teacher["source"]).name,
                "perplexity": curve([teacher_curve]), "state": teacher["state"],
                "niah": niah_curve(teacher_grids) if teacher_grids else None,
                "every_layer": by_layer(teacher_layers) if teacher_layers else None},
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


def reliance_cell(reliance: dict[str, dict]) -> str:
    """Each recurrent layer's loss increase when zeroed; with more than four, their mean and the largest."""
    if len(reliance) <= 4:
        return "; ".join(f"{layer}: {cell(value, 3, signed=True)}" for layer, value in reliance.items())
    means = {layer: value["mean"] for layer, value in reliance.items()}
    largest = max(means, key=means.get)
    return f"mean of {len(means)} layers {np.mean(list(means.values())):+.3f}; largest {largest} {means[largest]:+.3f}"


def perplexity_table(plan: Plan, summary: dict) -> str:
    """The teacher, each arm at its window and each control: perplexity by length, state, KL, reliance."""
    lengths = sorted(summary["teacher"]["perplexity"])
    head = ["model", *map(str, lengths), f"state@{max(lengths)} (fp32)", "held-out KL to the teacher",
            "reliance: recurrent layer zeroed, loss increase"]
    rows = [(plan.teacher, summary["teacher"], "-", "-")]
    rows += [(arm["label"], arm, cell(arm["kl"], 4), reliance_cell(arm["reliance"])) for arm in summary["arms"].values()]
    rows += [(control["label"], control, "", "") for name, control in summary["controls"].items()
             if name != "swa-short"]  # the short window's table has it
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 2) + "---|"]
    for name, entry, kl, reliance in rows:
        lines.append(f"| {name} | " + " | ".join(cell(entry["perplexity"][length]) for length in lengths)
                     + f" | {kib(entry['state'])} | {kl} | {reliance} |")
    return "\n".join(lines) + "\n"


def short_window_table(plan: Plan, summary: dict) -> str:
    """At the short test window: the students with SWA layers and the teacher cut to it."""
    lengths = sorted(summary["teacher"]["perplexity"])
    lines = [f"| model at test window {plan.short} | " + " | ".join(map(str, lengths)) + " |",
             "|---|" + "---:|" * len(lengths)]
    control = summary["controls"].get("swa-short")
    rows = [(control["label"], control["perplexity"])] if control else []
    rows += [(arm["label"], arm["perplexity_short"]) for arm in summary["arms"].values() if arm["perplexity_short"]]
    for name, perplexity in rows:
        lines.append(f"| {name} | " + " | ".join(cell(perplexity[length]) for length in lengths) + " |")
    return "\n".join(lines) + "\n"


def niah_table(plan: Plan, summary: dict) -> str:
    """NIAH accuracy (%) in the teacher's tokens at each length, needle at depth 0.5."""
    lines = ["| model: NIAH accuracy (%) | " + " | ".join(map(str, plan.niah)) + " |", "|---|" + "---:|" * len(plan.niah)]
    rows = [(plan.teacher, summary["teacher"]["niah"])] + [(arm["label"], arm["niah"]) for arm in summary["arms"].values()]
    for name, niah in rows:
        if niah:
            lines.append(f"| {name} | " + " | ".join(
                cell({key: 100 * value for key, value in niah[length].items()}, 1) for length in plan.niah) + " |")
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


def tables(plan: Plan, summary: dict) -> str:
    arms = list(summary["arms"].values())
    tokens, first = arms[0]["tokens"], arms[0]["per_run"][0]["run"]
    distill = yaml.safe_load(plan.config.read_text())["distill"]
    windows = f"{distill['eval']['samples']} held-out windows of {distill['end_to_end']['seq_len']} tokens"
    total = (f"Tokens of distillation per run: {tokens['total']:,} (stage 1 {tokens['align']:,}, stage 2 "
             f"{tokens['end_to_end']:,}).\n")
    parts = [perplexity_table(plan, summary), total, short_window_table(plan, summary)]
    parts += [niah_table(plan, summary)] if plan.niah else []
    parts += [layer_table(summary)] if plan.every_layer else []
    parts += [f"Each run's reliance measure ({first} and the others: {windows}):\n", runs_table(summary)]
    return "\n".join(parts)


def colours(plan: Plan) -> dict[str, str]:
    """One colour per arm in every panel; the teacher black, the undistilled controls grey."""
    return {arm: f"C{index}" for index, arm in enumerate(plan.arms)} | {"teacher": "k", "swa": "0.5", "swa-short": "0.5"}


def plot_curves(plan: Plan, axes, entries: list[tuple[str, str, dict, str]], title: str) -> None:
    """Perplexity against length: (name, label, {length: spread or None}, line style) per entry,
    bands for spreads."""
    from matplotlib.ticker import LogLocator, NullFormatter, NullLocator, ScalarFormatter

    colour = colours(plan)
    for name, text, perplexity, style in entries:
        points = [(length, value) for length, value in sorted(perplexity.items()) if value is not None]
        xs = [length for length, _ in points]
        axes.plot(xs, [value["mean"] for _, value in points], style, marker="o", markersize=3, label=text,
                  color=colour[name])
        axes.fill_between(xs, [value["min"] for _, value in points], [value["max"] for _, value in points],
                          color=colour[name], alpha=0.2)
    # log y: a collapsing teacher (hundreds) would otherwise flatten the students' gaps (units)
    axes.set(xscale="log", yscale="log", xlabel="context length L (tokens)",
             ylabel="perplexity over the first L tokens", title=title)
    axes.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axes.yaxis.set_major_formatter(ScalarFormatter())
    axes.yaxis.set_minor_formatter(NullFormatter())
    axes.xaxis.set_minor_locator(NullLocator())
    axes.set_xticks(plan.lengths, [str(length) for length in plan.lengths])
    axes.legend(fontsize=6)


def plot_zeroed(plan: Plan, axes, summary: dict) -> None:
    """Bars: the held-out loss increase with each layer's mixer zeroed, per model."""
    models = [("teacher", summary["teacher"]["every_layer"])]
    models += [(name, arm["every_layer"]) for name, arm in summary["arms"].items()]
    width = 0.8 / len(models)
    for index, (name, layers) in enumerate(models):
        xs = [layer["layer"] + (index - (len(models) - 1) / 2) * width for layer in layers]
        values = [layer["loss_increase"] for layer in layers]
        axes.bar(xs, [value["mean"] for value in values], width, label=name, color=colours(plan)[name],
                 yerr=[[value["mean"] - value["min"] for value in values],
                       [value["max"] - value["mean"] for value in values]])
    n_layers = len(models[0][1])
    axes.set_xticks(range(n_layers), [f"layer {i}" for i in range(n_layers)])
    axes.set_yscale("symlog", linthresh=0.01)  # a zeroed layer can help a little: increases below 0
    axes.set(ylabel="held-out loss increase (nats/token)", title="one layer's mixer zeroed")
    axes.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def figure(plan: Plan, summary: dict, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, panels = plt.subplots(1, 3 if plan.every_layer else 2, figsize=(17 if plan.every_layer else 12, 5))
    arms, controls = summary["arms"], summary["controls"]

    def control(name: str) -> list:
        return [(name, controls[name]["label"], controls[name]["perplexity"], ":")] if name in controls else []

    plot_curves(plan, panels[0], [("teacher", "teacher", summary["teacher"]["perplexity"], "--")]
                + [(name, arm["label"], arm["perplexity"], "-") for name, arm in arms.items()] + control("swa"),
                f"held-out text, test window {plan.window} (the teacher: its own)")
    plot_curves(plan, panels[1], control("swa-short") + [(name, arm["label"], arm["perplexity_short"], "-")
                                                         for name, arm in arms.items() if arm["perplexity_short"]],
                f"test window {plan.short}")
    if plan.every_layer:
        plot_zeroed(plan, panels[2], summary)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def report(plan: Plan, out: Path, to: Path) -> None:
    summary = summarise(plan, out)
    to.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{to}.json").write_text(json.dumps(summary, indent=1))
    Path(f"{to}.md").write_text(tables(plan, summary))
    figure(plan, summary, Path(f"{to}.png"))
    print(tables(plan, summary))
    print(f"wrote {to}.md, {to}.json and {to}.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    running = commands.add_parser("run")
    running.add_argument("--plan", choices=PLANS, default="tiny")
    running.add_argument("teacher", type=Path)
    running.add_argument("--out", type=Path, required=True)
    running.add_argument("--seeds", type=int, help="default: the plan's")
    running.add_argument("--jobs", type=int, help="distillations at a time (default: the plan's)")
    running.add_argument("--only", nargs="+", help="these arms and control layouts only (default: all)")
    running.add_argument("--keep", type=Path, help="then copy the measures (JSON, no models) into this folder")
    reporting = commands.add_parser("report")
    reporting.add_argument("study", type=Path)
    reporting.add_argument("--plan", choices=PLANS, default="tiny")
    reporting.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    plan = PLANS[args.plan]()
    if args.command == "run":
        run(plan, args.teacher, args.out, args.seeds or plan.seeds, args.jobs or plan.jobs, args.only)
        if args.keep:
            keep(args.out, args.keep)
    else:
        report(plan, args.study, args.out)


if __name__ == "__main__":
    main()
