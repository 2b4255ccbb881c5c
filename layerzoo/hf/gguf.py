"""A GGUF file (llama.cpp's format) as a Hugging Face folder: its tensors dequantized by
transformers' GGUF reader into config.json + model.safetensors, with its tokenizer and chat
template, so that every reader of a model folder (convert, eval, ARMT's wrap) takes a GGUF too.

The file's header is checked first (`inspect_gguf`: readable and whole, a supported architecture
and quantization types, a tokenizer that fits the vocabulary, memory enough for the dequantized
weights), each failure a GGUFError in one line, before any tensor is read. The folder is built once
per file content and dtype in the layerzoo cache ($LAYERZOO_CACHE, else $XDG_CACHE_HOME/layerzoo,
else ~/.cache/layerzoo; under gguf/), written whole or not at all, with the checked header beside
the weights: a later read hashes the file and checks the architecture there, parsing no metadata.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Collection

from ..errors import LayerzooError
from ..tasks.text.cache import built, cache_root, file_hash

SUFFIX = ".gguf"
INSTALL = "reading a GGUF file needs the gguf and transformers packages: pip install 'layerzoo[gguf]'"
# GGUF architectures transformers' reader maps onto its model classes; its own list also holds the
# metadata sections "general" and "tokenizer".
NOT_ARCHITECTURES = ("general", "tokenizer")
FLOAT_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
# The checked header, kept in the built folder: a later read checks it there instead of parsing the
# file's metadata again, whose cost grows with the vocabulary.
HEADER = "gguf-header.json"


class GGUFError(LayerzooError, ValueError):
    """A GGUF file that cannot be read as a model, in one line; raised before any tensor is read."""


@dataclass(frozen=True)
class GGUFHeader:
    """What a GGUF file's header says: architecture (its `general.architecture`), parameters (the
    number of weights), vocab_rows (rows of token_embd.weight), tokens (the tokenizer's), chat_template
    (from the metadata, None without one)."""

    architecture: str
    parameters: int
    vocab_rows: int
    tokens: int
    chat_template: str | None


def is_gguf(path: str | Path) -> bool:
    """Whether `path` names a GGUF file (by its suffix; the header is read by inspect_gguf)."""
    return str(path).lower().endswith(SUFFIX)


def inspect_gguf(path: str | Path, architectures: Collection[str] | None = None,
                 dtype: str = "float32") -> GGUFHeader:
    """The header of the GGUF file at `path`, checked; no tensor is read.

    Args:
        path: the .gguf file.
        architectures: the GGUF architectures accepted (None: every one transformers reads).
        dtype: the dtype the tensors are dequantized to (float32, float16, bfloat16), for the memory check.

    Raises:
        GGUFError: no such file, not a GGUF file or not a whole one, an architecture or quantization
            type not supported, a tokenizer with more tokens than the vocabulary, or more memory needed
            for the dequantized weights than is available.
    """
    path = Path(path)
    if dtype not in FLOAT_BYTES:
        raise GGUFError(f"dtype {dtype!r} is not supported for a GGUF's weights; supported: {', '.join(FLOAT_BYTES)}")
    if not path.is_file():
        raise GGUFError(f"{path}: no such GGUF file")
    try:
        from gguf import GGMLQuantizationType, GGUFReader
        from gguf.quants import _type_traits as quantized  # the types gguf's dequantize reads
        import transformers  # noqa: F401  (check_architecture reads its list of GGUF architectures)
    except ImportError:
        raise GGUFError(INSTALL) from None
    try:
        reader = GGUFReader(path)  # maps every tensor's bytes: a short file fails here, reading none
    except (ValueError, OSError, IndexError, TypeError) as error:
        raise GGUFError(f"{path}: not a whole GGUF file (truncated, damaged or another format: {error})") from None
    architecture = field(reader, "general.architecture")
    check_architecture(path, architecture, architectures)
    readable = {GGMLQuantizationType.F32, GGMLQuantizationType.F16, *quantized}
    for tensor in reader.tensors:
        if tensor.tensor_type not in readable:
            raise GGUFError(f"{path}: tensor {tensor.name} is quantized as {tensor.tensor_type.name}, which cannot be "
                            f"dequantized; supported: {', '.join(sorted(kind.name for kind in readable))}")
    embedding = next((tensor for tensor in reader.tensors if tensor.name == "token_embd.weight"), None)
    if embedding is None:
        raise GGUFError(f"{path}: has no token_embd.weight (not a language model's GGUF)")
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    if tokens is None:
        raise GGUFError(f"{path}: has no tokenizer (no tokenizer.ggml.tokens in its metadata)")
    header = GGUFHeader(architecture=architecture, parameters=sum(int(tensor.n_elements) for tensor in reader.tensors),
                        vocab_rows=int(embedding.shape[-1]), tokens=len(tokens.data),
                        chat_template=field(reader, "tokenizer.chat_template", None))
    if header.tokens > header.vocab_rows:
        raise GGUFError(f"{path}: its tokenizer has {header.tokens:,} tokens, but token_embd.weight has "
                        f"{header.vocab_rows:,} rows: the tokenizer is not this model's")
    needed, available = header.parameters * FLOAT_BYTES[dtype], available_memory()
    if needed > available:
        raise GGUFError(f"{path}: its weights in {dtype} need {needed / 2**30:.2f} GiB of memory, "
                        f"{available / 2**30:.2f} GiB is available")
    return header


def check_architecture(path: Path, architecture: str, architectures: Collection[str] | None) -> None:
    """GGUFError unless transformers reads `architecture` and it is one of `architectures` (None: any)."""
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    known = sorted(set(GGUF_SUPPORTED_ARCHITECTURES) - set(NOT_ARCHITECTURES))
    accepted = sorted(architectures) if architectures is not None else known
    if architecture not in accepted or architecture not in known:
        raise GGUFError(f"{path}: architecture {architecture!r} is not supported; supported: {', '.join(accepted)}")


def field(reader: Any, key: str, *default: Any) -> Any:
    """A metadata value of a GGUFReader; GGUFError when it is missing and there is no default."""
    found = reader.fields.get(key)
    if found is None:
        if default:
            return default[0]
        raise GGUFError(f"{reader.data.filename}: has no {key} in its metadata")
    return found.contents()


def available_memory() -> int:
    """Bytes of memory available now (Linux: MemAvailable; elsewhere the free physical pages)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def gguf_folder(path: str | Path, architectures: Collection[str] | None = None, dtype: str = "float32") -> Path:
    """The GGUF file at `path` as a Hugging Face model folder (config.json, model.safetensors, the
    tokenizer with its chat template), dequantized to `dtype`; built on first use into the cache.

    Args:
        path: the .gguf file.
        architectures: the GGUF architectures accepted (None: every one transformers reads).
        dtype: float32, float16 or bfloat16.

    Returns:
        The folder in the cache; AutoModelForCausalLM and AutoTokenizer read it.

    Raises:
        GGUFError: as inspect_gguf, before any tensor is read.
    """
    path = Path(path).absolute()
    folder = cache_root() / "gguf" / f"{path.stem}-{file_hash(path)}-{dtype}" if path.is_file() else None
    if folder is not None and (folder / HEADER).is_file():  # built, so checked, before
        check_architecture(path, GGUFHeader(**json.loads((folder / HEADER).read_text())).architecture, architectures)
        return folder
    header = inspect_gguf(path, architectures, dtype)
    return built(folder, lambda partial: write_folder(path, header, dtype, partial))


def write_folder(path: Path, header: GGUFHeader, dtype: str, out: Path) -> None:
    """The model and tokenizer of `path` dequantized and saved into `out`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .quiet import no_transformers_bars

    with no_transformers_bars():
        model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=getattr(torch, dtype),
                                                     local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name, local_files_only=True)
        # The weights are plain tensors now: saved with the quantizer, the folder would claim to be GGUF-quantized.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        if tokenizer.chat_template is None and header.chat_template is not None:
            tokenizer.chat_template = header.chat_template  # transformers' reader drops some families' templates
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    (out / HEADER).write_text(json.dumps(asdict(header), indent=2) + "\n")
