import subprocess
import sys
from dataclasses import dataclass

import pytest
import torch

import layerzoo
from layerzoo.errors import UnknownNameError
from layerzoo.mixers.attention import Attention
from layerzoo.testing import check_mixer


def test_builtin_mixers_are_registered():
    assert {"attention", "swa"} <= set(layerzoo.list_mixers())
    assert layerzoo.get_mixer("swa").options["window"].default == 128


def test_the_conversion_targets_are_the_mixers_that_declare_how_they_start_from_attention():
    assert layerzoo.list_targets() == ["attention", "gated_deltanet", "kda", "mamba2", "mlstm", "swa"]
    assert not layerzoo.get_mixer("assoc_memory").converts_from_attention


# Each in a fresh interpreter: which built-ins are loaded is per process.
FRESH_IMPORTS = {
    "import layerzoo is light": "import sys, layerzoo; assert 'torch' not in sys.modules, 'torch imported'",
    "a layer reached directly finds the built-ins": (
        "from layerzoo.specs import load_spec; spec = load_spec('swax-tiny'); "
        "assert spec.training is not None and {layer.type for layer in spec.model.layers} == {'swa', 'mlstm'}"),
    "a user mixer cannot take a built-in's name before they load": (
        "import layerzoo\n"
        "try:\n"
        "    layerzoo.register_mixer('swa')(type('Mine', (layerzoo.Mixer,), {'__module__': 'mine'}))\n"
        "except ValueError as error:\n"
        "    assert 'already registered' in str(error), error\n"
        "else:\n"
        "    raise AssertionError('registered')"),
}


@pytest.mark.parametrize("name", FRESH_IMPORTS)
def test_the_built_ins_load_on_first_use(name):
    result = subprocess.run([sys.executable, "-c", FRESH_IMPORTS[name]], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]


def test_unknown_mixer_names_the_known_ones_and_the_closest():
    with pytest.raises(UnknownNameError) as error:
        layerzoo.get_mixer("swaa")
    message = str(error.value)
    assert "did you mean 'swa'" in message and "attention" in message


class Doubling(layerzoo.Mixer):
    """A user mixer: y_t = scale * (x_t + x_{t-1}); the state is the previous token."""

    @dataclass(frozen=True)
    class Options(layerzoo.MixerOptions):
        scale: float = layerzoo.option(2.0, help="the factor of each sum")

    def __init__(self, d_model: int, **options):
        super().__init__(d_model, **options)
        self.scale = torch.nn.Parameter(torch.tensor(self.options.scale))

    def mix(self, x, state, cu_seqlens):
        previous = torch.zeros_like(x[:, :1]) if state is None or state.shape[1] == 0 else state.to(x.dtype)
        shifted = torch.cat((previous, x[:, :-1]), dim=1)
        kept = state if state is not None else self.init_state(x.shape[0])
        return self.scale * (x + shifted), x[:, -1:].clone() if x.shape[1] else kept  # no token: the previous one stays

    def init_state(self, batch_size):
        return self.scale.new_zeros(batch_size, 0, self.d_model)

    def state_size(self, seq_len):
        return self.d_model if seq_len else 0


@pytest.fixture
def user_mixer():
    layerzoo.register_mixer("doubling", test_options={"scale": 1.5})(Doubling)
    yield "doubling"
    layerzoo.unregister_mixer("doubling")


def test_user_mixer_passes_conformance_and_builds_from_a_spec(user_mixer):
    check_mixer(user_mixer)
    model = layerzoo.build({"model": {"d_model": 16, "n_layers": 2, "vocab_size": 32,
                                      "mixers": {"doubling": {"scale": 0.5}, "attention": {"n_heads": 2}},
                                      "pattern": ["doubling", "attention"]}})
    assert model(torch.zeros(1, 3, dtype=torch.long)).shape == (1, 3, 32)


def test_a_taken_name_cannot_be_reregistered_to_another_class():
    with pytest.raises(ValueError, match="already registered"):
        layerzoo.register_mixer("swa")(Attention)


def test_conformance_catches_a_broken_mixer(user_mixer):
    class Forgetful(Doubling):  # drops the carried token: streaming differs from one call
        def mix(self, x, state, cu_seqlens):
            return super().mix(x, None, cu_seqlens)

    with pytest.raises(AssertionError, match="streamed"):
        check_mixer(Forgetful, d_model=8)
