"""torch.distributed.set_timeout, which torchtitan 0.3.0 calls after its first step and torch 2.13
lacks: importing layerzoo.hf.torchtitan fills it in, and it sets a process group's timeout."""

import subprocess
import sys

import pytest

pytest.importorskip("torchtitan", reason="torchtitan is not installed (docs/training-at-scale.md says how)")

SCRIPT = """
import datetime, sys, torch, torch.distributed as dist
import layerzoo.hf.torchtitan
from torch.distributed.distributed_c10d import _get_default_group
dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)
dist.set_timeout(datetime.timedelta(seconds=7), None)
print(_get_default_group()._get_backend(torch.device("cpu")).options._timeout)
"""


def test_set_timeout_sets_the_groups_timeout(tmp_path):
    # a process of its own: this one's process group, if any, stays as it is
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "store")], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "0:00:07"
