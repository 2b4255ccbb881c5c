"""Sweeps (a grid of runs, each in its own process) and comparisons of runs and sweeps."""
