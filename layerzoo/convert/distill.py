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
import shutil
from collections.abc import Iterable
from pathlib import Path

import torch

from ..hf.export import export_model
from ..hf.quiet import no_transformers_bars
from ..training.distill.config import distillation_spec
from ..training.distill.run import MODEL_FOLDER, DistillResult, distill
from ..training.parallel.distributed import teardown
from .conversion import Conversion


def distill_folder(converted: str | Path, out: str | Path, config: str | Path | dict | None = None,
                   overrides: Iterable[str] = (), *, resume: bool = False, overwrite: bool = False, progress: bool = True,
                   device: torch.device | str | None = None) -> DistillResult:
    """Distil the conversion in folder `converted` into the run folder `out` (config: a YAML file
    with a `distill:` section or its mapping; overrides: `distill.KEY=VALUE` strings) and write
    the final student to out/model; returns the run's result. Without progress, transformers'
    own bars (loading and writing the folders) are off too. Under torchrun every process loads the
    conversion and distils (distill's ranks), rank 0 writes the student, and each leaves the group."""
    with contextlib.ExitStack() as holding:  # the run folder stays locked until the student is written
        if not progress:
            holding.enter_context(no_transformers_bars())
        conversion = Conversion.load(converted)
        spec = distillation_spec(conversion.student.config, config, overrides, source=f"{converted}/config.json")
        result = distill(conversion, spec, out, resume=resume, overwrite=overwrite, progress=progress, device=device,
                         holding=holding)
        model_dir = result.run_dir / MODEL_FOLDER
        try:
            if result.context.is_main:
                shutil.rmtree(model_dir, ignore_errors=True)  # a resumed run's earlier student
                export_model(result.student.cpu(), result.run_dir, model_dir)
        finally:
            teardown(result.context)
    if progress and result.context.is_main:
        print(f"wrote the student to {model_dir}; load it with `import layerzoo.hf` and AutoModelForCausalLM.from_pretrained")
    return result
