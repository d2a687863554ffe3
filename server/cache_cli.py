"""`tileforge cache stats|evict|export|import`: the kernel cache from the command line, on the
database the settings name (as the server and workers use it)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import asdict
from pathlib import Path

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd]?)$")
_SIZE = re.compile(r"^(\d+)([KMG]?)i?B?$", re.IGNORECASE)
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_BYTES = {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}


def duration(text: str) -> float:
    """Seconds in `90`, `45s`, `30m`, `12h` or `7d` (argparse type)."""
    m = _DURATION.match(text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 3600, 30m, 12h or 7d")
    return float(m.group(1)) * _SECONDS[m.group(2)]


def size(text: str) -> int:
    """Bytes in `1048576`, `512K`, `500M` or `2G` (argparse type)."""
    m = _SIZE.match(text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size like 1048576, 512K, 500M or 2G")
    return int(m.group(1)) * _BYTES[m.group(2).upper()]


def _session():
    from server.core.config import get_settings
    from server.db.migrate import upgrade
    from server.db.session import one_off_transaction

    settings = get_settings()
    upgrade(settings.db_url)  # a fresh embedded home has no tables yet
    return one_off_transaction(settings.db_url)


def cmd_stats(a: argparse.Namespace) -> int:
    from server.services.cache_admin import cache_stats

    with _session() as s:
        stats = cache_stats(s)
    if a.json:
        print(json.dumps(asdict(stats), indent=1, sort_keys=True))
        return 0
    print(f"{'target':<32} {'rows':>8} {'bytes':>14} {'hits':>10} {'stale':>8}")
    for name, t in [*stats.by_target.items(), ("all", stats.total)]:
        print(f"{name:<32} {t.rows:>8} {t.bytes:>14} {t.hits:>10} {t.stale:>8}")
    return 0


def cmd_evict(a: argparse.Namespace) -> int:
    from server.services import cache_admin

    if not (a.stale or a.older_than is not None or a.to_bytes is not None):
        print("error: say what to evict: --stale, --older-than AGE and/or --to-bytes SIZE", file=sys.stderr)
        return 2
    evicted = cache_admin.Evicted()
    with _session() as s:  # one transaction: all the asked evictions or none
        if a.stale:
            evicted += cache_admin.evict_stale(s)
        if a.older_than is not None:
            evicted += cache_admin.evict_older_than(s, a.older_than)
        if a.to_bytes is not None:
            evicted += cache_admin.evict_to_bytes(s, a.to_bytes)
    print(f"evicted {evicted.rows} kernel(s), {evicted.bytes} bytes")
    return 0


def cmd_export(a: argparse.Namespace) -> int:
    from server.services.kernel_bundle import BundleError, export_bundle

    try:
        with _session() as s:
            n = export_bundle(s, Path(a.path), a.target, a.include_stale)
    except BundleError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"exported {n} kernel(s) to {a.path}")
    return 0


def cmd_import(a: argparse.Namespace) -> int:
    from server.services.kernel_bundle import BundleError, import_bundle

    try:
        with _session() as s:
            report = import_bundle(s, Path(a.path), built_target_fingerprints(), strict=a.strict)
    except BundleError as e:
        print(f"error: {e}; nothing was imported", file=sys.stderr)
        return 2
    for reason in report.skipped:
        print(f"skipped {reason}", file=sys.stderr)
    print(f"imported {report.inserted} kernel(s); {report.present} already present; "
          f"{len(report.skipped)} skipped")
    return 0


def built_target_fingerprints() -> set[str]:
    """The fingerprints of every built-in target as this installation builds it (its toolchains)."""
    from compiler.errors import TargetError
    from compiler.target import get_target, list_targets

    found = set()
    for name in list_targets():
        try:
            found.add(get_target(name).fingerprint())
        except TargetError:
            continue  # a target this machine cannot describe builds nothing here
    return found


def add_cache_commands(sub: argparse._SubParsersAction) -> None:
    """Register `cache stats|evict|export|import`."""
    cache = sub.add_parser("cache", help="the kernel cache").add_subparsers(dest="cache_command", required=True)
    p = cache.add_parser("stats", help="rows, bytes, hits and stale rows, per target")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_stats)

    p = cache.add_parser("evict", help="delete kernels (in one transaction)")
    p.add_argument("--stale", action="store_true", help="rows another compiler version built")
    p.add_argument("--older-than", type=duration, metavar="AGE", help="rows not used for AGE (e.g. 30d, 12h)")
    p.add_argument("--to-bytes", type=size, metavar="SIZE",
                   help="least recently used rows, stale first, until the cache holds SIZE (e.g. 500M)")
    p.set_defaults(func=cmd_evict)

    p = cache.add_parser("export", help="write kernels to a portable .tar.gz bundle")
    p.add_argument("path")
    p.add_argument("--target", help="only kernels whose target fingerprint starts with this (e.g. cpu:, cuda:sm_90:)")
    p.add_argument("--include-stale", action="store_true", help="also rows of other compiler versions")
    p.set_defaults(func=cmd_export)

    p = cache.add_parser("import", help="load a bundle (checked; all or nothing)")
    p.add_argument("path")
    p.add_argument("--strict", action="store_true",
                   help="refuse the bundle if any kernel is for another compiler or target, instead of skipping it")
    p.set_defaults(func=cmd_import)
