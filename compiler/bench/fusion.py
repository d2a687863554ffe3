"""The fusion bench line (issue 16): predicted DRAM bytes and kernel counts of real exported
models' plans, unfused (one kernel per lowered node) against fused, from the cost model
alone (compiler.pipeline.plan_fusion: nothing is built or timed)."""

from __future__ import annotations

import sys

MODELS = ("bert", "vit", "mobilenet_v2")


def fusion_rows(names: tuple[str, ...] = MODELS, threads: int = 2) -> list[dict]:
    """One row per model: kernels and predicted DRAM bytes before and after fusion, or the error."""
    from compiler.bench.real_export import exported
    from compiler.bench.real_models import MODELS as REAL
    from compiler.pipeline import plan_fusion

    rows = []
    for name in names:
        model = REAL[name]
        try:
            f = plan_fusion(exported(model, model.exporters[0]), "cpu", {"threads": threads})
        except Exception as e:  # an export or planning failure is a result to report
            rows.append({"model": name, "error": f"{type(e).__name__}: {str(e)[:200]}"})
            continue
        rows.append({"model": name, **{k: f[k] for k in ("kernels_unfused", "kernels_fused", "dram_bytes_unfused",
                                                         "dram_bytes_fused", "refused", "split_back")}})
        print(f"fusion {name}: {f['kernels_unfused']} -> {f['kernels_fused']} kernels, "
              f"{f['dram_bytes_unfused'] / 1e6:.1f} -> {f['dram_bytes_fused'] / 1e6:.1f} MB", file=sys.stderr)
    return rows


def fusion_section(threads: int = 2) -> tuple[list[str], list[dict]]:
    """BENCHMARKS.md's fusion section (lines) and its rows for the JSON."""
    rows = fusion_rows(threads=threads)
    lines = ["", "## Fusion: predicted DRAM traffic (issue 16)", "",
             f"Plans for {threads} threads, priced by the cost model (nothing timed): one kernel per lowered",
             "node against tileforge's fused groups. Goal: predicted DRAM bytes at least halved.", "",
             "| model | kernels unfused | kernels fused | DRAM MB unfused | DRAM MB fused | ratio | refused by model |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['error']} | | | | | |")
            continue
        ratio = r["dram_bytes_fused"] / max(1, r["dram_bytes_unfused"])
        lines.append(f"| {r['model']} | {r['kernels_unfused']} | {r['kernels_fused']} | "
                     f"{r['dram_bytes_unfused'] / 1e6:.1f} | {r['dram_bytes_fused'] / 1e6:.1f} | "
                     f"{ratio:.2f} | {r['refused']} |")
    return lines, rows


if __name__ == "__main__":
    print("\n".join(fusion_section()[0]))
