"""The FSDP2 checks that need two ranks, run once by test_fsdp.py under torchrun with 2 gloo processes:

    python -m torch.distributed.run --standalone --nproc_per_node 2 fsdp_worker.py OUT SPEC ARMT_SPEC

One launch for all of them (starting the processes costs more than the checks). Rank 0 writes
OUT/report.json for the tests to read; the training runs leave their run folders in OUT.
"""

from __future__ import annotations

import faulthandler
import json
import os
import shutil
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

import layerzoo
from layerzoo.tasks import make_task
from layerzoo.training import train
from layerzoo.training.objectives.language_model import score_heldout
from layerzoo.training.parallel.distributed import setup
from layerzoo.training.parallel.fsdp import build_sharded

CPU = torch.device("cpu")
PACKED = ["training.task.pack=true"]  # rows of several examples of random lengths
# Odd vocabulary (uneven shards), untied head, every mixer with weights of its own: built, not run.
MIXED = {"model": {"d_model": 32, "n_layers": 4, "vocab_size": 61, "tie_embeddings": False,
                   "mixers": {"swa": {"n_heads": 2, "window": 8}, "mlstm": {"n_heads": 2},
                              "gated_deltanet": {"n_heads": 2, "head_dim": 8}, "attention": {"n_heads": 2, "qk_norm": True}},
                   "pattern": ["swa", "mlstm", "gated_deltanet", "attention"], "ffn": {"hidden": 64}}}


def build_differences(spec) -> list[str]:
    """Names whose gathered sharded value differs from a normal build's with the same seed
    (parameters, buffers, and "rng" for the generator's state afterwards); [] when all match."""
    torch.manual_seed(7)
    normal = layerzoo.build(spec)
    rng = torch.get_rng_state()
    torch.manual_seed(7)
    sharded = build_sharded(spec, CPU)
    differ = [] if torch.equal(torch.get_rng_state(), rng) else ["rng"]
    gathered = get_model_state_dict(sharded, options=StateDictOptions(full_state_dict=True))
    gathered.update(sharded.named_buffers())
    expected = {**normal.state_dict(), **dict(normal.named_buffers())}
    differ += [name for name, tensor in expected.items() if not torch.equal(gathered[name], tensor)]
    return differ


def uneven_evaluation(spec, context) -> tuple[dict, dict]:
    """evaluate over 3 examples one at a time, FSDP-sharded (rank 0 runs two batches, rank 1 one
    and a spare) and in one process: (sharded result, unsharded result)."""
    task = make_task(spec.training.task.name, spec.training.task.options, spec.model.vocab_size)
    torch.manual_seed(7)
    sharded = build_sharded(spec, CPU)
    torch.manual_seed(7)
    normal = layerzoo.build(spec)
    args = (task, spec.training.seq_len, 3, 11)
    return score_heldout(sharded, *args, batch_size=1, context=context), score_heldout(normal, *args, batch_size=1)


def mixed_precision_pass(spec) -> dict:
    """One forward and backward with bf16 mixed precision: the dtypes seen and whether the loss is finite."""
    model = build_sharded(spec, CPU, "bf16")
    unit = model.repeated_blocks()[0]
    seen = []
    unit.register_forward_pre_hook(lambda module, args: seen.append(next(module.parameters()).dtype))
    logits = model(torch.randint(0, spec.model.vocab_size, (2, spec.training.seq_len)))
    loss = logits.float().logsumexp(-1).mean()
    loss.backward()
    sharded = next(unit.parameters())
    return {"compute": str(seen[0]), "logits": str(logits.dtype), "weights": str(sharded.dtype),
            "gradients": str(sharded.grad.dtype), "finite": bool(torch.isfinite(loss))}


def hugging_face_armt(out: Path) -> float | None:
    """Largest difference of an FSDP ARMT around a small random Llama from the unsharded one
    (None without transformers); raises if its backward fails."""
    try:
        import transformers
    except ImportError:
        return None
    path = out / "llama"
    if dist.get_rank() == 0:
        torch.manual_seed(0)
        config = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
                                          num_key_value_heads=2, max_position_embeddings=64, vocab_size=96)
        transformers.AutoModelForCausalLM.from_config(config).save_pretrained(path)
    dist.barrier()
    spec = layerzoo.load_spec({"base": {"hf_checkpoint": str(path)},
                               "armt": {"segment_size": 8, "num_mem_tokens": 2, "d_mem": 16, "memory_layers": [0, 2]}})
    torch.manual_seed(1)
    normal = layerzoo.build(spec)
    torch.manual_seed(1)
    sharded = build_sharded(spec, CPU)
    ids = torch.randint(0, 96, (2, 20))
    logits = sharded(ids)
    logits.float().pow(2).mean().backward()
    return (logits - normal(ids)).abs().max().item()


def train_runs(out: Path, spec: Path, armt: Path) -> None:
    """FSDP training (global batch 8: two ranks of two micro-batches of 2), ARMT on packed rows too
    (the ranks' rows hold different numbers of examples, so of segments), a resume of the ARMT run
    from its step-2 checkpoint in a copy of its folder, and a bf16 mixed-precision run."""
    fsdp = ["training.parallel=fsdp", "training.grad_accum=2"]
    train(spec, fsdp, run_dir=out / "causal", progress=False)
    train(armt, fsdp + PACKED, run_dir=out / "armt-packed", progress=False)
    train(armt, fsdp + ["training.checkpoint_every=2"], run_dir=out / "armt", progress=False)
    if dist.get_rank() == 0:
        shutil.copytree(out / "armt", out / "armt-resumed")
        shutil.rmtree(out / "armt-resumed" / "checkpoints" / "step-00000004")
    dist.barrier()
    train(armt, fsdp + ["training.checkpoint_every=2"], run_dir=out / "armt-resumed", resume=True, progress=False)
    train(spec, fsdp + ["training.mixed_precision=bf16"], run_dir=out / "causal-bf16", progress=False)


def main(out: Path, spec_path: Path, armt_path: Path) -> None:
    faulthandler.enable()  # a crash inside torch prints every thread's Python stack
    context = setup()
    spec, armt = layerzoo.load_spec(spec_path), layerzoo.load_spec(armt_path)
    report = {"build": {"mixed": build_differences(layerzoo.load_spec(MIXED)), "armt": build_differences(armt)},
              "evaluation": uneven_evaluation(spec, context),
              "mixed_precision": {"causal": mixed_precision_pass(spec), "armt": mixed_precision_pass(armt)},
              "hugging_face": hugging_face_armt(out)}
    train_runs(out, spec_path, armt_path)
    if context.is_main:
        (out / "report.json").write_text(json.dumps(report, indent=1))
    dist.destroy_process_group()
    # Everything is checked and written. Interpreter shutdown with gloo's worker threads still
    # alive can abort the process ("terminate called without an active exception"), so skip it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(*map(Path, sys.argv[1:4]))
