"""Kimi Delta Attention against flash-linear-attention's KimiDeltaAttention layer: outputs, final
states and every gradient at fp32 tolerance, weights loaded by fla's names; then each parameter's
initialisation against fla's layer and fla's KDA model.

fla-core (installed) ships no layers and its Triton kernels fail on CPU, so the counterpart is a
transcription of fla's layer forward that runs fla's own naive_recurrent_kda
(tests/helpers/fla_kda.py says what stands in for each Triton piece). Its short convolutions are
always on here: with use_short_conv=False both sides apply SiLU alone (layerzoo's
DeltaRuleLayer._short_conv), which the Gated DeltaNet layer's tests cover.
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from layerzoo.mixers import KimiDeltaAttention
from layerzoo.testing import assert_close, mixer_inputs

from tests.helpers.distributions import (
    assert_drawn_from, constant, inverse_softplus_of_log_uniform, log_of_uniform, normal, uniform,
)
from tests.helpers.fla_kda import FLA, fla_layer, fla_layer_like, fla_model_initialised
from tests.helpers.parity_mapping import Mapping, assert_round_trips, assert_same_layer, check_complete, in_our_names
from tests.helpers.streams import delta_rule_layers_off_init

D_MODEL = 16


def test_the_mapping_covers_both_layers_and_round_trips():
    torch.manual_seed(0)
    mixer = KimiDeltaAttention(D_MODEL, n_heads=3, head_dim=4, expand_v=1.5, conv_size=3)
    theirs = fla_layer(mixer)
    check_complete(mixer, theirs, FLA)
    assert all(entry.theirs == (name,) for name, entry in FLA.items())  # fla's names, as kda.py says
    assert_round_trips(mixer, theirs, FLA)


@given(mixer=delta_rule_layers_off_init(KimiDeltaAttention, D_MODEL), x=mixer_inputs(D_MODEL, max_length=24),
       seed=st.integers(0, 2**16))
def test_output_and_gradients_equal_fla(mixer, x, seed):
    theirs = fla_layer(mixer)
    assert_same_layer(mixer, theirs, FLA, x, lambda x_ours, x_theirs: (mixer(x_ours), theirs(x_theirs)[0]),
                      what="KDA vs fla's KimiDeltaAttention", seed=seed)


@given(mixer=delta_rule_layers_off_init(KimiDeltaAttention, D_MODEL), x=mixer_inputs(D_MODEL, max_length=24),
       data=st.data())
def test_final_state_from_a_state_equals_fla(mixer, x, data):
    """From a drawn initial memory: the output and the final memory (fla's layer takes no
    convolution cache without its Cache class, so the streams start with empty convolutions)."""
    theirs = fla_layer(mixer)
    memory = torch.randn(x.shape[0], mixer.n_heads, mixer.head_dim, mixer.head_v_dim,
                         generator=torch.Generator().manual_seed(data.draw(st.integers(0, 2**16))))
    start = mixer.init_state(x.shape[0])
    start.recurrent = memory
    with torch.no_grad():
        y, state = mixer(x, start, return_state=True)
        y_fla, state_fla = theirs(x, initial_state=memory)
    assert_close(y, y_fla, what="output from a memory")
    assert_close(state.recurrent, state_fla, what="final memory")


# Each parameter's initialisation (names are fla's and layerzoo's alike): layerzoo's law, fla's
# layer's (KimiDeltaAttention.__init__: the nn defaults, A_log = log U(1, 16), dt_bias = 0, norm
# weight 1), fla's model's (KDAPreTrainedModel._init_weights over the layer: N(0, 0.02) weights and
# zero biases for nn.Linear and nn.Conv1d, dt_bias Mamba-2's, A_log log U(1, 16) again).
D_INIT, H_INIT, K_INIT, W_INIT = 64, 4, 16, 4
V_INIT = K_INIT  # expand_v 1, Kimi Linear's


def default_linear(fan_in: int):
    return uniform(-fan_in ** -0.5, fan_in ** -0.5)


INIT_LAWS = {
    "q_proj.weight": (default_linear(D_INIT), normal(0.02)),
    "k_proj.weight": (default_linear(D_INIT), normal(0.02)),
    "v_proj.weight": (default_linear(D_INIT), normal(0.02)),
    "q_conv1d.weight": (default_linear(W_INIT), normal(0.02)),
    "k_conv1d.weight": (default_linear(W_INIT), normal(0.02)),
    "v_conv1d.weight": (default_linear(W_INIT), normal(0.02)),
    "f_proj.0.weight": (default_linear(D_INIT), normal(0.02)),
    "f_proj.1.weight": (default_linear(V_INIT), normal(0.02)),
    "b_proj.weight": (default_linear(D_INIT), normal(0.02)),
    "A_log": (log_of_uniform(1, 16), log_of_uniform(1, 16)),
    "dt_bias": (constant(0.0), inverse_softplus_of_log_uniform(1e-3, 0.1, 1e-4)),
    "g_proj.0.weight": (default_linear(D_INIT), normal(0.02)),
    "g_proj.1.weight": (default_linear(V_INIT), normal(0.02)),
    "g_proj.1.bias": (default_linear(V_INIT), constant(0.0)),
    "o_norm.weight": (constant(1.0), constant(1.0)),
    "o_proj.weight": (default_linear(H_INIT * V_INIT), normal(0.02)),
}
INIT_SEEDS = 8


def pooled(make, mapping: Mapping | None = None) -> dict[str, torch.Tensor]:
    """Each parameter's values over INIT_SEEDS layers that make() builds, by layerzoo's names:
    a counterpart's parameters read through `mapping` (FLA for fla's layers)."""
    drawn: dict[str, list[torch.Tensor]] = {}
    shapes = new_mixer()
    for seed in range(INIT_SEEDS):
        torch.manual_seed(seed)
        layer = make()
        params = dict(layer.named_parameters()) if mapping is None else in_our_names(shapes, layer, mapping)
        for name, t in params.items():
            drawn.setdefault(name, []).append(t.detach().flatten())
    return {name: torch.cat(parts) for name, parts in drawn.items()}


def new_mixer() -> KimiDeltaAttention:
    return KimiDeltaAttention(D_INIT, n_heads=H_INIT, head_dim=K_INIT, conv_size=W_INIT)


def test_initialisation_equals_fla_layer():
    """layerzoo's construction draws every parameter as fla's layer's construction does."""
    ours, layer = pooled(new_mixer), pooled(lambda: fla_layer_like(new_mixer()), FLA)
    assert INIT_LAWS.keys() == ours.keys() == layer.keys()
    for name, (our_law, _) in INIT_LAWS.items():
        assert_drawn_from(ours[name], our_law, f"layerzoo's {name}")
        assert_drawn_from(layer[name], our_law, f"fla's layer's {name}")


def test_initialisation_against_fla_model():
    """fla's KDA model re-initialises its layers otherwise: the second law of each row."""
    model = pooled(lambda: fla_model_initialised(new_mixer()), FLA)
    for name, (_, model_law) in INIT_LAWS.items():
        assert_drawn_from(model[name], model_law, f"fla's model's {name}")
