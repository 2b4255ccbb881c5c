"""Errors layerzoo raises on bad input, each with a one-line message fit for a CLI.

The bottom layer: configuration errors live here so that specs, tasks and training can raise
them without importing the mixers or kernels that also raise them.
"""

from __future__ import annotations

import difflib
from typing import Iterable


class LayerzooError(Exception):
    """Base class: the CLI prints these as one line, without a traceback."""


class OptionError(LayerzooError, ValueError):
    """An option value that cannot be accepted. `key` names the option (dotted for nested ones,
    "" for the whole section), so that a spec error can point at the file and line that set it;
    printed, the error reads "key: message"."""

    def __init__(self, key: str, message: str):
        super().__init__(key, message)
        self.key = key
        self.message = message

    def __str__(self) -> str:
        return f"{self.key}: {self.message}" if self.key else self.message


class SpecError(LayerzooError):
    """A spec that cannot be read or built. The message starts with `file:line: key:`."""


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
