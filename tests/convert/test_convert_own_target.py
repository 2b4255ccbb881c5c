"""A mixer of the user's own becomes a target of `layerzoo convert` by declaring, beside its other
methods, the options a teacher's attention fixes and how its tensors start from that layer's: the
registry then lists it, and a tiny Llama converts into it and round-trips through a saved folder."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from transformers import AutoModelForCausalLM

import layerzoo
import layerzoo.hf  # noqa: F401 - registers the layerzoo model type with the Auto classes
from layerzoo.convert import ConvertError, convert, list_targets
from layerzoo.testing import assert_close

from tests.helpers.hf_teachers import D_MODEL, VOCAB, TeacherCase, save_teacher
from tests.helpers.toy_mixer import ToyMixer


class LinearAttention(ToyMixer):
    """A user's linear attention with a decay per head (q, k, v fused in `qkv`, then `out`), made
    a conversion target in a few lines; its decay keeps its own init."""

    @classmethod
    def options_from_attention(cls, teacher):
        if teacher.width != teacher.d_model:
            raise layerzoo.OptionError("n_heads", f"the heads are d_model // n_heads wide, not {teacher.head_dim}")
        return {"n_heads": teacher.n_heads}

    def init_from_attention(self, attention):
        q, k, v, o = attention.head_projections()
        self.qkv.weight.copy_(torch.cat([q, k, v]))
        self.out.weight.copy_(o)


@pytest.fixture
def registered():
    layerzoo.register_mixer("linear_attention")(LinearAttention)
    yield
    layerzoo.unregister_mixer("linear_attention")


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return save_teacher(TeacherCase("llama", n_layers=2, n_heads=4, n_kv_heads=2), tmp_path_factory.mktemp("llama"))


def test_a_declared_mixer_is_a_target_and_a_tiny_llama_converts_into_it(registered, llama, tmp_path):
    assert "linear_attention" in list_targets()
    conversion = convert(llama, "linear_attention,attention", tmp_path / "out")
    assert conversion.converted == (0,)
    mixer, attention = conversion.student.blocks[0].mixer, conversion.teacher.blocks[0].mixer
    assert isinstance(mixer, LinearAttention) and mixer.n_heads == 4
    q, k, v, o = attention.head_projections()
    assert torch.equal(mixer.qkv.weight, torch.cat([q, k, v])) and torch.equal(mixer.out.weight, o)
    assert torch.equal(k[:D_MODEL // 4], k[D_MODEL // 4:D_MODEL // 2])  # the 2 KV heads, each for 2 query heads
    assert torch.equal(k[:D_MODEL // 4], attention.kv_proj.weight[:D_MODEL // 4])
    ids = torch.randint(1, VOCAB, (2, 7), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = conversion.student(ids)
        assert torch.isfinite(logits).all()
        assert_close(AutoModelForCausalLM.from_pretrained(tmp_path / "out")(ids).logits, logits)


def test_a_pattern_that_changes_what_the_teacher_fixes_is_refused(registered, llama, tmp_path):
    with pytest.raises(ConvertError, match=r"linear_attention\.n_heads is 2, but initialising from the teacher's "
                                           r"attention needs 4"):
        convert(llama, {"mixers": {"linear_attention": {"n_heads": 2}}, "pattern": ["linear_attention", "attention"]})
    qwen3 = save_teacher(TeacherCase("qwen3", n_layers=1, head_dim=32), tmp_path)
    with pytest.raises(ConvertError, match=r"^pattern: layer 0 \(linear_attention\): the heads are d_model // n_heads "
                                           r"wide, not 32$"):
        convert(qwen3, "linear_attention")


def test_a_mixer_that_declares_nothing_is_no_target(llama):
    class Plain(LinearAttention):
        options_from_attention = init_from_attention = None

    layerzoo.register_mixer("plain")(Plain)
    try:
        assert "plain" in layerzoo.list_mixers() and "plain" not in list_targets()
        with pytest.raises(ConvertError, match="'plain' has no initialisation from attention"):
            convert(llama, {"mixers": {"p": {"type": "plain"}}, "pattern": ["p"]})
    finally:
        layerzoo.unregister_mixer("plain")


def test_declaring_one_half_is_refused_at_registration():
    class Half(LinearAttention):
        init_from_attention = None

    with pytest.raises(ValueError, match="defines options_from_attention but not init_from_attention"):
        layerzoo.register_mixer("half")(Half)
    assert "half" not in layerzoo.list_mixers()
