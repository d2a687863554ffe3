"""Custom targets described in a JSON or YAML file, validated field by field.

A file either describes a whole target or names a preset in `base` and
overrides some of its fields. Every name that may reach a command line
(`arch`, `features`) is checked against a strict pattern.

    base: cuda:a100          # optional
    name: my-a100-40g
    levels:                  # outermost first; replaces the base's levels
      - {name: dram, capacity: 42949672960, bandwidth: 1.555e12, transaction: 32, shared: true}
      ...
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import fields, replace
from pathlib import Path

import yaml

from compiler.errors import TargetError
from compiler.target.base import MemoryLevel, Target
from compiler.target.cuda import SMEM_STATIC_PER_BLOCK, compute_capability
from compiler.target.toolchain import gcc_version, nvcc_version

MAX_FILE_BYTES = 1 << 20
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:+-]{0,63}")
_ARCH = {"cuda": re.compile(r"sm_\d{2,3}[a-z]?"), "cpu": re.compile(r"[A-Za-z0-9_]{1,32}")}
_FEATURE = re.compile(r"[a-z0-9_]{1,32}")
# The levels the scheduler maps tiles onto, per kind.
REQUIRED_LEVELS = {"cuda": ("dram", "smem", "reg"), "cpu": ("dram", "l2", "l1")}
_FIELDS = {f.name for f in fields(Target)} | {"base"}


def is_target_file(name: str) -> bool:
    """Whether a target name refers to a file rather than a preset."""
    return name.lower().endswith((".json", ".yaml", ".yml"))


def load_target_file(path: str | Path) -> Target:
    """Read, validate and build a custom target; TargetError says what is wrong and where."""
    p = Path(path)
    try:
        if p.stat().st_size > MAX_FILE_BYTES:
            raise TargetError(f"target file {p}: larger than {MAX_FILE_BYTES} bytes")
        text = p.read_text()
    except OSError as e:
        raise TargetError(f"target file {p}: cannot be read ({e.strerror or e})") from None
    try:
        data = json.loads(text) if p.suffix.lower() == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as e:
        raise TargetError(f"target file {p}: not valid {p.suffix[1:].upper()}: {e}") from None
    try:
        return target_from_dict(data)
    except TargetError as e:
        raise TargetError(f"target file {p}: {e}") from None


def target_from_dict(data: object) -> Target:
    """Build a Target from a plain mapping (the content of a target file)."""
    if not isinstance(data, dict):
        raise TargetError("must be a mapping of target fields")
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise TargetError(f"unknown fields {unknown}; known: {sorted(_FIELDS)}")
    base = _base_target(data.get("base"))
    kind = _choice(data, "kind", ("cpu", "cuda"), base.kind if base else None)
    levels = (_levels(data["levels"], kind) if "levels" in data
              else base.levels if base else _missing("levels"))
    target = Target(
        name=_pattern(data, "name", _NAME, None),
        kind=kind,
        arch=_pattern(data, "arch", _ARCH[kind], base.arch if base else None),
        levels=levels,
        units=_positive_int(data, "units", base.units if base else None),
        lanes=_positive_int(data, "lanes", base.lanes if base else None),
        banks=_positive_int(data, "banks", base.banks if base else 1),
        registers=_positive_int(data, "registers", base.registers if base else None),
        peak_flops=_peaks(data["peak_flops"]) if "peak_flops" in data
        else (base.peak_flops if base else _missing("peak_flops")),
        features=_features(data["features"]) if "features" in data
        else (base.features if base else ()),
        toolchain=_toolchain(data, kind),
        extras=_extras(data["extras"]) if "extras" in data else dict(base.extras if base else {}),
    )
    return _with_kind_defaults(target)


def _base_target(name: object) -> Target | None:
    if name is None:
        return None
    from compiler.target.registry import get_target  # registry imports this module

    if not isinstance(name, str) or is_target_file(name):
        raise TargetError(f"'base' must name a preset target, got {name!r}")
    return get_target(name)


def _missing(key: str):
    raise TargetError(f"field {key!r} is required (or name a preset in 'base')")


def _value(data: dict, key: str, default: object) -> object:
    if key in data:
        return data[key]
    if default is None:
        _missing(key)
    return default


def _choice(data: dict, key: str, options: tuple[str, ...], default: str | None) -> str:
    v = _value(data, key, default)
    if v not in options:
        raise TargetError(f"field {key!r} must be one of {list(options)}, got {v!r}")
    return str(v)


def _pattern(data: dict, key: str, pattern: re.Pattern, default: str | None) -> str:
    v = _value(data, key, default)
    if not isinstance(v, str) or not pattern.fullmatch(v):
        raise TargetError(f"field {key!r} must match {pattern.pattern}, got {v!r}")
    return v


def _positive_int(data: dict, key: str, default: int | None, where: str = "") -> int:
    v = _value(data, key, default)
    if isinstance(v, bool) or not isinstance(v, int | float) or v != int(v) or v <= 0:
        raise TargetError(f"field {where}{key!r} must be a positive integer, got {v!r}")
    return int(v)


def _positive_number(v: object, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
        raise TargetError(f"{what} must be a positive number, got {v!r}")
    return float(v)


def _levels(raw: object, kind: str) -> tuple[MemoryLevel, ...]:
    if not isinstance(raw, list) or not raw:
        raise TargetError("field 'levels' must be a non-empty list, outermost (dram) first")
    levels = []
    for i, lv in enumerate(raw):
        where = f"levels[{i}]."
        if not isinstance(lv, dict):
            raise TargetError(f"{where[:-1]} must be a mapping")
        extra = sorted(set(lv) - {"name", "capacity", "bandwidth", "transaction", "shared"})
        if extra:
            raise TargetError(f"{where[:-1]} has unknown fields {extra}")
        shared = lv.get("shared", i == 0)
        if not isinstance(shared, bool):
            raise TargetError(f"field {where}'shared' must be true or false, got {shared!r}")
        levels.append(MemoryLevel(
            name=_pattern(lv, "name", _FEATURE, None),
            capacity=_positive_int(lv, "capacity", None, where),
            bandwidth=_positive_number(_value(lv, "bandwidth", None), f"field {where}'bandwidth'"),
            transaction=_positive_int(lv, "transaction", None, where),
            shared=shared,
        ))
    names = [lv.name for lv in levels]
    if len(set(names)) != len(names):
        raise TargetError(f"level names must be distinct, got {names}")
    absent = [n for n in REQUIRED_LEVELS[kind] if n not in names]
    if absent:
        raise TargetError(f"a {kind} target needs levels {list(REQUIRED_LEVELS[kind])}; "
                          f"missing {absent}")
    if names[0] != "dram":
        raise TargetError(f"levels must start with the outermost, 'dram'; got {names[0]!r}")
    return tuple(levels)


def _peaks(raw: object) -> dict[str, float]:
    if not isinstance(raw, dict) or "float32" not in raw:
        raise TargetError("field 'peak_flops' must map dtypes to FLOP/s and include 'float32'")
    return {_checked_name(k, "peak_flops key"): _positive_number(v, f"peak_flops[{k!r}]")
            for k, v in raw.items()}


def _features(raw: object) -> tuple[str, ...]:
    if not isinstance(raw, list):
        raise TargetError("field 'features' must be a list of ISA feature names")
    return tuple(sorted({_checked_name(f, "feature") for f in raw}))


def _checked_name(v: object, what: str) -> str:
    if not isinstance(v, str) or not _FEATURE.fullmatch(v):
        raise TargetError(f"{what} must match {_FEATURE.pattern}, got {v!r}")
    return v


def _extras(raw: object) -> dict[str, int | float | str]:
    if not isinstance(raw, dict):
        raise TargetError("field 'extras' must be a mapping")
    for k, v in raw.items():
        _checked_name(k, "extras key")
        if isinstance(v, bool) or not isinstance(v, int | float | str):
            raise TargetError(f"extras[{k!r}] must be a number or a string, got {v!r}")
    return dict(raw)


def _toolchain(data: dict, kind: str) -> str:
    # The toolchain is a fact of the machine that compiles, not of the file.
    if "toolchain" in data:
        raise TargetError("field 'toolchain' is read from the installed compiler, not set")
    return nvcc_version() if kind == "cuda" else gcc_version()


def _with_kind_defaults(t: Target) -> Target:
    """Fill the CUDA extras the scheduler reads when the file leaves them out."""
    if t.kind != "cuda":
        return t
    smem = t.level("smem").capacity
    defaults = {"max_threads_per_block": 1024, "max_threads_per_sm": 2048,
                "max_blocks_per_sm": 32, "max_registers_per_thread": 255,
                "smem_per_block": smem,
                "smem_static_per_block": min(smem, SMEM_STATIC_PER_BLOCK),
                "compute_capability": compute_capability(t.arch)}
    return replace(t, extras={**defaults, **t.extras})
