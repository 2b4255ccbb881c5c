"""Corpus discovery: file patterns match what glob matches, and each file is read once, however
symlinks (to files, to folders, in loops) or hard links reach it again."""

import glob
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from layerzoo.errors import OptionError
from layerzoo.tasks import make_task
from layerzoo.tasks.text import resolve_files
from tests.helpers.text_corpus import cache  # noqa: F401 (a fixture)


def write_files(folder: Path, names: list[str]) -> list[Path]:
    paths = []
    for name in names:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"the document {name}\n" * 3)
        paths.append(path)
    return paths


def test_a_symlink_loop_in_a_corpus_folder_reads_each_file_once(tmp_path, cache):  # noqa: F811
    corpus = tmp_path / "corpus"
    files = write_files(corpus, ["a.txt", "b.txt", "c.txt", "d.txt", "e.txt", "sub/f.txt"])
    (corpus / "loop").symlink_to(".")
    assert resolve_files((str(corpus / "**" / "*"),)) == [*files[:5], files[5]]
    train = make_task("text", {"files": [str(corpus / "**" / "*")], "holdout": 0.3}, 257)
    held = make_task("text", {"files": [str(corpus / "**" / "*")], "holdout": 0.3, "split": "eval"}, 257)
    assert len(train.shards.documents) == 6

    def texts(task):
        return {bytes(task.shards.document(int(i))[1:].tolist()) for i in task.doc_ids}

    assert not texts(train) & texts(held)  # nothing held out is trained on


def test_loops_that_would_multiply_paths_end(tmp_path):
    """Two links to the folder itself (and one to its parent) make glob's ** walk 2**40 paths."""
    corpus = tmp_path / "corpus"
    files = write_files(corpus, ["a.txt", "deep/b.txt"])
    for name, target in (("self", "."), ("again", "."), ("up", ".."), ("deep/back", "..")):
        (corpus / name).symlink_to(target)
    assert resolve_files((str(corpus / "**" / "*.txt"),)) == files


def test_the_same_file_reached_twice_is_read_once(tmp_path):
    corpus = tmp_path / "corpus"
    a, b = write_files(corpus, ["a.txt", "shared/b.txt"])
    (corpus / "link.txt").symlink_to("a.txt")
    os.link(a, corpus / "hard.txt")
    (corpus / "other").symlink_to(corpus / "shared")
    (corpus / "broken.txt").symlink_to("missing.txt")
    assert resolve_files((str(corpus / "*.txt"),)) == [a]  # a.txt sorts before hard.txt and link.txt
    assert resolve_files((str(corpus / "**" / "*.txt"),)) == [a, corpus / "other" / "b.txt"]
    assert resolve_files((str(corpus / "link.txt"), str(corpus / "a.txt"), str(corpus / "**"))) == [
        corpus / "link.txt", corpus / "other" / "b.txt"]


NAMES = st.sampled_from(["a", "b", "ab", ".h", "x.txt", "y.jsonl", "[c]"])
TREE = st.lists(st.lists(NAMES, min_size=1, max_size=4).map("/".join), min_size=1, max_size=12)
# (where the link goes, which path of the tree it points to: folders above it make loops)
LINKS = st.lists(st.tuples(st.lists(NAMES, min_size=1, max_size=3).map("/".join), st.integers(0, 50)), max_size=6)


def build_tree(root: Path, files: list[str], links: list[tuple[str, int]]) -> None:
    """The files (skipping those a file already blocks), then absolute links to the root or to
    one of its paths, so that no link leads out of the root."""
    for name in files:
        path = root / name
        if any(parent.is_file() for parent in path.parents) or path.is_dir():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(name)
    targets = [root, *sorted(root.rglob("*"))]
    for name, index in links:
        path = root / name
        if path.parent.is_dir() and not os.path.lexists(path):
            path.symlink_to(targets[index % len(targets)])


PATTERNS = ["*", "**", "**/*", "**/*.txt", "*/*", "a/**/x.txt", "**/a/*", "?", "[ab]*/**", ".h/*", "**/.h", "[[]c]"]


@given(files=TREE, pattern=st.sampled_from(PATTERNS))
def test_patterns_match_what_glob_matches(files, pattern):
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        build_tree(root, files, [])
        expected = [Path(path) for path in sorted(glob.glob(str(root / pattern), recursive=True))
                    if Path(path).is_file()]
        if not expected:
            with pytest.raises(OptionError, match="no such file"):
                resolve_files((str(root / pattern),))
        else:
            assert resolve_files((str(root / pattern),)) == expected


@given(files=TREE, links=LINKS)
def test_every_file_is_found_once_whatever_the_links(files, links):
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder).resolve()
        build_tree(root, ["a/x.txt", *files], links)
        found = resolve_files((str(root / "**"),))
        identities = [(path.stat().st_dev, path.stat().st_ino) for path in found]
        assert len(set(identities)) == len(found)  # no file twice
        real = {path for path in root.rglob("*") if path.is_file() and not path.is_symlink()
                and not any(part.startswith(".") for part in path.relative_to(root).parts)}
        assert real <= {path.resolve() for path in found}
