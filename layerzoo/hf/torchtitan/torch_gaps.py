"""What torchtitan 0.3.0 calls in torch that torch's releases lack (torchtitan follows nightlies).

After its first step, torchtitan's trainer sets every process group's timeout with
`torch.distributed.set_timeout`, absent from torch 2.11 and 2.13, whose private
`_set_pg_timeout(timeout, group)` does the same; without it every run fails after one step, on
any device. Filled in only where missing, so a torch that has it keeps its own.
"""

import torch.distributed as dist
from torch.distributed.distributed_c10d import _set_pg_timeout


def fill_torch_gaps() -> None:
    """Give torch.distributed the set_timeout(timeout, group=None) torchtitan 0.3.0 calls, where it has none."""
    if not hasattr(dist, "set_timeout"):
        dist.set_timeout = _set_pg_timeout
