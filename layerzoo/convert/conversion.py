"""`convert`: a teacher folder and a pattern -> the teacher and the student as layerzoo CausalLMs.

Everything that can be wrong with the inputs (the folder, its config and tokenizer, the shapes of
its weights in the safetensors headers, the pattern, the output folder) is checked before any
weight is allocated; then the teacher is built and loaded, and the student built (seeded, so a
conversion is reproducible), its unchanged tensors copied from the teacher and its new mixers
initialised from the attention layers they replace.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch

from .. import __version__
from ..assemblies.causal_lm import CausalLM
from ..assemblies.init import construction_order, init_module
from ..hf.config import LayerzooConfig
from ..hf.export import fill
from ..hf.gguf import available_memory, gguf_folder, is_gguf
from ..hf.model import LayerzooForCausalLM
from ..hf.quiet import no_transformers_bars
from ..specs import LayerConfig, MixerConfig, ModelConfig
from ..tasks.text.cache import written_whole
from ..training.runs.space import size
from .errors import ConvertError
from .folder import TeacherFolder, read_json, tokenizer_files
from .pattern import read_pattern
from .targets import student_options
from .teacher import GGUF_FAMILIES, Teacher, read_teacher

RECORD = "conversion.json"
Pattern = str | Path | Sequence[str] | Mapping[str, Any]


@dataclass
class Conversion:
    """teacher: the teacher in layerzoo, every layer attention (its logits are the folder's
    model's); student: the pattern's model, the teacher's tensors where its layers are unchanged,
    new mixers initialised from attention; converted: indices of the layers whose mixer changed;
    source: the teacher folder or GGUF file as the user named it (what conversion.json and
    distill-report.json say);
    tokenizer_folder: the folder the teacher was read from, which holds its tokenizer files (source,
    or the folder a GGUF file dequantizes into: a GGUF file is no tokenizer.json);
    token_ids: the teacher's bos/eos/pad ids, for the saved folder's config."""

    teacher: CausalLM
    student: CausalLM
    converted: tuple[int, ...]
    source: Path
    tokenizer_folder: Path
    token_ids: dict[str, Any] = field(default_factory=dict)

    def save(self, out_dir: str | Path) -> Path:
        """Write the student as a layerzoo Hugging Face folder (AutoModelForCausalLM loads it after
        `import layerzoo.hf`) with the teacher's tokenizer files and conversion.json, into
        `out_dir` (new or empty), whole or not at all; returns out_dir."""
        out_dir = Path(out_dir)
        check_out(out_dir)
        config = LayerzooConfig.from_model_config(self.student.config, **self.token_ids)
        state = {f"model.{name}": tensor for name, tensor in self.student.state_dict().items()}
        with no_transformers_bars():  # a model built here, not a folder read
            model = LayerzooForCausalLM.from_pretrained(None, config=config, state_dict=state)
        tokenizer = tokenizer_files(self.tokenizer_folder)

        def write(folder: Path) -> None:
            with no_transformers_bars():  # a file written in seconds: convert prints its own lines, as export
                model.save_pretrained(folder)
            for path in tokenizer:
                (folder / path.name).write_bytes(path.read_bytes())
            (folder / RECORD).write_text(json.dumps(self.record(), indent=2) + "\n")

        if out_dir.is_dir():
            fill(out_dir, write)
        else:
            written_whole(out_dir, write)
        return out_dir

    def record(self) -> dict[str, Any]:
        """conversion.json: the teacher's folder, and what each layer was and became."""
        layers = [{"index": index, "from": old.type, "to": new.type,
                   "init": "from_attention" if index in self.converted else "copied"}
                  for index, (old, new) in enumerate(zip(self.teacher.config.layers, self.student.config.layers))]
        return {"teacher": str(self.source), "converted_layers": list(self.converted), "layers": layers,
                "layerzoo_version": __version__}

    @classmethod
    def load(cls, out_dir: str | Path) -> Conversion:
        """The student from a folder `save` wrote; the teacher rebuilt from the folder its
        conversion.json names. ConvertError, in one line, for a folder that is missing or not a
        conversion, a conversion.json without a teacher folder or converted layers, and a teacher
        folder that is gone; then as `convert` for a teacher folder that changed."""
        out_dir = Path(out_dir)
        if not out_dir.is_dir():
            raise ConvertError(f"{out_dir}: no such folder (give a folder `layerzoo convert` wrote)")
        record = read_json(out_dir / RECORD, f"not a conversion folder (no {RECORD}; `layerzoo convert` writes one)")
        if not isinstance(record, dict) or not isinstance(record.get("teacher"), str) or not record["teacher"]:
            raise ConvertError(f"{out_dir / RECORD}: names no teacher folder (a \"teacher\" path)")
        converted = record.get("converted_layers")
        if not isinstance(converted, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in converted):
            raise ConvertError(f"{out_dir / RECORD}: converted_layers must be a list of layer indices, got {converted!r:.80}")
        source = Path(record["teacher"])
        if not (source.is_dir() or is_gguf(source) and source.is_file()):
            raise ConvertError(f"{out_dir / RECORD}: the teacher's folder {source} is missing (the teacher is read "
                               "from it again: restore it there, or point conversion.json's teacher at it)")
        student = LayerzooForCausalLM.from_pretrained(out_dir).model
        folder, teacher, model = read_teacher_folder(source)
        return cls(model, student, tuple(converted), source, folder.path, teacher.token_ids)


def read_teacher_folder(path: str | Path) -> tuple[TeacherFolder, Teacher, CausalLM]:
    """A teacher folder (what `convert` reads: a Llama, Mistral, Qwen2 or Qwen3 folder, or a
    layerzoo folder of attention layers, or a GGUF file of those families), its description and
    its model in layerzoo with the folder's tensors; ConvertError (GGUFError for a GGUF file) in
    one line, before any weight is allocated, as `convert`'s."""
    folder = read_folder(path)
    teacher = read_teacher(folder)
    check_weights(folder, teacher)
    check_memory(folder, teacher, models=1)
    return folder, teacher, load_teacher(folder, teacher)


def convert(teacher_folder: str | Path, pattern: Pattern, out: str | Path | None = None, *, seed: int = 0) -> Conversion:
    """Convert the causal LM in `teacher_folder` (a Hugging Face folder of a supported family, a
    GGUF file of one, or a layerzoo folder of attention layers) by `pattern` (pattern.py: a rule string, a list of mixer
    names, a spec-like mapping or a YAML file); with `out`, save the student there too.
    `seed` seeds the student's own initialisation (what init_from_attention leaves to it)."""
    folder = read_folder(teacher_folder)
    teacher = read_teacher(folder)
    student_config, converted = student_model(teacher.model, pattern)
    check_tokenizer(folder, teacher.model.vocab_size)
    check_weights(folder, teacher)
    check_memory(folder, teacher, models=2)
    if out is not None:
        check_out(Path(out))
    teacher_model = load_teacher(folder, teacher)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        student = CausalLM(student_config)
    copy_into_student(student, teacher_model, converted)
    conversion = Conversion(teacher_model.eval(), student, converted, Path(teacher_folder), folder.path,
                            teacher.token_ids)
    if out is not None:
        conversion.save(out)
    return conversion


def read_folder(path: str | Path) -> TeacherFolder:
    """The teacher folder at `path`; a GGUF file is read as the fp32 folder it dequantizes into
    (GGUFError, before any tensor is read, for one not of a supported family)."""
    return TeacherFolder.read(folder_path(path))


def folder_path(path: str | Path) -> Path:
    """The folder a teacher is read from: `path`, or the folder a GGUF file dequantizes into."""
    if is_gguf(path):
        return gguf_folder(path, GGUF_FAMILIES)
    return Path(path)


def student_model(teacher: ModelConfig, pattern: Pattern) -> tuple[ModelConfig, tuple[int, ...]]:
    """The student's ModelConfig (the teacher's but for the layers' mixers) and the converted layers."""
    plan = read_pattern(pattern, teacher)
    layers, converted = [], []
    for index, (name, old) in enumerate(zip(plan.names, teacher.layers)):
        kind, given = plan.mixers[name]
        options = student_options(old, kind, given, teacher.d_model, f"pattern: layer {index} ({name})")
        layers.append(LayerConfig(name, kind, options, old.ffn_hidden))
        if (kind, options) != (old.type, old.options):
            converted.append(index)
    mixers = {}
    for layer in layers:
        mixers.setdefault(layer.name, MixerConfig(layer.type, layer.options))
    return dataclasses.replace(teacher, layers=tuple(layers), mixers=mixers), tuple(converted)


def check_tokenizer(folder: TeacherFolder, vocab_size: int) -> None:
    size = folder.tokenizer_size()
    if size is not None and size > vocab_size:
        raise ConvertError(f"{folder.path / 'tokenizer.json'}: its token ids reach {size - 1}, but the model's "
                           f"vocab_size is {vocab_size}: the tokenizer is not this model's")


def check_weights(folder: TeacherFolder, teacher: Teacher) -> None:
    """ConvertError naming the first tensor the model needs that the folder lacks or holds in
    another shape (read from the headers: nothing is allocated)."""
    with torch.device("meta"):
        expected = {name: tuple(tensor.shape) for name, tensor in CausalLM(teacher.model).state_dict().items()}
    for ours, theirs in teacher.sources.items():
        shape = expected[ours]
        part = (shape[0] // len(theirs), *shape[1:])  # a fused tensor concatenates equal parts on dim 0
        for name in theirs:
            if name not in folder.shapes:
                raise ConvertError(f"{folder.path}: the weight {name} is missing (the config describes a model that has it)")
            if folder.shapes[name] != part:
                raise ConvertError(f"{folder.path}: {name} has shape {folder.shapes[name]}, but the model config.json "
                                   f"describes needs {part}")


def check_memory(folder: TeacherFolder, teacher: Teacher, models: int) -> None:
    """ConvertError, before any weight is read, when the memory available now cannot hold the
    folder's weight files as read plus `models` fp32 models of the teacher's size (the teacher;
    the student beside it)."""
    with torch.device("meta"):
        model = CausalLM(teacher.model)
    model_bytes = 4 * sum(tensor.numel() for tensor in (*model.parameters(), *model.buffers()))  # a tied weight once
    needed = sum(file.stat().st_size for file in set(folder.files.values())) + models * model_bytes
    available = available_memory()
    if needed > available:
        what = "the teacher and the student" if models == 2 else "the teacher"
        raise ConvertError(f"{folder.path}: its weights need {size(needed)} of memory as read and as {what} "
                           f"in float32, {size(available)} is available")


def check_out(out_dir: Path) -> None:
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise ConvertError(f"{out_dir}: exists and is not an empty folder; convert into a new one")


def load_teacher(folder: TeacherFolder, teacher: Teacher) -> CausalLM:
    """The teacher CausalLM with the folder's tensors (in fp32, whatever they are stored in; plus
    one, added in fp32, where the teacher says so). Built on the meta device and handed the
    tensors, so that no weight is drawn at random only to be overwritten."""
    with torch.device("meta"):
        model = CausalLM(teacher.model)
    tensors = folder.tensors({name for names in teacher.sources.values() for name in names})
    state = {}
    for ours, theirs in teacher.sources.items():
        tensor = torch.cat([tensors.pop(name) for name in theirs]).float()
        state[ours] = 1.0 + tensor if ours in teacher.plus_one else tensor
    model.load_state_dict(state, strict=False, assign=True)
    if teacher.model.tie_embeddings:
        model.head.weight = model.embedding.weight
    missing = [name for name, tensor in model.named_parameters() if tensor.is_meta]
    if missing:
        raise AssertionError(f"the teacher's sources leave {missing} without a tensor")
    for module in construction_order(model):  # what the folder has no tensor for: RoPE's frequencies
        init_module(module, "cpu", keep=lambda tensor: not tensor.is_meta)
    return model.eval()


def copy_into_student(student: CausalLM, teacher: CausalLM, converted: tuple[int, ...]) -> None:
    """Every tensor of the student from the teacher, but the converted layers' mixers, which are
    initialised from the teacher's attention there."""
    changed = tuple(f"blocks.{index}.mixer." for index in converted)
    theirs = teacher.state_dict()
    with torch.no_grad():
        for name, tensor in student.state_dict().items():
            if not name.startswith(changed):
                tensor.copy_(theirs[name])
    with torch.no_grad():
        for index in converted:
            student.blocks[index].mixer.init_from_attention(teacher.blocks[index].mixer)
