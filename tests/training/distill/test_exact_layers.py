"""Stage 1 aligns only the converted layers that differ from the teacher's attention on its
sequences: an SWA layer whose window covers them, with the teacher's weights, is exact, stays
frozen and bit-identical; a narrower window trains; stage 1 with nothing to align is one line."""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from layerzoo.mixers import set_window
from layerzoo.training.distill.run import distill
from layerzoo.training.errors import TrainingError
from layerzoo.training.objectives.alignment import exact_layers
from tests.helpers.run_checks import metric_records
from tests.training.distill.conftest import make


def swa_then_gdn(window: int) -> dict:
    """Layer 0 SWA of `window`, layer 1 Gated DeltaNet, layer 2 kept attention."""
    return {"mixers": {"swa": {"type": "swa", "window": window}}, "layers": ["swa", "gated_deltanet", "attention"]}


@pytest.fixture(scope="module")
def narrow(text):
    """A conversion whose layer 0 is SWA (its window set by each example), converted once."""
    return make(text, swa_then_gdn(8))[0]


@settings(max_examples=8, deadline=None)
@given(window=st.integers(1, 48), seq_len=st.integers(1, 48), nudged=st.booleans())
def test_an_swa_layer_is_exact_when_its_window_covers_the_sequence_and_its_weights_are_the_teachers(
        narrow, window, seq_len, nudged):
    set_window(narrow.student, window)
    weight = narrow.student.blocks[0].mixer.q_proj.weight
    kept = weight.detach().clone()
    with torch.no_grad():
        weight[0, 0] += 1e-3 * nudged
        exact = exact_layers(narrow.teacher, narrow.student, narrow.converted, seq_len)
        weight.copy_(kept)
    assert exact == ([0] if window >= seq_len and not nudged else [])  # Gated DeltaNet is never exact


def test_stage_1_leaves_an_exact_layer_bit_identical_and_aligns_the_rest(text, tmp_path, capsys):
    conversion, spec = make(text, swa_then_gdn(64), end_to_end=None)  # 64 covers the 32-token sequences
    before = {name: tensor.clone() for name, tensor in conversion.student.state_dict().items()}
    distill(conversion, spec, tmp_path / "run")
    out = capsys.readouterr().out
    assert "align: layer 0 computes the teacher's attention exactly on 32-token sequences" in out
    changed = {name for name, tensor in conversion.student.state_dict().items() if not torch.equal(tensor, before[name])}
    assert changed and all(name.startswith("blocks.1.mixer.") for name in changed)
    logged = {key for record in metric_records(tmp_path / "run" / "align") for key in record if "mse_layer" in key}
    assert logged == {"mse_layer1", "eval_mse_layer1"}
    reliance = json.loads((tmp_path / "run" / "reliance.json").read_text())
    assert [row["layer"] for row in reliance["layers"]] == [1]  # the exact layer is never zeroed


def test_an_swa_window_shorter_than_the_sequence_trains_in_stage_1(text, tmp_path):
    conversion, spec = make(text, swa_then_gdn(8), end_to_end=None)
    before = conversion.student.blocks[0].mixer.q_proj.weight.clone()
    distill(conversion, spec, tmp_path / "run", progress=False)
    assert not torch.equal(conversion.student.blocks[0].mixer.q_proj.weight, before)


def test_stage_1_with_only_exact_layers_is_one_line_before_the_run_folder(text, tmp_path):
    covering = {"mixers": {"swa": {"type": "swa", "window": 64}}, "layers": ["attention", "swa", "attention"]}
    conversion, spec = make(text, covering)
    with pytest.raises(TrainingError, match=r"^every converted layer \(1\) computes the teacher's attention exactly on "
                                            r"32-token sequences: stage 1 has nothing to align; set distill.align to null$"):
        distill(conversion, spec, tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()
