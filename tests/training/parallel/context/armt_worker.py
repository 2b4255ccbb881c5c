"""One torchrun process of the ARMT context-parallel checks: each case runs once whole (the
reference) and once split over the context group in pieces of whole segments; rank 0 writes the
largest differences and the bad inputs' messages to report.json.

Usage: armt_worker.py OUT (under torchrun --nproc_per_node K).
"""

import copy
import faulthandler
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from transformers import LlamaForCausalLM

import layerzoo
from layerzoo.assemblies.armt import wrap
from layerzoo.training.parallel.context import ContextGroup, Pieces
from layerzoo.training.parallel.fsdp import mixed_precision_policy, shard
from tests.helpers.gloo_worker import finish
from tests.helpers.hf_teachers import TeacherCase
from tests.training.parallel.context.worker import ROWS, VOCAB, refusals, run, run_sharded, run_split, worst_over_ranks

SEGMENT = 8
# 29 tokens: three whole segments and a partial one of 5; two sequences of 5 and 24 tokens packed,
# the second's segments crossing ranks (2 ranks: cut at 13; 3 ranks: at 5, a boundary, and 13).
LENGTHS = (24, 29)
PACKED = torch.tensor([0, 5, 29])


def tiny(dtype) -> torch.nn.Module:
    """armt-tiny (segments of 8, 4 memory tokens, memory in layers 1 and 3) at the test's vocabulary."""
    return layerzoo.build(layerzoo.load_spec("armt-tiny", [f"model.vocab_size={VOCAB}"])).to(dtype)


def hf(dtype) -> torch.nn.Module:
    """ARMT wrapped around transformers' Llama (2 layers, random weights), its base trained too."""
    base = LlamaForCausalLM(TeacherCase("llama").config()).to(dtype)
    return wrap(base, segment_size=SEGMENT, num_mem_tokens=2, memory_layers=[1], train_base=True)


def drawn(armt: torch.nn.Module) -> torch.nn.Module:
    """The memory starts neutral (W_v = 0, nothing read): drawn, so the memory passed on changes
    the logits of every later segment."""
    with torch.no_grad():
        for name, parameter in armt.memories.named_parameters():
            if name.endswith("value.weight"):
                parameter.normal_(0.0, 0.3)
    return armt


def difference(make, dtype, length: int, packed: bool, group: ContextGroup, fsdp: bool = False) -> float:
    """Largest difference of logits, loss or any gradient between the split run and one process;
    with fsdp, the split run's model sharded with FSDP2 over the same processes (one unit)."""
    torch.manual_seed(0)
    model = drawn(make(dtype))
    rows = 1 if packed else ROWS
    ids = torch.randint(0, VOCAB, (rows, length))
    targets = torch.randint(0, VOCAB, (rows, length))
    cu_seqlens = PACKED if packed else None
    pieces = Pieces.split(group, length, cu_seqlens, SEGMENT)
    logits, loss, grads = run(model, ids, targets, cu_seqlens)
    if fsdp:
        split_logits, split_loss, split_grads = run_sharded(shard(copy.deepcopy(model), mixed_precision_policy(None)),
                                                            ids, targets, pieces)
    else:
        split_logits, split_loss, split_grads = run_split(model, ids, targets, pieces)
    return worst_over_ranks(pieces, (logits, loss, grads), (split_logits, split_loss, split_grads))


def bad_inputs(group: ContextGroup) -> dict:
    """The one-line message of too few segments for the ranks."""
    return refusals({"too_few_segments": lambda: Pieces.split(group, SEGMENT * (group.size - 1), segment_size=SEGMENT)})

def main(out: Path) -> None:
    faulthandler.enable()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    group = ContextGroup.from_world(dist.get_world_size())
    cases = {}
    for length in LENGTHS:
        cases[f"armt-tiny/rows {length}/fp64"] = difference(tiny, torch.float64, length, False, group)
    cases["armt-tiny/packed/fp64"] = difference(tiny, torch.float64, int(PACKED[-1]), True, group)
    cases["armt-hf/rows 29/fp64"] = difference(hf, torch.float64, 29, False, group)
    cases["armt-tiny/rows 29/fp32"] = difference(tiny, torch.float32, 29, False, group)
    # rank 0's first segment reads no memory: every weight still reduce-scatters on every rank
    cases["armt-tiny/rows 29/fsdp/fp64"] = difference(tiny, torch.float64, 29, False, group, fsdp=True)
    cases["armt-tiny/packed/fsdp/fp64"] = difference(tiny, torch.float64, int(PACKED[-1]), True, group, fsdp=True)
    finish({"cases": cases, "bad_inputs": bad_inputs(group)}, out)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
