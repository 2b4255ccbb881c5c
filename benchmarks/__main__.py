"""`python -m benchmarks`, from the repository root: see benchmarks/runner/cli.py."""

import sys

from benchmarks.runner.cli import main

sys.exit(main(sys.argv[1:]))
