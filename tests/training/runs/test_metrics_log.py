"""metrics.jsonl is strict JSON, and a resumed run keeps only the records up to its checkpoint."""

import math

from layerzoo.training.runs.metrics import MetricsLog
from tests.helpers.run_checks import metric_records


def test_non_finite_values_are_written_as_null(tmp_path):
    MetricsLog(tmp_path / "metrics.jsonl", keep_through=0).write({"step": 1, "eval_loss": math.inf, "loss": math.nan})
    assert metric_records(tmp_path) == [{"step": 1, "eval_loss": None, "loss": None}]


def test_resuming_keeps_the_records_up_to_the_checkpoint(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "loss": 2.0}\n{"step": 2, "loss": NaN}\n{"step": 2, "eval_loss": 1.5}\n'
                    '{"step": 3, "loss": 1.0}\n{"step": 4, "lo')  # an older version's NaN; a write cut short
    log = MetricsLog(path, keep_through=2)
    log.write({"step": 3, "loss": 0.5})
    assert metric_records(tmp_path) == [{"step": 1, "loss": 2.0}, {"step": 2, "loss": None},
                                        {"step": 2, "eval_loss": 1.5}, {"step": 3, "loss": 0.5}]


def test_a_new_run_starts_an_empty_log(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "loss": 2.0}\n')
    MetricsLog(tmp_path / "metrics.jsonl", keep_through=0)
    assert metric_records(tmp_path) == []


def test_other_ranks_write_nothing(tmp_path):
    MetricsLog(None, keep_through=0).write({"step": 1})
    assert not list(tmp_path.iterdir())
