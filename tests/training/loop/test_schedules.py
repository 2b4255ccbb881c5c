import math

import torch
from hypothesis import given, strategies as st

from layerzoo.mixers.attention import SlidingWindowAttention
from layerzoo.training.config import CurriculumConfig, OptimizerConfig, WindowConfig
from layerzoo.training.loop.curriculum import Curriculum
from layerzoo.training.loop.schedules import WindowSchedule, learning_rate
from layerzoo.training.loop.trainer import train


@given(p=st.floats(0, 1), seed=st.integers(0, 2**32), anneal=st.sampled_from([0.0, 0.1, 0.3]))
def test_short_window_frequency_is_close_to_p_and_the_end_is_long(p, seed, anneal):
    steps = 4000
    schedule = WindowSchedule(WindowConfig("stochastic", short=8, long=64, p_short=p, anneal_fraction=anneal), steps, seed)
    windows = [schedule.window(step) for step in range(steps)]
    start = schedule.anneal_start
    assert start == math.ceil(steps * (1 - anneal))
    assert all(window == 64 for window in windows[start:])
    sampled = windows[:start]
    frequency = sum(window == 8 for window in sampled) / len(sampled)
    # Five standard deviations, plus a few draws' worth: for p near 0 or 1 the count is nearly
    # Poisson and a single short window is not rare enough for the normal bound alone.
    assert abs(frequency - p) <= 5 * math.sqrt(p * (1 - p) / len(sampled)) + 5 / len(sampled)
    assert set(sampled) <= {8, 64}


def test_fixed_schedule_keeps_one_window():
    schedule = WindowSchedule(WindowConfig("fixed", long=32), 100, 0)
    assert {schedule.window(step) for step in range(100)} == {32}
    assert WindowSchedule(WindowConfig(), 10, 0).window(3) is None  # keep the spec's windows


def test_learning_rate_warms_up_then_anneals():
    config = OptimizerConfig(lr=1.0, warmup_steps=10, min_lr_ratio=0.1)
    rates = [learning_rate(step, 110, config) for step in range(111)]
    assert rates[0] == 0.1 and rates[9] == 1.0
    assert all(a >= b for a, b in zip(rates[10:], rates[11:]))
    assert math.isclose(rates[110], 0.1)


def test_curriculum_stages_restart_the_schedule():
    curriculum = Curriculum(CurriculumConfig(segments=(2, 4, 8)), total_steps=30, segment_size=16, seed=0)
    assert [curriculum.seq_len(step) for step in (0, 9, 10, 29)] == [32, 32, 64, 128]
    assert curriculum.stage_progress(10) == (0, 10) and curriculum.stage_progress(25) == (5, 10)
    randomised = Curriculum(CurriculumConfig(segments=(2, 4), random_segments=True), 40, 16, seed=1)
    counts = {randomised.segments(step) for step in range(20, 40)}
    assert counts <= {1, 2, 3, 4} and len(counts) > 1


def test_swa_layers_run_with_the_sampled_window(tiny_spec, tmp_path):
    seen = []

    def record(module, args):
        if isinstance(module, SlidingWindowAttention) and torch.is_grad_enabled():
            seen.append(module.window)

    handle = torch.nn.modules.module.register_module_forward_pre_hook(record)
    try:
        result = train(tiny_spec, ["training.steps=12", "model.pattern=[swa, swa]"], run_dir=tmp_path / "run", progress=False)
    finally:
        handle.remove()
    config = result.spec.training
    schedule = WindowSchedule(config.window, config.steps, config.seed)
    expected = [schedule.window(step) for step in range(config.steps)]
    assert seen == [window for window in expected for _ in range(2)]  # both SWA layers, every step
    assert {4, 16} <= set(expected)


def test_the_report_names_the_longest_length_the_curriculum_reached():
    from types import SimpleNamespace

    from layerzoo.training.config import TrainingConfig
    from layerzoo.evaluation.grid_report import trained_length

    plain = SimpleNamespace(training=TrainingConfig(seq_len=96))
    grown = SimpleNamespace(training=TrainingConfig(seq_len=96, curriculum=CurriculumConfig(segments=(2, 4, 8))))
    assert trained_length(plain, torch.nn.Linear(1, 1)) == 96
    armt_like = SimpleNamespace(segment_size=32)
    assert trained_length(grown, armt_like) == 8 * 32
