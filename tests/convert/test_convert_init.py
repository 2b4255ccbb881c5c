"""New mixers initialised from the attention they replace (docs/convert.md's tables): each mapped
tensor is the teacher's slice exactly, with key/value heads expanded as grouped-query attention
shares them; the documented starts hold; the students run forward and backward, the recurrent ones
in constant state; SWA with a window covering the input is still the teacher."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from safetensors.torch import load_file

pytest.importorskip("transformers")

from layerzoo.convert import convert
from layerzoo.testing import assert_close

from tests.helpers.hf_teachers import D_MODEL, VOCAB, TeacherCase, reference, save_teacher

# Llama with 4 query heads over 2 KV heads of width 16; Qwen3 with heads 32 wide (128 = 2 d_model,
# so Mamba-2's inner width is a multiple of d_model).
TEACHERS = {"llama": TeacherCase("llama", n_layers=2, n_heads=4, n_kv_heads=2),
            "qwen3": TeacherCase("qwen3", n_layers=2, n_heads=4, n_kv_heads=1, head_dim=32)}
RECURRENT = ("gated_deltanet", "kda", "mamba2", "mlstm")


@pytest.fixture(scope="module", params=sorted(TEACHERS))
def teacher(request, tmp_path_factory) -> tuple[TeacherCase, Path]:
    case = TEACHERS[request.param]
    return case, save_teacher(case, tmp_path_factory.mktemp(request.param))


def attention_slices(folder: Path, case: TeacherCase, layer: int) -> dict[str, torch.Tensor]:
    """The teacher layer's q (H D, d), k and v with each KV head repeated for its H / Hkv query
    heads (H D, d), o (d, H D), read from the safetensors file itself."""
    weights = load_file(folder / "model.safetensors")
    prefix = f"model.layers.{layer}.self_attn."
    head_dim = case.head_dim or D_MODEL // case.n_heads
    group = case.n_heads // case.n_kv_heads

    def expanded(name: str) -> torch.Tensor:
        heads = weights[prefix + name].view(case.n_kv_heads, head_dim, D_MODEL)
        return torch.stack([heads[h // group] for h in range(case.n_heads)]).reshape(-1, D_MODEL)

    return {"q": weights[prefix + "q_proj.weight"], "k": expanded("k_proj.weight"), "v": expanded("v_proj.weight"),
            "o": weights[prefix + "o_proj.weight"]}


def mapped(mixer, kind: str) -> dict[str, torch.Tensor]:
    """The student mixer's tensors that docs/convert.md says hold q, k, v, o."""
    if kind in ("gated_deltanet", "kda"):
        return {"q": mixer.q_proj.weight, "k": mixer.k_proj.weight, "v": mixer.v_proj.weight, "o": mixer.o_proj.weight}
    if kind == "mamba2":
        width = mixer.d_inner
        _, x, B, C, _ = mixer.in_proj.weight.split([width] * 4 + [mixer.n_heads])
        return {"q": C, "k": B, "v": x, "o": mixer.out_proj.weight}
    q, k, v, _ = mixer.in_proj.weight.split(mixer.widths)
    return {"q": q, "k": k, "v": v, "o": mixer.out_proj.weight}


@pytest.mark.parametrize("kind", RECURRENT)
def test_mapped_tensors_are_the_teachers_slices_exactly(teacher, kind):
    case, folder = teacher
    conversion = convert(folder, f"{kind},attention")
    assert conversion.converted == (0,)
    ours = mapped(conversion.student.blocks[0].mixer, kind)
    for name, expected in attention_slices(folder, case, 0).items():
        assert torch.equal(ours[name], expected), f"{kind} from {case.family}: {name}"


@pytest.mark.parametrize("kind", RECURRENT)
def test_everything_but_the_converted_mixers_is_the_teachers(teacher, kind):
    _, folder = teacher
    conversion = convert(folder, f"{kind},attention")
    theirs = conversion.teacher.state_dict()
    for name, tensor in conversion.student.state_dict().items():
        if not name.startswith("blocks.0.mixer."):
            assert torch.equal(tensor, theirs[name]), name


@pytest.mark.parametrize("kind", RECURRENT)
def test_the_documented_starts(teacher, kind):
    """Convolutions the identity (last tap 1), decays input-independent with A = 1 and dt
    log-spaced over [1e-3, 1e-1] across the heads, beta 1/2, KDA's output gate open."""
    _, folder = teacher
    mixer = convert(folder, kind).student.blocks[1].mixer
    convs = [mixer.conv1d] if kind == "mamba2" else [] if kind == "mlstm" else [mixer.q_conv1d, mixer.k_conv1d, mixer.v_conv1d]
    for conv in convs:
        expected = torch.zeros_like(conv.weight)
        expected[:, -1] = 1
        assert torch.equal(conv.weight, expected)
    if kind == "mlstm":  # the layer's own gates: xLSTM-7B's
        assert torch.equal(mixer.gate_proj.weight, torch.zeros_like(mixer.gate_proj.weight))
        return
    assert torch.equal(mixer.A_log, torch.zeros_like(mixer.A_log))
    dt = torch.nn.functional.softplus(mixer.dt_bias).view(mixer.n_heads, -1)  # KDA: one per key channel
    assert torch.equal(dt, dt[:, :1].expand_as(dt))
    assert_close(dt[:, 0], torch.logspace(-3, -1, mixer.n_heads), what="dt per head")
    if kind == "mamba2":  # dt's rows of in_proj
        zero = [mixer.in_proj.weight[-mixer.n_heads:]]
    elif kind == "gated_deltanet":
        zero = [mixer.a_proj.weight, mixer.b_proj.weight]
    else:
        zero = [mixer.f_proj[1].weight, mixer.g_proj[1].weight, mixer.b_proj.weight]
        assert torch.equal(mixer.g_proj[1].bias, torch.full_like(mixer.g_proj[1].bias, 3.0))
    for tensor in zero:
        assert not tensor.any()


@pytest.mark.parametrize("kind", RECURRENT + ("swa",))
def test_students_run_forward_and_backward(teacher, kind):
    _, folder = teacher
    student = convert(folder, f"{kind},attention").student
    ids = torch.randint(0, VOCAB, (2, 9), generator=torch.Generator().manual_seed(0))
    logits = student(ids)
    assert logits.shape == (2, 9, VOCAB) and torch.isfinite(logits).all()
    torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten()).backward()
    for name, parameter in student.named_parameters():
        assert parameter.grad is not None and torch.isfinite(parameter.grad).all(), name


@pytest.mark.parametrize("kind", RECURRENT)
def test_recurrent_students_keep_a_state_constant_in_length(teacher, kind):
    _, folder = teacher
    student = convert(folder, kind).student
    assert student.state_size(8) == student.state_size(100_000) > 0


@given(window=st.integers(1, 16), length=st.integers(1, 16), seed=st.integers(0, 2**16))
def test_swa_with_a_window_covering_the_input_is_the_teacher(window, length, seed):
    """Every layer SWA (window, sinks from the pattern): the teacher while the window covers the
    input; a shorter window changes the logits of the tokens past it."""
    case = TeacherCase("llama", n_layers=2, seed=seed % 7)
    ids = torch.randint(0, VOCAB, (2, length), generator=torch.Generator().manual_seed(seed))
    with tempfile.TemporaryDirectory() as folder:
        save_teacher(case, Path(folder))
        conversion = convert(folder, {"mixers": {"swa": {"window": window}}, "pattern": ["swa"]})
        expected = reference(folder)(ids).logits
    assert conversion.converted == (0, 1)
    with torch.no_grad():
        logits = conversion.student(ids)
    if window >= length:
        assert_close(logits, expected)
    else:  # the first `window` positions see all they would anyway
        assert_close(logits[:, :window], expected[:, :window])
        assert not torch.allclose(logits, expected, rtol=1e-3, atol=1e-3)


def test_the_pattern_forms_say_the_same(tmp_path):
    """Rules (cycled, with placements), a list, `layers` and a YAML spec file for one 4-layer
    hybrid give one student."""
    folder = save_teacher(TeacherCase("llama", n_layers=4), tmp_path / "teacher")
    spec = tmp_path / "hybrid.yaml"
    spec.write_text("model:\n  d_model: 64\n  mixers:\n    short: {type: swa, window: 3}\n"
                    "  layers: [short, gated_deltanet, gated_deltanet, attention]\n")
    short = {"short": {"type": "swa", "window": 3}}
    forms = [{"mixers": short, "pattern": "short, gated_deltanet*2; attention@-1"},
             {"mixers": short, "pattern": "gated_deltanet; short@0; attention@3"},
             {"mixers": short, "pattern": ["short", "gated_deltanet", "gated_deltanet", "attention"]},
             {"mixers": short, "layers": ["short", "gated_deltanet", "gated_deltanet", "attention"]}, spec]
    students = [convert(folder, form) for form in forms]
    layers = [[(layer.type, layer.options) for layer in student.student.config.layers] for student in students]
    assert all(config == layers[0] for config in layers)
    assert [kind for kind, _ in layers[0]] == ["swa", "gated_deltanet", "gated_deltanet", "attention"]
    assert layers[0][0][1]["window"] == 3
    assert all(student.converted == (0, 1, 2) for student in students)
