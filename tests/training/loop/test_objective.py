"""A training objective of one's own, in this one file, trained by layerzoo's loop: interrupted by
SIGINT mid-run, it saves a checkpoint and stops; resumed, it ends where an uninterrupted run ends,
to the bit (weights, optimizer state, metrics)."""

import signal

import pytest
import torch
import torch.nn.functional as F

import layerzoo
from layerzoo.tasks import example_seed
from layerzoo.training import LoopSettings, TrainingInterrupted, run_loop
from layerzoo.training.config import OptimizerConfig
from layerzoo.training.runs.checkpoint import load_weights, read_checkpoint
from layerzoo.training.runs.run_checkpoints import newest_usable
from tests.helpers.run_checks import assert_same_final_state, checkpoint_steps

STEPS = 6


class FirstTokenEverywhere:
    """A toy objective: every position of a random row predicts the row's first token. Rows are
    drawn from (seed, step); `interrupt_at` sends this process SIGINT inside that step."""

    def __init__(self, model, seed: int = 0, interrupt_at: int | None = None):
        self.model, self.seed, self.interrupt_at = model, seed, interrupt_at

    def rows(self, key, seq_len: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(example_seed(self.seed, "first-token", key))
        return torch.randint(0, self.model.config.vocab_size, (2, seq_len), generator=generator)

    def loss(self, rows: torch.Tensor) -> torch.Tensor:
        logits = self.model(rows)
        return F.cross_entropy(logits.flatten(0, 1), rows[:, :1].expand_as(rows).flatten())

    def backward(self, step: int, seq_len: int) -> tuple[float, dict[str, float]]:
        if step == self.interrupt_at:
            signal.raise_signal(signal.SIGINT)
        loss = self.loss(self.rows(step, seq_len))
        loss.backward()
        return loss.item(), {"perplexity": loss.exp().item()}

    @torch.no_grad()
    def heldout(self) -> dict[str, float]:
        return {"loss": self.loss(self.rows("heldout", 16)).item()}


def settings() -> LoopSettings:
    return LoopSettings(steps=STEPS, batch_size=2, seq_len=16, optimizer=OptimizerConfig(lr=1e-2, warmup_steps=2),
                        log_every=1, eval_every=2, checkpoint_every=None, keep_checkpoints=1, lr_key="toy.lr")


def model_and_spec():
    spec = layerzoo.load_spec("swa-tiny")
    torch.manual_seed(0)
    return layerzoo.build(spec), spec


def test_a_toy_objective_trains_and_resumes_bit_exactly(tmp_path):
    model, spec = model_and_spec()
    record = run_loop(FirstTokenEverywhere(model), tmp_path / "whole", spec, settings(), progress=False)
    assert record["step"] == STEPS and "eval_loss" in record and "perplexity" in record

    model, spec = model_and_spec()
    with pytest.raises(TrainingInterrupted, match=r"interrupted by SIGINT after step 3; saved .*step-00000003"):
        run_loop(FirstTokenEverywhere(model, interrupt_at=2), tmp_path / "resumed", spec, settings(), progress=False)
    assert checkpoint_steps(tmp_path / "resumed") == [3]

    model, spec = model_and_spec()
    checkpoint = newest_usable(tmp_path / "resumed", read_checkpoint)
    load_weights(checkpoint, model)
    run_loop(FirstTokenEverywhere(model), tmp_path / "resumed", spec, settings(), checkpoint=checkpoint, progress=False)
    assert_same_final_state(tmp_path / "resumed", tmp_path / "whole")


def test_the_loop_stops_before_a_non_finite_step_updates_the_weights(tmp_path):
    model, spec = model_and_spec()
    objective = FirstTokenEverywhere(model)
    objective.loss = lambda rows: model(rows).sum() * float("inf")
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    with pytest.raises(layerzoo.training.TrainingError, match=r"^step 1: non-finite loss .* try a lower toy.lr$"):
        run_loop(objective, tmp_path / "run", spec, settings(), progress=False)
    assert all(torch.equal(before[name], tensor) for name, tensor in model.state_dict().items())
