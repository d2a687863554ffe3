"""A tiny C source builder: indented lines and braced blocks."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class CSource:
    """Accumulates C lines at the current indentation."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

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
        return "\n".join(self.lines) + "\n"
