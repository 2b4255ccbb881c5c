"""`layerzoo distill CONVERTED_DIR --out RUN_DIR`: the folder `layerzoo convert` wrote, distilled
from its teacher (training.distill: per-layer alignment, then KL end to end, then the reliance
measure), and the final student written to RUN_DIR/model as a transformers folder with the
teacher's tokenizer (`import layerzoo.hf`, then AutoModelForCausalLM.from_pretrained).

The distillation itself is training's (layerzoo.training.distill), below hf and convert, so that
it runs on any pair of CausalLMs; this is the folder around it: a conversion folder read, a
Hugging Face folder written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
from collections.abc import Iterable
from pathlib import Path

import torch

from ..assemblies.causal_lm import CausalLM
from ..hf.export import export_model
from ..hf.quiet import no_transformers_bars
from ..mixers import SlidingWindowAttention
from ..specs import ModelConfig
from ..training.distill.config import distillation_spec
from ..training.distill.run import MODEL_FOLDER, DistillResult, distill
from .conversion import Conversion


def distill_folder(converted: str | Path, out: str | Path, config: str | Path | dict | None = None,
                   overrides: Iterable[str] = (), *, resume: bool = False, overwrite: bool = False, progress: bool = True,
                   device: torch.device | str | None = None) -> DistillResult:
    """Distil the conversion in folder `converted` into the run folder `out` (config: a YAML file
    with a `distill:` section or its mapping; overrides: `distill.KEY=VALUE` strings) and write
    the final student to out/model; returns the run's result. Without progress, transformers'
    own bars (loading and writing the folders) are off too."""
    with contextlib.ExitStack() as holding:  # the run folder stays locked until the student is written
        if not progress:
            holding.enter_context(no_transformers_bars())
        conversion = Conversion.load(converted)
        spec = distillation_spec(conversion.student.config, config, overrides, source=f"{converted}/config.json")
        result = distill(conversion, spec, out, resume=resume, overwrite=overwrite, progress=progress, device=device,
                         holding=holding)
        model_dir = result.run_dir / MODEL_FOLDER
        shutil.rmtree(model_dir, ignore_errors=True)  # a resumed run's earlier student
        result.student.config = running_config(result.student)  # its SWA layers at the window it was distilled at
        export_model(result.student.cpu(), result.run_dir, model_dir)
    if progress:
        print(f"wrote the student to {model_dir}; load it with `import layerzoo.hf` and AutoModelForCausalLM.from_pretrained")
    return result


def running_config(model: CausalLM) -> ModelConfig:
    """model.config with each SWA layer's window the one its mixer runs at: distillation sets the
    student's SWA layers to `distill.window.long` (set_window changes the mixers, not the config),
    and the folder written must run at that window too. A named mixer config takes the window when
    all its layers have it; a layer that differs keeps its own as an override."""
    config = model.config
    layers = [dataclasses.replace(layer, options={**layer.options, "window": block.mixer.window})
              if isinstance(block.mixer, SlidingWindowAttention) else layer
              for layer, block in zip(config.layers, model.blocks)]
    mixers = dict(config.mixers)
    for name, mixer in config.mixers.items():
        windows = {layer.options.get("window") for layer in layers if layer.name == name}
        if "window" in mixer.options and len(windows) == 1:
            mixers[name] = dataclasses.replace(mixer, options={**mixer.options, "window": windows.pop()})
    return dataclasses.replace(config, layers=tuple(layers), mixers=mixers)
