"""A conversion pattern: which mixer each of the teacher's layers becomes.

Three forms, each naming mixer configs: a target mixer's registered name (its options derived
from the teacher, the rest at their defaults) or a config declared under `mixers`:

- a rule string, `CYCLE[; NAME@I,J...]...`: CYCLE is `name[*count]` items, comma-separated,
  repeated over the layers; each `NAME@I,J` then puts NAME at those layers (negative: from the
  end). `gated_deltanet*3,attention` is a 3:1 hybrid ending each group of four with attention;
  `gated_deltanet; attention@0,-1` converts all but the first and last layers;
- a list of names, cycled over the layers (one per layer when it is as long);
- a mapping, a spec's `model:` section without what the teacher fixes: `mixers` ({name: {type,
  options...}}), and `pattern` (a list or a rule, cycled) or `layers` (one name per layer).
  d_model, vocab_size and n_layers may be given if they are the teacher's. A YAML file's path
  reads as its `model:` section.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from ..errors import did_you_mean, unknown_name_message
from ..registry import list_mixers, list_targets
from ..specs import ModelConfig
from .errors import ConvertError

TEACHER_KEYS = ("d_model", "vocab_size", "n_layers")


@dataclass(frozen=True)
class Plan:
    """names: the mixer config of each layer; mixers: each named config's (type, options as given)."""

    names: tuple[str, ...]
    mixers: dict[str, tuple[str, dict[str, Any]]]


def read_pattern(pattern: str | Path | Sequence[str] | Mapping[str, Any], teacher: ModelConfig) -> Plan:
    """The Plan of `pattern` over the teacher's layers; ConvertError naming what is wrong."""
    if isinstance(pattern, Path) or (isinstance(pattern, str) and pattern.strip().endswith((".yaml", ".yml"))):
        pattern = read_yaml(Path(pattern))
    if isinstance(pattern, str):
        return resolve(rule_names(pattern, teacher.n_layers, "pattern"), {})
    if isinstance(pattern, Mapping):
        return read_mapping(pattern, teacher)
    if isinstance(pattern, Sequence) and pattern and all(isinstance(name, str) for name in pattern):
        return resolve(cycled(list(pattern), teacher.n_layers), {})
    raise ConvertError(f"pattern: expected a rule string, a list of mixer names or a mapping, got {pattern!r:.80}")


def with_options(pattern: str, assignments: Sequence[str]) -> str | dict[str, Any]:
    """The command line's pattern (a rule or a YAML file) with `--set MIXER.OPTION=VALUE`
    assignments (VALUE read as YAML) added to its mixers."""
    if not assignments:
        return pattern
    section = dict(read_yaml(Path(pattern))) if pattern.strip().endswith((".yaml", ".yml")) else {"pattern": pattern}
    mixers = {name: dict(body or {}) for name, body in (section.get("mixers") or {}).items()}
    for assignment in assignments:
        key, equals, value = assignment.partition("=")
        name, dot, option = key.strip().partition(".")
        if not (equals and dot and name and option):
            raise ConvertError(f"--set {assignment!r}: expected MIXER.OPTION=VALUE, e.g. swa.window=512")
        try:
            mixers.setdefault(name, {})[option] = yaml.safe_load(value)
        except yaml.YAMLError:
            raise ConvertError(f"--set {assignment!r}: {value!r} is not a YAML value") from None
    return section | {"mixers": mixers}


def read_yaml(path: Path) -> Any:
    """A spec file's `model:` section (or the file's whole mapping when it has none)."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise ConvertError(f"{path}: not a readable YAML file ({str(error).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise ConvertError(f"{path}: expected a mapping with a model: section")
    return data.get("model", data)


def read_mapping(section: Mapping[str, Any], teacher: ModelConfig) -> Plan:
    known = ("mixers", "pattern", "layers", *TEACHER_KEYS)
    for key, value in section.items():
        if key not in known:
            raise ConvertError(f"pattern: {key}: not read from a pattern{did_you_mean(str(key), known)} (known: "
                               f"{', '.join(known)}; the rest of the model is the teacher's)")
        if key in TEACHER_KEYS and value is not None and value != getattr(teacher, key):
            raise ConvertError(f"pattern: {key} is {value!r} but the teacher's is {getattr(teacher, key)}; leave it out")
    mixers = section.get("mixers") or {}
    if not isinstance(mixers, Mapping) or not all(isinstance(body, (Mapping, type(None))) for body in mixers.values()):
        raise ConvertError("pattern: mixers must map names to mappings of options ({name: {type: ..., option: value}})")
    if (section.get("pattern") is None) == (section.get("layers") is None):
        raise ConvertError("pattern: give exactly one of 'pattern' (cycled over the layers) or 'layers' (one per layer)")
    if section.get("layers") is not None:
        names = section["layers"]
        if not isinstance(names, Sequence) or isinstance(names, str) or len(names) != teacher.n_layers:
            raise ConvertError(f"pattern: layers must list one mixer name for each of the teacher's {teacher.n_layers} "
                               f"layers, got {names!r:.80}")
        names = list(names)
    elif isinstance(section["pattern"], str):
        names = rule_names(section["pattern"], teacher.n_layers, "pattern")
    elif isinstance(section["pattern"], Sequence) and section["pattern"]:
        names = cycled(list(section["pattern"]), teacher.n_layers)
    else:
        raise ConvertError(f"pattern: pattern must be a rule string or a list of names, got {section['pattern']!r:.80}")
    unused = [str(name) for name in mixers if name not in names]
    if unused:  # options for a mixer no layer becomes (a misspelt name, a --set for another pattern) are not dropped silently
        raise ConvertError(f"pattern: mixers.{unused[0]}: options given, but no layer becomes {unused[0]!r} (the "
                           f"layers become {', '.join(map(str, dict.fromkeys(names)))})")
    return resolve(names, {str(name): dict(body or {}) for name, body in mixers.items()})


def rule_names(rule: str, n_layers: int, where: str) -> list[str]:
    """The names a rule string gives the layers (the module docstring's grammar)."""
    cycle, *placements = [part.strip() for part in rule.split(";")]
    items = []
    for item in cycle.split(","):
        name, _, count = (piece.strip() for piece in item.partition("*"))
        if not name or (count and not (count.isdigit() and int(count) > 0)):
            raise ConvertError(f"{where}: {item.strip()!r} in {rule!r} is not NAME or NAME*COUNT (COUNT a positive integer)")
        items += [name] * (int(count) if count else 1)
    names = cycled(items, n_layers)
    for placement in placements:
        name, at, indices = (piece.strip() for piece in placement.partition("@"))
        if not name or not at:
            raise ConvertError(f"{where}: {placement!r} in {rule!r} is not NAME@I,J,... (layer indices)")
        for text in indices.split(","):
            try:
                index = int(text)
            except ValueError:
                raise ConvertError(f"{where}: {text.strip()!r} in {placement!r} is not a layer index") from None
            if not -n_layers <= index < n_layers:
                raise ConvertError(f"{where}: layer {index} is out of range: the teacher has {n_layers} layers "
                                   f"(0 to {n_layers - 1}, or -{n_layers} to -1 from the end)")
            names[index] = name
    return names


def cycled(names: list[Any], n_layers: int) -> list[Any]:
    return [names[index % len(names)] for index in range(n_layers)]


def resolve(names: list[Any], declared: dict[str, dict[str, Any]]) -> Plan:
    """Each named config's type and options: a declared one's, or a target's own name with none."""
    targets = list_targets()
    known = {**dict.fromkeys(targets), **declared}
    mixers = {}
    for name in dict.fromkeys(names):
        if not isinstance(name, str) or name not in known:
            raise ConvertError(f"pattern: {unknown_name_message('mixer', str(name), known)}")
        options = dict(declared.get(name, {}))
        kind = options.pop("type", name)
        if kind in list_mixers() and kind not in targets:
            raise ConvertError(f"pattern: mixers.{name}: {kind!r} has no initialisation from attention "
                               f"(targets: {', '.join(targets)})")
        if kind not in targets:
            raise ConvertError(f"pattern: mixers.{name}: {unknown_name_message('mixer type', str(kind), targets)}")
        mixers[name] = (kind, options)
    return Plan(tuple(names), mixers)
