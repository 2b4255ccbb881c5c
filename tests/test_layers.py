"""layerzoo's imports point down its layers, and its import graph has no circle.

LAYERS below is the order, declared here once: a module may import its own layer and those below
it. Every import counts, those inside functions too: a lazy import is still a dependency. The
layout page (docs/layout.md) renders LAYERS when the site builds.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

import layerzoo

PACKAGE = Path(layerzoo.__file__).parent


class Layer(NamedTuple):
    """Modules whose dotted names (below `layerzoo`) start with one of `prefixes`; `what` they hold."""

    prefixes: tuple[str, ...]
    what: str


# Lowest first. A module belongs to the layer of the longest prefix that names it; "" is the root
# package `layerzoo`, the facade that imports the layers below it and registers the built-ins.
LAYERS = (
    Layer(("errors",), "the errors a user can cause, one line each"),
    Layer(("options",), "options declared once: type, default, bounds, one line of help"),
    Layer(("registry",), "mixers by name; holds entries, imports no mixer"),
    Layer(("kernels.common",), "what the kernel families share"),
    Layer(("kernels",), "pure functions on (B, T, H, D) tensors, a folder per family"),
    Layer(("blocks",), "norms, SwiGLU, RoPE, short convolution, the residual block, packing"),
    Layer(("mixers",), "one file per mixer, each with its Options"),
    Layer(("specs",), "YAML specs, their sections, the model section's resolution"),
    Layer(("assemblies.causal_lm", "assemblies.generate"), "the causal LM and its generation"),
    Layer(("tasks.text.cache", "hf.quiet", "hf.gguf"), "content-addressed caches written whole; GGUF files "
                                                      "read as Hugging Face folders (for ARMT's wrap too)"),
    Layer(("assemblies.armt",), "ARMT around a causal LM"),
    Layer(("assemblies.build", "assemblies"), "`build`, the one factory above both; `describe`"),
    Layer(("tasks",), "training tasks and the seeds their examples are drawn from"),
    Layer(("training.config", "training.errors", "training.precision"),
          "the `training:` section, the errors of runs, the precision a model computes in"),
    Layer(("training.parallel",), "data parallelism and FSDP"),
    Layer(("training.runs",), "run folders, checkpoints, metrics logs and their plots"),
    Layer(("training.objectives",), "what a model is trained on: language modelling, distillation's stages"),
    Layer(("training.loop",), "the one training loop, its schedules and stop signals; `train`"),
    Layer(("training.distill",), "a converted model distilled from its teacher: the `distill:` section, "
                                 "its stages in the loop, the reliance measure"),
    Layer(("training.sweeps",), "grids of runs and their comparison"),
    Layer(("training",), "the package's face: the sections, and names loaded on first use"),
    Layer(("",), "`import layerzoo`: public names loaded on first use, the built-ins registered"),
    Layer(("testing",), "hypothesis strategies, mixer and kernel conformance checks"),
    Layer(("hf",), "transformers' Auto classes, export; above the facade, so that `import layerzoo` "
                   "never imports transformers"),
    Layer(("convert",), "a Hugging Face transformer into a layerzoo hybrid; a conversion folder distilled"),
    Layer(("evaluation",), "runs, distill runs and model folders scored, their reports; `layerzoo eval`"),
    Layer(("cli", "__main__"), "the `layerzoo` command: a module per subcommand"),
)


def module_names() -> dict[str, Path]:
    """Dotted names of the package's modules (packages by their __init__)."""
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def imports_of(module: str, source: str, modules: set[str], is_package: bool) -> set[str]:
    """The layerzoo modules `source` (the text of `module`) imports, anywhere in it."""
    found = set()
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # `from x import y` depends on module x.y when there is one, else on x's names
            submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules]
            targets = submodules + ([base] if len(submodules) < len(node.names) else [])
        else:
            continue
        for target in targets:
            while target and target not in modules:  # `import layerzoo.a.b` names a module or a package
                target = target.rpartition(".")[0]
            if target.startswith("layerzoo"):
                found.add(target)
    return found


def rank(module: str) -> int:
    """The index in LAYERS of `module`'s layer (len(LAYERS) for none)."""
    best, best_length = len(LAYERS), -1
    relative = module.removeprefix("layerzoo").lstrip(".")
    for index, layer in enumerate(LAYERS):
        for prefix in layer.prefixes:
            if (relative == prefix or relative.startswith(prefix + ".")) and len(prefix) > best_length:
                best, best_length = index, len(prefix)
    return best


def import_graph() -> dict[str, set[str]]:
    modules = module_names()
    return {name: imports_of(name, path.read_text(), set(modules), path.name == "__init__.py") - {name}
            for name, path in modules.items()}


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{source} imports {target}" for source, targets in graph.items()
                  for target in targets if rank(target) > rank(source))


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected group of modules that has one (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_module_has_a_layer():
    unplaced = [name for name in module_names() if rank(name) == len(LAYERS)]
    assert not unplaced, f"modules in no layer of LAYERS: {unplaced}"


def test_imports_point_down_the_layers():
    assert upward_imports(import_graph()) == []


def test_the_import_graph_has_no_circle():
    assert cycles(import_graph()) == []


def test_the_checks_catch_an_upward_import_and_a_circle():
    modules = {"layerzoo.registry", "layerzoo.mixers", "layerzoo.mixers.base", "layerzoo.specs.spec", "layerzoo.training"}
    registry = imports_of("layerzoo.registry", "def load():\n    from . import mixers\n", modules, False)
    assert registry == {"layerzoo.mixers"}
    spec = imports_of("layerzoo.specs.spec", "from ..training import config\n", modules, False)
    assert upward_imports({"layerzoo.registry": registry, "layerzoo.specs.spec": spec}) == [
        "layerzoo.registry imports layerzoo.mixers", "layerzoo.specs.spec imports layerzoo.training"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
