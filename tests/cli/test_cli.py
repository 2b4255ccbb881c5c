import argparse
import subprocess
import sys

import pytest

from layerzoo.cli import main


def test_specs_lists_shipped_specs(capsys):
    assert main(["specs"]) == 0
    out = capsys.readouterr().out
    assert "swa-full" in out and "transformer-tiny" in out


def test_mixers_lists_the_mixers_and_one_mixers_options(capsys):
    assert main(["mixers"]) == 0
    out = capsys.readouterr().out
    assert "swa " in out and "mamba2 " in out and "layerzoo mixers NAME" in out
    assert main(["mixers", "swa"]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[2:]}
    assert rows["window"][:4] == ["window", "int", "128", ">="] and "settable at run time" in " ".join(rows["window"])
    assert rows["backend"][1:3] == ["str", "auto"]


def test_mixers_targets_are_the_registrys(capsys):
    from layerzoo.registry import list_targets

    assert main(["mixers", "--targets"]) == 0
    targets = capsys.readouterr().out.split()
    assert targets == list_targets() and {"swa", "gated_deltanet"} <= set(targets) and "assoc_memory" not in targets


def test_describe_shows_layers_parameters_and_state(capsys):
    assert main(["describe", "swa-full-tiny", "--seq-len", "100"]) == 0
    out = capsys.readouterr().out
    assert "attention" in out and "state per sequence at 100 tokens" in out and "parameters:" in out


def test_describe_applies_overrides_and_dumps(capsys):
    assert main(["describe", "swa-tiny", "--set", "model.n_layers=2", "--dump"]) == 0
    assert "layers: [swa, swa]" in capsys.readouterr().out


@pytest.mark.parametrize("argv, words", [
    (["describe", "swa-ful"], "did you mean 'swa-full'"),
    (["describe", "swa-tiny", "--set", "model.mixers.swa.windw=3"], "did you mean 'window'"),
    (["describe", "nothere.yaml"], "no such spec file"),
    (["describe", "swa-tiny", "--seq-len", "-5"], "--seq-len must be >= 1, got -5"),
])
def test_errors_are_one_line_without_traceback(argv, words):
    result = subprocess.run([sys.executable, "-m", "layerzoo.cli", *argv], capture_output=True, text=True)
    assert result.returncode == 2
    assert words in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr


def test_version_and_python_dash_m():
    import layerzoo

    for command in (["-m", "layerzoo"], ["-m", "layerzoo.cli"]):
        result = subprocess.run([sys.executable, *command, "--version"], capture_output=True, text=True)
        assert result.returncode == 0 and result.stdout.strip() == f"layerzoo {layerzoo.__version__}", result


def heavy_imports(argv: list[str]) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run `python -m layerzoo ARGV...`; its result, and the modules of torch and transformers it imported."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "layerzoo", *argv], capture_output=True, text=True)
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}
    return result, {name for name in imported if name.split(".")[0] in ("torch", "transformers")}


def subcommands() -> list[str]:
    from layerzoo.cli import build_parser

    (commands,) = [action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction)]
    return sorted(commands.choices)


@pytest.mark.parametrize("argv", [["--help"], *([name, "--help"] for name in subcommands()), ["tokenizer", "train", "-h"]],
                         ids=" ".join)
def test_help_returns_without_importing_torch(argv):
    result, heavy = heavy_imports(argv)
    assert result.returncode == 0 and "usage: layerzoo" in result.stdout, result.stderr[-2000:]
    assert not heavy, f"`layerzoo {' '.join(argv)}` imported {sorted(heavy)[:5]}"


@pytest.mark.parametrize("argv", [[], ["trian"], ["train"], ["describe", "swa-tiny", "--seq-len", "x"], ["lm-eval"],
                                  ["kernels", "rebuild"], ["kernels", "build", "--jobs", "0"]],
                         ids=lambda argv: " ".join(argv) or "nothing")
def test_argument_errors_return_without_importing_torch(argv):
    result, heavy = heavy_imports(argv)
    lines = [line for line in result.stderr.splitlines() if not line.startswith("import time:")]
    assert result.returncode == 2 and lines[-1].startswith("layerzoo") and "error:" in lines[-1], result.stderr[-2000:]
    assert not heavy, f"`layerzoo {' '.join(argv)}` imported {sorted(heavy)[:5]}"
