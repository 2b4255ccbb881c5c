"""What layerzoo.hf.torchtitan refuses, in one line each: another torchtitan release, parallelism a
layerzoo spec cannot take (tensor, pipeline, an SPMD backend needing annotations, torchtitan's
context load balancing, compiled blocks under context parallelism), batch sizes other than the
spec's, a segment curriculum without a segment size; and the batch split it derives instead
(layerzoo train's micro-batches)."""

import types

import pytest
import torch

pytest.importorskip("torchtitan", reason="torchtitan is not installed (docs/training-at-scale.md says how)")

from torchtitan.config import CompileConfig, ParallelismConfig

from layerzoo.hf.errors import HFError
from layerzoo.hf.torchtitan.config_registry import trainer_config
from layerzoo.hf.torchtitan.data import TaskDataLoader
from layerzoo.hf.torchtitan.model import LayerzooTitanModel
from layerzoo.hf.torchtitan.trainer import split_batch
from layerzoo.hf.torchtitan.version import check_version
from layerzoo.specs import load_spec
from layerzoo.training.errors import TrainingError
from layerzoo.training.objectives.language_model import LanguageModel
from layerzoo.training.parallel.distributed import Context

def one_line(error: pytest.ExceptionInfo) -> str:
    assert "\n" not in str(error.value)
    return str(error.value)


def test_another_torchtitan_release_is_refused():
    check_version("0.3.0")
    with pytest.raises(HFError, match=r"torchtitan 0\.2\.2 is installed; .* supports 0\.3\.0 only") as error:
        check_version("0.2.2")
    one_line(error)


@pytest.mark.parametrize("layout, named", [
    ({"tensor_parallel_degree": 2, "spmd_backend": "partial_dtensor"}, "tensor parallelism"),
    ({"pipeline_parallel_degree": 2, "spmd_backend": "partial_dtensor"}, "pipeline parallelism"),
    ({"spmd_backend": "spmd_types"}, "spmd_backend spmd_types"),
])
def test_a_parallel_layout_the_model_cannot_take_is_refused(layout, named):
    config = types.SimpleNamespace(parallelism=ParallelismConfig(**layout))
    with pytest.raises(HFError, match=named) as error:
        LayerzooTitanModel.Config(spec="swax-gdn-tiny").update_from_config(config=config)
    one_line(error)


def test_the_config_of_a_spec_trains_it_as_layerzoo_train_would():
    config = trainer_config("swax-gdn-tiny", ["training.batch_size=8"])
    assert (config.training.global_batch_size, config.training.seq_len) == (8, 64)
    assert config.training.mixed_precision_param == "float32"
    assert config.parallelism.spmd_backend == "partial_dtensor"
    assert [group.optimizer_kwargs["weight_decay"] for group in config.optimizer.param_groups] == [0.0, 0.1]


def test_a_curriculum_without_a_segment_size_is_refused():
    """Only ARMT brings a segment size of its own."""
    with pytest.raises(TrainingError, match="training.curriculum: set segment_size") as error:
        trainer_config("swax-gdn-tiny", ["training.curriculum.segments=[1, 2]"])
    one_line(error)


@pytest.mark.parametrize("layout, compile_config, named", [
    ({"context_parallel_load_balancer": "headtail"}, CompileConfig(), "context_parallel_load_balancer headtail"),
    ({"context_parallel_load_balancer": "ptrr"}, CompileConfig(), "context_parallel_load_balancer ptrr"),
    ({"context_parallel_load_balancer": None}, CompileConfig(enable=True), "compiled blocks"),
])
def test_what_layerzoos_context_parallelism_cannot_take_is_refused(layout, compile_config, named):
    parallelism = ParallelismConfig(context_parallel_degree=2, spmd_backend="partial_dtensor", **layout)
    config = types.SimpleNamespace(parallelism=parallelism, compile=compile_config)
    with pytest.raises(HFError, match=named) as error:
        LayerzooTitanModel.Config(spec="swax-gdn-tiny").update_from_config(config=config)
    one_line(error)
    # the layout layerzoo_spec sets (no load balancing) is taken under context parallelism
    config.parallelism, config.compile = trainer_config("swax-gdn-tiny").parallelism, CompileConfig()
    config.parallelism.context_parallel_degree = 2
    LayerzooTitanModel.Config(spec="swax-gdn-tiny").update_from_config(config=config)


@pytest.mark.parametrize("world, degrees, grad_accum, micro", [
    (2, {}, 1, 16),                                                       # data parallel 2
    (2, {"context_parallel_degree": 2}, 1, 32),                           # context 2, data 1
    (8, {"context_parallel_degree": 2}, 2, 4),                            # context 2, data 4, 2 micro-batches
    (4, {"data_parallel_replicate_degree": 2}, 4, 2),                     # HSDP 2 x 2
])
def test_the_local_batch_is_layerzoo_trains_micro_batch(world, degrees, grad_accum, micro):
    config = trainer_config("swax-gdn-tiny", [f"training.grad_accum={grad_accum}"])  # batch 32
    for name, degree in degrees.items():
        setattr(config.parallelism, name, degree)
    split_batch(config, world)
    assert config.training.local_batch_size == micro
    split_batch(config, world)  # the value it set is its own, taken again


@pytest.mark.parametrize("field, value, named", [
    ("global_batch_size", 64, "training.global_batch_size 64 is not the spec's training.batch_size 32"),
    ("local_batch_size", 4, "training.local_batch_size 4: .* gives 16"),
])
def test_torchtitans_batch_sizes_other_than_the_specs_are_refused(field, value, named):
    config = trainer_config("swax-gdn-tiny")
    setattr(config.training, field, value)
    with pytest.raises(HFError, match=named) as error:
        split_batch(config, 2)
    one_line(error)


def test_a_batch_that_does_not_split_is_refused():
    config = trainer_config("swax-gdn-tiny", ["training.grad_accum=16"])  # 32 over 4 ranks x 16
    with pytest.raises(TrainingError, match="does not split over 4 processes x 16") as error:
        split_batch(config, 4)
    one_line(error)
    loader = TaskDataLoader.Config(spec="swax-gdn-tiny")
    with pytest.raises(HFError, match="micro-batches of 5 examples on each of 2 .* do not split") as error:
        loader.build(dp_world_size=2, dp_rank=0, tokenizer=None, seq_len=64, local_batch_size=5)
    one_line(error)


@pytest.mark.parametrize("grad_accum, dp_rank", [(1, 0), (2, 1), (4, 0)])
def test_the_micro_batches_are_the_examples_of_layerzoo_trains_step(grad_accum, dp_rank):
    overrides = [f"training.grad_accum={grad_accum}", "training.task.pack=true"]
    training = load_spec("swax-gdn-tiny", overrides).training
    micro = training.batch_size // (2 * grad_accum)
    loader = TaskDataLoader.Config(spec="swax-gdn-tiny", overrides=overrides).build(
        dp_world_size=2, dp_rank=dp_rank, tokenizer=None, seq_len=training.seq_len, local_batch_size=micro)
    objective = LanguageModel(None, loader.task, None, training, Context(dp_rank, 2, torch.device("cpu")), None)
    drawn = iter(loader)
    for step in range(2):
        for expected in objective.batches(step, training.seq_len):
            inputs, targets = next(drawn)
            assert torch.equal(inputs["input"], expected.input_ids) and torch.equal(targets, expected.targets)
            assert torch.equal(inputs["cu_seqlens"], expected.cu_seqlens)
        assert loader.state_dict() == {"step": step + 1}  # what a checkpoint after the step keeps
