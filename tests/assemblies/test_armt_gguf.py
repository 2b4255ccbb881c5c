"""ARMT around a GGUF file: wrap("MODEL.gguf") reads it as its dequantized folder, and a bad
file is one line before anything is loaded."""

import pytest
import torch

pytest.importorskip("gguf")
transformers = pytest.importorskip("transformers")

from layerzoo.assemblies.armt import wrap  # noqa: E402
from layerzoo.hf.gguf import GGUFError  # noqa: E402
from tests.helpers.gguf_files import write_gguf  # noqa: E402


def test_wrap_reads_a_gguf_as_transformers_does(tmp_path):
    path = write_gguf(tmp_path / "tiny.gguf")
    armt = wrap(path, segment_size=8, num_mem_tokens=2, memory_layers=[-1]).eval()
    base = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, gguf_file=path.name).eval()
    ids = torch.tensor([[1, 3, 16, 5, 17, 8]])
    with torch.no_grad():  # one segment, the memory neutral: the base model's logits
        torch.testing.assert_close(armt(ids), base(ids).logits, rtol=1e-5, atol=1e-5)


def test_wrap_refuses_a_truncated_gguf_in_one_line(tmp_path):
    data = write_gguf(tmp_path / "whole.gguf").read_bytes()
    (tmp_path / "cut.gguf").write_bytes(data[: len(data) // 2])
    with pytest.raises(GGUFError, match="not a whole GGUF file") as error:
        wrap(tmp_path / "cut.gguf", segment_size=8, num_mem_tokens=2, memory_layers=[-1])
    assert "\n" not in str(error.value)
