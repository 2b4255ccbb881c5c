"""First use of a compiled CPU kernel: where it is built (a folder private to the Python
environment), what a build says while it runs, and building them all up front."""

import shutil
import subprocess
import sys
import time
import venv

import pytest
from torch.utils import cpp_extension

from layerzoo.kernels.common import native_build

FOLDER = "from layerzoo.kernels.gated_delta_rule.native import build_directory; print(build_directory())"


def toy_kernel(tmp_path, what="toy kernel"):
    """A CompiledOps of a one-line source, for builds that cpp_extension.load only pretends to do."""
    source = tmp_path / "toy.cpp"
    source.write_text(f"// {what}\n")  # its own source: its own extension name
    return native_build.compiled_ops("toy", [source], [], what, register_for_tracing=lambda: None)


def pretend_builds(monkeypatch, seconds=0.0, fail=False, log=None):
    """cpp_extension.load writes the library (or fails) after `seconds`; `log` gets (start, end) times."""
    def load(name, sources, build_directory, **_):
        start = time.perf_counter()
        time.sleep(seconds)
        if log is not None:
            log.append((start, time.perf_counter()))
        if fail:
            raise RuntimeError("x.cpp:1:1: error: no compiler here")
        (native_build.Path(build_directory) / f"{name}{cpp_extension.LIB_EXT}").write_bytes(b"")

    monkeypatch.setattr(cpp_extension, "load", load)


def test_the_build_folder_is_private_to_the_python_environment(tmp_path, monkeypatch):
    """Two environments sharing one torch cache (its default, or TORCH_EXTENSIONS_DIR) build into
    folders of their own: their build files hold their own paths, so neither rebuilds the other's.
    One environment finds the same folder whichever name its interpreter is run by."""
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    here = native_build.build_directory("x")
    assert here.parent.parent == native_build.Path(cpp_extension.get_default_build_root())
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    assert native_build.build_directory("x") == tmp_path / here.parent.name / "x"
    other = tmp_path / "venv"  # another environment: a venv of this Python, finding this torch on PYTHONPATH
    venv.create(other, with_pip=False, symlinks=True)
    env = {"PYTHONPATH": ":".join(p for p in sys.path if p), "TORCH_EXTENSIONS_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    folders = {subprocess.run([other / "bin" / python, "-c", FOLDER], env=env, capture_output=True, text=True,
                              check=True).stdout.strip() for python in ("python", "python3")}
    assert len(folders) == 1 and native_build.Path(folders.pop()).parent.name != here.parent.name
    monkeypatch.setattr(sys, "prefix", str(other))
    assert native_build.build_directory("x").parent.name != here.parent.name


def test_a_first_build_says_so_in_one_line_and_a_built_kernel_loads_quietly(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    pretend_builds(monkeypatch)
    toy = toy_kernel(tmp_path)
    assert not toy.built() and toy.load() is not None and toy.built()
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("layerzoo: building the compiled CPU toy kernel"), lines
    assert "minute" in lines[0] and "layerzoo kernels build" in lines[0]
    toy.load.cache_clear()
    assert toy.load() is not None and capsys.readouterr().err == ""


def test_a_build_held_by_another_process_is_waited_for_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    pretend_builds(monkeypatch)
    toy = toy_kernel(tmp_path)
    toy.build_directory().mkdir(parents=True)
    hold = ("import fcntl, time\n"
            f"lock = open({str(toy.build_directory() / 'layerzoo.lock')!r}, 'w')\n"
            "fcntl.flock(lock, fcntl.LOCK_EX); print('held', flush=True); time.sleep(1.5)")
    holder = subprocess.Popen([sys.executable, "-c", hold], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    assert toy.load() is not None
    holder.wait()
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("layerzoo: waiting for another process building the compiled CPU toy kernel"), lines
    assert len(lines) == 2 and lines[1].startswith("layerzoo: building the compiled CPU toy kernel"), lines


def test_build_notices_go_to_whoever_reports_them(tmp_path, monkeypatch, capsys):
    """The trainer's progress bar takes the notices: a message when a build starts, None when it ends."""
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    pretend_builds(monkeypatch, fail=True)
    heard = []
    with native_build.reporting_builds(heard.append):
        assert toy_kernel(tmp_path).load() is None  # a failed build falls back, and its notice ends too
    assert [message is None for message in heard] == [False, True] and "toy kernel" in heard[0]
    assert "building" not in capsys.readouterr().err


def test_kernels_build_builds_several_at_a_time(tmp_path, monkeypatch):
    from layerzoo.kernels.compiled import build_all

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    spans = []
    pretend_builds(monkeypatch, seconds=0.5, log=spans)
    toys = toy_kernels(tmp_path, 3)
    heard = []
    with native_build.reporting_builds(lambda notice: None):
        results = build_all(toys, jobs=2, done=heard.append)
    assert sorted(built.kernel.what for built in heard) == ["toy 0", "toy 1", "toy 2"] and len(results) == 3
    assert all(built.ok and not built.was_built for built in results) and all(toy.built() for toy in toys)
    overlapping = max(sum(start <= moment < end for start, end in spans) for moment, _ in spans)
    assert overlapping == 2, spans  # two at a time, never three
    again = build_all(toys, jobs=2)
    assert all(built.was_built and built.ok for built in again)


def toy_kernels(tmp_path, n):
    """n toy kernels, "toy 0" to "toy n-1", each of its own source."""
    for i in range(n):
        (tmp_path / str(i)).mkdir()
    return tuple(toy_kernel(tmp_path / str(i), f"toy {i}") for i in range(n))


def test_layerzoo_kernels_lists_them_and_kernels_build_reports_each(tmp_path, monkeypatch, capsys):
    from layerzoo.cli import main
    from layerzoo.kernels import compiled

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    pretend_builds(monkeypatch)
    toys = toy_kernels(tmp_path, 2)
    monkeypatch.setattr(compiled, "KERNELS", toys)

    def listed():
        assert main(["kernels"]) == 0
        return [row.split() for row in capsys.readouterr().out.splitlines()[1:3]]

    assert listed() == [["toy", str(i), "toy", "native", "no", str(toy.build_directory())] for i, toy in enumerate(toys)]
    assert main(["kernels", "build", "--jobs", "2"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0] == "building 2 compiled CPU kernels, 2 at a time (a minute or two each): toy 0, toy 1", lines
    assert sorted(lines[1:]) == ["toy 0: built in 0 s", "toy 1: built in 0 s"] and captured.err == ""
    assert [row[4] for row in listed()] == ["yes", "yes"]
    assert main(["kernels", "build"]) == 0
    assert sorted(capsys.readouterr().out.splitlines()) == ["toy 0: already built", "toy 1: already built"]
    assert main(["kernels", "build", "--jobs", "0"]) == 2 and "--jobs must be >= 1" in capsys.readouterr().err


def test_kernels_build_fails_when_a_kernel_does_not_build(tmp_path, monkeypatch, capsys, caplog):
    from layerzoo.cli import main
    from layerzoo.kernels import compiled

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    pretend_builds(monkeypatch, fail=True)
    monkeypatch.setattr(compiled, "KERNELS", toy_kernels(tmp_path, 1))
    assert main(["kernels", "build"]) == 1
    assert capsys.readouterr().out.splitlines()[1] == "toy 0: not built (see the warning above); its PyTorch code runs instead"
    assert "compiled CPU toy 0 unavailable (x.cpp:1:1: error: no compiler here)" in caplog.text


@pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler: the PyTorch kernels run")
def test_kernels_build_builds_the_real_kernels(capsys):
    """The real kernels, side by side in threads, in this environment's folders. In the suite most
    are built already by earlier tests; a cold run builds the rest here (later tests would anyway)."""
    from layerzoo.cli import main
    from layerzoo.kernels.compiled import KERNELS

    assert main(["kernels", "build"]) == 0
    out = capsys.readouterr().out
    assert all(f"{kernel.what}: " in out for kernel in KERNELS) and "not built" not in out, out
    assert all(kernel.built() and kernel.enabled() for kernel in KERNELS)


def test_a_built_library_loads_as_it_is_and_a_damaged_one_is_built_again(tmp_path, monkeypatch):
    """A finished build is loaded straight from its file (its name holds what it was built from),
    never through torch's builder; a file that does not load goes back to the builder."""
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "cache"))
    kernel = toy_kernel(tmp_path)
    library = native_build.library(kernel.name)
    library.parent.mkdir(parents=True)
    library.write_bytes(b"a finished build")
    loaded, built = [], []
    monkeypatch.setattr(native_build.torch.ops, "load_library", loaded.append)
    monkeypatch.setattr(cpp_extension, "load", lambda name, **_: built.append(name))
    assert kernel.load() is not None
    assert (loaded, built) == ([str(library)], [])

    def damaged(path):
        raise OSError(f"{path}: file too short")

    kernel.load.cache_clear()
    monkeypatch.setattr(native_build.torch.ops, "load_library", damaged)
    assert kernel.load() is not None
    assert built == [kernel.name]


def test_the_extension_name_changes_with_the_compiler_flags(tmp_path):
    source = tmp_path / "toy.cpp"
    source.write_text("// toy\n")
    names = {native_build.extension_name("toy", [source], [], flags) for flags in ((), ("-DFAST",), ("-DSLOW",))}
    assert len(names) == 3
