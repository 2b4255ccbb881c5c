"""A spec under torchtitan (2 gloo processes, FSDP2): the losses `layerzoo train` logs on the same
spec, seed and data, with data parallelism, with gradient accumulation and with layerzoo's context
parallelism over torchtitan's cp mesh (alone, and beside data parallelism on 4 processes); a resumed
run continues them, also under another context size; its checkpoint becomes a
Hugging Face folder whose logits are the checkpoint's weights' and whose tokenizer is the task's.
An ARMT around the same model (also under context parallelism, a segment per rank), and one around
a Hugging Face checkpoint (a tiny Llama), train as layerzoo train trains them; an ARMT checkpoint is
not exported."""

import json
import shutil

import pytest

pytest.importorskip("torchtitan", reason="torchtitan is not installed (docs/training-at-scale.md says how)")

import torch
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

from layerzoo.assemblies.build import build
from layerzoo.cli import main
from layerzoo.hf.errors import HFError
from layerzoo.hf.torchtitan.export import export_checkpoint
from layerzoo.mixers.window import set_window
from tests.helpers.titan_runs import ARMT, docs_train, logged_losses, titan_train, write_spec


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """layerzoo train's 4 steps; torchtitan's first 2 (checkpointed), by the docs page's command,
    and then 2 more resumed."""
    folder = tmp_path_factory.mktemp("titan")
    cache = folder / "cache"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LAYERZOO_CACHE", str(cache))
        spec = write_spec(folder)
        assert main(["train", str(spec), "--out", str(folder / "layerzoo"), "--no-progress"]) == 0
        first = docs_train(spec, folder / "titan", overrides=("training.steps=2",))
        resumed = titan_train(spec, folder / "titan", "--checkpoint.enable")
    layerzoo = [json.loads(line) for line in (folder / "layerzoo" / "metrics.jsonl").read_text().splitlines()]
    return {"folder": folder, "spec": spec, "cache": cache, "first": first, "resumed": resumed,
            "layerzoo": {row["step"]: row["loss"] for row in layerzoo if "loss" in row}}


@pytest.fixture(scope="module")
def variants(runs):
    """torchtitan's first 2 steps with the spec's gradient accumulation (2 micro-batches of 1 example
    per rank), and with context parallelism over both processes by the docs page's command (data
    parallel 1: each holds half of every packed row). `layerzoo train`'s accumulation draws the
    same examples, so its losses are those of the run without it. This checks the wiring (the cp
    group, the pieces, the loss's normalisation, the gradients' sums): two steps of a fresh model
    log the same digits even with pieces run apart, so the exchanges' exactness is checked where
    they live (tests/training/parallel/context)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LAYERZOO_CACHE", str(runs["cache"]))
        folder, spec = runs["folder"], runs["spec"]
        return {"accumulated": titan_train(spec, folder / "accumulated", "--training.steps", "2",
                                           overrides=("training.grad_accum=2",)),
                "context": docs_train(spec, folder / "context", ("training.steps=2",), "## Context parallelism",
                                      (("context_parallel_degree 4", "context_parallel_degree 2"),))}


SCHEDULES = ("training.window.schedule=stochastic", "training.window.short=8", "training.window.long=16",
             "training.window.p_short=0.5", "training.window.anneal_fraction=0.25",
             "training.curriculum.segments=[1, 2]", "training.curriculum.segment_size=16")


@pytest.fixture(scope="module")
def schedules(runs):
    """The spec with SWAX's stochastic window and a segment curriculum (16 tokens, then 32), by
    layerzoo train and by torchtitan (2 processes, FSDP2): layerzoo train's metrics and torchtitan's log."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LAYERZOO_CACHE", str(runs["cache"]))
        folder, spec = runs["folder"], runs["spec"]
        flags = [flag for override in SCHEDULES for flag in ("--set", override)]
        assert main(["train", str(spec), "--out", str(folder / "scheduled"), *flags, "--no-progress"]) == 0
        log = titan_train(spec, folder / "titan-scheduled", overrides=SCHEDULES)
    metrics = [json.loads(line) for line in (folder / "scheduled" / "metrics.jsonl").read_text().splitlines()]
    return {"titan": log, "layerzoo": [row for row in metrics if "loss" in row]}


def assert_losses_equal(titan: dict[int, float], layerzoo: dict[int, float]) -> None:
    for step, loss in titan.items():  # logged to 5 decimals; fp32 sums in another order
        assert loss == pytest.approx(layerzoo[step], abs=2e-5), step


def test_losses_equal_layerzoo_trains(runs):
    titan = logged_losses(runs["first"]) | logged_losses(runs["resumed"])
    assert sorted(titan) == [1, 2, 3, 4]
    assert_losses_equal(titan, runs["layerzoo"])


@pytest.mark.parametrize("variant, logged", [
    ("accumulated", ["local batch size 1, global batch size 4, gradient accumulation steps 2"]),
    ("context", ["layerzoo's context parallelism: 2 ranks", "(training.balance_attention: True)",
                 "local batch size 4, global batch size 4, gradient accumulation steps 1"]),
])
def test_losses_with_accumulation_or_context_parallelism_equal_layerzoo_trains(runs, variants, variant, logged):
    log = variants[variant]
    assert all(line in log for line in logged)
    titan = logged_losses(log)
    assert sorted(titan) == [1, 2]
    assert_losses_equal(titan, runs["layerzoo"])


def test_stochastic_windows_and_a_curriculum_train_as_layerzoo_trains(schedules):
    """Each step's window and sequence length as layerzoo train draws them (both windows drawn, both
    lengths reached), and its learning rate restarted per stage: the same losses."""
    steps = schedules["layerzoo"]
    assert {row["window"] for row in steps} == {8, 16} and [row["seq_len"] for row in steps] == [16, 16, 32, 32]
    titan = logged_losses(schedules["titan"])
    assert sorted(titan) == [1, 2, 3, 4]
    assert_losses_equal(titan, {row["step"]: row["loss"] for row in steps})


@pytest.fixture(scope="module")
def context_runs(runs):
    """torchtitan with layerzoo's context parallelism beside data parallelism (4 processes: 2
    data-parallel ranks x K = 2), and the data-parallel run's step-2 checkpoint resumed with K = 2
    (the context size changed across a resume): rank 0's logs."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LAYERZOO_CACHE", str(runs["cache"]))
        folder, spec = runs["folder"], runs["spec"]
        both = titan_train(spec, folder / "context-x-data", "--training.steps", "2",
                           "--parallelism.context_parallel_degree", "2", processes=4)
        shutil.copytree(folder / "titan" / "checkpoint" / "step-2", folder / "recut" / "checkpoint" / "step-2")
        recut = titan_train(spec, folder / "recut", "--checkpoint.enable", "--parallelism.context_parallel_degree", "2")
    return {"context x data": both, "resumed at K = 2": recut}


def test_context_parallelism_beside_data_parallelism_trains_as_layerzoo_trains(runs, context_runs):
    log = context_runs["context x data"]
    assert "layerzoo's context parallelism: 2 ranks" in log
    titan = logged_losses(log)
    assert sorted(titan) == [1, 2]
    assert_losses_equal(titan, runs["layerzoo"])


def test_a_checkpoint_resumes_under_another_context_size(runs, context_runs):
    log = context_runs["resumed at K = 2"]
    assert "Loading the checkpoint from" in log and "layerzoo's context parallelism: 2 ranks" in log
    titan = logged_losses(log)
    assert sorted(titan) == [3, 4]
    assert_losses_equal(titan, runs["layerzoo"])


def test_the_second_run_resumes_from_the_checkpoint(runs):
    assert "Loading the checkpoint from" in runs["resumed"]
    assert sorted(logged_losses(runs["resumed"])) == [3, 4]


def test_checkpoint_to_hugging_face_folder(runs, tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import layerzoo.hf  # noqa: F401 (registers the Auto classes)

    monkeypatch.setenv("LAYERZOO_CACHE", str(runs["cache"]))
    checkpoint = runs["folder"] / "titan" / "checkpoint" / "step-4"
    out = export_checkpoint(checkpoint, str(runs["spec"]), [], tmp_path / "hf")
    folder_model = AutoModelForCausalLM.from_pretrained(out).eval()
    # the checkpoint's weights read by torch's own converter, into layerzoo's model at the trained window
    dcp_to_torch_save(checkpoint, tmp_path / "saved.pt")
    saved = torch.load(tmp_path / "saved.pt", weights_only=False)
    reference = build(runs["spec"]).eval()
    set_window(reference, 16)
    reference.load_state_dict({name.removeprefix("lm."): value for name, value in saved.items() if name.startswith("lm.")})
    ids = AutoTokenizer.from_pretrained(out)("def total(self): return value", return_tensors="pt").input_ids
    with torch.no_grad():
        assert torch.equal(folder_model(ids).logits, reference(ids))
    assert folder_model.generate(ids, max_new_tokens=4, do_sample=False).shape == (1, ids.shape[1] + 4)


def test_a_checkpoint_of_another_spec_is_refused_in_one_line(runs, tmp_path, monkeypatch):
    monkeypatch.setenv("LAYERZOO_CACHE", str(runs["cache"]))
    checkpoint = runs["folder"] / "titan" / "checkpoint" / "step-4"
    with pytest.raises(HFError, match="is not a checkpoint of") as error:
        export_checkpoint(checkpoint, str(runs["spec"]), ["model.d_model=32"], tmp_path / "hf")
    assert "\n" not in str(error.value)
    assert not (tmp_path / "hf").exists()


@pytest.fixture(scope="module")
def armt_runs(runs):
    """The spec's model as an ARMT (segments of 16 tokens, memory in layers 1 and 3) under the
    curriculum 1 -> 2 segments, which takes ARMT's segment size: 2 steps of layerzoo train and of
    torchtitan (2 processes, FSDP2 over the base's layers), checkpointed."""
    folder = runs["folder"]
    spec = write_spec(folder, ARMT, name="armt.yaml")
    overrides = ("training.steps=2", "training.curriculum.segments=[1, 2]")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LAYERZOO_CACHE", str(runs["cache"]))
        flags = [flag for override in overrides for flag in ("--set", override)]
        assert main(["train", str(spec), "--out", str(folder / "armt-layerzoo"), *flags, "--no-progress"]) == 0
        log = titan_train(spec, folder / "armt-titan", "--checkpoint.enable", overrides=overrides)
    metrics = [json.loads(line) for line in (folder / "armt-layerzoo" / "metrics.jsonl").read_text().splitlines()]
    return {"spec": spec, "log": log, "layerzoo": [row for row in metrics if "loss" in row]}


def test_an_armt_trains_as_layerzoo_trains(armt_runs):
    """Its memory carried across the segments under FSDP2; torchtitan's default activation
    checkpointing left off with a warning (its recompute would run a layer without its memory)."""
    log = armt_runs["log"]
    assert "an ARMT's layers take no activation checkpointing under torchtitan" in log
    steps = armt_runs["layerzoo"]
    assert [row["seq_len"] for row in steps] == [16, 32]
    titan = logged_losses(log)
    assert sorted(titan) == [1, 2]
    assert_losses_equal(titan, {row["step"]: row["loss"] for row in steps})


def test_an_armt_checkpoint_is_not_exported(runs, armt_runs, tmp_path, monkeypatch):
    monkeypatch.setenv("LAYERZOO_CACHE", str(runs["cache"]))
    checkpoint = runs["folder"] / "armt-titan" / "checkpoint" / "step-2"
    assert (checkpoint / ".metadata").is_file()
    with pytest.raises(HFError, match="ARMT models are not exported to transformers") as error:
        export_checkpoint(checkpoint, str(armt_runs["spec"]), [], tmp_path / "hf")
    assert "\n" not in str(error.value)
    assert not (tmp_path / "hf").exists()


def test_an_armt_under_context_parallelism_trains_as_layerzoo_trains(runs, tmp_path):
    """Two 16-token segments a row, one per cp rank (FSDP2 over both): rank 0's segment reads no
    memory, rank 1's reads the memory rank 0 handed on."""
    spec = write_spec(tmp_path, ARMT, name="armt.yaml")
    overrides = ("training.steps=2",)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LAYERZOO_CACHE", str(runs["cache"]))
        flags = [flag for override in overrides for flag in ("--set", override)]
        assert main(["train", str(spec), "--out", str(tmp_path / "layerzoo"), *flags, "--no-progress"]) == 0
        log = titan_train(spec, tmp_path / "titan", "--parallelism.context_parallel_degree", "2", overrides=overrides)
    metrics = [json.loads(line) for line in (tmp_path / "layerzoo" / "metrics.jsonl").read_text().splitlines()]
    titan = logged_losses(log)
    assert sorted(titan) == [1, 2]
    assert_losses_equal(titan, {row["step"]: row["loss"] for row in metrics if "loss" in row})


@pytest.fixture(scope="module")
def hf_armt_runs(tmp_path_factory):
    """armt-hf-text around a tiny Llama folder (its tokenizer trained on a small corpus), the base
    frozen: 2 steps of layerzoo train and of torchtitan (2 processes, FSDP2 over the Llama's layers)."""
    from tests.helpers.conversion import write_text, write_tokenizer
    from tests.helpers.hf_teachers import TeacherCase, save_teacher

    root = tmp_path_factory.mktemp("titan-hf-armt")
    corpus = write_text(root / "corpus", documents=4, words=100)
    folder = write_tokenizer(corpus, save_teacher(TeacherCase("llama", tied=True), root / "llama", tokenizer_size=None))
    overrides = (f"base.hf_checkpoint={folder}", f"training.task.tokenizer={folder}",
                 f"training.task.files=['{corpus}/*.txt']", "training.task.holdout=0.25", "armt.segment_size=8",
                 "armt.num_mem_tokens=2", "armt.d_mem=16", "armt.memory_layers=[-1]", "training.seq_len=16",
                 "training.steps=2", "training.batch_size=2", "training.log_every=1",
                 "training.eval={every: 100, samples: 2, lengths: [16], documents: 1, batch_size: 2}")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LAYERZOO_CACHE", str(root / "cache"))
        flags = [flag for override in overrides for flag in ("--set", override)]
        assert main(["train", "armt-hf-text", "--out", str(root / "layerzoo"), *flags, "--no-progress"]) == 0
        log = titan_train("armt-hf-text", root / "titan", overrides=overrides)
    metrics = [json.loads(line) for line in (root / "layerzoo" / "metrics.jsonl").read_text().splitlines()]
    return {"log": log, "layerzoo": {row["step"]: row["loss"] for row in metrics if "loss" in row}}


def test_an_armt_around_a_hugging_face_checkpoint_trains_as_layerzoo_trains(hf_armt_runs):
    titan = logged_losses(hf_armt_runs["log"])
    assert sorted(titan) == [1, 2]
    assert_losses_equal(titan, hf_armt_runs["layerzoo"])
