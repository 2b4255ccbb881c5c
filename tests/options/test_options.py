"""A mixer's options are declared once, in its Options dataclass, and every reader takes them from
there: the spec reader, the constructor, `layerzoo mixers NAME` and the signature help() shows."""

import inspect
from dataclasses import dataclass

import pytest
import torch

import layerzoo
from layerzoo.cli import main
from layerzoo.errors import OptionError, SpecError


class Scaled(layerzoo.Mixer):
    """A stateless test mixer: y = scale * x."""

    @dataclass(frozen=True)
    class Options(layerzoo.MixerOptions):
        scale: float = layerzoo.option(2.0, help="the factor of each output")

    def __init__(self, d_model: int, **options):
        super().__init__(d_model, **options)

    def mix(self, x, state, cu_seqlens):
        return self.output(x), state if state is not None else self.init_state(x.shape[0])

    def output(self, x):
        return self.options.scale * x

    def init_state(self, batch_size):
        return torch.zeros(batch_size, 0)

    def state_size(self, seq_len):
        return 0


class Shifted(Scaled):
    """The test mixer with one option added: y = scale * x + shift."""

    @dataclass(frozen=True)
    class Options(Scaled.Options):
        shift: float = layerzoo.option(0.5, min=0.0, help="added to each output")

    def output(self, x):
        return super().output(x) + self.options.shift


@pytest.fixture
def shifted():
    layerzoo.register_mixer("shifted", test_options={"shift": 1.0})(Shifted)
    yield "shifted"
    layerzoo.unregister_mixer("shifted")


def spec_file(tmp_path, options: str):
    path = tmp_path / "spec.yaml"
    path.write_text("model:\n  d_model: 8\n  vocab_size: 16\n  n_layers: 1\n  pattern: [shifted]\n"
                    f"  mixers:\n    shifted: {{{options}}}\n")
    return path


def test_an_added_option_reaches_the_spec_reader_the_constructor_and_the_table(shifted, tmp_path, capsys):
    layer = layerzoo.load_spec(spec_file(tmp_path, "shift: 0.25")).model.layers[0]
    assert layer.options == {"scale": 2.0, "shift": 0.25}
    with pytest.raises(SpecError, match=r"spec.yaml:7: model.mixers.shifted.shift: must be >= 0.0, got -1"):
        layerzoo.load_spec(spec_file(tmp_path, "shift: -1"))
    with pytest.raises(SpecError, match=r"spec.yaml:7: model.mixers.shifted.shfit: unknown option of mixer 'shifted'; "
                                        r"did you mean 'shift'\? \(options: scale, shift\)"):
        layerzoo.load_spec(spec_file(tmp_path, "shfit: 1"))

    mixer = Shifted(8, shift=0.25)
    assert torch.equal(mixer(torch.ones(1, 2, 8)), torch.full((1, 2, 8), 2.25))
    assert inspect.signature(Shifted).parameters["shift"].default == 0.5
    with pytest.raises(OptionError, match=r"^shift: expected float, got 'far'$"):
        Shifted(8, shift="far")

    assert main(["mixers", "shifted"]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[2:]}
    assert rows["shift"].split()[:5] == ["shift", "float", "0.5", ">=", "0.0"] and rows["shift"].endswith("added to each output")
    assert "scale" in rows


def test_the_class_signature_is_the_constructors_and_an_instance_keeps_torchs():
    constructor = inspect.signature(layerzoo.mixers.SlidingWindowAttention)
    assert list(constructor.parameters)[:2] == ["d_model", "n_heads"] and constructor.parameters["window"].default == 128
    assert "d_model" not in inspect.signature(Scaled(4)).parameters  # calling a module is its forward


def test_every_built_in_option_has_a_description():
    missing = [f"{name}.{option}" for name in layerzoo.list_mixers()
               for option, info in layerzoo.get_mixer(name).options.items() if not info.help]
    assert missing == []


class OwnSignature(Scaled):
    def __init__(self, d_model: int, scale: float = 2.0):
        super().__init__(d_model, scale=scale)


class NoDataclass(Scaled):
    class Options(Scaled.Options):
        extra: int = 3


@pytest.mark.parametrize("cls, test_options, message", [
    (OwnSignature, {}, r"OwnSignature.__init__ takes scale: declare options as fields of OwnSignature.Options"),
    (NoDataclass, {}, r"NoDataclass.Options must be a @dataclass\(frozen=True\) subclass of layerzoo.MixerOptions"),
    (Scaled, {"sclae": 1.0}, r"test_options of Scaled name undeclared options: sclae"),
])
def test_options_not_declared_in_the_dataclass_are_refused_at_registration(cls, test_options, message):
    with pytest.raises(ValueError, match=message):
        layerzoo.register_mixer("refused", test_options=test_options)(cls)
    assert "refused" not in layerzoo.list_mixers()
