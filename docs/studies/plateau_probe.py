"""Issue 31, item 3 (a first probe): does the delta-rule layers' initialisation explain the loss
plateau near 5.9 of study (b)'s Gated DeltaNet and KDA hybrids (docs/results.md)?

Trains one of the study specs through layerzoo's own `train()`, with the model re-initialised
*after* the library builds it (library defaults untouched: the driver wraps trainer.build_model),
and logs per step: the loss (metrics.jsonl, log_every 1), and in <run>.probe.jsonl the pre-clip
gradient norm of each block's mixer, FFN and norms (and of embedding, head, dt_bias, A_log); at
steps 1, 2, 5 and every 10th also the RMS of each mixer's output and of its token-constant part
(the mean over the batch's tokens), the same for the residual stream entering the final norm, and
for Gated DeltaNet / KDA the memory a head or channel keeps per token, exp(g), over that batch.

Arms (--arm, comma-separated for several):
  base       the library's init
  fla-dt     KDA: dt_bias = softplus^-1(dt), dt log-uniform in [1e-3, 0.1] per key channel
             (fla's KDA model's re-init; the library's layer init is dt_bias = 0)
  dt1        Gated DeltaNet: dt_bias = 1 (Qwen3-Next's init)
  dt1-n002   dt1, and the delta-rule mixers' Linear / conv weights N(0, 0.02), biases 0
             (transformers' _init_weights at initializer_range 0.02)
  n002       the delta-rule mixers' Linear / conv weights N(0, 0.02) only (library dt_bias)
  fla-dt-n002  KDA: fla-dt and N(0, 0.02) (fla's KDA model's init of both)
  dt1-n002all / fla-dt-n002all  the dt arm, and every Linear / short conv of the model N(0, 0.02)
             (the counterpart *model's* init: Qwen3-Next / fla; the head and embedding included)
  n002all    every Linear / short conv of the model N(0, 0.02) only (e.g. for the Mamba-2 control)
  n002rest   every Linear / short conv N(0, 0.02) except the delta-rule mixers' (the other half of n002)
  n002conv / n002proj  the delta-rule mixers' short convolutions only / their Linear projections only
  n002out    only each block's output projections N(0, 0.02): the mixers' o_proj / out_proj and the
             FFN's down (the residual branches start small, their inputs' projections stay as built)
The n002 arms zero the biases they touch, then run each mixer's own reset_parameters() again, so
the decay, time-step and gate tensors the library sets (mLSTM's gate projection too) stay its own.
  o3         the delta-rule mixers' o_proj weights x3 (their output RMS at init near Mamba-2's)

The learning-rate schedule is the study's 300-step one (--lr-total 300) even when --steps is
smaller, so that the first steps are the study's first steps.

The arms act on the model as the spec builds it. The text specs now build with
`projection_init: normal`; the study's runs (docs/results.md, "Why the text hybrids started
slowly") predate that option, so `--set model.projection_init=uniform` gives their builds back.

Run (from the repository root, the text extra installed):
  OMP_NUM_THREADS=1 python docs/studies/plateau_probe.py docs/studies/text-kda-hybrid-tiny.yaml \
      --arm base,fla-dt --set model.projection_init=uniform --steps 150 --out /tmp/plateau-runs
then `python docs/studies/plateau_probe.py --table /tmp/plateau-runs/*` for the loss table,
`--summary` over seeds, `--account RUN.probe.jsonl ...` for gradients and the residual stream.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch
from torch import nn

CHECK_STEPS = {1, 2, 5} | set(range(10, 10_001, 10))


def reinit(model: nn.Module, arm: str) -> None:
    from layerzoo.mixers.decay_gates import init_time_step_bias
    from layerzoo.mixers.gated_deltanet import GatedDeltaNet
    from layerzoo.mixers.kda import KimiDeltaAttention

    parts = {"base": set(), "fla-dt": {"fla-dt"}, "dt1": {"dt1"}, "dt1-n002": {"dt1", "n002"},
             "n002": {"n002"}, "fla-dt-n002": {"fla-dt", "n002"},
             "o3": {"o3"}, "dt1-n002all": {"dt1", "n002all"}, "fla-dt-n002all": {"fla-dt", "n002all"},
             "n002all": {"n002all"}, "n002rest": {"n002rest"}, "n002out": {"n002out"}, "n002conv": {"n002conv"}, "n002proj": {"n002proj"}}[arm]
    touched = 0
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, KimiDeltaAttention) and "fla-dt" in parts:
                init_time_step_bias(module.dt_bias)
                touched += 1
            if isinstance(module, GatedDeltaNet) and "dt1" in parts:
                module.dt_bias.fill_(1.0)
                touched += 1
            if isinstance(module, (KimiDeltaAttention, GatedDeltaNet)) and parts & {"n002conv", "n002proj"}:
                for sub in module.modules():
                    is_conv = type(sub).__name__ == "ShortConvolution"
                    if (is_conv and "n002conv" in parts) or (isinstance(sub, nn.Linear) and "n002proj" in parts):
                        nn.init.normal_(sub.weight, std=0.02)
                        if getattr(sub, "bias", None) is not None:
                            nn.init.zeros_(sub.bias)
                touched += 1
            if isinstance(module, (KimiDeltaAttention, GatedDeltaNet)) and "n002" in parts:
                for sub in module.modules():
                    if isinstance(sub, (nn.Linear, nn.Conv1d)):
                        nn.init.normal_(sub.weight, std=0.02)
                        if sub.bias is not None:
                            nn.init.zeros_(sub.bias)
                    elif hasattr(sub, "weight") and isinstance(getattr(sub, "weight"), nn.Parameter) \
                            and sub.weight.dim() >= 2 and "conv" in type(sub).__name__.lower():
                        nn.init.normal_(sub.weight, std=0.02)
                touched += 1
            if isinstance(module, (KimiDeltaAttention, GatedDeltaNet)) and "o3" in parts:
                module.o_proj.weight.mul_(3.0)
                touched += 1
        if parts & {"n002all", "n002rest"}:  # as HF / fla models init every projection and convolution
            delta_rule = (KimiDeltaAttention, GatedDeltaNet)
            spared = {id(sub) for m in model.modules() if "n002rest" in parts and isinstance(m, delta_rule)
                      for sub in m.modules()}
            for sub in model.modules():
                if id(sub) in spared:
                    continue
                if isinstance(sub, nn.Linear) or (type(sub).__name__ == "ShortConvolution"):
                    nn.init.normal_(sub.weight, std=0.02)
                    if getattr(sub, "bias", None) is not None:
                        nn.init.zeros_(sub.bias)
                    touched += 1
            for block in model.blocks:  # the mixers' own decay / gate tensors back
                if id(block.mixer) not in spared:
                    block.mixer.reset_parameters()
        if "n002out" in parts:
            for block in model.blocks:
                outputs = [getattr(block.mixer, name) for name in ("o_proj", "out_proj") if hasattr(block.mixer, name)]
                for linear in outputs + ([block.ffn.down] if getattr(block, "ffn", None) is not None else []):
                    nn.init.normal_(linear.weight, std=0.02)
                    touched += 1
    if arm != "base" and not touched:
        raise SystemExit(f"arm {arm} touched no mixer of this model")


def retained(mixer: nn.Module, x: torch.Tensor) -> torch.Tensor | None:
    """exp(g) per token and head/channel, recomputed from the mixer's input x."""
    import torch.nn.functional as F
    from layerzoo.mixers.gated_deltanet import GatedDeltaNet
    from layerzoo.mixers.kda import KimiDeltaAttention
    x = x.float()
    if isinstance(mixer, KimiDeltaAttention):
        f = (mixer.f_proj(x) + mixer.dt_bias).unflatten(-1, (mixer.n_heads, mixer.head_dim))
        return torch.exp(-mixer.A_log.exp()[:, None] * F.softplus(f))
    if isinstance(mixer, GatedDeltaNet):
        return torch.exp(-mixer.A_log.exp() * F.softplus(mixer.a_proj(x) + mixer.dt_bias))
    return None


def run(spec_path: str, arm: str, steps: int, out: Path, lr_total: int, extra: list[str], suffix: str = "") -> None:
    import layerzoo.training.loop.trainer as trainer
    from layerzoo.training.loop.schedules import learning_rate

    run_dir = out / f"{Path(spec_path).stem}-{arm}{suffix}"
    probe = open(run_dir.parent / f"{run_dir.name}.probe.jsonl", "w")
    state = {"step": 0, "model": None}

    original_build = trainer.build_model

    def build_model(spec, context):
        model = original_build(spec, context)
        reinit(model, arm)
        state["model"] = model
        install_hooks(model)
        return model

    acts: dict[str, dict] = {}

    def install_hooks(model):
        for index, block in enumerate(model.blocks):
            def hook(module, args, output, index=index):
                if not module.training or (state["step"] + 1) not in CHECK_STEPS:
                    return
                y = output[0] if isinstance(output, tuple) else output
                y = y.detach().float()
                entry = {"out_rms": float(y.pow(2).mean().sqrt()),
                         # the part of the output common to every token of the batch
                         "out_const_rms": float(y.mean(dim=(0, 1)).pow(2).mean().sqrt()),
                         "in_rms": float(args[0].detach().float().pow(2).mean().sqrt())}
                with torch.no_grad():
                    kept = retained(module, args[0].detach())
                if kept is not None:
                    flat = kept.flatten()
                    sample = flat[torch.randperm(flat.numel())[:100_000]] if flat.numel() > 100_000 else flat
                    entry.update(kept_mean=float(flat.mean()), kept_median=float(sample.median()),
                                 kept_lt_0p5=float((flat < 0.5).float().mean()),
                                 kept_gt_0p99=float((flat > 0.99).float().mean()))
                acts[f"block{index}.{type(module).__name__}"] = entry
            block.mixer.register_forward_hook(hook)

        def final_hook(module, args, output):
            if module.training and (state["step"] + 1) in CHECK_STEPS:
                h = args[0].detach().float()  # the residual stream before the final norm
                acts["residual"] = {"rms": float(h.pow(2).mean().sqrt()),
                                    "const_rms": float(h.mean(dim=(0, 1)).pow(2).mean().sqrt())}
        model.final_norm.register_forward_hook(final_hook)

    original_clip = nn.utils.clip_grad_norm_

    def clip(parameters, max_norm, *args, **kwargs):
        state["step"] += 1
        step, model = state["step"], state["model"]
        norms: dict[str, float] = {}
        for name, p in model.named_parameters():
            if p.grad is None:
                continue
            parts = name.split(".")
            if parts[0] == "blocks":
                key = f"block{parts[1]}.{parts[2]}"  # mixer / ffn / mixer_norm / ffn_norm
                leaf = parts[-1]
                if leaf in ("dt_bias", "A_log"):
                    norms[f"block{parts[1]}.{leaf}"] = float(p.grad.norm())
            else:
                key = parts[0]
            norms[key] = norms.get(key, 0.0) + float(p.grad.float().pow(2).sum())
        norms = {k: (math.sqrt(v) if not k.endswith(("dt_bias", "A_log")) else v) for k, v in norms.items()}
        total = original_clip(parameters, max_norm, *args, **kwargs)
        record = {"step": step, "grad_norm": float(total), "grads": norms}
        if step in CHECK_STEPS:
            record["acts"] = dict(acts)
        probe.write(json.dumps(record) + "\n")
        probe.flush()
        acts.clear()
        return total

    trainer.build_model = build_model
    trainer.learning_rate = lambda step, total, config: learning_rate(step, lr_total, config)
    nn.utils.clip_grad_norm_ = clip
    try:
        overrides = [f"training.steps={steps}", "training.log_every=1", "training.eval.every=100000",
                     "training.eval.samples=8", *extra]
        trainer.train(spec_path, overrides, run_dir=run_dir, overwrite=True, progress=False)
    finally:
        trainer.build_model, trainer.learning_rate, nn.utils.clip_grad_norm_ = original_build, learning_rate, original_clip
        probe.close()


def losses(folder: Path) -> dict[int, float]:
    path = folder / "metrics.jsonl"
    return {r["step"]: r["loss"] for r in map(json.loads, path.open()) if "loss" in r} if path.exists() else {}


def plateau_exit(loss: dict[int, float]) -> int | None:
    """The first step whose 10-step mean loss is below 5.5, half a nat under the unigram solution."""
    return next((s for s in sorted(loss) if s >= 10 and sum(loss.get(t, 9) for t in range(s - 9, s + 1)) / 10 < 5.5), None)


def table(dirs: list[str]) -> None:
    """One row per run: the loss at marked steps and the plateau exit."""
    marks = [1, 10, 20, 30, 40, 50, 60, 75, 100, 120, 150]
    print("| run | " + " | ".join(str(m) for m in marks) + " | first step < 5.5 (10-step mean) |")
    print("|---|" + "---:|" * (len(marks) + 1))
    for folder in map(Path, dirs):
        loss = losses(folder)
        if loss:
            cells = [f"{loss[m]:.3f}" if m in loss else "" for m in marks]
            print(f"| {folder.name} | " + " | ".join(cells) + f" | {plateau_exit(loss)} |")


def summary(dirs: list[str]) -> None:
    """One row per layout and arm, over its seeds (run folders named <spec>-<arm>[-variant]-seed<N>):
    the plateau exit per seed and the mean [min, max] loss at step 150 (10-step mean)."""
    groups: dict[str, list[dict[int, float]]] = {}
    for folder in map(Path, sorted(dirs)):
        loss = losses(folder)
        if loss and max(loss) >= 150 and "-seed" in folder.name:
            groups.setdefault(folder.name.rsplit("-seed", 1)[0], []).append(loss)
    print("| layout, arm | seeds | first step < 5.5 (10-step mean), per seed | loss at 150 (10-step mean) |")
    print("|---|---:|---|---|")
    for name, runs in groups.items():
        ends = [sum(run[t] for t in range(141, 151)) / 10 for run in runs]
        exits = ", ".join(str(plateau_exit(run)) for run in runs)
        print(f"| {name} | {len(runs)} | {exits} | {sum(ends) / len(ends):.3f} [{min(ends):.3f}, {max(ends):.3f}] |")


def account(probes: list[str]) -> None:
    """Per run, at the check steps: the total gradient norm, the embedding's, the residual stream's
    RMS before the final norm and the fraction of it common to every token (token-constant)."""
    steps = (1, 10, 20, 30, 50, 100, 150)
    print("| run | quantity | " + " | ".join(f"step {s}" for s in steps) + " |")
    print("|---|---|" + "---:|" * len(steps))
    for path in map(Path, probes):
        records = {r["step"]: r for r in map(json.loads, path.open())}
        rows = {"gradient norm": lambda r: r["grad_norm"], "embedding gradient": lambda r: r["grads"]["embedding"],
                "residual RMS": lambda r: r["acts"]["residual"]["rms"],
                "token-constant part": lambda r: r["acts"]["residual"]["const_rms"] / r["acts"]["residual"]["rms"]}
        for label, value in rows.items():
            cells = [f"{value(records[s]):.3f}" if s in records and "acts" in records[s] else "" for s in steps]
            print(f"| {path.name.removesuffix('.probe.jsonl')} | {label} | " + " | ".join(cells) + " |")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("spec", nargs="?")
    parser.add_argument("--arm", default="base")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--lr-total", type=int, default=300)
    parser.add_argument("--out", type=Path, default=Path("/tmp/plateau-runs"))
    parser.add_argument("--set", action="append", default=[], dest="extra")
    parser.add_argument("--suffix", default="", help="appended to the run folder's name (e.g. -seed1)")
    parser.add_argument("--table", nargs="+", metavar="RUN", help="the loss table of these run folders")
    parser.add_argument("--summary", nargs="+", metavar="RUN", help="per layout and arm over seeds")
    parser.add_argument("--account", nargs="+", metavar="PROBE", help="gradients and residual stream of these .probe.jsonl")
    args = parser.parse_args(argv)
    for mode in ("table", "summary", "account"):
        if getattr(args, mode):
            return globals()[mode](getattr(args, mode))
    args.out.mkdir(parents=True, exist_ok=True)
    for arm in args.arm.split(","):
        run(args.spec, arm, args.steps, args.out, args.lr_total, args.extra, args.suffix)


if __name__ == "__main__":
    main(sys.argv[1:])
