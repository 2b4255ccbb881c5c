"""What a result depends on besides the code's arguments: the machine, the versions, the commit, the date."""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import subprocess
from collections.abc import Iterable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
# Written by the runs themselves: they do not make the code a result came from dirty.
RESULTS = "benchmarks/results"


def cpu_model() -> str:
    """The CPU's name as the OS reports it (Linux's /proc/cpuinfo; platform's guess elsewhere)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def git(*args: str, cwd: Path = ROOT) -> str | None:
    """git's output in cwd, stripped; None when git or the checkout is missing."""
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return done.stdout.strip()


def commit_and_dirty(root: Path = ROOT) -> dict:
    """{"commit": HEAD's hash or None outside a checkout, "dirty": whether tracked or new files
    differ from it, results excepted}."""
    commit = git("rev-parse", "HEAD", cwd=root)
    status = git("status", "--porcelain", "--", ".", f":!{RESULTS}", cwd=root) if commit else None
    return {"commit": commit, "dirty": bool(status) if commit else None}


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def run_context(device: str, packages: Iterable[str] = ()) -> dict:
    """The context a result is read in: machine (platform, CPU, cores, GPU on CUDA), versions of
    torch and of `packages` (None where not installed), torch's thread count, git commit, UTC date."""
    machine = {"platform": platform.platform(), "cpu": cpu_model(), "cores": os.cpu_count()}
    if device.startswith("cuda"):
        machine["gpu"] = torch.cuda.get_device_name(torch.device(device))
    return {
        "machine": machine,
        "python": platform.python_version(),
        "versions": {"torch": torch.__version__, **{name: package_version(name) for name in packages}},
        "threads": torch.get_num_threads(),
        "git": commit_and_dirty(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
