"""The GPU check (`scripts/gpu_check.sh` runs it on a machine with an NVIDIA GPU): the GPU
tests, the ONNX node suite on the GPU, and every benchmark model compiled for this GPU,
validated against onnxruntime and timed against PyTorch eager and `torch.compile` on the
same device; memory-bound models' bandwidth against a device-to-device copy. Prints one
table and writes `gpu_check.json` and `gpu_check.md` to `--out`.

Times are medians of CUDA-event timings with the inputs already on the device, for all
three runners alike (tileforge: `CudaExecutable.device_times`). PyTorch runs with its
defaults (TF32 off for matmuls, on for cuDNN convolutions).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from compiler.bench.real_models import GPU, suite
from compiler.schedule.split_k import SPLIT_LABEL

ROOT = Path(__file__).resolve().parents[2]
GPU_TEST_FILES = ["tests/compiler/codegen/test_cuda_gpu.py", "tests/compiler/codegen/test_cuda_compile.py",
                  "tests/compiler/codegen/test_cuda_attention.py", "tests/compiler/runtime/test_cuda_run.py",
                  "tests/compiler/test_cuda_models.py"]


@dataclass
class ModelRow:
    """One model's line of the table (times in ms; None where that runner could not run)."""

    model: str
    source: str
    kernels: int = 0
    compile_s: float = 0.0
    rel_l2_error: float | None = None
    passed: bool | None = None
    tileforge_ms: float | None = None
    eager_ms: float | None = None
    compiled_ms: float | None = None
    unsplit_ms: float | None = None  # compiled with split_k off, where the plan had split contractions
    bytes_moved: int = 0
    hot_kernels: list[dict[str, Any]] = field(default_factory=list)
    # each timed top-k candidate: launch kind, the cost model's estimate, the measured time (us)
    candidates: list[dict[str, Any]] = field(default_factory=list)
    split_k: list[dict[str, Any]] = field(default_factory=list)  # report.json's split-K verdicts
    note: str = ""

    @property
    def vs_eager(self) -> float | None:
        return _ratio(self.eager_ms, self.tileforge_ms)

    @property
    def vs_compiled(self) -> float | None:
        return _ratio(self.compiled_ms, self.tileforge_ms)


@dataclass
class Report:
    device: dict[str, Any] = field(default_factory=dict)
    suites: dict[str, dict[str, Any]] = field(default_factory=dict)
    models: list[ModelRow] = field(default_factory=list)
    copy_gbps: float | None = None


def _ratio(ref: float | None, ours: float | None) -> float | None:
    return None if ref is None or ours is None or ours <= 0 else ref / ours


def _geomean(values: list[float]) -> float | None:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else None


def device_info() -> dict[str, Any]:
    """Device 0 as pycuda sees it, and the `cuda:` target this check compiles for."""
    import pycuda.driver as drv

    from compiler.runtime.cuda import device_target

    drv.init()
    dev = drv.Device(0)
    a = drv.device_attribute
    return {"name": dev.name(), "compute_capability": "{}.{}".format(*dev.compute_capability()),
            "sms": dev.get_attribute(a.MULTIPROCESSOR_COUNT),
            "l2_bytes": dev.get_attribute(a.L2_CACHE_SIZE),
            "memory_bytes": dev.total_memory(), "target": device_target(),
            "driver": drv.get_driver_version()}


def run_pytest(name: str, args: list[str], out: Path, timeout: int) -> dict[str, Any]:
    """One pytest run in a subprocess; its counts from the summary line, its log in `out`."""
    log = out / f"{name}.log"
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE", *args]
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        text, rc = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        text = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        text, rc = text + f"\n(timed out after {timeout} s)", -1
    log.write_text(text)
    summary = next((line for line in reversed(text.splitlines()) if re.search(r" in [\d.]+s", line)), "")
    counts = {("error" if k.startswith("error") else k): int(v) for v, k in
              re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected)", summary)}
    failed = [line.split(" ", 1)[1] for line in text.splitlines() if line.startswith(("FAILED", "ERROR"))]
    return {"rc": rc, "seconds": round(time.perf_counter() - t0, 1), **counts, "failures": failed[:40]}


def _cuda_median_ms(fn: Callable[[], Any], runs: int = 50, warmup: int = 5) -> float:
    import torch

    for _ in range(warmup):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(runs):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def copy_bandwidth_gbps(nbytes: int = 1 << 30) -> float:
    """Device-to-device copy through PyTorch: bytes read plus bytes written per second."""
    import torch

    src = torch.randn(nbytes // 4, device="cuda")
    dst = torch.empty_like(src)
    ms = _cuda_median_ms(lambda: dst.copy_(src), runs=20)
    return 2 * nbytes / (ms * 1e-3) / 1e9


def _io_bytes(model: onnx.ModelProto) -> int:
    """The fewest bytes a run moves: every weight and input read once, every output written once."""
    from onnx import numpy_helper

    total = sum(numpy_helper.to_array(i).nbytes for i in model.graph.initializer)
    for vi in (*model.graph.input, *model.graph.output):
        dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if dims and all(d > 0 for d in dims):
            total += int(np.prod(dims)) * 4
    return total


def bench_one(name: str, source: str, model: onnx.ModelProto, torch_module: Any, target: str,
              feeds: dict[str, np.ndarray]) -> ModelRow:
    """Compile for `target` (validated against onnxruntime), then time the three runners."""
    row = ModelRow(name, source, bytes_moved=_io_bytes(model))
    with tempfile.TemporaryDirectory(prefix="tileforge-gpu-check-") as folder:  # its artifacts, removed when done
        return _bench_into(row, model, torch_module, target, feeds, Path(folder))


def _bench_into(row: ModelRow, model: onnx.ModelProto, torch_module: Any, target: str,
                feeds: dict[str, np.ndarray], folder: Path) -> ModelRow:
    """`bench_one`'s work, its artifacts written under `folder`."""
    import torch

    from compiler.pipeline import compile_model
    from compiler.runtime import load

    t0 = time.perf_counter()
    try:
        result = compile_model(model, target, {"validate": True}, output=folder / "model.tar.gz")
    except Exception as e:  # the table reports it; the other models go on
        row.note = f"compile failed: {type(e).__name__}: {e}"[:300]
        return row
    row.compile_s = round(time.perf_counter() - t0, 1)
    row.kernels = len(result.kernels)
    row.passed = result.validation.get("passed")
    row.rel_l2_error = result.validation.get("rel_l2_error")
    if row.passed is not True:
        row.note = str(result.validation.get("skipped") or result.validation)[:300]
    exe = load(result.artifact_path)
    if exe.graph_note:
        row.note += f" {exe.graph_note}"
    row.tileforge_ms = statistics.median(exe.device_times(feeds))
    row.hot_kernels = hot_kernels(exe.kernel_times(feeds, runs=10), result.kernels)
    row.candidates = timed_candidates(result.kernels)
    row.split_k = result.report.get("split_k", [])
    if any(k.get("op_pattern", "").startswith(SPLIT_LABEL) for k in result.kernels):
        # what split-K gains: the same model planned without it, validated the same way
        try:
            unsplit = compile_model(model, target, {"validate": True, "split_k": False},
                                    output=folder / "unsplit.tar.gz")
            if unsplit.validation.get("passed") is True:
                row.unsplit_ms = statistics.median(load(unsplit.artifact_path).device_times(feeds))
        except Exception as e:  # the table reports it; the split row above stands
            row.note += f" without split-K: {type(e).__name__}: {e}"[:300]
    if torch_module is None:
        return row
    module = torch_module.cuda().eval()
    args = [torch.from_numpy(feeds[n]).cuda() for n in feeds]
    with torch.no_grad():
        try:
            row.eager_ms = _cuda_median_ms(lambda: module(*args))
            compiled = torch.compile(module)
            row.compiled_ms = _cuda_median_ms(lambda: compiled(*args), warmup=3)
        except Exception as e:
            row.note += f" torch: {type(e).__name__}: {e}"[:300]
    return row


def hot_kernels(times: dict[str, list[float]], kernels: list[dict[str, Any]],
                top: int = 5) -> list[dict[str, Any]]:
    """The `top` kernels by median time, with what the cost model expected of them."""
    info = {k["symbol"]: k for k in kernels}
    ranked = sorted(((statistics.median(t), s) for s, t in times.items()), reverse=True)
    total = sum(ms for ms, _ in ranked) or 1.0
    return [{"symbol": s, "ops": info.get(s, {}).get("op_pattern", "?"), "us": round(ms * 1e3, 1),
             "share": round(ms / total, 3), "estimated_us": info.get(s, {}).get("estimated_us"),
             "measured_us": info.get(s, {}).get("measured_us"),
             "tile": info.get(s, {}).get("tile")} for ms, s in ranked[:top]]


def timed_candidates(kernels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every top-k candidate the compile timed on the device (report.json's kernels'
    `candidates`): its launch kind, the cost model's estimate and the measured time."""
    return [{"kind": (c["tile"].get("launch") or {}).get("kind", "?"), "estimated_us": c["estimated_us"],
             "measured_us": c["measured_us"]}
            for k in kernels for c in k.get("candidates", [])
            if c.get("measured_us") and c.get("estimated_us")]


# Candidates timed faster than this are left out of the calibration: back-to-back launches
# time a kernel far below the launch rate as the launch rate (runtime/cuda_timer.py).
CALIBRATION_FLOOR_US = 20.0


def calibration(rows: list[ModelRow]) -> list[str]:
    """The cost model against the device, per launch kind: how many candidates were timed
    at CALIBRATION_FLOOR_US or more, and the geomean and 10th-90th percentiles of their
    measured / estimated time."""
    by_kind: dict[str, list[float]] = {}
    for r in rows:
        for c in r.candidates:
            if c["measured_us"] >= CALIBRATION_FLOOR_US:
                by_kind.setdefault(c["kind"], []).append(c["measured_us"] / c["estimated_us"])
    if not by_kind:
        return []
    lines = ["", f"The cost model on this GPU (every top-k candidate timed while compiling at "
             f"{CALIBRATION_FLOOR_US:g} us or more; measured / estimated time):", "",
             "| kind | candidates | geomean | p10 | p90 |", "| --- | --- | --- | --- | --- |"]
    for kind, ratios in sorted(by_kind.items()):
        q = sorted(ratios)
        lines.append(f"| {kind} | {len(q)} | {_geomean(q):.2f}x | {q[len(q) // 10]:.2f}x | "
                     f"{q[min(len(q) - 1, len(q) * 9 // 10)]:.2f}x |")
    return lines


def split_k_lines(rows: list[ModelRow]) -> list[str]:
    """Each split contraction's verdict, timed while compiling: the partial sums and their
    sum against the contraction whole."""
    lines = [f"| {r.model} | {'+'.join(v.get('ops', []))} | {v['slices']} | {_fmt(v['split_us'], '.1f')} | "
             f"{_fmt(v['whole_us'], '.1f')} | {v['kept']} ({v['by']}) |" for r in rows for v in r.split_k]
    return ["", "Split-K, timed while compiling (us):", "", "| model | ops | slices | split | whole | kept |",
            "| --- | --- | --- | --- | --- | --- |", *lines] if lines else []


def _first_export(module: Any, inputs: tuple, exporters: tuple[str, ...]) -> onnx.ModelProto:
    """The model exported by the first of `exporters` that can (the last one's error otherwise)."""
    from compiler.bench.real_export import export_onnx

    failure: Exception = ValueError("no exporter named")
    for exporter in exporters:
        try:
            return export_onnx(module, inputs, exporter)
        except Exception as e:  # the next exporter may manage; the last one's error is raised
            failure = e
    raise failure


def _feeds(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    init = {i.name for i in model.graph.initializer}
    out = {}
    for vi in model.graph.input:
        if vi.name not in init:
            dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
            out[vi.name] = rng.standard_normal(dims).astype(np.float32)
    return out


def _single_op_model(name: str, op: str, shape: list[int], n_inputs: int = 1,
                     weights: dict[str, np.ndarray] | None = None, **attrs: Any) -> onnx.ModelProto:
    from onnx import TensorProto, helper, numpy_helper

    names = [f"x{i}" for i in range(n_inputs)]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in names]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)
    node = helper.make_node(op, [*names, *(weights or {})], ["y"], **attrs)
    inits = [numpy_helper.from_array(a, n) for n, a in (weights or {}).items()]
    g = helper.make_graph([node], name, inputs, [out], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def memory_bound_models() -> dict[str, onnx.ModelProto]:
    """Large single-op models whose floor is moving bytes: their GB/s column is the
    memory-bound kernels' bandwidth."""
    rng = np.random.default_rng(0)
    ln = {n: rng.standard_normal(1024).astype(np.float32) for n in ("scale", "bias")}
    return {
        "add_64M": _single_op_model("add_64M", "Add", [64, 1 << 20], 2),
        "sigmoid_64M": _single_op_model("sigmoid_64M", "Sigmoid", [64, 1 << 20]),
        "softmax_4096x8192": _single_op_model("softmax_4096x8192", "Softmax", [4096, 8192], axis=-1),
        "layernorm_16384x1024": _single_op_model("layernorm_16384x1024", "LayerNormalization",
                                                 [16384, 1024], weights=ln, axis=-1),
    }


def model_rows(target: str, names: set[str] | None) -> list[ModelRow]:
    """Every zoo model (torch side: the ONNX graph run as torch ops) and every torch model
    (torch side: the module itself, exported to ONNX for tileforge)."""
    from compiler.bench.models import ZOO
    from compiler.bench.onnx_torch import TorchGraph, UnsupportedOp

    rows = []
    for name in sorted(ZOO):
        if names and name not in names:
            continue
        model = ZOO[name]()
        try:
            module: Any = TorchGraph(model)
        except UnsupportedOp:
            module = None
        rows.append(bench_one(name, "zoo", model, module, target, _feeds(model)))
        _print_row(rows[-1])
    for name, model in memory_bound_models().items():
        if names and name not in names:
            continue
        rows.append(bench_one(name, "memory", model, TorchGraph(model), target, _feeds(model)))
        _print_row(rows[-1])
    try:
        import torch  # noqa: F401  (the exporters need it)
    except ImportError as e:
        print(f"gpu_check: no torch models ({e})", file=sys.stderr)
        return rows
    for entry in suite(GPU):
        name = entry.name
        if names and name not in names:
            continue
        module, inputs = entry.build()
        try:
            model = _first_export(module, inputs, entry.exporters)
        except Exception as e:
            rows.append(ModelRow(name, "torch", note=f"export failed: {type(e).__name__}: {e}"[:300]))
            continue
        feeds = dict(zip([i.name for i in model.graph.input][:len(inputs)],
                         (t.numpy() for t in inputs), strict=True))
        rows.append(bench_one(name, "torch", model, module, target, feeds))
        _print_row(rows[-1])
    return rows


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _print_row(r: ModelRow) -> None:
    print(f"  {r.model}: passed={r.passed} err={r.rel_l2_error} tileforge={_fmt(r.tileforge_ms, '.3f')} ms "
          f"eager={_fmt(r.eager_ms, '.3f')} compiled={_fmt(r.compiled_ms, '.3f')} {r.note}", flush=True)


def table(report: Report) -> list[str]:
    """The markdown table of the report (and its summary lines)."""
    d = report.device
    lines = [f"Produced by `scripts/gpu_check.sh` on {time.strftime('%Y-%m-%d')}.",
             f"Device: {d.get('name')} (sm {d.get('compute_capability')}, {d.get('sms')} SMs, "
             f"L2 {d.get('l2_bytes', 0) >> 20} MiB), target `{d.get('target')}`; "
             f"device-to-device copy {_fmt(report.copy_gbps, '.0f')} GB/s.", ""]
    for name, s in report.suites.items():
        lines.append(f"- {name}: {s.get('passed', 0)} passed, {s.get('failed', 0)} failed, "
                     f"{s.get('error', 0)} errors, {s.get('skipped', 0)} skipped "
                     f"({s['seconds']} s, rc {s['rc']})")
    lines += ["", "| model | source | kernels | compile s | rel L2 vs onnxruntime | tileforge ms | "
              "without split-K ms | eager ms | torch.compile ms | vs eager | vs compile | GB/s at floor bytes |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in report.models:
        gbps = r.bytes_moved / (r.tileforge_ms * 1e-3) / 1e9 if r.tileforge_ms else None
        err = "-" if r.rel_l2_error is None else f"{r.rel_l2_error:.1e}" + ("" if r.passed else " FAIL")
        lines.append(f"| {r.model} | {r.source} | {r.kernels} | {r.compile_s} | {err} | "
                     f"{_fmt(r.tileforge_ms, '.3f')} | {_fmt(r.unsplit_ms, '.3f')} | {_fmt(r.eager_ms, '.3f')} | "
                     f"{_fmt(r.compiled_ms, '.3f')} | {_fmt(r.vs_eager, '.2f')}x | "
                     f"{_fmt(r.vs_compiled, '.2f')}x | {_fmt(gbps, '.0f')} |")
    ge = _geomean([r.vs_eager for r in report.models if r.vs_eager])
    gc = _geomean([r.vs_compiled for r in report.models if r.vs_compiled])
    lines += ["", f"Geomean speedup: {_fmt(ge, '.2f')}x vs PyTorch eager, {_fmt(gc, '.2f')}x vs "
              "torch.compile (> 1: tileforge faster)."]
    notes = [f"- {r.model}: {r.note.strip()}" for r in report.models if r.note.strip()]
    hot = ["", "Hottest kernels (each launched alone between CUDA events; estimated = the cost model):", "",
           "| model | kernel | ops | us | share | estimated us | top-k measured us | tile |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in report.models:
        for k in r.hot_kernels[:3]:
            hot.append(f"| {r.model} | {k['symbol']} | {k['ops']} | {k['us']} | {k['share']:.0%} | "
                       f"{k['estimated_us']} | {k['measured_us']} | {json.dumps(k['tile'], separators=(',', ':'))} |")
    return (lines + (["", "Notes:", *notes] if notes else []) + split_k_lines(report.models)
            + calibration(report.models) + hot)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=ROOT / "gpu-check")
    p.add_argument("--skip", default="", help="comma-separated sections to skip: tests,nodes,models")
    p.add_argument("--models", default="", help="comma-separated model names (default: all)")
    p.add_argument("--node-timeout", type=int, default=300, help="seconds for the node suite")
    p.add_argument("--jobs", type=int, default=min(16, os.cpu_count() or 1))
    a = p.parse_args(argv)
    skip = set(filter(None, a.skip.split(",")))
    a.out.mkdir(parents=True, exist_ok=True)
    report = Report(device=device_info())
    print(f"gpu_check: {report.device}", flush=True)
    if "tests" not in skip:
        report.suites["GPU tests (pytest -m 'gpu or nvcc')"] = run_pytest(
            "gpu_tests", ["-m", "gpu or nvcc", "-n", str(min(a.jobs, 8)), *GPU_TEST_FILES], a.out, 400)
        print(f"gpu_check: tests {report.suites}", flush=True)
    if "models" not in skip:
        report.copy_gbps = copy_bandwidth_gbps()
        report.models = model_rows(report.device["target"], set(filter(None, a.models.split(","))))
    if "nodes" not in skip:
        report.suites["ONNX node suite on the GPU"] = run_pytest(
            "node_suite", ["-n", str(a.jobs), "-k", "_cuda", "tests/compiler/conformance"], a.out, a.node_timeout)
        print("gpu_check: node suite", report.suites["ONNX node suite on the GPU"], flush=True)
    lines = table(report)
    (a.out / "gpu_check.md").write_text("\n".join(lines) + "\n")
    (a.out / "gpu_check.json").write_text(json.dumps(
        {**asdict(report), "models": [asdict(r) for r in report.models]}, indent=2, default=str))
    print("\n".join(lines))
    failed = any(s.get("failed") or s.get("error") or s["rc"] != 0 for s in report.suites.values())
    return 1 if failed or any(r.passed is False for r in report.models) else 0


if __name__ == "__main__":
    sys.exit(main())
