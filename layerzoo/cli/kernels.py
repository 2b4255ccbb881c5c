"""`layerzoo kernels [build]`: the compiled CPU kernels, which are built in this Python environment
and where; `build` builds them all up front."""

from __future__ import annotations

import argparse
import sys

from .arguments import check_at_least_one


def add_parser(commands, name: str) -> None:
    parser = commands.add_parser(name, help="the compiled CPU kernels: which are built in this Python environment, and "
                                            "where; `kernels build` builds them all up front")
    parser.add_argument("action", nargs="?", choices=("list", "build"), default="list",
                        help="list (the default), or build every kernel not built yet, several at a time")
    parser.add_argument("--jobs", type=int, metavar="J",
                        help="build: builds at a time (default: the CPUs available, at most one per kernel)")


def run(args: argparse.Namespace) -> int:
    check_at_least_one("--jobs", args.jobs)  # before torch is imported, as argument errors are
    from ..kernels.compiled import KERNELS

    if args.action == "build":
        return build(KERNELS, args.jobs)
    rows = [("compiled CPU kernel", "backend", "built", "folder")]
    rows += [(kernel.what, f"{kernel.family} native", "yes" if kernel.built() else "no", str(kernel.build_directory()))
             for kernel in KERNELS]
    width = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        print("  ".join(cell.ljust(size) for cell, size in zip(row, width)) + f"  {row[3]}")
    print(f"\nfolders of the Python environment {sys.prefix}; each kernel is built on first use, or all at once "
          "by `layerzoo kernels build`; backend=\"native\" runs it (\"auto\" does on the CPU where it builds)")
    return 0


def build(kernels, jobs: int | None) -> int:
    """One line on what builds, then one per kernel as it ends; 1 if any failed."""
    from ..kernels.common.native_build import reporting_builds
    from ..kernels.compiled import build_all, builds_at_once

    missing = [kernel.what for kernel in kernels if not kernel.built()]
    jobs = jobs or builds_at_once(kernels)
    if missing:
        print(f"building {len(missing)} compiled CPU kernels, {jobs} at a time (a minute or two each): "
              f"{', '.join(missing)}", flush=True)

    def done(built) -> None:
        if not built.ok:
            outcome = "not built (see the warning above); its PyTorch code runs instead"
        elif built.was_built:
            outcome = "already built"
        else:
            outcome = f"built in {built.seconds:.0f} s"
        print(f"{built.kernel.what}: {outcome}", flush=True)

    with reporting_builds(lambda notice: None):  # the line above says what builds; each kernel's says when it ends
        results = build_all(kernels, jobs, done)
    return 0 if all(built.ok for built in results) else 1
