"""The built-in kernel families described for check_kernel_family: one module per family of
layerzoo.kernels, named as its folder there. They live in layerzoo.testing, not beside the kernels,
because they are KernelFamily objects drawing with hypothesis, and the kernels import neither::

    from layerzoo.testing import check_kernel_family
    from layerzoo.testing.families import SSD
    check_kernel_family(SSD, "native")

Each is a KernelFamily: how to draw the family's inputs and a reachable state, and how to run one
streaming call on a backend of that name.
"""

from .assoc_memory import ASSOCIATIVE_MEMORY
from .gated_delta_rule import GATED_DELTA_RULE
from .kda import KDA
from .mlstm import MLSTM, in_frame
from .sliding_window import SLIDING_WINDOW
from .ssd import SSD

# Every built-in family, in the order of layerzoo.kernels.
FAMILIES = (SLIDING_WINDOW, MLSTM, GATED_DELTA_RULE, SSD, KDA, ASSOCIATIVE_MEMORY)

__all__ = ["ASSOCIATIVE_MEMORY", "FAMILIES", "GATED_DELTA_RULE", "KDA", "MLSTM", "SLIDING_WINDOW", "SSD", "in_frame"]
