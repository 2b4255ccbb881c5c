import pytest
import yaml

from layerzoo import SpecError, load_spec, shipped_specs
from layerzoo.training.config import TrainingConfig


def test_the_training_section_is_validated_and_defaults_filled(tiny_spec):
    config = load_spec(tiny_spec).training
    assert isinstance(config, TrainingConfig)
    assert config.task.options == {"num_pairs": 4, "vocab_size": None, "pack": False}
    assert config.window.short == 4 and config.window.anneal_fraction == 0.1
    assert config.eval.lengths == (32, 64) and config.optimizer.grad_clip == 1.0


@pytest.mark.parametrize("name", [n for n in shipped_specs() if load_spec(n).training is not None] or ["none"])
def test_shipped_training_sections_round_trip(name, tmp_path):
    if name == "none":
        pytest.skip("no shipped spec has a training section")
    spec = load_spec(name)
    spec.save(tmp_path / "dump.yaml")
    again = load_spec(tmp_path / "dump.yaml")
    assert again.training == spec.training and again.model == spec.model


def test_round_trip_and_overrides(tiny_spec):
    spec = load_spec(tiny_spec, ["training.steps=9", "training.window.p_short=0.75", "training.eval.depths=[0, 1]"])
    assert spec.training.steps == 9 and spec.training.window.p_short == 0.75 and spec.training.eval.depths == (0.0, 1.0)
    assert load_spec(yaml.safe_load(spec.to_yaml())).training == spec.training


MALFORMED = [
    # (--set override, words in the one-line message)
    ("training.stpes=3", ["training.stpes", "did you mean 'steps'"]),
    ("training.steps=0", ["training.steps", "must be >= 1"]),
    ("training.steps=many", ["training.steps", "expected int"]),
    ("training.window.p_short=1.5", ["training.window.p_short", "between 0.0 and 1.0"]),
    ("training.window.schedule=random", ["training.window.schedule", "one of fixed, stochastic"]),
    ("training.window.short=32", ["training.window.short", "exceeds long window 16"]),
    ("training.window={schedule: stochastic}", ["training.window", "needs 'short'"]),
    ("training.task.name=mqr", ["training.task.name", "did you mean 'mqar'"]),
    ("training.task.num_pairs=40", ["training.task.num_pairs", "need more than 80 tokens"]),
    ("training.task.pairs=3", ["training.task.pairs", "did you mean 'num_pairs'"]),
    ("training.seq_len=5", ["training.seq_len", "needs sequences of >= 12 tokens"]),
    ("training.grad_accum=3", ["training.grad_accum", "not divisible"]),
    ("training.eval.depths=[0, 2]", ["training.eval.depths.1", "between 0.0 and 1.0"]),
    ("training.eval.lengths=64", ["training.eval.lengths", "expected a list"]),
    ("training.curriculum={segments: [2, 4], stage_steps: [1]}", ["training.curriculum.stage_steps", "1 entries for 2 stages"]),
    ("training.precision=fp8", ["training.precision", "one of auto, fp32, bf16"]),
    ("training.mixed_precision=fp16", ["training.mixed_precision", "one of bf16 or null"]),
    ("training.mixed_precision=bf16", ["training.mixed_precision", "needs parallel: fsdp"]),
    ("training.context=0", ["training.context", ">= 1"]),
    ("training.optimizer.lr=.inf", ["training.optimizer.lr", "must be a finite number"]),
    ("training.eval.depths=[0, .nan]", ["training.eval.depths.1", "must be a finite number"]),
]


@pytest.mark.parametrize("override, words", MALFORMED, ids=[case[0] for case in MALFORMED])
def test_bad_training_sections_name_the_key(tiny_spec, override, words):
    with pytest.raises(SpecError) as error:
        load_spec(tiny_spec, [override])
    message = str(error.value)
    assert "\n" not in message
    for word in words:
        assert word in message, message


def test_context_parallelism_is_not_compiled_yet(tiny_spec):
    with pytest.raises(SpecError, match="training.compile: does not combine with context parallelism"):
        load_spec(tiny_spec, ["training.context=2", "training.compile=true"])


def test_errors_point_at_the_file_and_line(tiny_spec):
    tiny_spec.write_text(tiny_spec.read_text().replace("seq_len: 32", "seq_len: -4"))
    with pytest.raises(SpecError, match=rf"^{tiny_spec}:13: training.seq_len: must be >= 1"):
        load_spec(tiny_spec)


def test_a_task_is_required(tiny_spec):
    tiny_spec.write_text(tiny_spec.read_text().replace("  task: {name: mqar, num_pairs: 4}\n", ""))
    with pytest.raises(SpecError, match="missing required key 'task'"):
        load_spec(tiny_spec)


def test_a_window_schedule_refuses_per_layer_windows(tiny_spec):
    per_layer = ["model.pattern=[swa, swa]", "model.overrides={1: {window: 4}}"]
    with pytest.raises(SpecError, match=r"training\.window: sets one window for every SWA layer, but this "
                                        r"model's SWA layers have windows \[4, 8\]"):
        load_spec(tiny_spec, per_layer)
    kept = load_spec(tiny_spec, per_layer + ["training.window={schedule: fixed, long: null}"])
    assert [layer.options["window"] for layer in kept.model.layers] == [8, 4]
    with pytest.raises(SpecError, match=r"training\.eval\.window: sets one window"):
        load_spec(tiny_spec, per_layer + ["training.window={schedule: fixed, long: null}", "training.eval.window=8"])


def test_a_window_on_a_model_without_swa_layers_is_refused(tiny_spec):
    with pytest.raises(SpecError, match=r"training\.window: sets the SWA layers' window, but this model has no SWA "
                                        r"layer; give it window: \{schedule: fixed, long: null\}"):
        load_spec(tiny_spec, ["model.pattern=[attention]"])
    kept = load_spec(tiny_spec, ["model.pattern=[attention]", "training.window={schedule: fixed, long: null}"])
    assert {layer.type for layer in kept.model.layers} == {"attention"}


def test_mixed_precision_leaves_precision_at_auto(tiny_spec):
    fsdp = ["training.parallel=fsdp", "training.mixed_precision=bf16"]
    assert load_spec(tiny_spec, fsdp).training.mixed_precision == "bf16"
    with pytest.raises(SpecError, match=r"training\.precision: fp32 does not combine with mixed_precision: bf16; "
                                        r"leave precision at auto"):
        load_spec(tiny_spec, fsdp + ["training.precision=fp32"])
