"""How numbers, times and identifiers read on the pages (Jinja filters)."""

from __future__ import annotations

import json
from datetime import UTC, datetime


def duration_us(us: float | None) -> str:
    """Microseconds as µs, ms or s with three significant digits; an em dash when unknown."""
    if us is None:
        return "\u2014"
    if us < 1000:
        return f"{us:.3g} µs"
    if us < 1_000_000:
        return f"{us / 1000:.3g} ms"
    return f"{us / 1_000_000:.3g} s"


def duration_s(seconds: float | None) -> str:
    """Seconds as ms, s or min:s."""
    if seconds is None:
        return "\u2014"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{int(seconds // 60)} min {int(seconds % 60)} s"


def percent(fraction: float | None) -> str:
    """A fraction as a percentage; an em dash when unknown."""
    return "\u2014" if fraction is None else f"{fraction:.0%}"


def size(nbytes: int | None) -> str:
    """A byte count in B, KiB, MiB or GiB."""
    if nbytes is None:
        return "\u2014"
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def count(n: int | None) -> str:
    """An integer with thousands separators."""
    return "\u2014" if n is None else f"{n:,}"


def timestamp(when: datetime | None) -> str:
    """A UTC time to the minute."""
    return "\u2014" if when is None else when.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


def ago(when: datetime | None) -> str:
    """How long ago, roughly ("3 min ago")."""
    if when is None:
        return "never"
    seconds = (datetime.now(UTC) - when).total_seconds()
    for limit, unit, per in ((60, "s", 1), (3600, "min", 60), (86400, "h", 3600)):
        if seconds < limit:
            return f"{max(int(seconds // per), 0)} {unit} ago"
    return f"{int(seconds // 86400)} d ago"


def target_name(fingerprint: str) -> str:
    """The readable part of a target fingerprint (`cuda:sm_90:ab12…` -> `cuda:sm_90`)."""
    kind, _, rest = fingerprint.partition(":")
    arch = rest.rpartition(":")[0] if rest.count(":") else rest
    return f"{kind}:{arch}" if arch else fingerprint


def target_labels(fingerprints: list[str]) -> dict[str, str]:
    """Readable names for fingerprints; two that read the same (another toolchain) get their hash's start."""
    names = [target_name(fp) for fp in fingerprints]
    return {fp: name if names.count(name) == 1 else f"{name} ({fp.rpartition(':')[2][:6]})"
            for fp, name in zip(fingerprints, names, strict=True)}


def short_key(key: str) -> str:
    """The first 12 hex digits of a key or sha256 (enough to find it again)."""
    return key[:12]


def dims(shape: object) -> str:
    """A shape as `1x3x224x224` (with multiplication signs); `scalar` for [], `unknown` when there is none."""
    if shape is None:
        return "unknown"
    return "\u00d7".join(str(d) for d in shape) if isinstance(shape, list | tuple) and shape else "scalar"


def shapes(text: str) -> str:
    """A kernel's shapes column (JSON: input shapes, then the output's) as `64x64, 64x64 -> 64x64` (with the real signs)."""
    try:
        parsed = json.loads(text)
    except ValueError:
        return text
    if not isinstance(parsed, list) or not parsed:
        return text
    *inputs, output = parsed
    return f"{', '.join(dims(s) for s in inputs)} \u2192 {dims(output)}"


def dtypes(text: str) -> str:
    """A kernel's dtypes column (a JSON list) as `float32, int64`."""
    try:
        parsed = json.loads(text)
    except ValueError:
        return text
    return ", ".join(str(d) for d in parsed) if isinstance(parsed, list) else text


def tile_summary(tile: dict | None) -> str:
    """A tile config on one line: `block 32x64 · thread 4x4 · step 16 · vec 8` (with the real signs)."""
    if not tile:
        return "\u2014"
    parts = []
    for name, short in (("block", "block"), ("thread", "thread"), ("reduce_step", "step"), ("vector", "vec")):
        value = tile.get(name)
        if isinstance(value, list) and value:
            parts.append(f"{short} {dims(value)}")
        elif isinstance(value, int) and value > 1:
            parts.append(f"{short} {value}")
    return " \u00b7 ".join(parts) or "\u2014"


FILTERS = {
    "dims": dims,
    "shapes": shapes,
    "dtypes": dtypes,
    "tile": tile_summary,
    "us": duration_us,
    "seconds": duration_s,
    "percent": percent,
    "size": size,
    "count": count,
    "timestamp": timestamp,
    "ago": ago,
    "target_name": target_name,
    "short": short_key,
}
