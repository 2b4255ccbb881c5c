"""The end of a test's worker process under torchrun (one that can import tests.helpers): rank 0's report
written, the group left."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch.distributed as dist


def finish(report: dict, out: Path) -> None:
    """Rank 0 writes `report` to out/report.json; every rank leaves the process group and exits at once."""
    if dist.get_rank() == 0:
        (out / "report.json").write_text(json.dumps(report, indent=1))
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # gloo's threads can abort the interpreter's shutdown
