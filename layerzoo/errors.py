"""Errors layerzoo raises on bad input. Each carries a one-line message fit for a CLI."""

from __future__ import annotations

import difflib
from typing import Iterable


class LayerzooError(Exception):
    """Base class: the CLI prints these as one line, without a traceback."""


class UnknownNameError(LayerzooError, KeyError):
    """A name (mixer, spec, option) that is not known."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name most similar to `name`, or None when nothing is close."""
    matches = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return matches[0] if matches else None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """"; did you mean 'x'?" for the closest known name, or "" when nothing is close."""
    guess = closest(str(name), map(str, known))
    return f"; did you mean {guess!r}?" if guess else ""


def unknown_name_message(kind: str, name: str, known: Iterable[str]) -> str:
    """'unknown mixer 'swaa'; did you mean 'swa'? (known: attention, swa)'."""
    known = sorted(known)
    return f"unknown {kind} {name!r}{did_you_mean(name, known)} (known: {', '.join(known) or 'none'})"
