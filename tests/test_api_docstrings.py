"""The API reference's entry points have Google-style docstrings: an `Args:` section naming every
parameter of the signature, and a `Returns:` section where the call returns something, as
mkdocstrings (Google style) renders them.

A class names its constructor's parameters in its own docstring (a mixer's are d_model and
**options, which point at its options table instead of copying it; a state's fields go under
`Attributes:`). *args / **kwargs are named as such (`**options:`).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import textwrap
import typing

import pytest

SECTIONS = ("Args", "Keyword Args", "Returns", "Yields", "Raises", "Attributes", "Example", "Examples", "Note", "Notes")
HEADER = re.compile(rf"^({'|'.join(SECTIONS)}):\s*$")
ENTRY = re.compile(r"^(\*{0,2}\w+)(?:\s*\([^)]*\))?:(\s|$)")
# How griffe's Google parser reads an item's first line: a `name:`, `name (type):` or `(type):`
# prefix, when there is one (in Returns: a named value, not the description).
GRIFFE_NAMED = re.compile(r"^(\w+\s*(\(.+\))?|\(.+\)):")


def sections(doc: str) -> dict[str, list[str]]:
    """A Google-style docstring's sections: header -> its lines, dedented one level. A section runs
    from its header (alone on an unindented line) to the next unindented line that is not blank."""
    found: dict[str, list[str]] = {}
    current = None
    for line in doc.splitlines():
        header = HEADER.match(line)
        if header:
            current = found.setdefault(header.group(1), [])
        elif line and not line[0].isspace():
            current = None
        elif current is not None:
            current.append(line)
    return {name: textwrap.dedent("\n".join(lines)).strip("\n").splitlines() for name, lines in found.items()}


def entries(lines: list[str]) -> list[str]:
    """The names an Args (or Raises) section describes: its unindented `name:` / `name (type):` lines."""
    return [match.group(1) for line in lines if line and not line[0].isspace() and (match := ENTRY.match(line))]


def test_the_parser_reads_google_sections():
    doc = inspect.cleandoc("""One line.

        Prose about `x`: it says nothing here.

        Args:
            x: (B, T, d_model) input,
                over two lines: still x.
            state (Any): or None.
            **options: the rest.

        Returns:
            y (B, T, d_model),
                the same dtype as x.

        Raises:
            OptionError: a bad option.
        """)
    found = sections(doc)
    assert entries(found["Args"]) == ["x", "state", "**options"]
    assert found["Returns"] == ["y (B, T, d_model),", "    the same dtype as x."]
    assert entries(found["Raises"]) == ["OptionError"]
    assert "Args" not in sections("Args: in prose, not a header.\n    x: nothing")
    named = ["Memory: the increments", "out (Tensor): o", "(Tensor, Tensor): o and the state"]
    described = ["The pair (o, state): o (B, T, H, V)", "(B, T, H, V) in q's dtype.", "out_dir, as a Path."]
    assert all(GRIFFE_NAMED.match(line) for line in named)
    assert not any(GRIFFE_NAMED.match(line) for line in described)


# The entry points, as "module:qualified.name". Methods are checked as their class defines them.
ENTRY_POINTS = [
    # layerzoo (its __all__'s functions)
    "layerzoo.assemblies.build:build",
    "layerzoo.specs.spec:load_spec",
    "layerzoo.specs.spec:Spec",
    "layerzoo.specs.files:shipped_specs",
    "layerzoo.registry:get_mixer",
    "layerzoo.registry:list_mixers",
    "layerzoo.registry:list_targets",
    "layerzoo.registry:register_mixer",
    "layerzoo.registry:unregister_mixer",
    "layerzoo.options.section:option",
    "layerzoo.mixers.window:set_window",
    # the models build returns
    "layerzoo.assemblies.causal_lm:CausalLM",
    "layerzoo.assemblies.causal_lm:CausalLM.forward",
    "layerzoo.assemblies.causal_lm:CausalLM.forward_embeddings",
    "layerzoo.assemblies.causal_lm:CausalLM.init_state",
    "layerzoo.assemblies.causal_lm:CausalLM.state_size",
    "layerzoo.assemblies.generate:generate",
    "layerzoo.assemblies.armt.model:ARMT",
    "layerzoo.assemblies.armt.model:ARMT.forward",
    "layerzoo.assemblies.armt.model:ARMT.init_state",
    "layerzoo.assemblies.armt.model:ARMT.state_size",
    "layerzoo.assemblies.armt.model:ARMT.end_token_ids",
    "layerzoo.assemblies.armt.model:ARMTState",
    "layerzoo.assemblies.armt.model:ARMTStreams",
    # the mixer contract
    "layerzoo.mixers.base:Mixer",
    "layerzoo.mixers.base:Mixer.forward",
    "layerzoo.mixers.base:Mixer.mix",
    "layerzoo.mixers.base:Mixer.init_state",
    "layerzoo.mixers.base:Mixer.state_size",
    "layerzoo.mixers.base:MixerOptions.check",
    # the mixers' states
    "layerzoo.mixers.attention:KVCache",
    "layerzoo.mixers.gated_deltanet:GatedDeltaNetState",
    "layerzoo.mixers.mamba2:Mamba2State",
    "layerzoo.mixers.assoc_memory:AssocMemoryState",
    # the mixers: a class names d_model and its declared options (its signature)
    "layerzoo.mixers.attention:Attention",
    "layerzoo.mixers.attention:SlidingWindowAttention",
    "layerzoo.mixers.attention:CausalAttention.init_state",
    "layerzoo.mixers.attention:CausalAttention.state_size",
    "layerzoo.mixers.mlstm:MLSTM",
    "layerzoo.mixers.mlstm:MLSTM.init_state",
    "layerzoo.mixers.mlstm:MLSTM.state_size",
    "layerzoo.mixers.gated_deltanet:GatedDeltaNet",
    "layerzoo.mixers.gated_deltanet:DeltaRuleLayer.init_state",
    "layerzoo.mixers.gated_deltanet:DeltaRuleLayer.state_size",
    "layerzoo.mixers.kda:KimiDeltaAttention",
    "layerzoo.mixers.mamba2:Mamba2",
    "layerzoo.mixers.mamba2:Mamba2.init_state",
    "layerzoo.mixers.mamba2:Mamba2.state_size",
    "layerzoo.mixers.assoc_memory:AssociativeMemory",
    "layerzoo.mixers.assoc_memory:AssociativeMemory.init_state",
    "layerzoo.mixers.assoc_memory:AssociativeMemory.state_size",
    # the kernels: each family's public function, its backend choice, its step loop and chunked form
    "layerzoo.kernels.sliding_window.dispatch:sliding_window_attention",
    "layerzoo.kernels.sliding_window.dispatch:choose_sliding_window_backend",
    "layerzoo.kernels.sliding_window.reference:sliding_window_attention_reference",
    "layerzoo.kernels.sliding_window.reference:sliding_window_mask",
    "layerzoo.kernels.gated_delta_rule.dispatch:gated_delta_rule",
    "layerzoo.kernels.gated_delta_rule.dispatch:choose_gated_delta_rule_backend",
    "layerzoo.kernels.gated_delta_rule.reference:gated_delta_rule_reference",
    "layerzoo.kernels.gated_delta_rule.chunkwise:gated_delta_rule_chunkwise",
    "layerzoo.kernels.mlstm.dispatch:mlstm",
    "layerzoo.kernels.mlstm.dispatch:choose_mlstm_backend",
    "layerzoo.kernels.mlstm.triton:mlstm_triton",
    "layerzoo.kernels.mlstm.reference:MLSTMState",
    "layerzoo.kernels.mlstm.reference:mlstm_reference",
    "layerzoo.kernels.mlstm.reference:mlstm_step",
    "layerzoo.kernels.mlstm.chunkwise:mlstm_chunkwise",
    "layerzoo.kernels.ssd.dispatch:ssd",
    "layerzoo.kernels.ssd.dispatch:choose_ssd_backend",
    "layerzoo.kernels.ssd.reference:ssd_reference",
    "layerzoo.kernels.ssd.chunkwise:ssd_chunkwise",
    "layerzoo.kernels.kda.dispatch:kda",
    "layerzoo.kernels.kda.dispatch:choose_kda_backend",
    "layerzoo.kernels.kda.reference:kda_reference",
    "layerzoo.kernels.kda.chunkwise:kda_chunkwise",
    "layerzoo.kernels.assoc_memory.dispatch:associative_read",
    "layerzoo.kernels.assoc_memory.dispatch:associative_update",
    "layerzoo.kernels.assoc_memory.dispatch:choose_assoc_memory_backend",
    "layerzoo.kernels.assoc_memory.memory:Memory",
    "layerzoo.kernels.assoc_memory.memory:empty_memory",
    "layerzoo.kernels.assoc_memory.reference:associative_read_reference",
    "layerzoo.kernels.assoc_memory.reference:associative_update_reference",
    "layerzoo.kernels.assoc_memory.feature_map:dpfp",
    "layerzoo.kernels.assoc_memory.feature_map:features",
    # ARMT around a causal LM
    "layerzoo.assemblies.armt.wrap:wrap",
    "layerzoo.assemblies.armt.wrap:load_hf_checkpoint",
    "layerzoo.assemblies.armt.adapter:save_adapter",
    "layerzoo.assemblies.armt.adapter:load_adapter",
    # layerzoo.testing (its __all__ but TOLERANCES, a table)
    "layerzoo.testing.mixer_suite:check_mixer",
    "layerzoo.testing.suites:mixer_test",
    "layerzoo.testing.suites:kernel_test",
    "layerzoo.testing.conformance:make_mixer",
    "layerzoo.testing.conformance:state_numel",
    "layerzoo.testing.conformance:run_in_pieces",
    "layerzoo.testing.conformance:prefill_then_decode",
    "layerzoo.testing.conformance:padded_batch",
    "layerzoo.testing.conformance:check_shapes",
    "layerzoo.testing.conformance:check_streaming",
    "layerzoo.testing.conformance:check_empty_inputs",
    "layerzoo.testing.conformance:check_reentrant",
    "layerzoo.testing.conformance:check_state_size",
    "layerzoo.testing.conformance:check_state_contract",
    "layerzoo.testing.conformance:check_causality",
    "layerzoo.testing.conformance:check_batch_independence",
    "layerzoo.testing.conformance:check_reference",
    "layerzoo.testing.conformance:check_gradients",
    "layerzoo.testing.conformance:check_padding",
    "layerzoo.testing.conformance:check_packing",
    "layerzoo.testing.conformance:check_dtypes",
    "layerzoo.testing.conformance:check_precision",
    "layerzoo.testing.kernels:KernelCase",
    "layerzoo.testing.kernels:KernelFamily",
    "layerzoo.testing.kernels:kernel_cases",
    "layerzoo.testing.kernels:packed_cases",
    "layerzoo.testing.kernels:check_kernel_family",
    "layerzoo.testing.kernels:check_kernel_streaming",
    "layerzoo.testing.kernels:check_kernel_empty_inputs",
    "layerzoo.testing.kernels:check_kernel_reference",
    "layerzoo.testing.kernels:check_kernel_layouts",
    "layerzoo.testing.kernels:check_kernel_gradients",
    "layerzoo.testing.kernels:check_kernel_bad_inputs",
    "layerzoo.testing.kernels:check_kernel_packed",
    "layerzoo.testing.kernels:check_kernel_bad_offsets",
    "layerzoo.testing.reports:Report",
    "layerzoo.testing.tolerances:assert_close",
    "layerzoo.testing.tolerances:relative_rms_error",
    "layerzoo.testing.strategies:sequence_splits",
    "layerzoo.testing.strategies:mixer_inputs",
    "layerzoo.testing.strategies:mixer_specs",
    # training's loop and evaluation's functions
    "layerzoo.training.loop.loop:run_loop",
    "layerzoo.training.loop.loop:LoopSettings",
    "layerzoo.evaluation.scoring:evaluate",
    "layerzoo.evaluation.run_report:report_run",
    "layerzoo.evaluation.run_report:train_and_report",
    # layerzoo.hf (needs transformers)
    "layerzoo.hf.config:LayerzooConfig",
    "layerzoo.hf.config:LayerzooConfig.from_model_config",
    "layerzoo.hf.config:LayerzooConfig.model_config",
    "layerzoo.hf.model:LayerzooForCausalLM",
    "layerzoo.hf.model:LayerzooForCausalLM.from_spec",
    "layerzoo.hf.model:LayerzooForCausalLM.from_pretrained",
    "layerzoo.hf.model:LayerzooForCausalLM.forward",
    "layerzoo.hf.model:LayerzooForCausalLM.generate",
    "layerzoo.hf.cache:LayerzooCache",
    "layerzoo.hf.cache:LayerzooCache.advance",
    "layerzoo.hf.cache:LayerzooCache.reorder_cache",
    "layerzoo.hf.export:export_run",
    "layerzoo.hf.export:export_model",
]

# What a class's docstring names when its signature is not the list of its constructor's own
# parameters (a transformers config's signature holds every PretrainedConfig field).
PARAMETERS: dict[str, typing.Callable[[type], list[str]]] = {
    "layerzoo.hf.config:LayerzooConfig": lambda cls: list(inspect.get_annotations(cls)),
}


def resolve(path: str):
    module, _, name = path.partition(":")
    obj = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def parameters(path: str, obj) -> list[str]:
    """The names the Args section must hold: the signature's, less self / cls (a mixer's
    signature lists its options; its constructor takes them as **options)."""
    if path in PARAMETERS:
        return PARAMETERS[path](obj)
    if is_mixer_class(path):
        return ["d_model", "**options"]
    signature = inspect.signature(obj)
    names = []
    for parameter in signature.parameters.values():
        if parameter.name in ("self", "cls"):
            continue
        prefix = {parameter.VAR_POSITIONAL: "*", parameter.VAR_KEYWORD: "**"}.get(parameter.kind, "")
        names.append(prefix + parameter.name)
    return names


def returns_something(obj) -> bool:
    """Whether a function's annotation says it returns a value (no annotation: it does)."""
    annotation = inspect.signature(obj).return_annotation
    return annotation not in (None, "None", type(None))


@pytest.mark.parametrize("path", ENTRY_POINTS)
def test_an_entry_point_documents_its_arguments_and_result(path):
    if path.startswith("layerzoo.hf"):
        pytest.importorskip("transformers")  # the hf extra
    if path.startswith("layerzoo.testing"):
        pytest.importorskip("hypothesis")  # the test extra
    obj = resolve(path)
    doc = inspect.getdoc(obj) or ""
    found = sections(doc)
    wanted = parameters(path, obj)
    if wanted:
        assert {"Args", "Keyword Args", "Attributes"} & set(found), f"{path}: no Args: section"
        named = [name for section in ("Args", "Keyword Args", "Attributes") for name in entries(found.get(section, []))]
        missing = [name for name in wanted if name not in named and name.lstrip("*") not in named]
        assert not missing, f"{path}: Args: does not name {', '.join(missing)}"
        unknown = [name for name in named if not name.startswith("*") and name not in wanted
                   and "*" + name not in wanted and "**" + name not in wanted]
        assert not unknown, f"{path}: Args: names {', '.join(unknown)}, which the signature does not have"
    if not inspect.isclass(obj) and returns_something(obj):
        assert found.get("Returns"), f"{path}: no Returns: section"
    if found.get("Returns"):
        first, *rest = found["Returns"]
        assert all(not line or line[0].isspace() for line in rest), (
            f"{path}: Returns: continues at its first line's indent (griffe reads each such line as a "
            "value of its own): indent the continuation lines")
        assert not GRIFFE_NAMED.match(first), (
            f"{path}: Returns: starts as `name:` or `name (type):`, which griffe reads as a named value")


def is_mixer_class(path: str) -> bool:
    from layerzoo.mixers import Mixer

    obj = resolve(path) if path.startswith("layerzoo.mixers.") else None
    return inspect.isclass(obj) and issubclass(obj, Mixer) and obj is not Mixer


MIXER_CLASSES = [path for path in ENTRY_POINTS if is_mixer_class(path)]


@pytest.mark.parametrize("path", MIXER_CLASSES)
def test_a_mixers_docstring_points_at_its_options_table_and_copies_none(path):
    """The options are declared once (their help is what `layerzoo mixers NAME` and docs/mixers.md
    show); a docstring that listed them again would drift."""
    from layerzoo.options import declared

    cls = resolve(path)
    found = sections(inspect.getdoc(cls))
    assert "Keyword Args" not in found, f"{path}: lists its options; point at `layerzoo mixers NAME` instead"
    options = " ".join(found["Args"])
    assert f"`layerzoo mixers {cls.registry_name}`" in options and "docs/mixers.md" in options, path
    doc = inspect.getdoc(cls)
    copied = [info.help for info in declared(cls.Options).values() if len(info.help.split()) > 3 and info.help in doc]
    assert not copied, f"{path}: copies the help of its options: {copied}"
