"""ARMT around a pretrained LM as its users run it: generation that stops at end tokens and takes
left-padded batches, a frozen base by default, adapters that never silently drop base changes,
and the spec form `base:` trained on text. A tiny random Llama stands in for the real model."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import layerzoo
from layerzoo.assemblies.armt import load_adapter, save_adapter, wrap

transformers = pytest.importorskip("transformers")

from tests.helpers.conversion import write_text, write_tokenizer  # noqa: E402
from tests.helpers.hf_teachers import VOCAB, TeacherCase, save_teacher  # noqa: E402

ARMT_OPTIONS = {"segment_size": 6, "num_mem_tokens": 2, "d_mem": 16, "memory_layers": [-1]}


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """A tiny Llama folder with tied embeddings (SmolLM2's shape) and a tokenizer trained on a
    small corpus: (folder, corpus)."""
    root = tmp_path_factory.mktemp("llama")
    corpus = write_text(root / "corpus", documents=4, words=100)
    folder = save_teacher(TeacherCase("llama", tied=True), root / "teacher", tokenizer_size=None)
    return write_tokenizer(corpus, folder), corpus


def live(model):
    """Memory that writes from the start (W_v drawn instead of ARMT's zero)."""
    torch.manual_seed(1)
    for memory in model.memories.values():
        torch.nn.init.normal_(memory.value.weight, std=0.2)
    return model.eval()


def prompts(batch: int, length: int, seed: int) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


def until_stop(row: torch.Tensor, start: int, stops: set[int]) -> torch.Tensor:
    """row up to and with its first new token (at or after `start`) in stops."""
    for position in range(start, len(row)):
        if int(row[position]) in stops:
            return row[:position + 1]
    return row


@given(seed=st.integers(0, 2**16), pick=st.integers(0, 7), listed=st.booleans())
def test_generation_stops_at_the_configs_end_tokens_and_at_stop_ids(llama, seed, pick, listed):
    folder, _ = llama
    model = live(wrap(folder, **ARMT_OPTIONS))
    prompt = prompts(1, 5, seed)
    free = model.generate(prompt, 8, stop_ids=())
    stop = int(free[0, 5 + pick])
    expected = until_stop(free[0], 5, {stop})
    assert torch.equal(model.generate(prompt, 8, stop_ids=[stop])[0], expected)
    # The default: generation_config's eos_token_id, which may be a list, else the config's.
    other = VOCAB - 1 if stop != VOCAB - 1 else 0
    model.base.generation_config.eos_token_id = [other, stop] if listed else None
    model.base.config.eos_token_id = None if listed else stop
    # a listed end token stops a row too, wherever it comes first
    assert torch.equal(model.generate(prompt, 8)[0], until_stop(free[0], 5, {other, stop} if listed else {stop}))


@given(seed=st.integers(0, 2**16), lengths=st.lists(st.integers(1, 9), min_size=2, max_size=3))
def test_left_padded_rows_generate_as_if_alone_and_stopped_rows_repeat_their_end_token(llama, seed, lengths):
    folder, _ = llama
    model = live(wrap(folder, **ARMT_OPTIONS))
    longest = max(lengths)
    rows = [prompts(1, length, seed + index)[0] for index, length in enumerate(lengths)]
    ids = torch.stack([torch.cat((torch.zeros(longest - len(row), dtype=torch.long), row)) for row in rows])
    mask = torch.stack([(torch.arange(longest) >= longest - len(row)).long() for row in rows])
    alone = [model.generate(row[None], 7, stop_ids=())[0] for row in rows]
    stops = {int(alone[0][len(rows[0]) + 2])}  # row 0 stops after 3 new tokens, the others maybe
    batched = model.generate(ids, 7, attention_mask=mask, stop_ids=sorted(stops))
    for row, prompt, free in zip(batched, rows, alone):
        expected = until_stop(free, len(prompt), stops)
        new = row[longest:]
        assert torch.equal(new[:len(expected) - len(prompt)], expected[len(prompt):])
        assert set(new[len(expected) - len(prompt):].tolist()) <= {int(expected[-1])}


def test_a_stop_id_outside_the_vocabulary_is_one_line_before_any_work(llama):
    model = wrap(llama[0], **ARMT_OPTIONS)
    with pytest.raises(ValueError, match=rf"^stop_ids must be token ids in \[0, {VOCAB}\), got {VOCAB}$"):
        model.generate(prompts(1, 3, 0), 4, stop_ids=[VOCAB])


def test_wrap_freezes_the_base_unless_asked_to_train_it(llama):
    folder, _ = llama
    frozen = wrap(folder, **ARMT_OPTIONS)
    ids = prompts(2, 13, 0)
    frozen(ids, labels=ids).backward()
    assert all(p.grad is None and not p.requires_grad for p in frozen.base.parameters())
    assert all(p.grad is not None for name, p in frozen.named_parameters() if not name.startswith("base."))
    trained = wrap(folder, train_base=True, **ARMT_OPTIONS)
    trained(ids, labels=ids).backward()
    assert all(p.grad is not None for p in trained.base.parameters())
    with pytest.raises(TypeError, match="^train_base must be True or False, got 'yes'$"):
        wrap(folder, train_base="yes", **ARMT_OPTIONS)


def test_save_adapter_refuses_a_changed_base_unless_it_saves_the_base_too(llama, tmp_path):
    folder, _ = llama
    model = live(wrap(folder, train_base=True, **ARMT_OPTIONS)).train()
    ids = prompts(2, 13, 0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model(ids, labels=ids).backward()
    optimizer.step()
    with pytest.raises(ValueError, match=r"^save_adapter: \d+ base parameter\(s\) changed since wrap .* "
                                         r"pass include_base=True to save them too$"):
        save_adapter(model, tmp_path / "memory-only.safetensors")
    assert not (tmp_path / "memory-only.safetensors").exists()
    save_adapter(model, tmp_path / "whole.safetensors", include_base=True)
    loaded = load_adapter(folder, tmp_path / "whole.safetensors")
    with torch.no_grad():
        assert torch.equal(loaded.eval()(ids), model.eval()(ids))


def test_an_unchanged_frozen_base_saves_the_memory_only(llama, tmp_path):
    folder, _ = llama
    model = live(wrap(folder, **ARMT_OPTIONS)).train()
    ids = prompts(2, 13, 0)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    model(ids, labels=ids).backward()
    optimizer.step()
    save_adapter(model, tmp_path / "memory.safetensors")
    loaded = load_adapter(folder, tmp_path / "memory.safetensors")
    with torch.no_grad():
        assert torch.equal(loaded.eval()(ids), model.eval()(ids))


def test_the_shipped_text_spec_trains_the_memory_of_a_local_checkpoint(llama, tmp_path):
    from layerzoo.training import train

    folder, corpus = llama
    overrides = [f"base.hf_checkpoint={folder}", f"training.task.tokenizer={folder}",
                 f"training.task.files=['{corpus}/*.txt']", "training.task.holdout=0.25",
                 "armt.segment_size=8", "armt.num_mem_tokens=2", "armt.d_mem=16", "armt.memory_layers=[-1]",
                 "training.seq_len=20", "training.steps=2", "training.batch_size=2",
                 "training.eval={every: 2, samples: 2, lengths: [20], documents: 1, batch_size: 2}"]
    torch.manual_seed(0)  # the spec's training.seed: the weights train() starts from
    before = {name: p.detach().clone() for name, p in layerzoo.build("armt-hf-text", overrides).named_parameters()}
    result = train("armt-hf-text", overrides, run_dir=tmp_path / "run", progress=False)
    after = dict(result.model.named_parameters())
    assert all(torch.equal(after[name], before[name]) for name in before if name.startswith("base."))
    assert not torch.equal(after["memory_tokens"], before["memory_tokens"])
    save_adapter(result.model, tmp_path / "memory.safetensors")  # the frozen base: nothing is lost
    from layerzoo.evaluation.reading import load_run

    _, loaded, task = load_run(str(tmp_path / "run"))  # what `layerzoo eval RUN` reads: no model: section
    assert task.split == "eval"
    with torch.no_grad():
        ids = torch.randint(0, VOCAB, (1, 12))
        assert torch.equal(loaded.eval()(ids), result.model.eval()(ids))
