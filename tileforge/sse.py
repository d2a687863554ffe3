"""Server-sent events, read line by line (the subset the server sends: `event`, `data`,
`id` fields and `:` comments)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator


def iter_events(lines: Iterable[str]) -> Iterator[tuple[str, str]]:
    """(event name, data) for each event in `lines`; comments (keep-alives) are skipped."""
    event, data = "message", []
    for line in lines:
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = "message", []
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
