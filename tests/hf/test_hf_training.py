"""Training a layerzoo model through the ecosystem: gradient checkpointing, transformers' Trainer
(gradient accumulation, saving and resuming) and peft's LoRA on the mixers' projections."""

import warnings

import pytest
import torch
from transformers import Trainer, TrainerCallback, TrainingArguments

from layerzoo.hf import LayerzooForCausalLM

from tests.helpers.hf_inputs import TINY, prompts


def gradients(model: LayerzooForCausalLM, ids: torch.Tensor) -> dict[str, torch.Tensor]:
    model.zero_grad()
    model(ids, labels=ids).loss.backward()
    return {name: parameter.grad.clone() for name, parameter in model.named_parameters() if parameter.grad is not None}


@pytest.mark.parametrize("name", TINY)
def test_gradient_checkpointing_gives_the_gradients_of_the_plain_backward(name):
    torch.manual_seed(0)
    model = LayerzooForCausalLM.from_spec(name).train()
    ids = torch.stack(prompts([40, 40], model.config.vocab_size))
    plain = gradients(model, ids)
    with warnings.catch_warnings():  # transformers 5 renames it activation_checkpointing_enable
        warnings.simplefilter("ignore", FutureWarning)
        model.gradient_checkpointing_enable()
    assert model.model.gradient_checkpointing
    checkpointed = gradients(model, ids)
    assert checkpointed.keys() == plain.keys()
    for key, value in plain.items():
        assert torch.equal(checkpointed[key], value), key
    model.gradient_checkpointing_disable()
    assert not model.model.gradient_checkpointing


class StopAt(TrainerCallback):
    """Stops training after `step`, as an interruption would (the checkpoint there is written)."""

    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            control.should_training_stop = True


def example(row: torch.Tensor, ignored: int) -> dict[str, torch.Tensor]:
    labels = row.clone()
    labels[:ignored] = -100
    return {"input_ids": row, "labels": labels}


# Rows scoring different numbers of tokens: micro-batches of a step weigh by their scored tokens.
DATA = [example(row, 3 * (index % 6)) for index, row in
        enumerate(torch.randint(1, 256, (16, 24), generator=torch.Generator().manual_seed(0)))]


def trained(folder, *, batch: int = 2, accumulation: int = 2, steps: int = 4, stop: int | None = None,
            resume: bool = False, optimizer: str = "adamw_torch") -> LayerzooForCausalLM:
    torch.manual_seed(0)
    model = LayerzooForCausalLM.from_spec("swax-tiny")
    arguments = TrainingArguments(output_dir=str(folder), max_steps=steps, per_device_train_batch_size=batch,
                                  gradient_accumulation_steps=accumulation, learning_rate=1e-3, save_steps=2,
                                  report_to=[], use_cpu=True, seed=0, disable_tqdm=True, optim=optimizer)
    trainer = Trainer(model=model, args=arguments, train_dataset=DATA, callbacks=[StopAt(stop)] if stop else None)
    trainer.train(resume_from_checkpoint=resume or None)
    return model


def test_the_trainer_accumulates_gradients_saves_and_resumes(tmp_path):
    pytest.importorskip("accelerate", reason="transformers' Trainer needs accelerate")
    whole = trained(tmp_path / "whole")
    assert (tmp_path / "whole" / "checkpoint-4" / "model.safetensors").exists()
    trained(tmp_path / "resumed", stop=2)
    resumed = trained(tmp_path / "resumed", resume=True)
    for key, value in whole.state_dict().items():
        assert torch.equal(resumed.state_dict()[key], value), key
    # The Trainer passes num_items_in_batch, so two micro-batches of 2 step as one batch of 4 does
    # (plain SGD: Adam's normalised step would magnify the rounding of the smallest gradients).
    accumulated = trained(tmp_path / "accumulated", optimizer="sgd")
    one_batch = trained(tmp_path / "one", batch=4, accumulation=1, optimizer="sgd")
    for key, value in accumulated.state_dict().items():
        torch.testing.assert_close(one_batch.state_dict()[key], value, rtol=1e-5, atol=1e-7)


def test_peft_lora_on_the_mixers_projections_trains_saves_loads_and_merges(tmp_path):
    peft = pytest.importorskip("peft")
    torch.manual_seed(0)
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "kv_proj", "out_proj", "in_proj"],
                             task_type="CAUSAL_LM")
    model = peft.get_peft_model(LayerzooForCausalLM.from_spec("swax-tiny"), config)
    trainable = {name for name, parameter in model.named_parameters() if parameter.requires_grad}
    assert trainable and all("lora_" in name for name in trainable)
    ids = torch.stack(prompts([20, 20], 256))
    optimizer = torch.optim.AdamW([parameter for parameter in model.parameters() if parameter.requires_grad], lr=1e-2)
    before = model(input_ids=ids, labels=ids).loss.item()
    for _ in range(5):
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    with torch.no_grad():
        adapted = model(input_ids=ids).logits
        assert model(input_ids=ids, labels=ids).loss.item() < before
    model.save_pretrained(tmp_path)
    torch.manual_seed(0)
    loaded = peft.PeftModel.from_pretrained(LayerzooForCausalLM.from_spec("swax-tiny"), tmp_path).eval()
    with torch.no_grad():
        assert torch.equal(loaded(input_ids=ids).logits, adapted)
    merged = loaded.merge_and_unload()
    assert type(merged) is LayerzooForCausalLM
    with torch.no_grad():
        torch.testing.assert_close(merged(input_ids=ids).logits, adapted, rtol=1e-5, atol=1e-5)
