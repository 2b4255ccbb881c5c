"""Hostile spec files through `layerzoo describe`, in-process: each either describes its model or
fails with the project's one-line error (exit code 2), never a traceback, and reading it stays
within a memory budget whatever its numbers and aliases."""

from __future__ import annotations

import contextlib
import copy
import difflib
import functools
import io
import tracemalloc

import yaml
from hypothesis import given, strategies as st

from layerzoo.cli import main
from layerzoo.specs.files import shipped_path

SEEDS = ["swa-full-tiny", "swax-tiny", "armt-tiny", "swax-gdn-tiny"]
HOSTILE_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.sampled_from([0, -1, 1, 2**31, 2**63]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8), st.lists(st.integers(-3, 3), max_size=4),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=3),
)
# Peak Python memory of reading and describing one tiny spec (the model is built on the meta
# device): far below what expanding aliases or materialising huge sizes would take.
MEMORY_BUDGET = 64 * 2**20


@functools.cache
def warm_up() -> None:
    """Describe each seed once, so first-use imports do not count against the budget."""
    with contextlib.redirect_stdout(io.StringIO()):
        for name in SEEDS:
            main(["describe", name, "--seq-len", "64"])


def paths(data, prefix=()):
    """Every key path of a nested mapping/list, parents before children."""
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        yield prefix + (key,)
        yield from paths(value, prefix + (key,))


def parent_of(data, path):
    for key in path[:-1]:
        data = data[key]
    return data


@st.composite
def hostile_specs(draw):
    """A shipped tiny spec with a few of its values replaced, keys misspelt or dropped, or
    subtrees repeated (which YAML writes as anchors and aliases)."""
    data = yaml.safe_load(shipped_path(draw(st.sampled_from(SEEDS))).read_text())
    for _ in range(draw(st.integers(1, 4))):
        candidates = list(paths(data))
        if not candidates:
            break
        path = draw(st.sampled_from(candidates))
        parent, key = parent_of(data, path), path[-1]
        action = draw(st.sampled_from(["value", "misspell", "drop", "alias"]))
        if action == "value":
            parent[key] = draw(HOSTILE_VALUES)
        elif action == "misspell" and isinstance(parent, dict) and isinstance(key, str):
            letters = list(key)
            letters.insert(draw(st.integers(0, len(letters))), draw(st.sampled_from("aeiost_")))
            parent["".join(letters)] = parent.pop(key)
        elif action == "drop":
            parent.pop(key) if isinstance(parent, dict) else parent.remove(parent[key])
        elif action == "alias":
            shared = copy.deepcopy(parent[key])
            parent[key] = [shared, shared] if draw(st.booleans()) else shared
    return data


@given(spec=hostile_specs(), overrides=st.lists(st.tuples(st.sampled_from(
    ["model.d_model", "model.n_layers", "model.mixers.swa.window", "model.ffn", "training.steps", "armt.d_mem",
     "model.pattern", "extends", "model.norm.eps"]), HOSTILE_VALUES), max_size=2))
def test_a_hostile_spec_describes_or_fails_in_one_line(spec, overrides, tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz") / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    argv = ["describe", str(path), "--seq-len", "64"]
    for key, value in overrides:
        argv += ["--set", f"{key}={yaml.safe_dump(value, default_flow_style=True).strip().removesuffix('...').strip()}"]
    warm_up()
    stderr = io.StringIO()
    tracemalloc.start()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(stderr):
            code = main(argv)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    err = stderr.getvalue()
    assert code in (0, 2)
    if code == 2:
        assert err.startswith("layerzoo: error: ") and len(err.strip().splitlines()) == 1, err
    assert peak < MEMORY_BUDGET, f"{peak / 2**20:.0f} MiB"


def test_the_mutations_reach_the_errors_they_aim_at():
    """The generator can write what it means to: a misspelt key is one edit from the real one."""
    assert difflib.get_close_matches("windoww", ["window", "n_heads"], n=1) == ["window"]
