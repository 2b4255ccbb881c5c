"""ARMT around transformers causal LMs: small random models of each family, saved and loaded locally."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open

import layerzoo
from layerzoo.assemblies.armt import load_adapter, save_adapter, wrap
from layerzoo.testing import assert_close

transformers = pytest.importorskip("transformers")

VOCAB = 96
FAMILIES = {
    # SmolLM2 is the Llama architecture with tied embeddings.
    "smollm2": lambda: transformers.LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
        tie_word_embeddings=True, max_position_embeddings=64, vocab_size=VOCAB),
    "llama": lambda: transformers.LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4, max_position_embeddings=64,
        vocab_size=VOCAB),
    "gemma3": lambda: transformers.Gemma3TextConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
        head_dim=8, sliding_window=16, max_position_embeddings=64, vocab_size=VOCAB),
    "gpt2": lambda: transformers.GPT2Config(n_embd=32, n_layer=3, n_head=4, n_positions=64, vocab_size=VOCAB,
                                            bos_token_id=0, eos_token_id=0),
    "gpt_neox": lambda: transformers.GPTNeoXConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4, max_position_embeddings=64,
        vocab_size=VOCAB),
}


# Every family for the wrapping itself; two (a Llama and GPT-2) for what does not depend on it.
SOME = ["smollm2", "gpt2"]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """family -> (save_pretrained directory, the model), each built once: small and random."""
    made = {}

    def get(family: str):
        if family not in made:
            torch.manual_seed(0)
            model = transformers.AutoModelForCausalLM.from_config(FAMILIES[family]())
            path = tmp_path_factory.mktemp(family)
            model.save_pretrained(path)
            made[family] = path, model.eval()
        return made[family]

    return get


def tokens(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


def live(model):
    """Memory that writes from the start (W_v drawn instead of ARMT's zero)."""
    for memory in model.memories.values():
        torch.nn.init.normal_(memory.value.weight, std=0.2)
    return model


@pytest.mark.parametrize("family", FAMILIES)
def test_without_memory_one_segment_equals_the_unwrapped_model(checkpoints, family):
    path, base = checkpoints(family)
    ids = tokens(2, 12)
    model = wrap(path, segment_size=16, num_mem_tokens=4, memory_layers=[]).eval()
    with torch.no_grad():
        assert_close(model(ids), base(ids).logits, what="single segment, no memory")


@pytest.mark.parametrize("family", FAMILIES)
def test_with_memory_the_loss_is_finite_and_every_memory_parameter_learns(checkpoints, family):
    path, _ = checkpoints(family)
    model = live(wrap(path, segment_size=6, num_mem_tokens=2, memory_layers=[0, -1]))
    ids = tokens(2, 16)
    loss = model(ids, labels=ids)
    loss.backward()
    assert torch.isfinite(loss)
    for name, parameter in model.named_parameters():
        if not name.startswith("base."):
            assert parameter.grad is not None and torch.isfinite(parameter.grad).all() and parameter.grad.any(), name


@pytest.mark.parametrize("family", SOME)
def test_streaming_and_generation_match_full_forwards(checkpoints, family):
    """A transformers cache carries the current segment; generation reads the prompt segment by
    segment, decodes inside a segment and writes the memory when one fills."""
    path, _ = checkpoints(family)
    model = live(wrap(path, segment_size=5, num_mem_tokens=2, memory_layers=[1])).eval()
    ids = tokens(2, 13)
    with torch.no_grad():
        full = model(ids)
        state, pieces = None, []
        for piece in ids.split([3, 4, 1, 5], dim=1):
            logits, state = model(piece, state=state, return_state=True)
            pieces.append(logits)
        assert_close(torch.cat(pieces, dim=1), full, what="streamed", scale=10)
        generated = model.generate(ids[:, :7], 6)
        expected = ids[:, :7]
        for _ in range(6):
            expected = torch.cat((expected, model(expected)[:, -1].argmax(-1, keepdim=True)), dim=1)
    assert torch.equal(generated, expected)


@pytest.mark.parametrize("family", SOME)
def test_the_adapter_ships_apart_from_the_base_checkpoint(checkpoints, family, tmp_path):
    path, _ = checkpoints(family)
    model = live(wrap(path, segment_size=6, num_mem_tokens=2, memory_layers=[-1]))
    save_adapter(model, tmp_path / "armt.safetensors")
    loaded = load_adapter(path, tmp_path / "armt.safetensors")
    ids = tokens(1, 14)
    with torch.no_grad():
        assert torch.equal(loaded.eval()(ids), model.eval()(ids))
    with safe_open(str(tmp_path / "armt.safetensors"), framework="pt") as file:
        assert all(name.startswith(("memory_tokens", "memories.")) for name in file.keys())


@pytest.mark.parametrize("family", SOME)
def test_a_spec_wraps_a_local_checkpoint(checkpoints, family):
    path, base = checkpoints(family)
    model = layerzoo.build("armt-hf-example", [f"base.hf_checkpoint={path}", "armt.memory_layers=[-1]",
                                               "armt.segment_size=8", "armt.num_mem_tokens=2"]).eval()
    ids = tokens(1, 6)
    with torch.no_grad():
        assert_close(model(ids), base(ids).logits, what="neutral memory, one segment")
    with pytest.raises(ValueError, match="memory layer 12 is not a layer index of a 3-layer model"):
        layerzoo.build("armt-hf-example", [f"base.hf_checkpoint={path}"])
    with pytest.raises(ValueError, match="exceeds the base model's 64 positions"):
        wrap(path, segment_size=60, num_mem_tokens=8, memory_layers=[0])


@pytest.mark.parametrize("family", SOME)
def test_a_spec_builds_on_the_meta_device_without_reading_weights(checkpoints, family):
    """What FSDP and torchtitan shard before they fill: the same modules, nothing allocated."""
    from layerzoo.assemblies.build import vocab_size

    path, base = checkpoints(family)
    overrides = [f"base.hf_checkpoint={path}", "armt.memory_layers=[-1]", "armt.segment_size=8",
                 "armt.num_mem_tokens=2"]
    meta, built = layerzoo.build("armt-hf-example", overrides, device="meta"), layerzoo.build("armt-hf-example", overrides)
    assert all(tensor.is_meta for tensor in meta.state_dict().values())
    assert ({name: (t.shape, t.dtype) for name, t in meta.state_dict().items()}
            == {name: (t.shape, t.dtype) for name, t in built.state_dict().items()})
    assert vocab_size(layerzoo.load_spec("armt-hf-example", overrides)) == base.config.vocab_size


def test_a_checkpoint_that_ships_its_own_code_is_refused_without_running_it(tmp_path):
    folder = tmp_path / "custom"
    folder.mkdir()
    ran = tmp_path / "ran"
    (folder / "modeling_custom.py").write_text(f"open({str(ran)!r}, 'w').write('ran')\n")
    config = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
                                      vocab_size=VOCAB).to_dict()
    config["auto_map"] = {"AutoModelForCausalLM": "modeling_custom.CustomForCausalLM"}
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"needs its own code .*trust_remote_code=False\)$") as error:
        wrap(folder, segment_size=8, num_mem_tokens=2, memory_layers=[0])
    assert "\n" not in str(error.value) and not ran.exists()
