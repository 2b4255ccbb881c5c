"""Gemma-3's text model converts: every layer kept (sliding layers as `swa`, global ones as
`attention`), the logits and greedy tokens are transformers' Gemma3ForCausalLM's; converted to a
hybrid, the kept layers stay the teacher's, the model streams as it runs whole, and its exported
folder loads back; what layerzoo does not have is refused in one line naming the key."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

pytest.importorskip("transformers")

from transformers import AutoModelForCausalLM

import layerzoo.hf  # noqa: F401 - registers the layerzoo model type with the Auto classes
from layerzoo.convert import ConvertError, convert
from layerzoo.registry import list_targets
from layerzoo.testing import assert_close

from tests.helpers.hf_gemma import VOCAB, GemmaCase, as_hub_config, save_gemma
from tests.helpers.hf_teachers import edit_config, reference

KEPT = "swa,attention"  # the case's layers: sliding, global, sliding, global
LENGTH = 9  # three windows


def ids(batch: int = 2, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, LENGTH), generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def gemma(tmp_path_factory):
    return save_gemma(GemmaCase(), tmp_path_factory.mktemp("gemma"))


# fp32, near and not bit-equal: transformers' eager attention and layerzoo's kernels sum in other
# orders, and layerzoo's RoPE frequencies are computed in fp64 (the norms' (1 + w), the embedding
# scale and the score scale are the same fp32 products).
@pytest.mark.parametrize("case", [GemmaCase(), GemmaCase(n_layers=3, every=3, tied=False, seed=1)],
                         ids=["alternating-tied", "two-sliding-one-global-untied"])
def test_every_layer_kept_gives_transformers_logits(case, tmp_path):
    folder = save_gemma(case, tmp_path)
    conversion = convert(folder, "swa*2,attention" if case.every == 3 else KEPT)
    with torch.no_grad():
        expected = reference(folder)(ids()).logits
        assert_close(conversion.teacher(ids()), expected, what="teacher")
        assert_close(conversion.student(ids()), expected, what="student")
    assert conversion.converted == ()
    layers = conversion.teacher.config.layers
    assert [layer.type for layer in layers] == ["swa" if (index + 1) % case.every else "attention"
                                                for index in range(case.n_layers)]
    assert {(layer.type, layer.options["rope_theta"], layer.options.get("window")) for layer in layers} == {
        ("swa", 100.0, 3), ("attention", 5000.0, None)}
    assert all(layer.options["score_scale"] == 12**-0.5 and layer.options["qk_norm"] for layer in layers)


def test_a_hub_config_of_transformers_4_reads_the_same(gemma, tmp_path):
    shutil.copytree(gemma, tmp_path / "hub")
    as_hub_config(tmp_path / "hub")
    assert convert(tmp_path / "hub", KEPT).teacher.config == convert(gemma, KEPT).teacher.config


def test_greedy_generation_is_transformers(gemma):
    conversion = convert(gemma, KEPT)
    prompt = ids(batch=1)
    with torch.no_grad():
        theirs = reference(gemma).generate(prompt, max_new_tokens=6, do_sample=False, pad_token_id=0)
        ours = conversion.student.generate(prompt, 6)
    assert torch.equal(ours, theirs)


@pytest.mark.parametrize("target", [t for t in list_targets() if t not in ("attention", "swa")])
def test_a_hybrid_keeps_the_sliding_layers_and_streams_as_it_runs_whole(gemma, target, tmp_path):
    conversion = convert(gemma, f"swa,{target}", tmp_path / "out")
    assert conversion.converted == (1, 3)
    teacher, student = conversion.teacher.state_dict(), conversion.student.state_dict()
    for name, tensor in student.items():
        if not name.startswith(("blocks.1.mixer.", "blocks.3.mixer.")):
            assert torch.equal(tensor, teacher[name]), name
    x = ids(seed=2)
    with torch.no_grad():
        whole = conversion.student(x)
        assert torch.isfinite(whole).all()
        state, pieces = None, []
        for start, end in ((0, 4), (4, 5), (5, 6), (6, LENGTH)):  # a prefill, then tokens one by one
            logits, state = conversion.student(x[:, start:end], state, return_state=True)
            pieces.append(logits)
        assert_close(torch.cat(pieces, dim=1), whole, what=f"{target}: streamed")
        loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "out").eval()
        assert torch.equal(loaded(x).logits, whole)
    assert loaded.model.config == conversion.student.config  # what distillation's spec check needs too
    spec = json.loads((tmp_path / "out" / "config.json").read_text())["model_spec"]
    assert spec["norm"]["post"] and spec["scale_embeddings"] and spec["ffn"]["activation"] == "gelu_tanh"


@pytest.mark.parametrize("model_type, architectures, words", [
    ("gemma2", ["Gemma2ForCausalLM"], ("'gemma2'", "Gemma-2")),
    ("gemma3n_text", ["Gemma3nForCausalLM"], ("'gemma3n_text'", "Gemma-3n")),
    ("gemma3n", ["Gemma3nForConditionalGeneration"], ("'gemma3n'", "Gemma-3n")),
    ("gemma3", ["Gemma3ForConditionalGeneration"], ("'gemma3'", "multimodal", "Gemma3ForCausalLM")),
    ("gemma3_text", ["Gemma3ForConditionalGeneration"], ("architectures", "Gemma3ForCausalLM")),
])
def test_other_gemmas_are_refused_naming_what_is_supported(gemma, tmp_path, model_type, architectures, words):
    folder = shutil.copytree(gemma, tmp_path / "other")
    edit_config(folder, model_type=model_type, architectures=architectures)
    refused(folder, *words, "supported: ", "Gemma3ForCausalLM")


@pytest.mark.parametrize("changes, words", [
    ({"attn_logit_softcapping": 50.0}, ("attn_logit_softcapping 50.0",)),
    ({"final_logit_softcapping": 30.0}, ("final_logit_softcapping 30.0",)),
    ({"use_bidirectional_attention": True}, ("use_bidirectional_attention",)),
    ({"hidden_activation": "gelu"}, ("hidden_activation 'gelu'",)),
    ({"rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                          "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}},
     ("rope_parameters.full_attention", "rope_type 'linear'")),
    ({"rope_parameters": {"full_attention": {"rope_theta": 1e6}, "chunked_attention": {"rope_theta": 1e4}}},
     ("rope_parameters.chunked_attention", "not a layer type")),
    ({"layer_types": ["sliding_attention", "chunked_attention", "sliding_attention", "full_attention"]},
     ("layer_types",)),
    ({"query_pre_attn_scalar": 0}, ("query_pre_attn_scalar",)),
])
def test_unsupported_gemma_features_name_the_key(gemma, tmp_path, changes, words):
    folder = shutil.copytree(gemma, tmp_path / "changed")
    edit_config(folder, **changes)
    refused(folder, "config.json: ", *words)


def test_a_hub_config_with_scaled_rope_is_refused(gemma, tmp_path):
    folder = shutil.copytree(gemma, tmp_path / "hub")
    as_hub_config(folder)
    edit_config(folder, rope_scaling={"rope_type": "linear", "factor": 8.0})
    refused(folder, "config.json: rope_scaling", "rope_type 'linear'")


def refused(folder, *words: str) -> None:
    with pytest.raises(ConvertError) as caught:
        convert(folder, KEPT)
    message = str(caught.value)
    assert "\n" not in message and all(word in message for word in words), message

