"""What a tiny distillation reads: a corpus of a few documents, a word-level BPE of under a
hundred tokens trained on it, and a teacher folder for layerzoo.convert: a three-layer
attention-only layerzoo model (random weights) saved as a Hugging Face folder with that
tokenizer, which `convert` reads as it reads any teacher's.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import yaml

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


def write_teacher(corpus: Path, folder: Path, spec: dict | None = None, seed: int = 0) -> Path:
    """The model of `spec` (default teacher_spec(); its layers attention) drawn from `seed`, saved
    as a layerzoo Hugging Face folder with a tokenizer trained on corpus/*.txt; returns the folder."""
    from layerzoo.hf import LayerzooForCausalLM

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LayerzooForCausalLM.from_spec(teacher_spec() if spec is None else spec)
    model.save_pretrained(folder)
    return write_tokenizer(corpus, folder)


def distill_folders(root):
    """In `root`: a layerzoo attention teacher, its corpus (held out: a quarter of its documents),
    its conversion by `layerzoo convert` (layer 1 Gated DeltaNet), and a distill config file of two
    steps a stage."""
    from layerzoo.cli import main
    from tests.training.distill.conftest import GDN, settings

    corpus = write_text(root / "corpus")
    teacher = write_teacher(corpus, root / "teacher")
    assert main(["convert", str(teacher), "--pattern", GDN, "--out", str(root / "converted")]) == 0
    text = type("Text", (), {"corpus": corpus})
    config = root / "distill.yaml"
    config.write_text(yaml.safe_dump({"distill": settings(text, align={"steps": 2, "batch_size": 2, "seq_len": 32},
                                                          end_to_end={"steps": 2, "batch_size": 2, "seq_len": 32})}))
    return type("Folders", (), {"root": root, "corpus": corpus, "converted": root / "converted", "teacher": teacher,
                                "config": config})
