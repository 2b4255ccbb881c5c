"""What the tests of `layerzoo distill` and of evaluating its runs share: a tiny attention teacher
(a layerzoo folder), its conversion by `layerzoo convert`, and a distill config of two steps a stage."""

from __future__ import annotations

import pytest
import yaml

from layerzoo.cli import main
from tests.helpers.conversion import write_teacher, write_text
from tests.training.distill.conftest import GDN, settings


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A layerzoo attention teacher, its corpus (held out: a quarter of its documents), its
    conversion by `layerzoo convert` (layer 1 Gated DeltaNet), and a distill config file."""
    root = tmp_path_factory.mktemp("distill-cli")
    corpus = write_text(root / "corpus")
    teacher = write_teacher(corpus, root / "teacher")
    assert main(["convert", str(teacher), "--pattern", GDN, "--out", str(root / "converted")]) == 0
    text = type("Text", (), {"corpus": corpus})
    config = root / "distill.yaml"
    config.write_text(yaml.safe_dump({"distill": settings(text, align={"steps": 2, "batch_size": 2, "seq_len": 32},
                                                          end_to_end={"steps": 2, "batch_size": 2, "seq_len": 32})}))
    return type("Folders", (), {"root": root, "corpus": corpus, "converted": root / "converted", "teacher": teacher,
                                "config": config})
