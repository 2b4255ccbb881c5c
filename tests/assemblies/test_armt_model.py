"""ARMT built from specs: segment recurrence, streaming, generation, loss, gradients, errors."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from safetensors.torch import save_file

import layerzoo
from layerzoo import SpecError, load_spec
from layerzoo.assemblies.armt import ARMT, load_adapter, save_adapter, wrap
from layerzoo.testing import assert_close, relative_rms_error, run_in_pieces, sequence_splits, state_numel

from tests.helpers.spec_errors import assert_spec_error

SEGMENT = 5
SPEC = {
    "extends": "armt-tiny",
    "model": {"d_model": 32, "n_layers": 3, "vocab_size": 64, "mixers": {"attention": {"n_heads": 4, "n_kv_heads": 2}}},
    "armt": {"segment_size": SEGMENT, "num_mem_tokens": 3, "d_mem": 8, "n_heads": 2, "memory_pattern": [True, False]},
}


def armt(seed: int = 0, **armt_options) -> ARMT:
    """A small ARMT whose memory is live from the start (W_v drawn instead of zero)."""
    torch.manual_seed(seed)
    model = layerzoo.build({**SPEC, "armt": {**SPEC["armt"], **armt_options}})
    for memory in model.memories.values():
        torch.nn.init.normal_(memory.value.weight, std=0.2)
    return model.eval()


def tokens(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 64, (batch, length), generator=torch.Generator().manual_seed(seed))


def test_the_spec_places_memory_by_pattern_or_indices():
    assert armt().memory_layers == (0, 2)
    assert layerzoo.build({**SPEC, "armt": {**SPEC["armt"], "memory_pattern": None, "memory_layers": [-1, 1]}}).memory_layers == (1, 2)


def test_one_call_equals_segment_by_segment_calls_with_the_memory_carried():
    model, ids = armt(), tokens(2, 4 * SEGMENT)
    with torch.no_grad():
        full = model(ids)
        state, pieces = None, []
        for segment in ids.split(SEGMENT, dim=1):
            logits, state = model(segment, state=state, return_state=True)
            pieces.append(logits)
    assert_close(torch.cat(pieces, dim=1), full, what="segment by segment")
    assert state.length == 0 and state.cache is None and all(m is not None for m in state.memory)


@pytest.mark.parametrize("length", [3 * SEGMENT, 3 * SEGMENT + 2])
def test_state_size_counts_the_streamed_state_and_stays_flat(length):
    """The memories alone at a segment boundary, plus the base's cache inside a segment."""
    model = armt()
    with torch.no_grad():
        _, state = model(tokens(2, length), return_state=True)
    assert state_numel(state) // 2 == model.state_size(length)
    assert model.state_size(length) == model.state_size(length + 10 * SEGMENT)


@given(data=st.data())
def test_any_split_equals_one_call(data):
    model, ids = armt(), tokens(2, data.draw(st.integers(1, 4 * SEGMENT)), data.draw(st.integers(0, 99)))
    pieces = data.draw(sequence_splits(ids.shape[1]))
    with torch.no_grad():
        full = model(ids)
        streamed, state = run_in_pieces(model, ids, pieces)
    assert_close(streamed, full, what=f"pieces {pieces}", scale=10)
    assert state.length == ids.shape[1] % SEGMENT


@given(prompt_length=st.integers(1, 3 * SEGMENT), seed=st.integers(0, 99))
def test_generate_equals_greedy_argmax_over_repeated_full_forwards(prompt_length, seed):
    model, prompt = armt(seed), tokens(2, prompt_length, seed)
    generated = model.generate(prompt, 2 * SEGMENT)
    ids = prompt
    with torch.no_grad():
        for _ in range(2 * SEGMENT):
            ids = torch.cat((ids, model(ids)[:, -1].argmax(-1, keepdim=True)), dim=1)
    assert torch.equal(generated, ids)


def test_information_crosses_segments_only_through_the_memory():
    ids = tokens(1, 3 * SEGMENT)
    changed = ids.clone()
    changed[:, 0] = (changed[:, 0] + 1) % 64
    for model, crosses in ((armt(), True), (armt(memory_pattern=[False]), False)):
        with torch.no_grad():
            later = model(ids)[:, SEGMENT:], model(changed)[:, SEGMENT:]
        assert (not torch.equal(*later)) == crosses


def test_two_armts_around_one_base_read_and_write_only_their_own_memories():
    """Memory hooks stay on the base model's layers from the ARMT's construction on; each ARMT's
    act only in its own passes, so a second ARMT around the same base changes neither."""
    first, x = armt(seed=0), tokens(2, 2 * SEGMENT + 2)
    expected_first = first(x)
    alone = ARMT(copy.deepcopy(first.base), first.armt_config)  # the copied hooks are another owner's
    for memory in alone.memories.values():
        torch.nn.init.normal_(memory.value.weight, std=0.2)
    second = ARMT(first.base, first.armt_config)
    second.load_state_dict(alone.state_dict())
    assert_close(first(x), expected_first, what="first ARMT beside a second")
    assert_close(second(x), alone(x), what="second ARMT beside the first")
    assert relative_rms_error(second(x), expected_first) > 1e-3  # the memories differ, and so do the outputs


def test_loss_is_next_token_cross_entropy_over_all_segments():
    model, ids = armt(), tokens(2, 3 * SEGMENT + 2)
    labels = ids.clone()
    labels[0, 4] = -100
    with torch.no_grad():
        loss = model(ids, labels=labels)
        logits = model(ids)
    expected = F.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten(), ignore_index=-100)
    torch.testing.assert_close(loss, expected)


def gradients(model: ARMT, ids: torch.Tensor) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    model(ids, labels=ids).backward()
    return {name: torch.zeros_like(p) if p.grad is None else p.grad for name, p in model.named_parameters()}


def test_every_memory_parameter_gets_a_gradient_and_checkpointing_changes_none():
    ids = tokens(2, 3 * SEGMENT)
    plain = gradients(armt(), ids)
    assert all(torch.isfinite(g).all() and g.any() for name, g in plain.items() if "memor" in name)
    checkpointed = gradients(armt(checkpoint_segments=True), ids)
    for name, grad in plain.items():
        assert_close(checkpointed[name], grad, what=name)


def test_truncation_keeps_memory_gradients_to_the_last_segments():
    ids = tokens(2, 3 * SEGMENT)
    full = gradients(armt(), ids)
    assert all(torch.equal(g, full[n]) for n, g in gradients(armt(truncate_segments=4), ids).items())
    only_last = gradients(armt(truncate_segments=1), ids)  # no write reaches a later read
    assert not only_last["memory_tokens"].any() and not only_last["memories.0.key.weight"].any()
    assert only_last["memories.0.query.weight"].any()
    two = gradients(armt(truncate_segments=2), ids)  # the second segment's write reaches the third
    assert two["memory_tokens"].any() and not torch.equal(two["memory_tokens"], full["memory_tokens"])


def test_adapter_round_trip_holds_only_the_armt_weights(tmp_path):
    model, ids = armt(), tokens(1, 2 * SEGMENT + 1)
    save_adapter(model, tmp_path / "adapter.safetensors")
    fresh_base = armt(seed=1).base
    fresh_base.load_state_dict(model.base.state_dict())
    loaded = load_adapter(fresh_base, tmp_path / "adapter.safetensors").eval()
    with torch.no_grad():
        assert torch.equal(loaded(ids), model(ids))
    assert loaded.armt_config == model.armt_config
    assert not any(name.startswith("base.") for name in loaded.adapter_state_dict())


def test_bad_inputs_get_one_line_errors(tmp_path):
    model = armt()
    cases = [
        (lambda: model(torch.zeros(1, 0, dtype=torch.long)), "input_ids must be"),
        (lambda: model(torch.zeros(1, 3)), "input_ids must be"),
        (lambda: model(tokens(1, 3), labels=tokens(1, 4)), "labels must have the shape"),
        (lambda: model(tokens(1, 3), state=[None]), "state must be the ARMTState"),
        (lambda: wrap(model.base, segment_size=0, num_mem_tokens=1, memory_layers=[0]), "segment_size"),
        (lambda: wrap(model.base, segment_size=4, num_mem_tokens=1, memory_layers=[3]), "not a layer index"),
        (lambda: wrap(model.base, segment_size=4, num_mem_tokens=1), "exactly one of memory_layers"),
        (lambda: wrap(torch.nn.Linear(2, 2), segment_size=4, num_mem_tokens=1, memory_layers=[]), "wraps a layerzoo"),
        (lambda: wrap(tmp_path, segment_size=4, num_mem_tokens=1, memory_layers=[]), "no config.json"),
    ]
    for call, words in cases:
        with pytest.raises((ValueError, TypeError, OSError)) as error:
            call()
        assert words in str(error.value) and "\n" not in str(error.value), str(error.value)


def test_a_file_that_is_no_adapter_is_refused(tmp_path):
    save_file({"x": torch.zeros(1)}, str(tmp_path / "other.safetensors"))
    with pytest.raises(ValueError, match="not an ARMT adapter"):
        load_adapter(armt().base, tmp_path / "other.safetensors")


BASE = """\
model:
  d_model: 32
  n_layers: 4
  vocab_size: 64
  mixers:
    attention: {n_heads: 4}
  pattern: [attention]
armt:
  segment_size: 8
  num_mem_tokens: 2
  memory_layers: [1, -1]
"""

MALFORMED = [
    # (replace this, with this, expected line, words in the message)
    ("segment_size: 8", "segment_size: 0", 9, ["armt.segment_size", "must be between 1 and"]),
    ("segment_size: 8", "segmnt_size: 8", 9, ["armt.segmnt_size", "did you mean 'segment_size'"]),
    ("  num_mem_tokens: 2\n", "", 8, ["armt", "missing required key 'num_mem_tokens'"]),
    ("memory_layers: [1, -1]", "memory_layers: [1, 4]", 11, ["armt.memory_layers.1", "not a layer index of a 4-layer model"]),
    ("memory_layers: [1, -1]", "memory_layers: [3, -1]", 11, ["armt.memory_layers.1", "layer 3 is listed twice"]),
    ("memory_layers: [1, -1]", "memory_layers: [1, true]", 11, ["armt.memory_layers.1", "expected int, got True"]),
    ("memory_layers: [1, -1]", "memory_layers: [1]\n  memory_pattern: [true]", 11, ["armt.memory_layers", "exactly one of"]),
    ("memory_layers: [1, -1]", "memory_pattern: [1, 0]", 11, ["armt.memory_pattern.0", "expected bool, got 1"]),
    ("memory_layers: [1, -1]", "memory_layers: [1]\n  truncate_segments: 0", 12, ["armt.truncate_segments", ">= 1"]),
    ("num_mem_tokens: 2", "num_mem_tokens: 2\n  d_mem: 6\n  n_heads: 4", 12, ["armt.n_heads", "d_mem 6 is not divisible"]),
    ("num_mem_tokens: 2", "num_mem_tokens: 2\n  d_mem: 6\n  n_heads: 3", 12, ["armt.n_heads", "d_model 32 is not divisible"]),
    ("armt:", "base: {hf_checkpoint: somewhere}\narmt:", 8, ["base", "replaces 'model'"]),
]


@pytest.mark.parametrize("old, new, line, words", MALFORMED, ids=[case[3][-1] for case in MALFORMED])
def test_malformed_armt_sections_name_file_line_and_key(tmp_path, old, new, line, words):
    assert old in BASE
    path = tmp_path / "spec.yaml"
    path.write_text(BASE.replace(old, new, 1))
    assert_spec_error(path, line, words)


def test_a_base_checkpoint_needs_an_armt_section_and_dumps_without_a_model(tmp_path):
    with pytest.raises(SpecError, match="base: a 'base' checkpoint is wrapped by an 'armt' section"):
        load_spec({"base": {"hf_checkpoint": "x"}})
    spec = load_spec("armt-hf-example", ["base.hf_checkpoint=/models/mine"])
    assert spec.model is None and spec.hf_checkpoint == "/models/mine"
    assert load_spec(spec.to_dict()).to_dict() == spec.to_dict()


def test_malformed_adapters_are_one_line_and_allocate_nothing_the_file_does_not_hold(tmp_path):
    model = armt()
    path = tmp_path / "adapter.safetensors"
    save_adapter(model, path)
    tensors = {name: tensor.contiguous() for name, tensor in model.adapter_state_dict().items()}
    config = model.armt_config.to_dict()

    def forged(name: str, **changes) -> Path:
        metadata = {"format": "layerzoo-armt-adapter", "armt": json.dumps({**config, **changes})}
        save_file(tensors, str(tmp_path / name), metadata=metadata)
        return tmp_path / name

    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(path.read_bytes()[:-100])
    no_config = tmp_path / "no_config.safetensors"
    save_file(tensors, str(no_config), metadata={"format": "layerzoo-armt-adapter"})
    cases = [
        (forged("huge.safetensors", d_mem=10**9), "d_mem: must be between 1 and 65536"),
        (forged("large.safetensors", d_mem=2**16), "does not match the config (65536,"),
        (forged("tokens.safetensors", num_mem_tokens=1000), "does not hold the config's 1000 tokens"),
        (forged("zero.safetensors", segment_size=0), "segment_size: must be between 1 and"),
        (truncated, "not a readable safetensors file"),
        (no_config, "has no 'armt' config"),
    ]
    for bad, words in cases:
        with pytest.raises(ValueError) as error:
            load_adapter(model.base, bad)
        assert words in str(error.value) and "\n" not in str(error.value), str(error.value)
