"""Options declared once, as dataclass fields with their type, default, bounds and one-line
description: the mixers' options and the spec's sections are such dataclasses, and every reader
(spec resolution, constructors, `layerzoo mixers NAME`, the docs) takes them from there."""

from .section import OptionInfo, Section, check_value, convert, declared, describe, make_section, option, plain
from .table import markdown_table, option_rows, text_table
from .types import check_type, type_name

__all__ = ["OptionInfo", "Section", "check_type", "check_value", "convert", "declared", "describe", "make_section",
           "markdown_table", "option", "option_rows", "plain", "text_table", "type_name"]
