"""GGUF files in (layerzoo.hf.gguf): a tiny hand-written Llama GGUF dequantized into a folder that
convert reads, equal to transformers' own reading; bad files refused in one line before any
tensor is read, with nothing written to the cache."""

from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

gguf = pytest.importorskip("gguf")
pytest.importorskip("transformers")

from layerzoo.convert import Conversion, convert  # noqa: E402
from layerzoo.hf import gguf as gguf_module  # noqa: E402
from layerzoo.hf.gguf import GGUFError, gguf_folder, inspect_gguf  # noqa: E402
from layerzoo.tasks.text.cache import cache_root  # noqa: E402
from tests.helpers.gguf_files import CHAT_TEMPLATE, TOKENS, write_gguf  # noqa: E402


def cache_entries() -> list[Path]:
    folder = cache_root() / "gguf"
    return sorted(folder.iterdir()) if folder.is_dir() else []


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory) -> Path:
    return write_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf")


def test_a_gguf_converts_to_the_model_transformers_reads(tiny_gguf, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    conversion = convert(tiny_gguf, "attention", tmp_path / "out")
    theirs = AutoModelForCausalLM.from_pretrained(tiny_gguf.parent, gguf_file=tiny_gguf.name).eval()
    ids = torch.tensor([[1, 3, 16, 5, 17, 8, 2]])
    with torch.no_grad():
        torch.testing.assert_close(conversion.student(ids), theirs(ids).logits, rtol=1e-5, atol=1e-5)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "out")
    assert tokenizer.apply_chat_template([{"role": "user", "content": "ab"}], tokenize=False) == "<s>ab</s>"
    assert tokenizer("abcd")["input_ids"] == [16, 17]
    again = Conversion.load(tmp_path / "out")  # the teacher named as given: the GGUF file
    assert again.source == tiny_gguf
    with torch.no_grad():
        torch.testing.assert_close(again.teacher(ids), conversion.teacher(ids), rtol=0, atol=0)


def test_a_gguf_conversion_distils_reading_the_text_with_the_files_tokenizer(tiny_gguf, tmp_path, capsys):
    from transformers import AutoTokenizer

    from layerzoo.cli import main
    from layerzoo.convert import distill_folder

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for index in range(4):
        (corpus / f"{index}.txt").write_text(" ".join("abcdefghijklm"[index:] * 8))
    convert(tiny_gguf, "gated_deltanet,attention", tmp_path / "out")
    stage = {"steps": 1, "batch_size": 1, "seq_len": 16}
    config = {"data": {"files": [str(corpus / "*.txt")], "holdout": 0.25}, "align": stage, "end_to_end": stage,
              "eval": {"samples": 1, "batch_size": 1}}
    result = distill_folder(tmp_path / "out", tmp_path / "run", config, progress=False)
    assert result.report["teacher"] == str(tiny_gguf)
    assert result.task.tokenizer_files()["tokenizer.json"].parent == gguf_folder(tiny_gguf)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "run" / "model")  # the student's: the chat template came along
    assert tokenizer.apply_chat_template([{"role": "user", "content": "ab"}], tokenize=False) == "<s>ab</s>"
    # `layerzoo eval` on the run scores the student beside the teacher the report names: the GGUF file
    assert main(["eval", str(tmp_path / "run"), "--lengths", "16", "--samples", "1", "--no-progress"]) == 0
    assert "tiny (teacher)" in capsys.readouterr().out


def test_the_dequantized_folder_is_built_once_per_content_and_dtype(tiny_gguf, tmp_path):
    first = gguf_folder(tiny_gguf)
    stamp = (first / "model.safetensors").stat().st_mtime_ns
    copy = tmp_path / "renamed-tiny.gguf"
    copy.write_bytes(tiny_gguf.read_bytes())
    assert gguf_folder(tiny_gguf) == first and (first / "model.safetensors").stat().st_mtime_ns == stamp
    assert gguf_folder(copy) != first  # the name is part of the folder's, for a reader of the cache
    half = gguf_folder(tiny_gguf, dtype="bfloat16")
    assert half != first and '"dtype": "bfloat16"' in (half / "config.json").read_text()
    assert "quantization_config" not in (first / "config.json").read_text()
    assert not [entry for entry in cache_entries() if ".partial-" in entry.name]


def test_a_built_folder_is_found_without_parsing_the_file_again(tiny_gguf, monkeypatch):
    folder = gguf_folder(tiny_gguf)
    monkeypatch.setattr(gguf_module, "inspect_gguf", lambda *args: pytest.fail("the header was parsed again"))
    assert gguf_folder(tiny_gguf) == folder
    with pytest.raises(GGUFError, match="architecture 'llama' is not supported; supported: qwen2"):
        gguf_folder(tiny_gguf, architectures=("qwen2",))  # the kept header is still checked


def test_a_chat_template_the_reader_drops_comes_from_the_metadata(tmp_path, monkeypatch):
    from transformers import AutoTokenizer

    read = AutoTokenizer.from_pretrained

    def dropping(*args, **kwargs):  # as transformers' reader does for Gemma's files
        tokenizer = read(*args, **kwargs)
        tokenizer.chat_template = None
        return tokenizer

    monkeypatch.setattr(AutoTokenizer, "from_pretrained", dropping)
    folder = gguf_folder(write_gguf(tmp_path / "dropped.gguf", seed=1))
    monkeypatch.undo()
    assert AutoTokenizer.from_pretrained(folder).chat_template == CHAT_TEMPLATE


def refused(path: Path, match: str, **options) -> None:
    """inspect_gguf and gguf_folder refuse `path` in one line matching `match`, writing nothing."""
    before = cache_entries()
    for call in (inspect_gguf, gguf_folder):
        with pytest.raises(GGUFError, match=match) as error:
            call(path, **options)
        assert "\n" not in str(error.value)
    assert cache_entries() == before


def test_an_unsupported_architecture_is_one_line(tmp_path):
    path = write_gguf(tmp_path / "m.gguf", architecture="rwkv6")
    refused(path, r"architecture 'rwkv6' is not supported; supported: .*llama")
    refused(write_gguf(tmp_path / "g.gguf", architecture="gemma2"), "architecture 'gemma2'", architectures=("llama",))


def test_convert_names_its_families_for_another_architecture(tmp_path):
    path = write_gguf(tmp_path / "g.gguf", architecture="gemma2")
    with pytest.raises(GGUFError, match=r"'gemma2' is not supported; supported: gemma3, llama, mistral, qwen2, qwen3$"):
        convert(path, "attention")


def test_an_unsupported_quantization_type_is_one_line(tmp_path):
    path = write_gguf(tmp_path / "q.gguf", quantization=gguf.GGMLQuantizationType.I32)
    refused(path, r"blk.0.ffn_down.weight is quantized as I32, which cannot be dequantized; supported: .*Q4_K")


@given(cut=st.floats(0.05, 0.99))
def test_a_truncated_gguf_is_one_line(tiny_gguf, tmp_path_factory, cut):
    data = tiny_gguf.read_bytes()
    path = tmp_path_factory.mktemp("cut") / "cut.gguf"
    path.write_bytes(data[: int(len(data) * cut)])
    refused(path, r"not a whole GGUF file \(truncated, damaged or another format: ")


def test_a_tokenizer_larger_than_the_vocabulary_is_one_line(tmp_path):
    path = write_gguf(tmp_path / "v.gguf", vocab=len(TOKENS) - 2)
    refused(path, f"tokenizer has {len(TOKENS)} tokens, but token_embd.weight has {len(TOKENS) - 2} rows")


def test_a_model_larger_than_the_memory_is_one_line_saying_how_much(tmp_path, monkeypatch):
    monkeypatch.setattr(gguf_module, "available_memory", lambda: 1000)
    refused(write_gguf(tmp_path / "unbuilt.gguf", seed=2), r"its weights in float32 need 0.00 GiB of memory, 0.00 GiB is available")


def test_not_a_gguf_and_a_missing_one_are_one_line(tmp_path):
    (tmp_path / "text.gguf").write_text("hello, not a model")
    refused(tmp_path / "text.gguf", "not a whole GGUF file")
    refused(tmp_path / "missing.gguf", "no such GGUF file")
    refused(tmp_path / "text.gguf", "dtype 'int8' is not supported", dtype="int8")
