"""ARMT under context parallelism over 2 and 3 gloo processes (one torchrun launch each,
armt_worker.py) against one process: logits, loss and every gradient of armt-tiny in rows (a last
segment partial, and not) and in packed sequences, and of ARMT around transformers' Llama; each
rank holding whole segments, the memory passed rank to rank; also sharded with FSDP2 over the same
processes. Bad input is refused in one line."""

import pytest

from tests.training.parallel.context.test_context_parallel import launch


@pytest.fixture(scope="module", params=[2, 3], ids=["2 ranks", "3 ranks"])
def report(request, tmp_path_factory) -> dict:
    """armt_worker.py's report: each case's largest difference, the bad inputs' messages."""
    return launch("armt_worker.py", request.param, tmp_path_factory.mktemp(f"armt{request.param}"))


def test_armt_equals_one_process_in_fp64(report):
    fp64 = {case: worst for case, worst in report["cases"].items() if case.endswith("fp64")}
    assert set(fp64) == {"armt-tiny/rows 24/fp64", "armt-tiny/rows 29/fp64", "armt-tiny/packed/fp64",
                         "armt-hf/rows 29/fp64", "armt-tiny/rows 29/fsdp/fp64", "armt-tiny/packed/fsdp/fp64"}
    assert {case: worst for case, worst in fp64.items() if not worst <= 1e-12} == {}


def test_armt_in_fp32_is_within_its_tolerance(report):
    assert report["cases"]["armt-tiny/rows 29/fp32"] <= 1e-5


def test_bad_input_is_one_line(report):
    messages = report["bad_inputs"]
    assert set(messages) == {"too_few_segments"}
    assert "too few for a context" in messages["too_few_segments"]
    assert all("\n" not in message for message in messages.values())
