"""What several commands' arguments share: overrides of spec values, and checks of flags that
argparse's types do not express, made before torch is imported."""

from __future__ import annotations

import argparse
import types
import typing

from ..errors import LayerzooError, OptionError
from ..options import declared


def add_overrides(parser: argparse.ArgumentParser, example: str, what: str = "a spec value") -> None:
    """--set KEY=VALUE, repeatable, into args.overrides."""
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help=f"override {what}, e.g. --set {example} (repeatable)")


def check_at_least_one(flag: str, value: int | list[int] | None) -> None:
    """A size or count flag (None: not given) must be >= 1; a ValueError naming the flag otherwise."""
    for item in value if isinstance(value, list) else [] if value is None else [value]:
        if item < 1:
            raise ValueError(f"{flag} must be >= 1, got {item}")


def as_flags(error: OptionError) -> LayerzooError:
    """A library setting's OptionError as the flag that gave it: "--chunk-size: must be >= 1, got 0"."""
    flag = "--" + error.key.split(".")[0].replace("_", "-")
    return LayerzooError(f"{flag}: {error.message}" if error.key else error.message)



def add_section_flags(parser: argparse.ArgumentParser, section: type) -> None:
    """A flag for each option of a Section (`chunk_size` -> --chunk-size), with its help and its
    type: a tuple a list of values, a Literal its choices. Its defaults and bounds stay the
    section's: a flag not given is None, and the section checks what is."""
    for info in declared(section).values():
        union = typing.get_origin(info.annotation) in (typing.Union, types.UnionType)  # X | None: X's flag
        kinds = [kind for kind in (typing.get_args(info.annotation) if union else (info.annotation,))
                 if kind is not types.NoneType]
        kind, many = kinds[0], typing.get_origin(kinds[0]) is tuple
        if many:
            kind = typing.get_args(kind)[0]
        choices = typing.get_args(kind) if typing.get_origin(kind) is typing.Literal else None
        parser.add_argument(f"--{info.name.replace('_', '-')}", type=str if choices else kind, choices=choices,
                            nargs="+" if many else None, help=info.help)


def section_of(section: type, args: argparse.Namespace):
    """The Section made of the flags add_section_flags added (those given), checked; a flag out
    of bounds is a one-line error naming it."""
    given = {name: getattr(args, name) for name in declared(section) if getattr(args, name) is not None}
    try:
        return section(**given)
    except OptionError as error:
        raise as_flags(error) from None
