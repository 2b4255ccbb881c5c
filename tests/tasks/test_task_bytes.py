import pytest
import torch

from layerzoo.errors import OptionError
from layerzoo.tasks import make_task


def test_windows_shift_by_one_and_splits_are_disjoint(tmp_path):
    text = bytes(range(256)) * 4
    path = tmp_path / "text.txt"
    path.write_bytes(text)
    train = make_task("bytes", {"paths": (str(path),), "holdout": 0.25}, 256)
    batch = train.batch(16, [0, 1, 2])
    assert torch.equal(batch.input_ids[:, 1:], batch.targets[:, :-1])
    assert len(train.data) == 768
    evaluation = make_task("bytes", {"paths": (str(path),), "holdout": 0.25, "split": "eval"}, 256)
    assert bytes(evaluation.data.tolist()) == text[768:]
    with pytest.raises(ValueError, match="fewer than seq_len"):
        evaluation.batch(300, [0])


@pytest.mark.parametrize("options, vocab, key", [({"paths": ("/no/such.txt",)}, 256, "paths"), ({"paths": ()}, 256, "paths"),
                                                 ({"paths": (__file__,)}, 64, "name")])
def test_bad_options(options, vocab, key):
    with pytest.raises(OptionError) as error:
        make_task("bytes", options, vocab)
    assert error.value.key == key
