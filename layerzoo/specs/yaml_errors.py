"""The line of a YAML syntax error: the line of the mistake, where the parser often names the next.

YAML's parser reports where it gives up. For a key without its ':', a bracket or quote left open,
that is a line or more after the mistake, but the error also marks where the construct began;
for a line indented unlike its siblings, it is either that line or the one after it, and the
indentation of the lines around the two tells which one breaks the pattern.
"""

from __future__ import annotations

import math

import yaml

# Constructs that the error marks the start of (its context mark): the mistake is there.
OPENED = {
    "while scanning a simple key": "a key without ':'",
    "while parsing a flow mapping": "a '{' left open",
    "while parsing a flow sequence": "a '[' left open",
    "while scanning a quoted scalar": "a quoted scalar left open",
}
# What the parser says when a line fits no open block (libyaml's words, then PyYAML's).
MISPLACED = ("mapping values are not allowed", "did not find expected key", "expected <block end>")


def syntax_error_line(error: yaml.YAMLError, text: str) -> tuple[int | None, str]:
    """(the 1-based line of the mistake or None when the error marks none, a one-line description)."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    if mark is None:
        return None, problem
    context, context_mark = getattr(error, "context", None), getattr(error, "context_mark", None)
    if context in OPENED and context_mark is not None and context_mark.line < mark.line:
        return context_mark.line + 1, f"{OPENED[context]} ({problem}, at line {mark.line + 1})"
    if not problem.startswith(MISPLACED):
        return mark.line + 1, problem
    lines = text.splitlines()
    here = mark.line
    if here >= len(lines) or ":" in lines[here][:mark.column]:  # a ': ' inside this line's value
        return here + 1, problem
    before = previous_content_line(lines, here)
    if before is None:
        return here + 1, problem
    if indent(lines[before]) == indent(lines[here]):
        if problem.startswith(MISPLACED[0]):
            return before + 1, f"a key without ':' (YAML reads line {before + 1} on into line {here + 1}: {problem})"
        return here + 1, problem
    if misindented_first(lines, before, here):
        return before + 1, (f"line {before + 1}'s indentation does not fit the lines around it ({problem}, "
                            f"at line {here + 1})")
    return here + 1, f"line {here + 1}'s indentation does not fit the lines around it ({problem})"


def misindented_first(lines: list[str], first: int, second: int) -> bool:
    """Of two consecutive content lines whose indentation clashes, whether the first is the one that
    breaks the pattern (else the second does). The first is when it stands at or left of a block
    opener just before it (a `key:` line) while the second stands inside that block; when the
    second has a sibling (a line at its indentation, in the same block) before the first, which
    the first then cut in two, or after it (unless the second opens a block: lines after it at its
    indentation are then more likely its children, indented one level too little with it); or
    when only the first is off the indentation step the rest of the file uses."""
    opener = previous_content_line(lines, first)
    if opener is not None and opens_block(lines[opener]) and \
            indent(lines[first]) <= indent(lines[opener]) < indent(lines[second]):
        return True
    directions = (-1,) if opens_block(lines[second]) else (-1, 1)
    if any(has_sibling(lines, second, step, skip=first) for step in directions):
        return True
    step = indentation_step(lines, skip=(first, second))
    return indent(lines[first]) % step != 0 and indent(lines[second]) % step == 0


def has_sibling(lines: list[str], start: int, step: int, skip: int) -> bool:
    """Whether, walking from line `start` by `step` over content lines other than `skip`, a line of
    its kind (a sequence item or a key) at its indentation comes before any at a lower one (the
    end of its block)."""
    level, item = indent(lines[start]), is_item(lines[start])
    index = start + step
    while 0 <= index < len(lines):
        if index != skip and is_content(lines[index]):
            if indent(lines[index]) == level and is_item(lines[index]) == item:
                return True
            if indent(lines[index]) < level:
                return False
        index += step
    return False


def previous_content_line(lines: list[str], index: int) -> int | None:
    """The last line before `index` that holds something other than blanks and a comment."""
    for before in range(index - 1, -1, -1):
        if is_content(lines[before]):
            return before
    return None


def indentation_step(lines: list[str], skip: tuple[int, ...]) -> int:
    """The step the file's indentation goes by (the greatest common divisor of its indents, other
    lines than `skip`); 1 when nothing is indented."""
    return math.gcd(*(indent(line) for index, line in enumerate(lines) if index not in skip and is_content(line))) or 1


def opens_block(line: str) -> bool:
    """Whether a line is a `key:` with nothing after it (its value is the block below)."""
    return line.split(" #")[0].rstrip().endswith(":")


def is_item(line: str) -> bool:
    """Whether a line is a sequence item (`- ...`)."""
    return line.lstrip(" ").startswith("- ") or line.strip() == "-"


def is_content(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))
