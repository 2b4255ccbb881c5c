"""layerzoo models as transformers models: config, model, cache, and the Auto classes' registration.

    import layerzoo.hf                                  # registers "layerzoo" with the Auto classes
    model = AutoModelForCausalLM.from_pretrained(folder)  # no trust_remote_code: the code is here

Importing `layerzoo.hf` (not plain `layerzoo`) registers LayerzooConfig with AutoConfig,
LayerzooForCausalLM with AutoModel and AutoModelForCausalLM, and with AutoTokenizer the fast
tokenizer a folder's tokenizer.json describes. It is its own import because transformers' model
classes take seconds to import, longer than layerzoo itself; `import layerzoo` stays free of
them. Needs the `hf` extra (transformers).
"""

try:
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast
except ImportError:  # pragma: no cover - the message is the point
    raise ImportError("layerzoo.hf needs transformers: pip install 'layerzoo[hf]'") from None

from .cache import LayerzooCache
from .config import LayerzooConfig
from .errors import HFError
from .model import LayerzooForCausalLM

AutoConfig.register(LayerzooConfig.model_type, LayerzooConfig, exist_ok=True)
AutoModel.register(LayerzooConfig, LayerzooForCausalLM, exist_ok=True)
AutoModelForCausalLM.register(LayerzooConfig, LayerzooForCausalLM, exist_ok=True)
AutoTokenizer.register(LayerzooConfig, tokenizer_class=PreTrainedTokenizerFast, exist_ok=True)

__all__ = ["HFError", "LayerzooCache", "LayerzooConfig", "LayerzooForCausalLM"]
