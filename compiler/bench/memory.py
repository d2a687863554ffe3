"""How much memory this process holds, for a profile's peak-memory figure."""

from __future__ import annotations

import os
import resource


def resident_bytes() -> int:
    """This process's resident set now, in bytes: /proc/self/statm on Linux; elsewhere its
    peak so far (ru_maxrss), the closest figure the platform gives."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if os.uname().sysname == "Darwin" else peak * 1024  # bytes there, KiB elsewhere
