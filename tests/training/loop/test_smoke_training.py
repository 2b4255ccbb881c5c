import json

import torch

import layerzoo
from layerzoo.tasks import make_task
from layerzoo.training.objectives.language_model import score_heldout
from layerzoo.training.loop.trainer import train


def test_a_short_training_lowers_the_mqar_loss(tiny_spec, tmp_path):
    settings = ["training.steps=60", "training.optimizer.lr=1e-2", "training.log_every=10"]
    spec = layerzoo.load_spec(tiny_spec, settings)
    task = make_task("mqar", spec.training.task.options, spec.model.vocab_size)
    torch.manual_seed(spec.training.seed)
    before = score_heldout(layerzoo.build(spec), task, 32, 64, seed=11)
    result = train(spec, run_dir=tmp_path / "run", progress=False)
    after = score_heldout(result.model, task, 32, 64, seed=11)
    assert after["loss"] < before["loss"] - 0.5, (before, after)
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert {"loss", "accuracy", "lr", "tokens_per_s", "window"} <= set(records[0])
    assert any("eval_accuracy" in record for record in records)


def test_a_kernel_build_during_training_labels_the_progress_bar(tiny_spec, tmp_path, monkeypatch, capsys):
    """First use in a new environment: a kernel builds inside the first step. Its notice stands
    above the bar and the bar reads "building kernels" meanwhile, not a silent 0%; then it goes on."""
    from torch.utils import cpp_extension

    from layerzoo.kernels.compiled import KERNELS

    def failing_build(**_):  # quick, and it leaves the PyTorch kernels running
        raise RuntimeError("x.cpp:1:1: error: no compiler here")

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cpp_extension, "load", failing_build)
    for kernel in KERNELS:
        kernel.load.cache_clear()
    try:
        train(tiny_spec, ["training.steps=2"], run_dir=tmp_path / "run", progress=True)
    finally:
        for kernel in KERNELS:
            kernel.load.cache_clear()  # the next use loads the real build again
    err = capsys.readouterr().err
    assert "layerzoo: building the compiled CPU sliding-window attention kernel" in err
    assert "building kernels:   0%" in err and "building kernels" not in err.rsplit("\r", 1)[-1], err[-600:]
