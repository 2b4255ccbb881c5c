"""Spec files as raw data: shipped names and paths, `extends` chains deep-merged, `--set` overrides.

Nothing here knows what a key means; specs/spec.py hands the merged data to the sections' readers.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from ..errors import SpecError, unknown_name_message
from .yaml_source import KeyPath, Locations, fail, read_yaml_file

SHIPPED_DIR = Path(__file__).parent / "shipped"
# Far deeper than any spec family needs, and shallow enough for Python's recursion limit.
MAX_EXTENDS = 64


def shipped_specs() -> list[str]:
    """Names of the specs that ship with layerzoo.

    Returns:
        The names (the YAML files' stems, "swa-full", ...), sorted; each is a valid `spec` for
            `load_spec` and `build`.
    """
    return sorted(path.stem for path in SHIPPED_DIR.glob("*.yaml"))


def shipped_path(name: str) -> Path:
    path = SHIPPED_DIR / f"{name}.yaml"
    if not path.is_file():
        raise SpecError(unknown_name_message("spec", name, shipped_specs()))
    return path


def locate(spec: str | Path, relative_to: Path | None = None) -> Path:
    """A spec argument -> its file: an existing path (relative to the extending file), else a shipped name."""
    candidate = Path(spec)
    if relative_to is not None and not candidate.is_absolute():
        candidate = relative_to / candidate
    if candidate.is_file():
        return candidate
    if str(spec).endswith((".yaml", ".yml")) or "/" in str(spec):
        raise SpecError(f"{spec}: no such spec file")
    return shipped_path(str(spec))


def load_raw(path: Path, chain: tuple[Path, ...] = ()) -> tuple[dict, Locations]:
    """Read a spec file with its `extends` chain deep-merged underneath it."""
    if path.resolve() in chain:
        cycle = " -> ".join(str(p) for p in chain + (path.resolve(),))
        raise SpecError(f"{path}: extends cycle: {cycle}")
    if len(chain) == MAX_EXTENDS:
        raise SpecError(f"{chain[0]}: its extends chain is more than {MAX_EXTENDS} files deep (at {path})")
    data, locations = read_yaml_file(path)
    if not isinstance(data, dict):
        raise fail(locations, (), f"a spec must be a mapping, got {type(data).__name__}")
    parent = data.get("extends")
    if parent is None:
        return data, locations
    if not isinstance(parent, str):
        raise fail(locations, ("extends",), "must be a spec name or a path")
    try:
        base_path = locate(parent, relative_to=path.parent)
    except SpecError as error:
        raise fail(locations, ("extends",), str(error)) from None
    base, base_locations = load_raw(base_path, chain + (path.resolve(),))
    base.pop("name", None)  # a name belongs to its own file
    child = {key: value for key, value in data.items() if key != "extends"}
    return deep_merge(base, child, base_locations, locations)


def deep_merge(base: dict, override: dict, base_locations: Locations,
               override_locations: Locations) -> tuple[dict, Locations]:
    """Mappings merge key by key; anything else (lists included) is replaced whole. A merged
    mapping keeps the location where the base set it; everything else is located where it was
    last set."""
    replaced: set[KeyPath] = set()
    merged = _merge_into(copy.deepcopy(base), override, (), replaced)
    locations = Locations({path: where for path, where in base_locations.items()
                           if not any(path[:end] in replaced for end in range(1, len(path) + 1))})
    for path, where in override_locations.items():
        if path not in locations:  # merged mappings are the paths still there
            locations[path] = where
    return merged, locations


def _merge_into(target: dict, override: dict, path: KeyPath, replaced: set[KeyPath]) -> dict:
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge_into(target[key], value, path + (key,), replaced)
        else:
            target[key] = copy.deepcopy(value)
            replaced.add(path + (key,))
    return target


def apply_set(data: dict, locations: Locations, assignment: str) -> None:
    """Apply one `dotted.key=value` override in place; the value is parsed as YAML."""
    key, sep, text = assignment.partition("=")
    if not sep or not key.strip():
        raise SpecError(f"--set {assignment}: expected KEY=VALUE, e.g. model.d_model=256")
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        raise SpecError(f"--set {assignment}: the value is not valid YAML") from None
    parts = [int(p) if p.lstrip("-").isdigit() else p for p in key.strip().split(".")]
    if parts[0] == "extends":
        raise SpecError(f"--set {assignment}: extends cannot be set from the command line (the chain is read "
                        "before overrides); write a spec file that extends the one you want")
    target = data
    for depth, part in enumerate(parts[:-1]):
        target = target.setdefault(part, {})
        if not isinstance(target, dict):
            raise SpecError(f"--set {assignment}: {'.'.join(map(str, parts[: depth + 1]))} is not a mapping")
    target[parts[-1]] = value
    here = tuple(parts)
    for old in [p for p in locations if p[: len(here)] == here]:
        del locations[old]
    locations[here] = f"--set {assignment}"
