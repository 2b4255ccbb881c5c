import pytest
import torch

import layerzoo
from layerzoo.mixers.attention import SlidingWindowAttention

# Specs above this size (swax at 1.4B, swax-7b) would not fit a CPU training step in CI's memory;
# they are built on the meta device, and their -tiny variants run the real step.
CPU_PARAMETER_LIMIT = 200e6


def parameter_count(name: str) -> int:
    return sum(p.numel() for p in layerzoo.build(name, device="meta").parameters())


# Specs wrapping a user's Hugging Face checkpoint (base.hf_checkpoint) cannot be built without it;
# tests/assemblies/test_armt_hf.py builds them around small saved models.
BUILDABLE = [name for name in layerzoo.shipped_specs() if layerzoo.load_spec(name).hf_checkpoint is None]
SIZES = {name: parameter_count(name) for name in BUILDABLE}
CPU_SIZED = [name for name, size in SIZES.items() if size <= CPU_PARAMETER_LIMIT]
LARGE = [name for name, size in SIZES.items() if size > CPU_PARAMETER_LIMIT]


@pytest.mark.parametrize("name", LARGE)
def test_large_specs_have_a_tiny_variant_that_runs_their_mixers(name):
    tiny = {layer.type for layer in layerzoo.load_spec(name.removesuffix("-7b") + "-tiny").model.layers}
    assert tiny == {layer.type for layer in layerzoo.load_spec(name).model.layers}


@pytest.mark.parametrize("name", CPU_SIZED)
def test_every_shipped_spec_builds_trains_a_step_and_generates(name):
    torch.manual_seed(0)
    # ARMT: segments short enough that 11 tokens write the memory and read it back
    model = layerzoo.build(name, ["armt.segment_size=4"] if layerzoo.load_spec(name).armt else [])
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (1, 12))
    logits = model(ids[:, :-1])
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), ids[:, 1:].reshape(-1))
    loss.backward()
    torch.optim.AdamW(model.parameters(), lr=1e-3).step()
    assert torch.isfinite(loss)
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    out = model.generate(ids[:, :4], 16, temperature=0.8, top_k=20, generator=torch.Generator().manual_seed(0))
    assert out.shape == (1, 20) and bool(((0 <= out) & (out < vocab)).all())


@pytest.mark.parametrize("name", [name for name in CPU_SIZED if name.endswith("-tiny")])
def test_no_logit_sees_a_later_token(name):
    """Causality of the whole stack (mixers, short convolutions, chunk and segment boundaries): new
    tokens from position 37 on leave every earlier logit bit-identical."""
    torch.manual_seed(0)
    model = layerzoo.build(name, ["armt.segment_size=8"] if layerzoo.load_spec(name).armt else []).eval()
    ids = torch.randint(0, model.config.vocab_size, (2, 90))
    edited = ids.clone()
    edited[:, 37:] = torch.randint(0, model.config.vocab_size, (2, 53))
    with torch.no_grad():
        before, after = model(ids), model(edited)
    assert torch.equal(before[:, :37], after[:, :37])
    assert not torch.equal(before[:, 37:], after[:, 37:])


def test_sliding_window_decoding_runs_in_constant_memory():
    model = layerzoo.build("swa-tiny").eval()
    window = model.blocks[0].mixer.window
    state = None
    token = torch.zeros(1, 1, dtype=torch.long)
    sizes = []
    with torch.no_grad():
        for _ in range(3 * window):
            logits, state = model(token, state=state, return_state=True)
            token = logits[:, -1:].argmax(-1)
            sizes.append(sum(layer.k.numel() + layer.v.numel() + layer.position.numel() for layer in state))
    assert max(sizes) == sizes[-1] == sizes[window]  # grows for window-1 tokens, then stays
    assert sizes[-1] == model.state_size(3 * window)


def test_full_attention_cache_grows_with_length():
    model = layerzoo.build("transformer-tiny").eval()
    with torch.no_grad():
        _, state = model(torch.zeros(1, 7, dtype=torch.long), return_state=True)
    assert state[0].k.shape[1] == 7


def test_window_changes_at_run_time_without_rebuilding():
    model = layerzoo.build("swa-tiny").eval()
    ids = torch.randint(0, 256, (1, 40))
    with torch.no_grad():
        before = model(ids)
        assert layerzoo.set_window(model, 4) == 4
        narrow = model(ids)
        layerzoo.set_window(model, 16)
        again = model(ids)
    assert torch.equal(before, again) and not torch.allclose(before, narrow)
    assert all(m.window == 16 for m in model.modules() if isinstance(m, SlidingWindowAttention))
    with pytest.raises(ValueError, match=r"^window: must be >= 1, got 0$"):
        layerzoo.set_window(model, 0)


def test_a_window_as_long_as_the_input_is_full_attention():
    torch.manual_seed(0)
    swa = SlidingWindowAttention(32, n_heads=4, window=10)
    full = layerzoo.get_mixer("attention").cls(32, n_heads=4)
    full.load_state_dict(swa.state_dict())
    x = torch.randn(2, 10, 32)
    with torch.no_grad():
        torch.testing.assert_close(swa(x), full(x))
        assert not torch.allclose(swa(torch.randn(2, 11, 32))[:, -1], full(torch.randn(2, 11, 32))[:, -1])


def test_untied_head_has_its_own_weight():
    tied = layerzoo.build("swa-tiny")
    untied = layerzoo.build("swa-tiny", ["model.tie_embeddings=false"])
    assert tied.head.weight is tied.embedding.weight
    assert untied.head.weight is not untied.embedding.weight
    count = lambda m: sum(p.numel() for p in m.parameters())
    assert count(untied) - count(tied) == 256 * 64


def test_bad_model_inputs_get_clear_errors():
    model = layerzoo.build("swa-tiny")
    with pytest.raises(ValueError, match="input_ids must be"):
        model(torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="state has 1 layers"):
        model(torch.zeros(1, 2, dtype=torch.long), state=[None])
    with pytest.raises(ValueError, match="input_ids must be"):
        model.generate(torch.zeros(1, 0, dtype=torch.long), 4)


@pytest.mark.parametrize("name, low, high", [("transformer", 100e6, 150e6), ("swax", 1.3e9, 1.5e9), ("swax-7b", 6.5e9, 7.5e9)])
def test_meta_device_build_counts_parameters_without_memory(name, low, high):
    assert low < SIZES[name] < high
