"""Segment-count curriculum (ARMT): stages of growing segment counts, the lr re-annealed per stage.

It plugs into any model that processes its input in segments of a fixed length: a stage with n
segments trains on n * segment_size tokens.
"""

from __future__ import annotations

import bisect
import itertools

from ...tasks import example_seed
from ..config import CurriculumConfig


class Curriculum:
    def __init__(self, config: CurriculumConfig, total_steps: int, segment_size: int, seed: int):
        self.config = config
        self.segment_size = segment_size
        self.seed = seed
        stages = len(config.segments)
        steps = config.stage_steps or [total_steps // stages + (i < total_steps % stages) for i in range(stages)]
        self.stage_steps = list(steps)
        self.stage_starts = [0, *itertools.accumulate(steps)][:-1]

    def stage(self, step: int) -> int:
        return bisect.bisect_right(self.stage_starts, step) - 1

    def stage_progress(self, step: int) -> tuple[int, int]:
        """(step within its stage, that stage's length): the lr schedule restarts per stage."""
        stage = self.stage(step)
        return step - self.stage_starts[stage], self.stage_steps[stage]

    def segments(self, step: int) -> int:
        """The segment count of this step: the stage's, or uniform in 1..it with random_segments."""
        most = self.config.segments[self.stage(step)]
        if not self.config.random_segments:
            return most
        return 1 + example_seed(self.seed, "segments", step) % most

    def seq_len(self, step: int) -> int:
        return self.segments(step) * self.segment_size
