"""One torchrun process of the packed-layout checks: every mixer, split over the world, against one
process on the layouts flash-linear-attention's context-parallel tests use for Gated DeltaNet and
its short convolutions, scaled from 1024 tokens to 32: boundaries aligned with the pieces, a
sequence over three pieces, tails of one and two tokens (shorter than a convolution's halo), a
sequence of one token at a piece's start, many short sequences. Rank 0 writes each case's largest
difference to report.json.

Usage: layouts_worker.py OUT (under torchrun --nproc_per_node 2 or 4).
"""

import dataclasses
import faulthandler
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from layerzoo.registry import list_mixers
from layerzoo.training.parallel.context import ContextGroup
from tests.helpers.gloo_worker import finish
from tests.training.parallel.context.worker import difference, one_mixer

# lengths of the packed sequences, 32 tokens: pieces of 16 with 2 ranks, of 8 with 4
LAYOUTS = {
    "cut in the middle": [9, 13, 10],
    "aligned with the pieces": [16, 16],
    "many short": [3, 5, 6, 8, 4, 3, 3],
    "one sequence": [32],
    "over three pieces": [22, 10],
    "a tail of one": [17, 15],
    "a tail of two": [18, 14],
    "a tail of one on every other piece": [9, 7, 9, 7],
    "a tail after a short sequence": [6, 11, 15],
    "one token at a piece's start": [16, 1, 15],
    "short tails on several pieces": [9, 5, 9, 9],
    "one-token sequences and short tails": [9, 1, 5, 9, 1, 5, 2],
}


def main(out: Path) -> None:
    faulthandler.enable()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    contiguous = ContextGroup.from_world(dist.get_world_size(), balance_attention=False)
    groups = {"": contiguous, "balanced/": dataclasses.replace(contiguous, balance_attention=True)}
    cases = {}
    for layout, lengths in LAYOUTS.items():
        offsets = torch.tensor([0, *lengths]).cumsum(0)
        for name in list_mixers():
            for label, group in groups.items() if name == "attention" else [("", contiguous)]:
                cases[f"{name}/{label}{layout}"] = difference(one_mixer(name), torch.float64, True, group, offsets=offsets)
    finish(cases, out)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
