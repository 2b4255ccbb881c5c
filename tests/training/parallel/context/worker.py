"""One torchrun process of the context-parallel checks: each case runs once whole (the reference)
and once split over the context group; rank 0 writes the largest differences to report.json.

Usage: worker.py OUT (under torchrun --nproc_per_node K).
"""

import copy
import dataclasses
import faulthandler
import sys
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

import layerzoo
from layerzoo.mixers.from_attention import slow_decay_bias
from layerzoo.mixers.kda import KimiDeltaAttention
from layerzoo.registry import get_mixer, list_mixers
from layerzoo.training.parallel.fsdp import mixed_precision_policy, shard
from layerzoo.training.parallel.context import ContextError, ContextGroup, Pieces, context_parallel
from layerzoo.training.parallel.context.attention import worth_balancing
from tests.helpers.gloo_worker import finish
from tests.helpers.toy_mixer import ToyMixer

VOCAB = 64
# Pieces of 3 tokens with 3 ranks (4 and 5 with 2): shorter than SWA's window of 5 and than the
# chunks of 4; the packed boundaries fall inside pieces and across them.
LENGTH, ROWS = 9, 2
PACKED = torch.tensor([0, 2, 7, 9])
# For balanced full attention: a sequence crossing every piece after one of a token, uneven
# enough with 2 and 3 ranks (1.44x the average causal work) that full attention balances it.
PACKED_UNEVEN = torch.tensor([0, 1, 7, 9])
TINY_SPECS = ("transformer-tiny", "swa-tiny", "swax-tiny", "swax-gdn-tiny", "kda-hybrid-tiny", "mamba2-hybrid-tiny",
              "xlstm-tiny")


def third_party() -> str:
    """A user's mixer that declares no exchange, registered in this process only: its name."""
    layerzoo.register_mixer("toy", test_options={"n_heads": 2})(ToyMixer)
    return "toy"


def one_mixer(name: str) -> dict:
    """Two layers of mixer `name` alone (its registered test options), 32 wide."""
    return {"model": {"d_model": 32, "n_layers": 2, "vocab_size": VOCAB, "mixers": {name: get_mixer(name).test_options},
                      "pattern": [name], "ffn": {"hidden": 32}}}


def shipped(name: str) -> dict:
    """A shipped tiny spec at the test's vocabulary (its layers as shipped)."""
    return layerzoo.load_spec(name, [f"model.vocab_size={VOCAB}"])


def gradients(model) -> list[torch.Tensor]:
    return [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in model.parameters()]


def run(model, ids, targets, cu_seqlens):
    """(logits, mean loss over every token, gradients) of one process."""
    model.zero_grad()
    logits = model(ids, cu_seqlens=cu_seqlens)
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    loss.backward()
    return logits.detach(), loss.detach(), gradients(model)


def run_split(model, ids, targets, pieces):
    """The same from this rank's piece: logits of the piece, the loss and gradients summed over the group."""
    model.zero_grad()
    group = pieces.group.process_group
    with context_parallel(model, pieces):
        logits = model(pieces.slice(ids), cu_seqlens=pieces.local_cu_seqlens())
    loss = F.cross_entropy(logits.flatten(0, 1), pieces.slice(targets).flatten(), reduction="sum") / targets.numel()
    loss.backward()
    grads = gradients(model)
    for tensor in (loss, *grads):
        dist.all_reduce(tensor, group=group)
    return logits.detach(), loss.detach(), grads


def run_sharded(model, ids, targets, pieces):
    """run_split's under FSDP2, whose reduce-scatter averages the ranks' gradients (times K: their sum)."""
    with context_parallel(model, pieces):
        logits = model(pieces.slice(ids), cu_seqlens=pieces.local_cu_seqlens())
    loss = F.cross_entropy(logits.flatten(0, 1), pieces.slice(targets).flatten(), reduction="sum") / targets.numel()
    loss.backward()
    grads = [p.grad.full_tensor() * pieces.group.size for p in model.parameters()]
    dist.all_reduce(loss := loss.detach(), group=pieces.group.process_group)
    return logits.detach(), loss, grads


def difference(spec, dtype, packed: bool, group: ContextGroup, fsdp: bool = False, spread: bool = True,
               offsets: torch.Tensor = PACKED) -> float:
    """Largest difference of logits, loss or any gradient between the split run and one process;
    with fsdp, the split run's model sharded with FSDP2 over the same processes. spread: mLSTM's
    gates spread out, so its stabiliser takes both sides of its max, and KDA's decay slow, so its
    state reaches past a piece (a shipped spec runs as built: stacked layers of spread gates make
    the fp64 sums themselves ill-conditioned, gradients of 10 rounded to 1e-11 apart by two CPUs'
    kernels, which would measure the CPU, not the exchange)."""
    torch.manual_seed(0)
    model = layerzoo.build(spec).to(dtype)
    if spread:
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if name.endswith("gate_proj.bias"):
                    parameter.normal_(0.0, 4.0)
            for module in model.modules():
                if isinstance(module, KimiDeltaAttention):  # fla's init forgets in a few tokens
                    module.dt_bias.copy_(slow_decay_bias(module.n_heads).repeat_interleave(module.head_dim))
    rows, length = (1, int(offsets[-1])) if packed else (ROWS, LENGTH)
    ids = torch.randint(0, VOCAB, (rows, length))
    targets = torch.randint(0, VOCAB, (rows, length))
    cu_seqlens = offsets if packed else None
    pieces = Pieces.split(group, length, cu_seqlens)
    logits, loss, grads = run(model, ids, targets, cu_seqlens)
    if fsdp:
        split_logits, split_loss, split_grads = run_sharded(shard(copy.deepcopy(model), mixed_precision_policy(None)),
                                                            ids, targets, pieces)
    else:
        split_logits, split_loss, split_grads = run_split(model, ids, targets, pieces)
    return worst_over_ranks(pieces, (logits, loss, grads), (split_logits, split_loss, split_grads))


def balanced_state_difference(packed: bool, group: ContextGroup) -> float:
    """Largest difference, over the ranks, between the KV cache full attention's piece leaves
    balanced and the one it leaves in contiguous pieces (keys, values, lengths, positions)."""
    torch.manual_seed(0)
    attention = layerzoo.build(one_mixer("attention")).to(torch.float64).blocks[0].mixer
    rows = 1 if packed else ROWS
    x = torch.randn(rows, LENGTH, 32, dtype=torch.float64)
    pieces = {balance: Pieces.split(dataclasses.replace(group, balance_attention=balance), LENGTH,
                                    PACKED_UNEVEN if packed else None) for balance in (True, False)}
    states = {}
    for balance, split in pieces.items():
        with context_parallel(attention, split):
            _, states[balance] = attention(split.slice(x), return_state=True, cu_seqlens=split.local_cu_seqlens())
    (one, other) = states.values()
    if (one.lengths is None) != (other.lengths is None):
        return float("inf")
    pairs = [(one.k, other.k), (one.v, other.v), (one.position, other.position)]
    pairs += [] if one.lengths is None else [(one.lengths, other.lengths)]
    worst = max(float("inf") if a.shape != b.shape else (a - b).abs().max().item() for a, b in pairs)
    worst = torch.tensor(worst, dtype=torch.float64)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    return worst.item()


def worst_over_ranks(pieces: Pieces, whole: tuple, split: tuple) -> float:
    """The largest difference over the ranks between one process's (logits, loss, gradients) and
    the split run's (this rank's logits): absolute for logits and loss, relative for gradients."""
    (logits, loss, grads), (split_logits, split_loss, split_grads) = whole, split
    worst = max([(loss - split_loss).abs().item(), (pieces.slice(logits) - split_logits).abs().max().item()]
                + [(a - b).abs().max().item() / max(1.0, a.abs().max().item()) for a, b in zip(grads, split_grads)])
    worst = torch.tensor(worst, dtype=torch.float64)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    return worst.item()


def refusals(attempts: dict) -> dict:
    """{key: the ContextError message of attempts[key]()} for the attempts that raise one."""
    messages = {}
    for key, attempt in attempts.items():
        try:
            attempt()
        except ContextError as error:
            messages[key] = str(error)
    return messages


def bad_inputs(group: ContextGroup) -> dict:
    """The one-line messages of a context size not dividing the world and of too short a sequence."""
    return refusals({"context_size": lambda: ContextGroup.from_world(dist.get_world_size() + 1),
                     "too_short": lambda: Pieces.split(group, group.size - 1)})


def main(out: Path) -> None:
    faulthandler.enable()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    group = ContextGroup.from_world(dist.get_world_size(), balance_attention=False)  # contiguous pieces
    cases = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name in [*list_mixers(), third_party()]:
            for packed in (False, True):
                cases[f"{name}/{'packed' if packed else 'rows'}/fp64"] = difference(one_mixer(name), torch.float64, packed, group)
            cases[f"{name}/rows/fp32"] = difference(one_mixer(name), torch.float32, False, group)
        for name in TINY_SPECS:
            cases[f"{name}/packed/fp64"] = difference(shipped(name), torch.float64, True, group, spread=False)
        for name in ("swax-tiny", "swax-gdn-tiny", "mamba2-hybrid-tiny"):
            cases[f"{name}/packed/fsdp/fp64"] = difference(shipped(name), torch.float64, True, group, fsdp=True,
                                                           spread=False)
        balanced = dataclasses.replace(group, balance_attention=True)
        for packed in (False, True):
            layout = "packed" if packed else "rows"
            assert worth_balancing(Pieces.split(balanced, LENGTH, PACKED_UNEVEN if packed else None)), layout
            cases[f"attention/{layout}/balanced/fp64"] = difference(one_mixer("attention"), torch.float64, packed,
                                                                    balanced, offsets=PACKED_UNEVEN)
            cases[f"attention/{layout}/balanced/fp32"] = difference(one_mixer("attention"), torch.float32, packed,
                                                                    balanced, offsets=PACKED_UNEVEN)
            cases[f"transformer-tiny/{layout}/balanced/fp64"] = difference(
                shipped("transformer-tiny"), torch.float64, packed, balanced, spread=False, offsets=PACKED_UNEVEN)
            cases[f"attention/{layout}/balanced state/fp64"] = balanced_state_difference(packed, group)
    report = {"cases": cases, "bad_inputs": bad_inputs(group), "warnings": [str(w.message) for w in caught]}
    finish(report, out)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
