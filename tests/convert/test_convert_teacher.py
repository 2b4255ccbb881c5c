"""Kept as attention everywhere, a converted model's logits are the teacher's: transformers' own
model loaded from the same folder, at fp32 tolerance, for Llama, Mistral (its sliding window
too), Qwen2 and Qwen3 tiny models of a few sizes. This proves the weight mapping before any
mixer changes."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("transformers")

from layerzoo.convert import convert
from layerzoo.hf import LayerzooForCausalLM
from layerzoo.testing import assert_close

from tests.helpers.hf_teachers import FAMILIES, VOCAB, TeacherCase, edit_config, reference, save_teacher, teacher_cases

INPUTS = st.tuples(st.integers(1, 2), st.integers(1, 12), st.integers(0, 2**16))  # batch, length, seed


def token_ids(inputs) -> torch.Tensor:
    batch, length, seed = inputs
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


def kept(case: TeacherCase) -> str:
    return "swa" if case.family == "mistral" and case.window else "attention"


@pytest.mark.parametrize("family", sorted(FAMILIES))
@given(data=st.data())
def test_every_layer_kept_gives_the_teachers_logits(family, data):
    case = data.draw(teacher_cases(family), label="teacher")
    ids = token_ids(data.draw(INPUTS, label="inputs"))
    with tempfile.TemporaryDirectory() as folder:
        save_teacher(case, Path(folder))
        conversion = convert(folder, kept(case))
        expected = reference(folder)(ids).logits
        with torch.no_grad():
            assert_close(conversion.teacher(ids), expected, what=f"{case}: teacher")
            assert_close(conversion.student(ids), expected, what=f"{case}: student")
    assert conversion.converted == ()
    assert [block.mixer.registry_name for block in conversion.teacher.blocks] == [kept(case)] * case.n_layers


def test_a_sharded_folder_reads_as_one(tmp_path):
    case = TeacherCase("llama", n_layers=3)
    save_teacher(case, tmp_path, shard="40KB")
    assert len(list(tmp_path.glob("model-*.safetensors"))) > 1
    ids = token_ids((2, 7, 0))
    with torch.no_grad():
        assert_close(convert(tmp_path, "attention").teacher(ids), reference(tmp_path)(ids).logits)


def test_a_layerzoo_folder_of_attention_layers_is_a_teacher(tmp_path):
    """A transformer layerzoo trained and exported (its qk-norm and output gate too) converts."""
    torch.manual_seed(0)
    model = LayerzooForCausalLM.from_spec({"model": {
        "d_model": 32, "vocab_size": 50, "n_layers": 2, "tie_embeddings": False,
        "mixers": {"attention": {"n_heads": 4, "n_kv_heads": 2, "qk_norm": True, "output_gate": True}},
        "pattern": ["attention"]}}).eval()
    model.save_pretrained(tmp_path)
    conversion = convert(tmp_path, "gated_deltanet,attention")
    ids = token_ids((2, 6, 1)) % 50
    with torch.no_grad():
        assert_close(conversion.teacher(ids), model(ids).logits)
    assert conversion.converted == (0,)


def test_a_teacher_with_windows_on_some_layers_keeps_each_layers_kind(tmp_path):
    """Qwen2's use_sliding_window from layer max_window_layers on: attention, then swa layers."""
    case = TeacherCase("qwen2", n_layers=3)
    save_teacher(case, tmp_path)
    edit_config(tmp_path, layer_types=None, use_sliding_window=True, sliding_window=3, max_window_layers=1)
    conversion = convert(tmp_path, "attention,swa,swa")
    assert [layer.type for layer in conversion.teacher.config.layers] == ["attention", "swa", "swa"]
    assert conversion.converted == ()
    ids = token_ids((2, 9, 3))
    with torch.no_grad():
        assert_close(conversion.teacher(ids), reference(tmp_path)(ids).logits)
