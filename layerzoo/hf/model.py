"""`LayerzooForCausalLM`: a layerzoo CausalLM as a transformers causal LM.

    model = LayerzooForCausalLM.from_spec("swax-tiny", ["model.d_model=128"])
    model.save_pretrained("out")                      # config.json + model.safetensors
    model = AutoModelForCausalLM.from_pretrained("out")  # after `import layerzoo.hf`
    out = model.generate(ids, attention_mask=mask, do_sample=True, top_p=0.9, max_new_tokens=32)

The weights live in `self.model`, the CausalLM, unchanged; this class maps transformers'
conventions onto it. Generation runs on a LayerzooCache of the mixers' states, and each row
keeps its own positions in them, so a left-padded batch needs no position_ids (padding never
enters a state); position_ids given must repeat those positions, or pack sequences into rows
(positions restarting at 0, as transformers' padding-free collator passes them).
"""

from __future__ import annotations

import contextlib
import json
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

from ..assemblies.causal_lm import CausalLM
from ..assemblies.generate import check_integer, check_prompt_mask, check_token_ids, is_number
from ..assemblies.init import init_module
from ..mixers.attention import CausalAttention
from ..mixers.attention_weights import recorded_attention
from ..specs import Spec, load_spec
from .attention_rows import attention_rows, token_layout
from .cache import LayerzooCache
from .config import LayerzooConfig
from .errors import HFError
from .layers import DecoderBlock
from .positions import packed_sequences
from .weights import check_weight_shapes

IGNORE_INDEX = -100  # labels not scored: transformers' and torch's convention
# The cache's name in the outputs and in generate's keywords: `cache` where this transformers has
# it, else `past_key_values`.
CACHE_FIELD = "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"
# The folder from_pretrained is loading, whose weights' shapes the model transformers builds for it
# checks in __init__, on the meta device (a second build only for the check would cost as much again).
FOLDER_TO_CHECK: ContextVar[Path | None] = ContextVar("FOLDER_TO_CHECK", default=None)


class LayerzooForCausalLM(PreTrainedModel, GenerationMixin):
    """forward(input_ids (B, T), attention_mask (B, M >= T) or None, position_ids (B, T) or None,
    labels (B, T) or None, cache / past_key_values, use_cache, logits_to_keep) -> CausalLMOutputWithPast: logits
    (B, T or logits_to_keep, vocab_size) fp32 or the model's dtype, loss (0-d) with labels, cache
    (a LayerzooCache) with use_cache.

    attention_mask is transformers' growing mask: it covers the columns already in the cache and
    these T; its last T columns say which of input_ids are real (1) and which padding (0).

    Args:
        config: the LayerzooConfig; the CausalLM its model_spec describes is built (on the meta
            device, then allocated and initialised by transformers' init pass) as `self.model`.

    Raises:
        HFError: the config's model_spec is missing or wrong.
    """

    config_class = LayerzooConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    _is_stateful = True  # transformers then refuses assisted decoding itself: states cannot roll back
    supports_gradient_checkpointing = True  # the blocks are transformers' GradientCheckpointingLayers
    _no_split_modules = ["DecoderBlock"]
    _tied_weights_keys = {"model.head.weight": "model.embedding.weight"}  # used when config.tie_word_embeddings

    def __init__(self, config: LayerzooConfig):
        super().__init__(config)
        with torch.device("meta"):  # allocated and initialised once, by transformers' init pass (_init_weights)
            self.model = CausalLM(config.model_config(), DecoderBlock)
            # transformers ties the head to the embedding itself (tie_weights, after loading a folder):
            # tied during loading, a missing embedding would be neither loaded nor initialised
            self.model.head.weight = nn.Parameter(torch.empty_like(self.model.head.weight))
        if (folder := FOLDER_TO_CHECK.get()) is not None:
            FOLDER_TO_CHECK.set(None)  # the folder's model only: not one built while loading it
            check_weight_shapes(folder, self)
        self.post_init()

    @classmethod
    def from_spec(cls, spec: str | Path | dict | Spec, overrides: list[str] = (), **config: Any) -> LayerzooForCausalLM:
        """A freshly initialised model from a spec (shipped name, YAML path, dict or Spec) and
        `--set`-style overrides; `config` sets other LayerzooConfig fields (eos_token_id, ...).

        Args:
            spec: a shipped spec's name, a YAML path, a dict or a Spec, as `load_spec` takes it.
            overrides: `dotted.key=value` strings.
            **config: other LayerzooConfig fields.

        Returns:
            The model, its weights drawn as `layerzoo.build` draws them.

        Raises:
            SpecError: the spec cannot be read or is invalid.
            HFError: the spec is an ARMT one (not exported to transformers).
        """
        spec = load_spec(spec, overrides)
        check_exportable(spec)
        return cls(LayerzooConfig.from_model_config(spec.model, **config))

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str | Path | None, *args: Any,
                        allow_non_finite: bool = False, **kwargs: Any):
        """Load a folder save_pretrained wrote (local folders only, never the Hub), or with None
        the `state_dict` given beside a `config`. Weights missing from it are initialised as a new
        model's and listed in `missing_keys` (`output_loading_info=True`); a NaN or infinite weight
        is an HFError naming it unless allow_non_finite; so is a weight whose shape the config's
        model does not have, unless ignore_mismatched_sizes (transformers then initialises it).

        Args:
            pretrained_model_name_or_path: a local folder save_pretrained wrote, or None (then
                config= and state_dict= are required).
            *args: transformers' positional arguments of from_pretrained.
            allow_non_finite: load weights holding NaN or infinities.
            **kwargs: transformers' keyword arguments (config, state_dict, dtype, device_map,
                ignore_mismatched_sizes, output_loading_info, ...); local_files_only defaults
                to True.

        Returns:
            The model, or (model, loading info) with output_loading_info=True.

        Raises:
            HFError: not a local layerzoo folder; None without config and state_dict; a weight
                of another shape than the config's model (without ignore_mismatched_sizes);
                a non-finite weight (without allow_non_finite).
        """
        if pretrained_model_name_or_path is None:
            if not isinstance(kwargs.get("config"), LayerzooConfig) or kwargs.get("state_dict") is None:
                raise HFError("from_pretrained(None, ...) needs config= (a LayerzooConfig) and state_dict=")
        else:
            check_layerzoo_folder(pretrained_model_name_or_path)
        check = pretrained_model_name_or_path is not None and not kwargs.get("ignore_mismatched_sizes")
        kwargs.setdefault("local_files_only", True)
        token = FOLDER_TO_CHECK.set(Path(pretrained_model_name_or_path) if check else None)
        try:
            loaded = super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        finally:
            FOLDER_TO_CHECK.reset(token)
        if not allow_non_finite:
            check_finite(loaded[0] if isinstance(loaded, tuple) else loaded, pretrained_model_name_or_path)
        return loaded

    def refresh_config(self) -> None:
        """config's model_spec as the model runs now: `set_window` calls it after changing the SWA
        layers and refreshing the CausalLM's config."""
        self.config.set_model(self.model.config)

    def _initialize_weights(self, module: nn.Module, *args: Any, **kwargs: Any) -> None:
        """Each module through _init_weights once. transformers skips, for code outside it, a module
        whose own tensors were all loaded; a layerzoo module's init also sets its submodules'
        tensors (the mLSTM's gate projection's), so it runs whenever one of those is missing."""
        if not getattr(module, "_is_hf_initialized", False):
            self._init_weights(module)
            module._is_hf_initialized = True

    def _init_weights(self, module: nn.Module) -> None:
        """transformers' init pass, children before parents: the module allocated and initialised as
        its construction does (the model is built on the meta device, so a fresh model draws the
        same weights as `layerzoo.build`), except the tensors a folder loaded, which transformers
        marks `_is_hf_initialized`: weights missing from a folder get the layerzoo init."""
        init_module(module, torch.get_default_device(), keep=lambda tensor: getattr(tensor, "_is_hf_initialized", False))

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.embedding

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.model.embedding = value

    def get_output_embeddings(self) -> nn.Linear:
        return self.model.head

    def set_output_embeddings(self, value: nn.Linear) -> None:
        self.model.head = value

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, labels: torch.Tensor | None = None, cache: LayerzooCache | None = None, use_cache: bool | None = None,
                logits_to_keep: int = 0, past_key_values: LayerzooCache | None = None,
                return_dict: bool | None = None, inputs_embeds: torch.Tensor | None = None,
                output_hidden_states: bool | None = None, output_attentions: bool | None = None,
                shift_labels: torch.Tensor | None = None, **ignored: Any) -> CausalLMOutputWithPast:
        """The model's logits (and loss, and cache) on one piece of each row, as transformers calls it.

        Args:
            input_ids: (B, T) int64 token ids; or pass inputs_embeds, exactly one.
            attention_mask: (B, M >= T) of 1 (real) and 0 (padding), covering the cache's columns
                and these T; None: every token real.
            position_ids: (B or 1, T) integers, or None. Either the positions the attention_mask
                implies (its cumulative count of real columns, minus one; without a mask, the
                cache's columns onward), read at real tokens only, as generate passes them; or,
                with no cache and no padding, sequences packed into the rows, each restarting at
                0 and counting up by 1 (transformers' DataCollatorWithFlattening), run as separate
                sequences (cu_seqlens) and not cached.
            labels: (B, T) targets, the inputs themselves (shifted here: logits at t score
                labels at t + 1); -100 is not scored.
            cache: the LayerzooCache of the previous calls, or None to start.
            use_cache: return the cache; None: config.use_cache, unless scoring labels or
                running packed sequences.
            logits_to_keep: the last so many positions' logits only; 0: all.
            past_key_values: the cache under transformers' older name (cache wins).
            return_dict: False: a tuple instead of the output object.
            inputs_embeds: (B, T, d_model) embeddings in place of input_ids.
            output_hidden_states: also return the n_layers + 1 hidden states (B, T, d_model);
                None: config.output_hidden_states.
            output_attentions: also return each attention layer's weights (B, H, T, keys), keys
                the cache's kept ones (right-aligned when rows kept different numbers) then these
                T columns; zero at padding and between packed sequences; None:
                config.output_attentions.
            shift_labels: (B, T) targets already shifted (logits at t score shift_labels at t);
                they win over labels.
            **ignored: cache_position, token_type_ids and num_items_in_batch (the loss's
                divisor under gradient accumulation), which change nothing else; any other
                argument must be None or False.

        Returns:
            A CausalLMOutputWithPast with logits (B, T or logits_to_keep, vocab_size) in the model's
                dtype (all T positions when scoring); loss, a 0-d fp32 mean (the sum divided by
                num_items_in_batch when given), with labels; cache with use_cache; hidden_states and
                attentions when asked.

        Raises:
            HFError: both or neither of input_ids and inputs_embeds, or either of the wrong shape;
                a cache that is not a LayerzooCache; a malformed attention_mask; position_ids
                neither of the two kinds above, or packing sequences with a cache or use_cache;
                labels of another shape; output_attentions on a model without attention layers;
                an argument this model does not take.
        """
        check_ignored(ignored)
        embeddings = self.input_embeddings(input_ids, inputs_embeds)
        cache = cache if cache is not None else past_key_values
        if cache is not None and not isinstance(cache, LayerzooCache):
            raise HFError(f"LayerzooForCausalLM takes a LayerzooCache of its mixers' states, got {type(cache).__name__}")
        scored = labels is not None or shift_labels is not None
        shape = tuple(embeddings.shape[:2])
        packed = None if position_ids is None else packed_sequences(
            position_ids, attention_mask, shape, 0 if cache is None else cache.columns)
        if packed is not None and (use_cache or cache is not None):
            raise HFError(f"position_ids pack {len(packed) - 1} sequences into {shape[0]} row(s): packed sequences run "
                          "without a cache (each would need a stream of its own); pass use_cache=False and no cache")
        if use_cache is None:
            use_cache = self.config.use_cache and not scored and packed is None
        hidden_states = [] if (output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states) else None
        output_attentions = output_attentions if output_attentions is not None else self.config.output_attentions
        mask = piece_mask(attention_mask, shape)
        if output_attentions:
            check_attention_outputs(self.model)
        x = embeddings if packed is None else embeddings.reshape(1, -1, embeddings.shape[-1])  # one row, cu_seqlens
        keep = 0 if scored or packed is not None else logits_to_keep
        with recorded_attention() if output_attentions else contextlib.nullcontext() as attentions:
            logits, states = self.model.forward_embeddings(
                x, None if cache is None else cache.states, return_state=True, attention_mask=mask, cu_seqlens=packed,
                logits_to_keep=keep, hidden_states=hidden_states)
        if packed is not None:
            logits = logits.reshape(*shape, -1)[:, -logits_to_keep if logits_to_keep and not scored else 0:]
            hidden_states = None if hidden_states is None else [state.reshape(*shape, -1) for state in hidden_states]
        if output_attentions:
            layout = token_layout(mask, packed, shape, embeddings.device)
            attentions = [attention_rows(weights, *layout, shape) for weights in attentions]
        loss = causal_loss(logits, labels, ignored.get("num_items_in_batch"), shift_labels) if scored else None
        if use_cache:
            cache = cache if cache is not None else LayerzooCache()
            cache.advance(states, embeddings.shape[1])
        output = CausalLMOutputWithPast(loss=loss, logits=logits, **{CACHE_FIELD: cache if use_cache else None},
                                        hidden_states=None if hidden_states is None else tuple(hidden_states),
                                        attentions=tuple(attentions) if output_attentions else None)
        return output if return_dict is not False else output.to_tuple()

    def input_embeddings(self, input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None) -> torch.Tensor:
        """(B, T, d_model): the embeddings of input_ids (B, T), or inputs_embeds as given; exactly one."""
        if (input_ids is None) == (inputs_embeds is None):
            raise HFError("LayerzooForCausalLM.forward takes input_ids (B, T) or inputs_embeds (B, T, d_model): exactly one")
        if inputs_embeds is None:
            if input_ids.dim() != 2:
                raise HFError(f"input_ids must be (batch, length), got shape {tuple(input_ids.shape)}")
            return self.model.embedding(input_ids)
        d_model = self.model.config.d_model
        if inputs_embeds.dim() != 3 or inputs_embeds.shape[-1] != d_model:
            raise HFError(f"inputs_embeds must be (batch, length, {d_model}), got shape {tuple(inputs_embeds.shape)}")
        return inputs_embeds

    def generate(self, inputs: torch.Tensor | None = None, generation_config: Any = None, *args: Any, **kwargs: Any):
        """transformers' generate, after the checks layerzoo's own generate makes, each a one-line
        ValueError before any work: token ids in the vocabulary, an integer max_new_tokens, every
        prompt with a real token; and top_p in (0, 1] (transformers skips a top_p above 1 and
        keeps 0 or NaN).

        Args:
            inputs: (B, T) prompt token ids (or pass input_ids=).
            generation_config: transformers' GenerationConfig; None: the model's.
            *args: transformers' positional arguments of generate.
            **kwargs: transformers' keyword arguments (attention_mask, max_new_tokens, do_sample,
                top_p, num_beams, ...). A LayerzooCache may be passed as cache / past_key_values
                to continue from it.

        Returns:
            What transformers' generate returns: (B, T + new tokens) token ids, or its output
                object with return_dict_in_generate.

        Raises:
            ValueError: a token id outside the vocabulary, a max_new_tokens that is not an integer
                >= 0, a prompt with no real token, or top_p outside (0, 1].
            HFError: a cache_implementation is set, or the cache given is not a LayerzooCache.
        """
        if CACHE_FIELD != "past_key_values" and "past_key_values" in kwargs:  # the older name, without its warning
            if kwargs.get(CACHE_FIELD) is not None and kwargs["past_key_values"] is not None:
                raise HFError(f"generate takes the cache as {CACHE_FIELD}= or past_key_values=, not both")
            given = kwargs.pop("past_key_values")
            kwargs[CACHE_FIELD] = kwargs.get(CACHE_FIELD) if given is None else given
        config = generation_config if generation_config is not None else self.generation_config
        check_generation(inputs if inputs is not None else kwargs.get("input_ids"), kwargs.get("attention_mask"),
                         {name: kwargs.get(name, getattr(config, name, None)) for name in ("max_new_tokens", "top_p")},
                         self.config.vocab_size)
        return super().generate(inputs, generation_config, *args, **kwargs)

    def _prepare_position_ids_for_generation(self, inputs_tensor: torch.Tensor, model_kwargs: dict) -> None:
        """generate's hook: no position_ids of its own (position_ids given to generate still pass).
        Each row's positions live in the states; transformers' (the prompt's, then each step the
        last column's plus one) are wrong after a right-padded prompt."""
        return None

    def _prepare_cache_for_generation(self, generation_config, model_kwargs: dict, *args: Any, **kwargs: Any) -> None:
        """generate's hook: an empty LayerzooCache to fill (transformers would make a key/value one).
        Made before the prompt is read, so chunked prefill (prefill_chunk_size) works."""
        given = model_kwargs.get("cache", model_kwargs.get("past_key_values"))
        if generation_config.cache_implementation is not None:
            raise HFError(f"cache_implementation={generation_config.cache_implementation!r}: a layerzoo model "
                          "keeps its mixers' states in its own LayerzooCache; leave cache_implementation unset")
        if given is not None:
            if not isinstance(given, LayerzooCache):
                raise HFError(f"LayerzooForCausalLM takes a LayerzooCache of its mixers' states, got {type(given).__name__}")
            given._is_user_defined = True  # transformers' mark: the cache outlives generate
        elif generation_config.use_cache is not False:
            model_kwargs[CACHE_FIELD] = LayerzooCache(n_layers=len(self.model.blocks))


def check_generation(input_ids: torch.Tensor | None, attention_mask: torch.Tensor | None, settings: dict[str, Any],
                     vocab_size: int) -> None:
    """The checks of layerzoo's generate on the arguments of transformers' (see generate)."""
    if input_ids is not None:
        check_token_ids(input_ids, vocab_size)
    if attention_mask is not None:  # it may cover a cache's columns too: its rows are checked, not its width
        check_prompt_mask(attention_mask, None)
    if settings["max_new_tokens"] is not None:
        check_integer("max_new_tokens", settings["max_new_tokens"], 0)
    top_p = settings["top_p"]
    if top_p is not None and not (is_number(top_p) and 0 < top_p <= 1):
        raise ValueError(f"top_p must be a number in (0, 1], got {top_p!r}")


def piece_mask(attention_mask: torch.Tensor | None, shape: torch.Size) -> torch.Tensor | None:
    """The (B, T) mask of this call's tokens from transformers' (B, M >= T) one; None when every
    token is real (the common decoding step skips packing)."""
    if attention_mask is None:
        return None
    if attention_mask.dim() != 2 or attention_mask.shape[0] != shape[0] or attention_mask.shape[1] < shape[1]:
        raise HFError(f"attention_mask must be (batch, columns so far >= {shape[1]}) for input_ids of shape "
                      f"{tuple(shape)}, got {tuple(attention_mask.shape)}")
    piece = attention_mask[:, attention_mask.shape[1] - shape[1]:]
    return None if bool(piece.bool().all()) else piece


def causal_loss(logits: torch.Tensor, labels: torch.Tensor | None, num_items: int | torch.Tensor | None = None,
                shift_labels: torch.Tensor | None = None) -> torch.Tensor:
    """Mean next-token cross-entropy: logits (B, T, V) at t predict labels (B, T) at t + 1
    (transformers' convention: labels are the inputs, shifted here), or shift_labels (B, T) at t
    (already shifted, as the Trainer passes them under sequence parallelism; they win over
    labels); IGNORE_INDEX skipped. With num_items (the Trainer under gradient accumulation) the
    sum over that count."""
    if shift_labels is not None:
        labels, predictions = shift_labels, logits
    else:
        predictions = logits[:, :-1]
    if labels.shape != logits.shape[:2]:
        name = "labels" if shift_labels is None else "shift_labels"
        raise HFError(f"{name} must have the shape of the inputs {tuple(logits.shape[:2])}, got {tuple(labels.shape)}")
    targets = (labels if shift_labels is not None else labels[:, 1:]).flatten()
    predictions = predictions.flatten(0, 1).float()
    if num_items is None:
        return F.cross_entropy(predictions, targets, ignore_index=IGNORE_INDEX)
    return F.cross_entropy(predictions, targets, ignore_index=IGNORE_INDEX, reduction="sum") / num_items


def check_attention_outputs(model: CausalLM) -> None:
    """HFError unless output_attentions can be given: the model has an attention layer."""
    if not any(isinstance(block.mixer, CausalAttention) for block in model.blocks):
        mixers = ", ".join(dict.fromkeys(layer.type for layer in model.config.layers))
        raise HFError(f"output_attentions: no layer of this model computes attention weights (its mixers: {mixers})")


# Arguments transformers' callers may pass that change nothing here: each row's position lives in
# the states (cache_position, which some versions of generate pass), a decoder has no segments
# (token_type_ids, which tokenizers return), num_items_in_batch is read by the loss. Any other
# argument is refused unless it is None or False (an output this model does not give, asked off).
HARMLESS = {"cache_position", "token_type_ids", "num_items_in_batch"}


def check_ignored(arguments: dict[str, Any]) -> None:
    for name, value in arguments.items():
        if name not in HARMLESS and value is not None and value is not False:
            raise HFError(f"LayerzooForCausalLM.forward does not take {name}={type(value).__name__} "
                          "(it takes input_ids or inputs_embeds, attention_mask, position_ids, labels or shift_labels, cache, "
                          "use_cache, logits_to_keep, output_hidden_states, output_attentions, return_dict)")


def check_finite(model: nn.Module, source: str | Path | None) -> None:
    """HFError naming the first weight that holds NaN or an infinity."""
    for name, tensor in model.state_dict().items():
        # NaN and infinities make the sum non-finite, so a finite sum clears a tensor in one read
        if tensor.is_floating_point() and not torch.isfinite(tensor.sum()) and not bool(torch.isfinite(tensor).all()):
            where = "the state_dict" if source is None else source
            raise HFError(f"{where}: {name} holds NaN or infinite values; pass allow_non_finite=True to load it anyway")


def check_exportable(spec: Spec) -> None:
    """HFError unless the spec is a plain causal LM (no ARMT)."""
    if spec.armt is not None or spec.model is None:
        raise HFError(f"{spec.name or spec.source}: ARMT models are not exported to transformers: their memory is "
                      "written at segment ends by hooks around the base model's layers, which a per-token cache "
                      "cannot carry; use layerzoo's ARMT.generate, or save_adapter for ARMT around a Hugging Face model")


def check_layerzoo_folder(path: str | Path) -> None:
    """HFError unless `path` is a local folder whose config.json is a layerzoo one."""
    config = Path(path) / "config.json"
    if not Path(path).is_dir():
        raise HFError(f"{path}: no such folder (layerzoo loads local folders only, never from the Hub)")
    try:
        model_type = json.loads(config.read_text()).get("model_type")
    except FileNotFoundError:
        raise HFError(f"{path}: not a saved model folder (no config.json)") from None
    except (ValueError, UnicodeDecodeError, AttributeError) as error:
        raise HFError(f"{config}: not a JSON object ({error})") from None
    if model_type != LayerzooConfig.model_type:
        raise HFError(f"{path}: model_type is {model_type!r}, not 'layerzoo'; load it with transformers' own classes")
