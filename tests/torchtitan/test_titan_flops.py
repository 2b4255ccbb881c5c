"""FLOPs per token for torchtitan's MFU: torchtitan's own convention on a transformer (6 x the
non-embedding weights + 12 x layers x heads x head_dim x context), windows, recurrent states and ARMT's segments."""

import pytest

pytest.importorskip("torchtitan", reason="torchtitan is not installed (docs/training-at-scale.md says how)")

from layerzoo.assemblies.build import build
from layerzoo.hf.torchtitan.flops import flops_per_token


def weights(model) -> int:
    return sum(p.numel() for p in model.parameters()) - model.embedding.weight.numel()


@pytest.mark.parametrize("seq_len", [16, 256])
def test_a_transformer_counts_as_torchtitan_counts_one(seq_len):
    model = build("transformer-tiny", device="meta")
    heads, head_dim = model.blocks[0].mixer.n_heads, model.blocks[0].mixer.head_dim
    assert flops_per_token(model, seq_len) == 6 * weights(model) + 12 * len(model.blocks) * heads * head_dim * seq_len


def test_windows_and_recurrent_states_stop_growing_with_the_context():
    model = build("swax-gdn-tiny", device="meta")  # SWA window 16, Gated DeltaNet
    assert flops_per_token(model, 64) == flops_per_token(model, 4096) > 6 * weights(model)
    full = build("swax-gdn-tiny", ["model.mixers.swa.window=4096"], device="meta")
    assert flops_per_token(full, 4096) > flops_per_token(model, 4096)


def test_an_armt_counts_its_memory_tokens_and_memories_once_per_segment():
    armt = build("armt-tiny", device="meta")  # segments of 8 tokens, 4 memory tokens, 2 memory layers
    assert flops_per_token(armt, 64) == flops_per_token(armt, 4096)  # a token reads its segment alone
    assert flops_per_token(armt, 64) > flops_per_token(armt.base, 8 + 4) * (8 + 4) // 8
