"""`layerzoo eval MODEL.gguf`: a GGUF file is scored as the model folder it dequantizes into,
named by the file, read with its own tokenizer."""

import pytest
import torch

pytest.importorskip("gguf")
transformers = pytest.importorskip("transformers")

from layerzoo.evaluation.reading import read  # noqa: E402
from layerzoo.hf.gguf import GGUFError  # noqa: E402
from tests.helpers.gguf_files import write_gguf  # noqa: E402


def test_a_gguf_is_read_as_its_model_folder(tmp_path):
    path = write_gguf(tmp_path / "tiny.gguf")
    [scored] = read(str(path))
    assert (scored.label, scored.name, scored.kind) == ("tiny", "tiny", "model")
    tokenizer = transformers.AutoTokenizer.from_pretrained(scored.tokenizer)
    assert tokenizer.chat_template is not None
    base = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, gguf_file=path.name).eval()
    ids = torch.tensor([[1, 3, 16, 5, 17, 8]])
    with torch.no_grad():
        torch.testing.assert_close(scored.model(ids), base(ids).logits, rtol=1e-5, atol=1e-5)


def test_a_gguf_of_another_family_is_one_line(tmp_path):
    with pytest.raises(GGUFError, match=r"architecture 'gemma2' is not supported; supported: gemma3, llama, mistral, qwen2, qwen3$"):
        read(str(write_gguf(tmp_path / "g.gguf", architecture="gemma2")))
