"""training.compile: the model's blocks are compiled in place, so runs, checkpoints and resumes are the same
as without it, to rounding. Compiled with aot_eager here (inductor's C++ code generation costs
minutes per shape on CI's CPUs); the plumbing is the same for every backend."""

import shutil
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file

from layerzoo.errors import LayerzooError
from layerzoo.training import train
from tests.helpers.run_checks import metric_records

STEPS = ["training.steps=3", "training.window.schedule=fixed", "training.eval.lengths=[32]"]


@pytest.fixture
def aot_eager(monkeypatch):
    """nn.Module.compile with the aot_eager backend; records the modules it compiled and, for each
    graph traced, whether it was traced with gradients on (a training call) or off (evaluation)."""
    compiled = SimpleNamespace(modules=[], grad_modes=[])
    original = torch.nn.Module.compile
    backend = torch._dynamo.lookup_backend("aot_eager")

    def recording_backend(graph, inputs):
        compiled.grad_modes.append(torch.is_grad_enabled())
        return backend(graph, inputs)

    def compile_with_aot_eager(module, *args, **kwargs):
        compiled.modules.append(module)
        original(module, *args, **{**kwargs, "backend": recording_backend})

    monkeypatch.setattr(torch.nn.Module, "compile", compile_with_aot_eager)
    yield compiled
    torch._dynamo.reset()


def losses(run_dir) -> list[float]:
    return [record["loss"] for record in metric_records(run_dir) if "loss" in record]


def test_a_compiled_run_trains_and_saves_as_an_uncompiled_one(tiny_spec, tmp_path, aot_eager):
    eager = train(tiny_spec, STEPS, run_dir=tmp_path / "eager", progress=False)
    compiled = train(tiny_spec, [*STEPS, "training.compile=true"], run_dir=tmp_path / "compiled", progress=False)
    assert aot_eager.modules == list(compiled.model.blocks)  # block by block, the model itself uncompiled
    assert aot_eager.grad_modes and all(aot_eager.grad_modes)  # evaluation ran uncompiled
    assert losses(tmp_path / "compiled") == pytest.approx(losses(tmp_path / "eager"), rel=1e-4, abs=1e-5)
    saved = [load_file(run / "checkpoints" / "step-00000003" / "model.safetensors")
             for run in (tmp_path / "eager", tmp_path / "compiled")]
    assert saved[0].keys() == saved[1].keys()  # no "_orig_mod." prefix: the same model was saved
    for key in saved[0]:
        torch.testing.assert_close(saved[1][key], saved[0][key], rtol=1e-4, atol=1e-5)


def test_an_uncompiled_run_resumes_compiled(tiny_spec, tmp_path, aot_eager):
    """compile is a key a resumed run may change: the run continues from its step-2 checkpoint."""
    run_dir = tmp_path / "run"
    train(tiny_spec, [*STEPS, "training.checkpoint_every=1"], run_dir=run_dir, progress=False)
    uninterrupted = losses(run_dir)
    shutil.rmtree(run_dir / "checkpoints" / "step-00000003")
    train(tiny_spec, [*STEPS, "training.checkpoint_every=1", "training.compile=true"], run_dir=run_dir, resume=True,
          progress=False)
    assert aot_eager.modules
    assert losses(run_dir) == pytest.approx(uninterrupted, rel=1e-4, abs=1e-5)


def test_compile_with_fsdp_is_a_one_line_error(tiny_spec, tmp_path):
    with pytest.raises(LayerzooError, match="compile: does not combine with parallel: fsdp yet") as info:
        train(tiny_spec, [*STEPS, "training.compile=true", "training.parallel=fsdp"], run_dir=tmp_path / "x",
              progress=False)
    assert "\n" not in str(info.value)


def test_the_compile_flag_of_train_compiles_and_records_it(tiny_spec, tmp_path, aot_eager):
    from layerzoo.cli import main
    from layerzoo.specs import load_spec

    assert main(["train", str(tiny_spec), *(f"--set={item}" for item in STEPS), "--compile", "--out",
                 str(tmp_path / "run"), "--no-progress"]) == 0
    assert aot_eager.modules
    assert load_spec(tmp_path / "run" / "spec.yaml").training.compile is True
