"""A short CPU training run: key-value pairs in earlier segments, the query in a later one.

Attention never crosses a segment boundary, so every right answer above chance is information the
associative memory carried across segments.
"""

from __future__ import annotations

import torch

import layerzoo

SEGMENT = 4
PAIRS = 2  # one pair per segment, then the query segment
FILLER, KEYS, VALUES = (0, 8), (8, 24), (24, 40)  # disjoint token ranges
CHANCE = 1 / (VALUES[1] - VALUES[0])
STEPS = 200


def recall_batch(batch: int, generator: torch.Generator) -> torch.Tensor:
    """(batch, (PAIRS + 1) * SEGMENT) tokens: segment i starts `key_i value_i`, the last segment ends
    `key_q value_q` for one of the keys; everything else is filler."""
    ids = torch.randint(*FILLER, (batch, (PAIRS + 1) * SEGMENT), generator=generator)
    keys = torch.stack([torch.randperm(KEYS[1] - KEYS[0], generator=generator)[:PAIRS] for _ in range(batch)]) + KEYS[0]
    values = torch.randint(*VALUES, (batch, PAIRS), generator=generator)
    ids[:, 0:PAIRS * SEGMENT:SEGMENT] = keys
    ids[:, 1:PAIRS * SEGMENT:SEGMENT] = values
    asked = torch.randint(0, PAIRS, (batch,), generator=generator)
    ids[:, -2] = keys[torch.arange(batch), asked]
    ids[:, -1] = values[torch.arange(batch), asked]
    return ids


def accuracy(model, ids: torch.Tensor) -> float:
    """How often the prediction at the query key is its value."""
    with torch.no_grad():
        return (model(ids)[:, -2].argmax(-1) == ids[:, -1]).float().mean().item()


def test_memory_carries_key_value_pairs_across_segments():
    torch.manual_seed(0)
    model = layerzoo.build({
        "model": {"d_model": 64, "n_layers": 2, "vocab_size": VALUES[1], "mixers": {"attention": {"n_heads": 4}},
                  "pattern": ["attention"]},
        "armt": {"segment_size": SEGMENT, "num_mem_tokens": 2, "d_mem": 32, "memory_layers": [0, 1]},
    })
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    generator = torch.Generator().manual_seed(1)
    for _ in range(STEPS):
        ids = recall_batch(32, generator)
        labels = torch.full_like(ids, -100)
        labels[:, -1] = ids[:, -1]  # only the answer is scored
        loss = model(ids, labels=labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    test = recall_batch(256, torch.Generator().manual_seed(2))
    recalled = accuracy(model.eval(), test)
    without_memory = accuracy(model, test[:, -SEGMENT:])  # the query segment alone: nothing to recall
    assert recalled > 3 * CHANCE, recalled
    assert without_memory < 2 * CHANCE < recalled, without_memory
