"""What layerzoo's vLLM model refuses, in one line: a head size vLLM's CPU attention does not
take, and prefix caching with layers other than full attention (vLLM's "align" state mode would
give wrong tokens with recurrent layers, and fails without them)."""

import pytest

pytest.importorskip("vllm", reason="vllm is not installed (docs/serving.md says how)")

from layerzoo.hf.serving.attention import check_head_size
from layerzoo.hf.serving.errors import ServingError
from tests.helpers.vllm_serving import save_model, served


def test_a_head_size_vllm_refuses_is_named_with_the_sizes_allowed():
    check_head_size(32)
    with pytest.raises(ServingError, match=r"head size 16 .*\(32, 64, 80") as error:
        check_head_size(16)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("pattern", [["swa", "gated_deltanet"], ["swa"]])
def test_prefix_caching_with_layers_but_full_attention_is_refused(tmp_path, pattern):
    save_model(tmp_path, pattern)
    with pytest.raises(ServingError, match="enable_prefix_caching=False") as error:
        with served(tmp_path, enable_prefix_caching=True):
            pass
    assert "\n" not in str(error.value)
