"""torch.compile(fullgraph=True) and torch.export on every shipped tiny spec, equal to eager.

Kept cheap for CI: backend="aot_eager" runs what traces (dynamo, then AOTAutograd's
functionalisation, and for training its joint forward-backward graph) without generating code;
each stack is cut to one layer of each kind it has, and inputs are just long enough to cross an
SWA window, a kernel chunk and an ARMT segment. Export is
torch.export's default, non-strict: it is what `torch.export.export(model, args)` does, and
strictness (dynamo) is already held by the fullgraph compile. The Gated DeltaNet specs run the
compiled CPU kernel (the op must show in the exported graph), and gdn-tiny the PyTorch one too.
"""

from __future__ import annotations

import shutil

import pytest
import torch
import torch.nn.functional as F
from torch._dynamo.testing import CompileCounterWithBackend

import layerzoo
from layerzoo.assemblies.armt import ARMT
from layerzoo.kernels.common.backends import constant_when_traced
from layerzoo.kernels.gated_delta_rule import native
from layerzoo.specs.files import shipped_specs
from layerzoo.testing import assert_close

# The compiled kernel's ops, by name: torch.ops.layerzoo has the backward only once it is loaded.
COMPILED_FORWARD, COMPILED_BACKWARD = "gated_delta_rule_forward_functional", "gated_delta_rule_backward"


def distinct_tiny_specs() -> list[str]:
    """Every shipped *-tiny spec, less those that build the same model as one before them
    (swa-niah-tiny is swa-full-tiny with a training section)."""
    names, models = [], []
    for name in (name for name in shipped_specs() if name.endswith("-tiny")):
        spec = layerzoo.load_spec(name)
        if (spec.model, spec.armt) not in models:
            names.append(name)
            models.append((spec.model, spec.armt))
    return names


def uses_gated_deltanet(name: str) -> bool:
    return any(layer.type == "gated_deltanet" for layer in layerzoo.load_spec(name).model.layers)


# (spec, CPU kernel of the gated delta rule): the compiled one wherever it is used, and the
# PyTorch one (LAYERZOO_NATIVE=0) on one spec.
CASES = [(name, "compiled" if uses_gated_deltanet(name) else None) for name in distinct_tiny_specs()]
CASES.append(("gdn-tiny", "pytorch"))


@pytest.fixture
def kernel(request, monkeypatch):
    """Selects the case's gated delta rule kernel; a fresh dynamo cache, since a traced graph keeps
    the kernel it was traced with."""
    choice = request.param
    if choice == "compiled":
        if shutil.which("c++") is None:
            pytest.skip("no C++ compiler: the compiled kernel cannot be built")
        assert native.load_native_ops() is not None, "the compiled kernel did not build (see the warning above)"
    monkeypatch.setenv("LAYERZOO_NATIVE", "0" if choice == "pytorch" else "1")
    torch._dynamo.reset()
    yield choice
    torch._dynamo.reset()


def one_layer_of_each_kind(name: str) -> list[str]:
    """Overrides that cut the spec's stack to one layer of each kind it has, in order (for ARMT,
    repeated until the memory pattern places a memory layer): tracing time grows with depth, and a
    repeated layer traces the same code."""
    spec = layerzoo.load_spec(name)
    kinds = list(dict.fromkeys(layer.name for layer in spec.model.layers))
    depth = len(kinds)
    while spec.armt is not None and not spec.armt.layer_indices(depth):
        depth += 1
    return [f"model.pattern=[{', '.join(kinds)}]", f"model.n_layers={depth}"]


def model_and_tokens(name: str) -> tuple[torch.nn.Module, torch.Tensor]:
    """The spec's model, cut to one layer of each kind, in eval mode, and (2, T) tokens: T = 20
    crosses the tiny specs' window and chunk (16); for ARMT, a whole segment (written to memory)
    and two tokens that read it."""
    torch.manual_seed(0)
    model = layerzoo.build(name, one_layer_of_each_kind(name)).eval()
    length = 20
    if isinstance(model, ARMT):
        length = model.segment_size + 2
        for memory in model.memories.values():  # live from the start: its value projection starts at zero
            torch.nn.init.normal_(memory.value.weight, std=0.2)
    return model, torch.randint(0, model.config.vocab_size, (2, length), generator=torch.Generator().manual_seed(0))


def calls(graph_modules, op: str) -> bool:
    """Whether these graph modules, or their subgraphs (autograd.Function bodies), call
    torch.ops.layerzoo.<op> (the packet or an overload, printed "layerzoo.<op>[.default]")."""
    return any(str(node.target).split(".")[:2] == ["layerzoo", op] for gm in graph_modules for module in gm.modules()
               if isinstance(module, torch.fx.GraphModule) for node in module.graph.nodes)


CASE_IDS = [name if choice in (None, "compiled") else f"{name}-{choice}" for name, choice in CASES]


@pytest.mark.parametrize("name,kernel", CASES, ids=CASE_IDS, indirect=["kernel"])
def test_compile_fullgraph_matches_eager(name, kernel):
    model, tokens = model_and_tokens(name)
    counter = CompileCounterWithBackend("aot_eager")
    with torch.no_grad():
        expected = model(tokens)
        actual = torch.compile(model, fullgraph=True, backend=counter)(tokens)
    assert counter.frame_count == 1
    assert calls(counter.graphs, COMPILED_FORWARD) == (kernel == "compiled")
    assert_close(actual, expected, what=f"{name} compiled logits")


@pytest.mark.parametrize("name,kernel", CASES, ids=CASE_IDS, indirect=["kernel"])
def test_export_matches_eager(name, kernel):
    model, tokens = model_and_tokens(name)
    program = torch.export.export(model, (tokens,))
    assert calls([program.graph_module], COMPILED_FORWARD) == (kernel == "compiled")
    with torch.no_grad():
        expected = model(tokens)
    assert_close(program.module()(tokens), expected, what=f"{name} exported logits")


@pytest.mark.parametrize("kernel", ["compiled"], indirect=True)
def test_compiled_training_step_runs_the_compiled_kernel_backward(kernel):
    """loss.backward() through a fullgraph-compiled model: AOTAutograd traces the backward ahead of
    time, through the compiled kernel's backward op (its fake), and the gradients equal eager's."""
    model, tokens = model_and_tokens("gdn-tiny")
    model.train()

    def loss_of(module):
        return F.cross_entropy(module(tokens).flatten(0, 1), tokens.flatten())

    expected_loss = loss_of(model)
    expected_loss.backward()
    expected = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad()
    counter = CompileCounterWithBackend("aot_eager")
    loss = loss_of(torch.compile(model, fullgraph=True, backend=counter))
    loss.backward()
    assert counter.frame_count == 1
    assert calls(counter.graphs, COMPILED_FORWARD) and calls(counter.graphs, COMPILED_BACKWARD)
    assert_close(loss, expected_loss, what="loss")
    for name, p in model.named_parameters():
        assert_close(p.grad, expected[name], what=f"d{name}", scale=10)


def test_constant_when_traced_marks_a_function_as_torch_does():
    """It copies torch.compiler.assume_constant_result's mark (to spare `import layerzoo` importing
    torch._dynamo): if torch changes the mark, this fails before the compile tests do."""
    def ours():
        pass

    def theirs():
        pass

    assert constant_when_traced(ours) is ours
    assert vars(ours) == vars(torch.compiler.assume_constant_result(theirs))
