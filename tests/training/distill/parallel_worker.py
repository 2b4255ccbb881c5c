"""One of two torchrun processes distilling the tiny conversion as test_parallel.py asks: each run
of CONTEXT_RUNS through `distill` (context 2), a batch that does not split refused, then data
parallel 2 through `distill_folder` (the CLI's path: rank 0 exports the student, every rank leaves
the group). Rank 0 saves each final student's weights to OUT/<run>.pt and the refusal to
OUT/report.json.

Usage: parallel_worker.py CONVERTED CONFIG OUT (under torchrun --nproc_per_node 2).
"""

import faulthandler
import json
import os
import sys
from pathlib import Path

import torch

from layerzoo.convert import Conversion, distill_folder
from layerzoo.training.distill.config import distillation_spec
from layerzoo.training.distill.run import distill
from layerzoo.training.errors import TrainingError
from tests.training.distill.test_parallel import CONTEXT_RUNS, DATA_RUN, UNEVEN


def save_student(result, out: Path, name: str) -> None:
    if result.context.is_main:
        torch.save(result.student.state_dict(), out / f"{name}.pt")


def main(converted: Path, config: Path, out: Path) -> None:
    faulthandler.enable()
    torch.set_num_threads(1)
    for name, (_, overrides) in CONTEXT_RUNS.items():
        conversion = Conversion.load(converted)
        spec = distillation_spec(conversion.student.config, config, overrides)
        save_student(distill(conversion, spec, out / name, progress=False), out, name)
    conversion = Conversion.load(converted)
    try:
        distill(conversion, distillation_spec(conversion.student.config, config, UNEVEN), out / "uneven", progress=False)
        refused = None
    except TrainingError as error:
        refused = str(error)
    _, overrides = DATA_RUN
    result = distill_folder(converted, out / "data", config, overrides, progress=False)  # leaves the process group
    save_student(result, out, "data")
    if result.context.is_main:
        (out / "report.json").write_text(json.dumps({"refused": refused}))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # gloo's threads can abort the interpreter's shutdown


if __name__ == "__main__":
    main(*map(Path, sys.argv[1:4]))
