"""What the benchmarks share: one timing harness, the memory probes, the options, the results
files and their context, the rendering of tables into the docs, and A/B runs against a revision."""
