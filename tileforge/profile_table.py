"""A profile job's result as the text `tileforge submit-profile` prints: the model's
latency and memory, then one row per kernel against the roofline."""

from __future__ import annotations

from typing import Any

HEADER = f"{'kernel':<28} {'time us':>10} {'GFLOP/s':>9} {'GB/s':>8} {'bound':>8} {'% bound':>8}"


def format_profile_result(r: dict[str, Any]) -> str:
    """The summary lines, then the kernels (slowest against their bound first, as the server orders them)."""
    threads = f", {r['threads']} threads" if r.get("threads") else ""
    lines = [f"target       {r['target']}{threads}",
             f"first load   {r['first_load_ms']:.2f} ms",
             f"latency      median {r['median_us']:.1f} us, p90 {r['p90_us']:.1f} us over {r['runs']} runs",
             f"peak memory  +{r['peak_memory_bytes'] / 2**20:.1f} MiB resident",
             f"kernels      {r['kernels_us']:.1f} us in all",
             "", HEADER]
    for row in r["rows"]:
        pct = "-" if row["pct_of_bound"] is None else f"{row['pct_of_bound']:.1f}"
        lines.append(f"{row['op_pattern'][:28]:<28} {row['measured_us']:>10.1f} {row['gflops']:>9.2f} "
                     f"{row['gbs']:>8.2f} {row['bound'] or '-':>8} {pct:>8}")
    return "\n".join(lines)
