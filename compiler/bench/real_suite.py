"""The real-model section of `make bench`: every registry model of the REAL suite exported
(cached), compiled for the host CPU, validated against onnxruntime and timed against it
with `measure.bench_model` at each thread count; FLOPs from the TE analyses give achieved
GFLOP/s and the share of the measured FMA peak. A model that fails to export, compile or
validate keeps its row, with the error's class and message.
"""

from __future__ import annotations

import math
import multiprocessing
import re
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path

from compiler.bench.measure import BenchResult, bench_model
from compiler.bench.real_models import FAMILIES, REAL, RealModel, suite
from compiler.bench.sections import machine_description
from compiler.errors import ValidationError

HEADING = "## Real models (issue 17)"
HOT_MODELS = 3  # the slowest models whose hottest kernels the section lists
HOT_KERNELS = 3


@dataclass
class RealRow:
    """One (model, exporter): its status and, where it ran, one BenchResult per thread count."""

    model: RealModel
    exporter: str
    status: str = "ok"
    error: str = ""
    gflop: float | None = None
    results: dict[int, BenchResult] = field(default_factory=dict)

    def ratio(self, threads: int) -> float | None:
        r = self.results.get(threads)
        return r.speedup if r is not None else None

    def to_dict(self) -> dict:
        return {"model": self.model.name, "family": self.model.family, "source": self.model.source,
                "exporter": self.exporter, "status": self.status, "error": self.error, "gflop": self.gflop,
                "results": {str(t): r.to_dict() for t, r in self.results.items()}}


def model_flops(data: bytes) -> int:
    """FLOPs of one inference: the sum of the TE analyses' counts over the lowered graph's
    Computes, without the points that read padding (`useful_flops`). The model as written:
    every op lowered the plain way (a 3x3 convolution direct, whether or not it runs as
    Winograd), so the count is the model's, not a lowering's."""
    from compiler import frontend
    from compiler.cost.analysis import TileAnalysis

    graph = frontend.import_model(data, choose=lambda _: False)
    return sum(TileAnalysis(n.compute).useful_flops() for n in graph.nodes)


def peak_flops_per_thread() -> float:
    """The measured single-thread FLOP/s of this CPU (`tileforge targets --measure`'s peak:
    its FMA probe, or numpy's matmul where faster): the user's stored measurement, or
    measured now, at the bench's own start. It is not kept
    beside the exports: one taken while the host was busy would set every later run's
    % peak (a 51 GFLOP/s reading, a third of a quiet one, once did)."""
    from compiler.target.cpu import read_cpu_facts
    from compiler.target.measure import load_cpu_measurements, measure_cpu

    facts = read_cpu_facts()
    stored = load_cpu_measurements(facts.model, facts.cores)
    if stored is not None:
        return float(stored["flops_1thread"])
    from compiler.build.fma_peak import fma_peak

    with tempfile.TemporaryDirectory() as folder:
        return float(measure_cpu(Path(folder), fma_peak=fma_peak())["flops_1thread"])


def _error(e: BaseException) -> str:
    """The error's class and first line, and its root cause's where it wraps one (the
    exporters wrap the model code's error in their own)."""
    def line(x: BaseException) -> str:
        text = re.sub(r"\x1b\[[0-9;]*m", "", str(x)).strip()
        return f"{type(x).__name__}: {(text.splitlines() or [''])[0][:200]}"

    root = e
    while root.__cause__ is not None:
        root = root.__cause__
    return line(e) if root is e else f"{line(e)} <- {line(root)}"


def bench_one(model: RealModel, exporter: str, threads: list[int], cache_dir: Path | None = None) -> RealRow:
    """Export (cached in `cache_dir`, default build/bench/real), compile, validate and time one
    model; failures become the row's status."""
    from compiler.bench.real_export import exported

    row = RealRow(model, exporter)
    try:
        data = exported(model, exporter, cache_dir)
    except Exception as e:  # any exporter failure is a result to report, not a crash
        row.status, row.error = "export failed", _error(e)
        return row
    try:
        row.gflop = model_flops(data) / 1e9
        for t in threads:
            row.results[t] = bench_model(data, model.name, "cpu", t)
    except ValidationError as e:
        row.status, row.error = "validation failed", _error(e)
    except Exception as e:  # the frontend's, the scheduler's or the toolchain's: all reported
        row.status, row.error = "compile failed", _error(e)
    return row


def bench_isolated(model: RealModel, exporter: str, threads: list[int], cache_dir: Path | None = None) -> RealRow:
    """`bench_one` in a process of its own, so that what earlier models left in the process
    does not weigh on this one's timing: in one process, ResNet-18's TorchScript export ran
    8.31 ms at two threads after the dynamo export's runs, and the same artifact 6.82 ms timed
    again in a fresh process (onnxruntime 8.9 and 8.8 ms). A crash of the process becomes the
    row's status."""
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        try:
            return pool.submit(bench_one, model, exporter, threads, cache_dir).result()
        except BrokenProcessPool as e:
            return RealRow(model, exporter, status="crashed", error=_error(e))


def run_suite(models: list[RealModel] | None = None, threads: list[int] | None = None) -> list[RealRow]:
    """Every (model, exporter) of `models` (default: the REAL suite) at each of `threads`,
    each in a process of its own (`bench_isolated`)."""
    rows = []
    for m in models if models is not None else suite(REAL):
        for exporter in m.exporters:
            t0 = time.perf_counter()
            row = bench_isolated(m, exporter, threads or [1, 2])
            ratios = ", ".join(f"{t}t {r.speedup:.2f}x" for t, r in row.results.items())
            print(f"real {m.name} [{exporter}]: {row.status} {ratios} {row.error} "
                  f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
            rows.append(row)
    return rows


def geomean(values: list[float]) -> float | None:
    """The geometric mean, or None for no values."""
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _fmt(v: float | None, spec: str, suffix: str = "") -> str:
    return "-" if v is None else f"{format(v, spec)}{suffix}"


def _table(rows: list[RealRow], threads: list[int], peak: float) -> list[str]:
    head = ["model", "family", "source", "exporter", "status", "GFLOP", "rel L2"]
    for t in threads:
        head += [f"tileforge ms {t}t", f"onnxruntime ms {t}t", f"ratio {t}t"]
    last = threads[-1]
    head += [f"GFLOP/s {last}t", f"% peak {last}t"]
    out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        ok = [r.results.get(t) for t in threads]
        rel = ok[0].rel_l2_error if ok and ok[0] is not None else None
        cells = [r.model.name, r.model.family, r.model.source, r.exporter, r.status,
                 _fmt(r.gflop, ".2f"), _fmt(rel, ".1e")]
        for res in ok:
            cells += ([f"{res.tileforge_ms:.2f}", f"{res.onnxruntime_ms:.2f}", f"{res.speedup:.2f}x"]
                      if res is not None else ["-", "-", "-"])
        rate = r.gflop / (ok[-1].tileforge_ms / 1e3) if r.gflop and ok[-1] is not None else None
        cells += [_fmt(rate, ".1f"), _fmt(None if rate is None else 100 * rate * 1e9 / (peak * last), ".0f", "%")]
        out.append("| " + " | ".join(cells) + " |")
    return out


def _geomeans(rows: list[RealRow], threads: list[int]) -> list[str]:
    # One row per model (its first exporter's), so a model exported twice does not count twice.
    primary = [r for r in rows if r.exporter == r.model.exporters[0] and r.status == "ok"]
    out = ["| family | models | " + " | ".join(f"geomean {t}t" for t in threads) + " |",
           "|" + " --- |" * (2 + len(threads))]
    for family in (*FAMILIES, "all"):
        members = [r for r in primary if family in ("all", r.model.family)]
        means = [geomean([r.ratio(t) for r in members]) for t in threads]
        out.append(f"| {family} | {len(members)} | " + " | ".join(_fmt(g, ".2f", "x") for g in means) + " |")
    return out


def _hot(rows: list[RealRow], threads: list[int]) -> list[str]:
    done = sorted((r for r in rows if r.status == "ok"), key=lambda r: r.ratio(threads[-1]) or 0.0)
    out = []
    for r in done[:HOT_MODELS]:
        res = r.results[threads[-1]]
        # a kernel launched n times (same symbol) costs n of its measured runs
        per: dict[str, tuple[str, float, int]] = {}
        for k in res.kernel_times:
            if k.get("measured_us"):
                _, us, n = per.get(k["symbol"], ("", 0.0, 0))
                per[k["symbol"]] = ("+".join(k["ops"]), us + k["measured_us"], n + 1)
        total = sum(us for _, us, _ in per.values()) or 1.0
        top = sorted(per.items(), key=lambda kv: -kv[1][1])[:HOT_KERNELS]
        parts = [f"{sym} {ops} x{n} {us / 1e3:.2f} ms ({100 * us / total:.0f}%)" for sym, (ops, us, n) in top]
        out.append(f"- {r.model.name} [{r.exporter}], {res.speedup:.2f}x at {threads[-1]}t, "
                   f"{res.tileforge_ms:.2f} ms: " + "; ".join(parts))
    return out


def section(rows: list[RealRow], threads: list[int] | None = None, peak: float | None = None) -> list[str]:
    """The markdown section: the table, geomeans per family, failures, the slowest models' hottest kernels."""
    threads = threads or sorted({t for r in rows for t in r.results}) or [1, 2]
    peak = peak or peak_flops_per_thread()
    failures = [f"- {r.model.name} [{r.exporter}]: {r.status}: {r.error}" for r in rows if r.status != "ok"]
    import torch

    return [
        "", HEADING, "",
        f"{len({r.model.name for r in rows})} architectures, exported at bench time with random weights (seed 0)",
        f"by torch {torch.__version__}'s dynamo exporter (opset 18) and, for some, its TorchScript exporter",
        "(opset 17); cached under build/bench/real/. Source says whose model code defines each: transformers,",
        "torch.nn, or tileforge (our own nn.Modules, in compiler/bench/torch_nets.py, where torchvision and timm",
        "cannot be installed beside a CPU torch). GFLOP: the TE analyses' count (every scalar op, a",
        "multiply-add counting 2, taps on padding left out) of the model as written: its 3x3 convolutions",
        "direct, so where they run as Winograd (fewer multiply-adds) GFLOP/s is direct-equivalent and",
        f"% peak may pass 100. % peak: of {peak / 1e9:.0f} GFLOP/s per thread, the measured single-thread",
        "FMA peak (`tileforge targets --measure`). Ratio > 1: tileforge faster than onnxruntime, which",
        "runs at its default graph optimizations (all: on x86 its convolutions run in the blocked NCHWc layout).",
        f"Measured on {machine_description()} (`--section real` reruns this section alone).",
        "",
        *_table(rows, threads, peak),
        "",
        "Geometric mean of the ratios, one row per model (its first exporter's):",
        "",
        *_geomeans(rows, threads),
        "",
        "Failures:" if failures else "No model failed.",
        *(["", *failures] if failures else []),
        "",
        f"Hottest kernels (time measured at compile) of the {HOT_MODELS} slowest models against onnxruntime:",
        "",
        *_hot(rows, threads),
    ]


def real_section(threads: list[int]) -> tuple[list[str], list[dict]]:
    """The section and its JSON for `make bench`; without torch, a line saying why it is missing."""
    try:
        import torch  # noqa: F401  (the suite needs it; say so here rather than fail the bench)
    except ImportError as e:
        return ["", HEADING, "", f"Not run: torch is not installed here ({e}); `make bench` installs",
                "the `bench` extra when it can."], []
    rows = run_suite(threads=threads)
    return section(rows, threads), [r.to_dict() for r in rows]
