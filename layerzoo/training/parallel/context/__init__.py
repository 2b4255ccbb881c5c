"""Context parallelism: each rank of a context group holds a contiguous piece of every sequence,
and the mixers exchange what crosses the pieces in collectives every rank reaches in the same order."""

from .apply import context_parallel, exchange_of
from .errors import ContextError
from .exchanges import register_exchange
from .group import ContextGroup
from .pieces import Pieces

__all__ = ["ContextError", "ContextGroup", "Pieces", "context_parallel", "exchange_of", "register_exchange"]
