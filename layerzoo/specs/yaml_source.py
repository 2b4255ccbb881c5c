"""Reading YAML with the file and line of every key, so spec errors can point at them.

Only the safe loader is used (libyaml's or PyYAML's): a spec file can never construct arbitrary
Python objects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ..errors import SpecError
from .yaml_errors import syntax_error_line

KeyPath = tuple  # ("model", "mixers", "swa", "window")

# libyaml's parser when PyYAML has it (its wheels do): the same safe loading, faster.
SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Locations(dict):
    """Maps a key path to where it was set: 'file:line', or a '--set ...' override."""

    def where(self, path: KeyPath) -> str:
        """The location of `path`, or of its nearest ancestor that has one."""
        for end in range(len(path), -1, -1):
            if path[:end] in self:
                return self[path[:end]]
        return "<spec>"

    def source(self, path: KeyPath) -> str:
        """The file (or the `--set` flag) that set `path`: its location without the line."""
        where = self.where(path)
        return where if where.startswith("--set ") else where.rpartition(":")[0] or where

    def last_set(self, *paths: KeyPath) -> list[KeyPath]:
        """`paths` by when they were set, the last first: a spec merges each file over the files it
        extends and the `--set` flags over all, each placing the keys it sets after those it keeps."""
        order = {path: index for index, path in enumerate(self)}
        return sorted(paths, key=lambda path: order.get(path, -1), reverse=True)


def fail(locations: Locations, path: KeyPath, message: str) -> SpecError:
    """A SpecError naming where `path` was set and the dotted key."""
    key = ".".join(str(part) for part in path)
    return SpecError(f"{locations.where(path)}: {key}: {message}" if key else f"{locations.where(path)}: {message}")


def read_yaml(text: str, source: str) -> tuple[Any, Locations]:
    """Parse YAML text; returns the data and the location of each key path."""
    loader = SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return {}, Locations({(): source})
        data = loader.construct_document(node)
        locations = Locations({(): f"{source}:{node.start_mark.line + 1}"})
        _record(loader, node, (), source, locations)
    except yaml.YAMLError as error:
        line, problem = syntax_error_line(error, text)
        raise SpecError(f"{source}{'' if line is None else f':{line}'}: invalid YAML: {problem}") from None
    finally:
        loader.dispose()
    return data, locations


def _record(loader: SafeLoader, node: yaml.Node, path: KeyPath, source: str, locations: Locations,
            visited: set[int] | None = None) -> None:
    """Record where each key path below `node` is set. An aliased node is walked once, at its
    first use: later uses are located by the key that holds the alias, so the walk costs what the
    text does, not what the aliases expand to."""
    visited = set() if visited is None else visited
    if id(node) in visited:
        return
    visited.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen = set()
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node)  # ints stay ints: layer indices are keys
            where = f"{source}:{key_node.start_mark.line + 1}"
            if key in seen:
                raise SpecError(f"{where}: {'.'.join(map(str, path + (key,)))}: duplicate key")
            seen.add(key)
            locations[path + (key,)] = where
            _record(loader, value_node, path + (key,), source, locations, visited)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            locations[path + (index,)] = f"{source}:{item.start_mark.line + 1}"
            _record(loader, item, path + (index,), source, locations, visited)


def read_yaml_file(path: Path) -> tuple[Any, Locations]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise SpecError(f"{path}: cannot read spec: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise SpecError(f"{path}: not UTF-8 text (byte {error.start} is {error.object[error.start]:#04x})") from None
    return read_yaml(text, str(path))
