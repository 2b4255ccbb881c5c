"""The registry from mixer class to exchange: how a mixer runs on its rank's piece.

An exchange is `fn(mixer, forward, x, pieces, link) -> (y, state, link)`: x (B, T_piece,
d_model) is this rank's piece and `forward` the mixer's own forward; it returns the piece's
output, its state and the link of its last collective (collectives.py). A third-party mixer
declares its own with `@register_exchange(MyMixer)`; one without passes states rank to rank
(states.py), warned once.
"""

from __future__ import annotations

from collections.abc import Callable

from ....mixers.base import Mixer

Exchange = Callable  # (mixer, forward, x, pieces, link) -> (y, state, link)

_EXCHANGES: dict[type, Exchange] = {}


def register_exchange(*classes: type) -> Callable[[Exchange], Exchange]:
    """Decorator: `fn` runs every mixer of these classes (and of their subclasses) on a piece."""
    def decorate(fn: Exchange) -> Exchange:
        for cls in classes:
            _EXCHANGES[cls] = fn
        return fn
    return decorate


def declared_exchange(mixer: Mixer) -> Exchange | None:
    """The exchange registered for the mixer's class or its nearest base, or None."""
    for cls in type(mixer).__mro__:
        if cls in _EXCHANGES:
            return _EXCHANGES[cls]
    return None
