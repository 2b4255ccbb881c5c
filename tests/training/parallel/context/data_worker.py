"""One of 4 torchrun processes: context 2 x data 2, with DDP and with FSDP2 over all 4 (each
data group its own rows, each context rank its piece of them), against one process on all the
rows; rank 0 writes the largest differences to report.json.

Usage: data_worker.py OUT (under torchrun --nproc_per_node 4).
"""

import copy
import faulthandler
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

import layerzoo
from layerzoo.training.parallel.context import ContextGroup, Pieces, context_parallel
from layerzoo.training.parallel.fsdp import mixed_precision_policy, shard
from tests.helpers.gloo_worker import finish
from tests.training.parallel.context.worker import LENGTH, ROWS, VOCAB, run, shipped


def difference(name: str, wrap: str, group: ContextGroup) -> float:
    """Largest difference of this rank's logits and of every gradient from one process's."""
    torch.manual_seed(0)
    model = layerzoo.build(shipped(name)).to(torch.float64)
    data_groups = dist.get_world_size() // group.size
    ids = torch.randint(0, VOCAB, (data_groups * ROWS, LENGTH))
    targets = torch.randint(0, VOCAB, (data_groups * ROWS, LENGTH))
    logits, _, grads = run(model, ids, targets, None)
    mine = slice(dist.get_rank() // group.size * ROWS, (dist.get_rank() // group.size + 1) * ROWS)
    pieces = Pieces.split(group, LENGTH)
    wrapped = DistributedDataParallel(copy.deepcopy(model)) if wrap == "ddp" else shard(copy.deepcopy(model),
                                                                                        mixed_precision_policy(None))
    with context_parallel(wrapped, pieces):
        split_logits = wrapped(pieces.slice(ids[mine]))
    # both average gradients over all 4 processes: scaled so the average is the global batch's mean
    loss = F.cross_entropy(split_logits.flatten(0, 1), pieces.slice(targets[mine]).flatten(), reduction="sum")
    (loss * dist.get_world_size() / targets.numel()).backward()
    split_grads = [p.grad.full_tensor() if wrap == "fsdp" else p.grad for p in wrapped.parameters()]
    worst = max([(pieces.slice(logits[mine]) - split_logits.detach()).abs().max().item()]
                + [(a - b).abs().max().item() / max(1.0, a.abs().max().item()) for a, b in zip(grads, split_grads)])
    worst = torch.tensor(worst, dtype=torch.float64)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    return worst.item()


def main(out: Path) -> None:
    faulthandler.enable()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    group = ContextGroup.from_world(2)
    cases = {f"{name}/{wrap}": difference(name, wrap, group)
             for name in ("swax-gdn-tiny", "xlstm-tiny") for wrap in ("ddp", "fsdp")}
    finish(cases, out)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
