"""layerzoo specs trained under torchtitan's trainer (`pip install 'layerzoo[torchtitan]'`).

    torchrun --nproc-per-node 8 -m torchtitan.train --module layerzoo.hf.torchtitan --config layerzoo_spec

`--module` imports `layerzoo.hf.torchtitan.config_registry`; its functions return torchtitan
Trainer configs (trainer.py: torchtitan's Trainer with layerzoo's batch split and context
parallelism) whose model is a layerzoo spec (model.py). Only torchtitan 0.3.0 is supported:
its model protocol changes between releases, so another version is refused here, in one line;
what it calls in torch that torch's releases lack is filled in here too (torch_gaps.py).
"""

from .torch_gaps import fill_torch_gaps
from .version import check_version

check_version()
fill_torch_gaps()
