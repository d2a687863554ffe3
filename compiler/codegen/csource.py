"""A tiny C source builder: indented lines, braced blocks, and file-scope definitions
that the body asks for while it is written."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class CSource:
    """Accumulates C lines at the current indentation."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0
        self._definitions: dict[str, list[str]] = {}
        self._definitions_at = 0

    def definitions_go_here(self) -> None:
        """File-scope definitions (`define`) are placed at this point of the unit."""
        self._definitions_at = len(self.lines)

    def define(self, definitions: dict[str, list[str]]) -> None:
        """Add file-scope definitions, name -> lines; a name already defined is kept once."""
        for name, lines in definitions.items():
            self._definitions.setdefault(name, lines)

    def line(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def extend(self, lines: list[str]) -> None:
        for text in lines:
            self.line(text)

    @contextmanager
    def block(self, header: str) -> Iterator[None]:
        """`header {` ... `}` with the body indented one level."""
        self.line(f"{header} {{" if header else "{")
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            self.line("}")

    def text(self) -> str:
        at = self._definitions_at
        defined = [line for lines in self._definitions.values() for line in lines]
        return "\n".join([*self.lines[:at], *defined, *self.lines[at:]]) + "\n"
