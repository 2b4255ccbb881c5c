"""A stand-in for layerzoo.convert's Conversion while that is built (issue 32, items 1-2), with the
same attributes: a teacher CausalLM with attention in every layer, built from a spec dict, and a
student with chosen layers' mixers swapped and every other tensor copied from the teacher. Saved,
it is the folders `layerzoo convert` writes (a layerzoo transformers folder, and conversion.json
naming the teacher's folder and the converted layers), which `load` reads back.

Also the tiny text a distillation reads: a corpus of a few documents and a word-level BPE of
under a hundred tokens trained on it, saved as the teacher folder's tokenizer.json.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

import layerzoo
from layerzoo.errors import LayerzooError
from tests.helpers.text_corpus import document

VOCAB = 96  # the models' vocabulary; the tokenizer has fewer tokens
EOS = "<|endoftext|>"


def teacher_spec(n_layers: int = 3, d_model: int = 32, vocab_size: int = VOCAB) -> dict:
    return {"model": {"d_model": d_model, "n_layers": n_layers, "vocab_size": vocab_size,
                      "mixers": {"attention": {"n_heads": 2}}, "pattern": ["attention"], "ffn": {"hidden": 2 * d_model}}}


def write_text(folder: Path, documents: int = 8, words: int = 150) -> Path:
    """`documents` pseudo-Python documents as text files in folder; returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    for seed in range(documents):
        (folder / f"doc{seed}.txt").write_text(document(seed, words), encoding="utf-8")
    return folder


def write_tokenizer(corpus: Path, folder: Path, vocab_size: int = 80) -> Path:
    """A BPE of at most vocab_size tokens (whitespace-split words, EOS first) trained on corpus/*.txt,
    as folder/tokenizer.json and tokenizer_config.json (naming the EOS)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS, "[UNK]"], show_progress=False)
    tokenizer.train([str(path) for path in sorted(corpus.glob("*.txt"))], trainer)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": EOS}))
    return folder


@dataclass
class StandInConversion:
    teacher: torch.nn.Module
    student: torch.nn.Module
    converted: tuple[int, ...]
    source: Path

    @classmethod
    def build(cls, spec: dict, mixers: dict[int, dict], source: Path, seed: int = 0) -> StandInConversion:
        """The teacher layerzoo.build(spec) (seeded), and a student whose layer i has the mixer
        mixers[i] ({"type": ..., options...}), every other tensor the teacher's (copied)."""
        torch.manual_seed(seed)
        teacher = layerzoo.build(spec)
        model = teacher.config.to_dict()
        for layer, mixer in mixers.items():
            model["mixers"][f"converted{layer}"] = dict(mixer)
            model["layers"][layer] = f"converted{layer}"
        student = layerzoo.build({"model": model})
        new = tuple(f"blocks.{layer}.mixer." for layer in mixers)
        with torch.no_grad():
            targets = student.state_dict()
            for name, tensor in teacher.state_dict().items():
                if not name.startswith(new):
                    targets[name].copy_(tensor)
        return cls(teacher, student, tuple(sorted(mixers)), Path(source))

    def save(self, folder: Path, teacher_folder: Path) -> Path:
        """The teacher as a layerzoo transformers folder with the tokenizer (what a teacher's Hugging
        Face folder is to a real conversion), and the student as one with conversion.json."""
        from layerzoo.hf.export import export_model

        export_model(self.teacher, self.source, teacher_folder)
        export_model(self.student, self.source, folder)
        (folder / "conversion.json").write_text(json.dumps({"teacher": str(teacher_folder),
                                                            "converted_layers": list(self.converted)}))
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> StandInConversion:
        """What save wrote; one-line errors for a folder that is not a conversion or whose teacher is gone."""
        from transformers.utils import logging

        from layerzoo.hf import LayerzooForCausalLM

        logging.disable_progress_bar()  # transformers' loading bars: not part of what the tests read
        folder = Path(folder)
        if not (folder / "conversion.json").is_file():
            raise LayerzooError(f"{folder}: not a conversion folder (no conversion.json); `layerzoo convert` writes one")
        meta = json.loads((folder / "conversion.json").read_text())
        teacher = Path(meta["teacher"])
        if not (teacher / "config.json").is_file():
            raise LayerzooError(f"{folder}/conversion.json: the teacher's folder {teacher} is missing")
        return cls(LayerzooForCausalLM.from_pretrained(teacher).model, LayerzooForCausalLM.from_pretrained(folder).model,
                   tuple(meta["converted_layers"]), teacher)
