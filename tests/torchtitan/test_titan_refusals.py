"""What layerzoo.hf.torchtitan refuses, in one line each: another torchtitan release, parallelism a
layerzoo spec cannot take (tensor, pipeline, an SPMD backend needing annotations), and training
settings only layerzoo train has (stochastic windows)."""

import types

import pytest

pytest.importorskip("torchtitan", reason="torchtitan is not installed (docs/training-at-scale.md says how)")

from torchtitan.config import ParallelismConfig

from layerzoo.hf.errors import HFError
from layerzoo.hf.torchtitan.config_registry import trainer_config
from layerzoo.hf.torchtitan.model import LayerzooTitanModel
from layerzoo.hf.torchtitan.version import check_version


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
    config = trainer_config("swax-gdn-tiny", ["training.window.schedule=fixed", "training.batch_size=8"])
    assert (config.training.global_batch_size, config.training.seq_len) == (8, 64)
    assert config.training.mixed_precision_param == "float32"
    assert config.parallelism.spmd_backend == "partial_dtensor"
    assert [group.optimizer_kwargs["weight_decay"] for group in config.optimizer.param_groups] == [0.0, 0.1]


def test_a_stochastic_window_schedule_is_refused():
    with pytest.raises(HFError, match="training.window.schedule stochastic") as error:
        trainer_config("swax-gdn-tiny")
    one_line(error)


def test_gradient_accumulation_is_refused_as_the_batch_would_be_drawn_wrong():
    from layerzoo.hf.torchtitan.data import TaskDataLoader

    loader = TaskDataLoader.Config(spec="swax-gdn-tiny")
    with pytest.raises(HFError, match="not the spec's training.batch_size 32; gradient accumulation") as error:
        loader.build(dp_world_size=2, dp_rank=0, tokenizer=None, seq_len=64, local_batch_size=8)
    one_line(error)
    loader.build(dp_world_size=2, dp_rank=1, tokenizer=None, seq_len=64, local_batch_size=16)
