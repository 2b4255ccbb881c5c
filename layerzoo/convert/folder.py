"""A teacher's Hugging Face folder as files: config.json, the safetensors tensors by name (shapes
read from the headers), the tokenizer's largest token id. Nothing here allocates a weight or runs
code of the folder's: a folder that asks for its own code (`auto_map`) is refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import torch
from safetensors import SafetensorError, safe_open

from ..tasks.text.tokenizer import TOKENIZER_FILES
from .errors import ConvertError

WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"  # the shard map of a folder saved in several files


@dataclass(frozen=True)
class TeacherFolder:
    """path: the folder (absolute); config: its config.json; shapes: every tensor's shape, by
    name; files: the safetensors file holding each tensor."""

    path: Path
    config: dict[str, Any]
    shapes: dict[str, tuple[int, ...]]
    files: dict[str, Path]

    @classmethod
    def read(cls, path: str | Path) -> TeacherFolder:
        """ConvertError for a folder that is missing, has no readable config.json or safetensors
        weights, or asks for custom code."""
        path = Path(path).absolute()
        if not path.is_dir():
            raise ConvertError(f"{path}: no such folder (conversion reads a local Hugging Face model folder)")
        config = read_json(path / "config.json", "not a Hugging Face model folder (no config.json)")
        for name in ("config.json", "tokenizer_config.json"):
            data = config if name == "config.json" else read_json(path / name, None)
            if isinstance(data, dict) and data.get("auto_map"):
                raise ConvertError(f"{path / name}: auto_map asks for the folder's own code (trust_remote_code), "
                                   "which conversion never runs")
        shapes, files = {}, {}
        for file in weight_files(path):
            try:
                with safe_open(file, framework="pt") as weights:
                    for key in weights.keys():
                        shapes[key], files[key] = tuple(weights.get_slice(key).get_shape()), file
            except (SafetensorError, OSError) as error:
                raise ConvertError(f"{file}: not a readable safetensors file ({error})") from None
        return cls(path, config, shapes, files)

    def tensors(self, names: Iterable[str]) -> dict[str, torch.Tensor]:
        """The named tensors as stored, each file opened once."""
        by_file: dict[Path, list[str]] = {}
        for name in names:
            by_file.setdefault(self.files[name], []).append(name)
        found = {}
        for file, keys in by_file.items():
            with safe_open(file, framework="pt") as weights:
                found |= {key: weights.get_tensor(key) for key in keys}
        return found

    def tokenizer_size(self) -> int | None:
        """1 + the largest token id tokenizer.json can give (its model's vocabulary and its added
        tokens), or None without a tokenizer.json."""
        data = read_json(self.path / "tokenizer.json", None)
        if data is None:
            return None
        try:
            vocab = data["model"]["vocab"]
            ids = list(vocab.values()) if isinstance(vocab, dict) else [len(vocab) - 1]  # Unigram: a list, ids by place
            ids += [token["id"] for token in data.get("added_tokens") or ()]
            return 1 + max(int(i) for i in ids) if ids else 0
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise ConvertError(f"{self.path / 'tokenizer.json'}: not a tokenizers file ({error!r})") from None


def tokenizer_files(path: Path) -> list[Path]:
    """The tokenizer files in a folder (TOKENIZER_FILES that are there); conversion copies them."""
    return [path / name for name in TOKENIZER_FILES if (path / name).is_file()]


def read_json(path: Path, missing: str | None) -> Any:
    """The JSON in `path`; when it does not exist, ConvertError(missing), or None if missing is None."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        if missing is None:
            return None
        raise ConvertError(f"{path.parent}: {missing}") from None
    except (ValueError, UnicodeDecodeError, OSError) as error:
        raise ConvertError(f"{path}: not readable JSON ({error})") from None


def weight_files(path: Path) -> list[Path]:
    """model.safetensors, or the shards the index names; ConvertError when there are no
    safetensors weights or the index names a shard the folder lacks."""
    index = read_json(path / INDEX, None)
    if index is None:
        if not (path / WEIGHTS).is_file():
            raise ConvertError(f"{path}: no {WEIGHTS} or {INDEX} (conversion reads safetensors weights only, "
                               "never pickled .bin files)")
        return [path / WEIGHTS]
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict):
        raise ConvertError(f"{path / INDEX}: has no weight_map")
    shards = [path / str(file) for file in sorted(set(map(str, weight_map.values())))]
    for shard in shards:
        if not shard.is_file():
            raise ConvertError(f"{path / INDEX}: names the shard {shard.name}, which is not in the folder")
    return shards
