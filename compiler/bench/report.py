"""`make bench`: run the zoo, the operator table and the real-model suite through tileforge
and onnxruntime, write docs/BENCHMARKS.md with medians, ratios, and the command that
produced them (`--section real`, `compile` or `cnn` reruns only that section and splices it in)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from compiler.bench.measure import BenchResult, bench_model
from compiler.bench.models import ZOO
from compiler.bench.sections import machine_description
from compiler.cache import FileKernelCache

# The GPU check's table (scripts/gpu_check.sh, run on a machine with a GPU), kept beside
# this file so that a CPU-only `make bench` carries the last GPU numbers forward.
GPU_CHECK_FILE = "gpu_check.md"
# The sections `--section` reruns alone, and the key of each one's rows in the JSON.
SECTIONS = {"real": "real_models", "compile": "cli_compile_seconds", "cnn": "cnn_blocks", "fusion": "fusion",
            "attention": "attention_blocks", "operators": "operators"}


def gpu_section(path: Path) -> list[str]:
    """The GPU section of BENCHMARKS.md: the last GPU check's table, when one is recorded."""
    if not path.exists():
        return ["", "## GPU", "", "No GPU check recorded (`scripts/gpu_check.sh` on a machine with a GPU)."]
    return ["", "## GPU (CUDA backend, `scripts/gpu_check.sh`)", "", *path.read_text().splitlines()]


def model_table(results: list[BenchResult]) -> list[str]:
    rows = ["| model | threads | kernels | compile s | rel L2 error | tileforge ms | onnxruntime ms | speedup |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        rows.append(f"| {r.model} | {r.threads} | {r.kernels} | {r.compile_seconds:.2f} | "
                    f"{r.rel_l2_error:.1e} | {r.tileforge_ms:.3f} | {r.onnxruntime_ms:.3f} | "
                    f"{r.speedup:.2f}x |")
    return rows


def run(out: Path, threads: list[int], models: list[str]) -> dict:
    results: list[BenchResult] = []
    with tempfile.TemporaryDirectory() as d:
        cache = FileKernelCache(Path(d) / "kernels")
        for t in threads:
            for name in models:
                r = bench_model(ZOO[name](), name, "cpu", t, cache=cache)
                print(f"{name} threads={t}: {r.tileforge_ms:.3f} ms vs onnxruntime "
                      f"{r.onnxruntime_ms:.3f} ms ({r.speedup:.2f}x)", file=sys.stderr)
                results.append(r)
    from compiler.bench.attention_blocks import attention_section
    from compiler.bench.cnn_blocks import cnn_section
    from compiler.bench.compile_time import compile_time_section
    from compiler.bench.fusion import fusion_section
    from compiler.bench.operators import operator_section
    from compiler.bench.real_suite import real_section

    ops_lines, ops_json = operator_section(threads[0])
    attention_lines, attention_json = attention_section(max(threads))
    real_lines, real_json = real_section(threads)
    fusion_lines, fusion_json = fusion_section(max(threads))
    cnn_lines, cnn_json = cnn_section(max(threads))
    compile_lines, compile_json = compile_time_section()
    cmd = "make bench  (python -m compiler.bench.report --out docs/BENCHMARKS.md)"
    lines = [
        "# Benchmarks",
        "",
        f"Produced by `{cmd}` on {time.strftime('%Y-%m-%d')} ({machine_description()}).",
        "Medians of repeated runs after warm-up; onnxruntime runs in the same process on the",
        "same inputs with the same thread count (intra-op threads = N, sequential execution),",
        "the two timed in alternating phases of 0.1 s (20 ms apart, so that neither's spinning pool",
        "threads take the other's cores) so that a change in the machine's load hits both.",
        "Speedup > 1 means tileforge is faster. The sections up to the GPU one are CPU numbers of",
        "this run; the GPU section is the last recorded GPU check (its own date and device).",
        "Compile times are cold: kernels are scheduled for the thread count, which is part of their cache key.",
        "",
        "## Models",
        "",
        *model_table(results),
        "",
        *compile_lines,
        "",
        *ops_lines,
        *attention_lines,
        *cnn_lines,
        *real_lines,
        *fusion_lines,
        *gpu_section(out.parent / GPU_CHECK_FILE),
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    data = {"models": [r.to_dict() for r in results], "operators": ops_json, SECTIONS["attention"]: attention_json,
            SECTIONS["cnn"]: cnn_json, SECTIONS["real"]: real_json, SECTIONS["fusion"]: fusion_json,
            SECTIONS["compile"]: compile_json}
    out.with_suffix(".json").write_text(json.dumps(data, indent=2))
    return data


def run_section(name: str, out: Path, threads: list[int]) -> None:
    """Only one section (`SECTIONS`), rerun now: spliced into `out`, its JSON into out's
    .json beside it."""
    from compiler.bench.attention_blocks import attention_section
    from compiler.bench.cnn_blocks import cnn_section
    from compiler.bench.compile_time import compile_time_section
    from compiler.bench.fusion import fusion_section
    from compiler.bench.operators import operator_section
    from compiler.bench.real_suite import real_section
    from compiler.bench.sections import write_section

    makers = {"real": lambda: real_section(threads), "compile": compile_time_section,
              "cnn": lambda: cnn_section(max(threads)), "fusion": lambda: fusion_section(max(threads)),
              "attention": lambda: attention_section(max(threads)),
              "operators": lambda: operator_section(threads[0])}
    lines, rows = makers[name]()
    write_section(out, lines)
    js = out.with_suffix(".json")
    data = json.loads(js.read_text()) if js.exists() else {}
    js.write_text(json.dumps({**data, SECTIONS[name]: rows}, indent=2))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", type=Path, default=Path("docs/BENCHMARKS.md"))
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--models", default=",".join(ZOO), help="comma-separated zoo model names")
    p.add_argument("--section", choices=["all", *SECTIONS], default="all",
                   help="rerun one section alone (real models, compile time, CNN blocks, fusion, attention blocks, "
                        "operators) "
                        "and splice it into --out")
    a = p.parse_args(argv)
    threads = [int(t) for t in a.threads.split(",")]
    if a.section != "all":
        run_section(a.section, a.out, threads)
    else:
        run(a.out, threads, a.models.split(","))
    return 0


if __name__ == "__main__":
    sys.exit(main())
