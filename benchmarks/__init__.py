"""layerzoo's benchmarks: time and memory against length, beside peers, as JSON that renders the docs' tables.

Run from the repository root (this package is not installed with layerzoo):

    python -m benchmarks                      # the benchmarks, one line each
    python -m benchmarks swa --help           # one benchmark's options
    python -m benchmarks swa                  # run it: benchmarks/results/swa.json, its tables printed
    python -m benchmarks swa --smoke          # tiny shapes, two rounds: does it run?
    python -m benchmarks swa --base main      # A/B against another revision, per-cell ratios
    python -m benchmarks render               # docs/benchmarks.md and the README's summary from the JSON

Each benchmark is one module here (registered in runner/registry.py); runner/ holds what they
share: the timing harness (timing.py), memory probes, options, the results files, rendering and
the A/B runs.
"""
