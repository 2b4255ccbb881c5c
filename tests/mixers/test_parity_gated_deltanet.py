"""Gated DeltaNet against Qwen3-Next's Gated DeltaNet layer (transformers' Qwen3NextGatedDeltaNet),
layerzoo's weights mapped onto its fused projections (the mapping in tests/helpers/qwen3_next_gdn.py,
compared by tests/helpers/parity_mapping.py; docs/parity.md): outputs, final states, decoding
steps and every gradient at fp32 tolerance; then each parameter's initialisation against the one
transformers gives that layer.

transformers binds fla's Triton kernels when fla is installed, and those fail on CPU: the
module-wide fixture `qwen3_next_on_torch` (torch_path()) sets the module attributes
modeling_qwen3_next.torch_chunk_gated_delta_rule, torch_recurrent_gated_delta_rule,
causal_conv1d_fn and causal_conv1d_update, which the layer's forward calls by name, to the
pure-PyTorch functions their wrappers keep as __wrapped__.

Qwen3-Next's layer has no option for layerzoo's use_short_conv=False (it always convolves) nor
layerzoo one for its grouped value heads (num_v_heads > num_k_heads): the layers are compared
with convolutions and as many value heads as key heads.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from transformers.cache_utils import DynamicCache

from layerzoo.mixers import GatedDeltaNet
from layerzoo.testing import assert_close, mixer_inputs

from tests.helpers.distributions import (
    assert_drawn_from, constant, inverse_softplus_of_log_uniform, log_of_uniform, normal, uniform,
)
from tests.helpers.parity_mapping import GRADIENT_SCALE, assert_round_trips, assert_same_layer, check_complete, in_our_names
from tests.helpers.qwen3_next_gdn import (
    qwen3_next_config, qwen3_next_initialised, qwen3_next_layer, qwen3_next_mapping, torch_path,
)
from tests.helpers.streams import delta_rule_layers_off_init

D_MODEL = 16


@pytest.fixture(autouse=True, scope="module")
def qwen3_next_on_torch():
    with torch_path():
        yield


def test_the_mapping_covers_both_layers_and_round_trips():
    torch.manual_seed(0)
    mixer = GatedDeltaNet(D_MODEL, n_heads=3, head_dim=4, expand_v=1.5, conv_size=3)
    theirs, mapping = qwen3_next_layer(mixer), qwen3_next_mapping(mixer)
    check_complete(mixer, theirs, mapping)
    assert_round_trips(mixer, theirs, mapping)


@given(mixer=delta_rule_layers_off_init(GatedDeltaNet, D_MODEL), x=mixer_inputs(D_MODEL, max_length=40),
       seed=st.integers(0, 2**16))
def test_output_and_gradients_equal_qwen3_next(mixer, x, seed):
    theirs = qwen3_next_layer(mixer)
    # Qwen3-Next's chunked rule computes in fp32 whatever it is given, and the gradients of the
    # per-head decay parameters sum B*T per-token terms that mostly cancel: its rounding error on
    # them grows as sqrt(B*T) times fp32's (ours, against the step loop in fp64, is exact)
    decay_scale = GRADIENT_SCALE * (x.shape[0] * x.shape[1]) ** 0.5
    assert_same_layer(mixer, theirs, qwen3_next_mapping(mixer), x,
                      lambda x_ours, x_theirs: (mixer(x_ours), theirs(x_theirs)),
                      what="Gated DeltaNet vs Qwen3NextGatedDeltaNet", seed=seed,
                      scales={"grad A_log": decay_scale, "grad dt_bias": decay_scale})


def assert_same_states(state, cache: DynamicCache, what: str) -> None:
    """layerzoo's GatedDeltaNetState against Qwen3-Next's cache: the memory, and the convolution
    inputs (Qwen3-Next keeps the last conv_size of the concatenated q, k, v projections, layerzoo
    the last conv_size - 1 of each; the oldest one the convolution never reads again)."""
    layer = cache.layers[0]
    assert_close(state.recurrent, layer.recurrent_states[0], what=f"{what}: recurrent state")
    ours = torch.cat([state.q_conv, state.k_conv, state.v_conv], dim=-1)
    assert_close(ours, layer.conv_states[0][..., 1:].transpose(1, 2), what=f"{what}: convolution state")


@given(mixer=delta_rule_layers_off_init(GatedDeltaNet, D_MODEL), x=mixer_inputs(D_MODEL, max_length=24), data=st.data())
def test_prefill_then_decoding_and_states_equal_qwen3_next(mixer, x, data):
    """A prefill (Qwen3-Next's chunked rule and full convolution), then the rest token by token
    (its recurrent rule and convolution update) through its cache: each output and state equal."""
    theirs = qwen3_next_layer(mixer)
    cache = DynamicCache(config=qwen3_next_config(mixer))
    prefill = data.draw(st.integers(1, x.shape[1]), label="prefill")
    with torch.no_grad():
        y, state = mixer(x[:, :prefill], return_state=True)
        assert_close(y, theirs(x[:, :prefill], cache=cache), what=f"prefill of {prefill}")
        assert_same_states(state, cache, f"after a prefill of {prefill}")
        for t in range(prefill, min(x.shape[1], prefill + 3)):
            y, state = mixer(x[:, t:t + 1], state, return_state=True)
            assert_close(y, theirs(x[:, t:t + 1], cache=cache), what=f"decoding token {t}")
            assert_same_states(state, cache, f"after decoding token {t}")


# Each parameter's initialisation (layerzoo's names): (layerzoo's law, Qwen3-Next's law) at
# D_INIT, with H_INIT heads of width K_INIT (values V_INIT), convolutions of width W_INIT. transformers'
# Qwen3NextPreTrainedModel._init_weights: N(0, initializer_range = 0.02) for every nn.Linear and
# nn.Conv1d (PreTrainedModel's), dt_bias = 1, A_log = log U(0.01, 16), the gated norm's weight 1.
# layerzoo: nn.Linear's default, U(+-1 / sqrt(fan_in)); the convolutions nn.Conv1d's default for a
# depthwise kernel, U(+-1 / sqrt(W)); A and dt as fla's GatedDeltaNet layer (decay_gates.py).
D_INIT, H_INIT, K_INIT, V_INIT, W_INIT = 64, 8, 8, 16, 4
PROJECTION = uniform(-D_INIT ** -0.5, D_INIT ** -0.5)
INIT_LAWS = {
    "q_proj.weight": (PROJECTION, normal(0.02)),
    "k_proj.weight": (PROJECTION, normal(0.02)),
    "v_proj.weight": (PROJECTION, normal(0.02)),
    "g_proj.weight": (PROJECTION, normal(0.02)),
    "a_proj.weight": (PROJECTION, normal(0.02)),
    "b_proj.weight": (PROJECTION, normal(0.02)),
    "o_proj.weight": (uniform(-(H_INIT * V_INIT) ** -0.5, (H_INIT * V_INIT) ** -0.5), normal(0.02)),
    "q_conv1d.weight": (uniform(-W_INIT ** -0.5, W_INIT ** -0.5), normal(0.02)),
    "k_conv1d.weight": (uniform(-W_INIT ** -0.5, W_INIT ** -0.5), normal(0.02)),
    "v_conv1d.weight": (uniform(-W_INIT ** -0.5, W_INIT ** -0.5), normal(0.02)),
    "A_log": (log_of_uniform(0, 16), log_of_uniform(0.01, 16)),
    "dt_bias": (inverse_softplus_of_log_uniform(1e-3, 0.1, 1e-4), constant(1.0)),
    "o_norm.weight": (constant(1.0), constant(1.0)),
}
INIT_SEEDS = 8  # layers drawn per side: A_log and dt_bias pool H_INIT values from each


def test_initialisation_against_qwen3_next():
    """Each side draws each parameter from its law above (KS at alpha = 1e-3 over INIT_SEEDS
    layers, exact for constants); docs/parity.md lists where the laws differ and why."""
    ours, theirs = {}, {}
    for seed in range(INIT_SEEDS):
        torch.manual_seed(seed)
        mixer = GatedDeltaNet(D_INIT, n_heads=H_INIT, head_dim=K_INIT, expand_v=V_INIT / K_INIT, conv_size=W_INIT)
        mapping = qwen3_next_mapping(mixer)
        drawn = in_our_names(mixer, qwen3_next_initialised(mixer), mapping)
        for name, p in mixer.named_parameters():
            ours.setdefault(name, []).append(p.detach().flatten())
            theirs.setdefault(name, []).append(drawn[name].flatten())
    assert INIT_LAWS.keys() == ours.keys()
    for name, (our_law, their_law) in INIT_LAWS.items():
        assert_drawn_from(torch.cat(ours[name]), our_law, f"layerzoo's {name}")
        their_name = f"Qwen3-Next's {', '.join(mapping[name].theirs)} ({name})"
        assert_drawn_from(torch.cat(theirs[name]), their_law, their_name)
