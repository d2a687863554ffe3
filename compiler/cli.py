"""The compiler's command line: compile, run, bench, profile, targets.

`add_commands` is shared with the service CLI (server/cli.py), which adds
serve / worker / db / token on top; `main` runs the compiler commands alone.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from compiler.errors import TileforgeError
from compiler.target.base import Target

if TYPE_CHECKING:
    from compiler.cache import KernelCache


def _default_cache_dir() -> Path:
    home = os.environ.get("TILEFORGE_HOME")
    return (Path(home) if home else Path.home() / ".cache" / "tileforge") / "kernels"


def _input_shapes(items: list[str] | None) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for item in items or []:
        name, sep, dims = item.rpartition("=")
        if not sep or not name:
            raise SystemExit(f"--input-shape expects NAME=D0,D1,...; got {item!r}")
        try:
            out[name] = [int(d) for d in dims.split(",") if d.strip()]
        except ValueError:
            raise SystemExit(f"--input-shape {item!r}: dims must be integers") from None
    return out


class _ProgressLine:
    """A one-line progress display on stderr (plain lines when not a terminal)."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.t0 = time.perf_counter()

    def __call__(self, stage: str, fraction: float) -> None:
        bar = "#" * int(fraction * 20)
        line = f"[{bar:<20}] {fraction * 100:3.0f}%  {stage:<10} {time.perf_counter() - self.t0:6.2f}s"
        if self.tty:
            print("\r" + line, end="" if stage != "done" else "\n", file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)


def _target(name: str) -> Target:
    """A preset name, or (from the command line only) a JSON/YAML target file."""
    from compiler.target import get_target

    return get_target(name, allow_files=True)


def _compile_inputs(a: argparse.Namespace) -> tuple[dict, KernelCache]:
    """The compile options and kernel cache of `compile` / `profile`'s shared arguments."""
    from compiler.cache import FileKernelCache, MemoryKernelCache

    options: dict = {"input_shapes": _input_shapes(a.input_shape)}
    if a.threads:
        options["threads"] = a.threads
    if a.no_measure:
        options["measure"] = False
    if a.top_k is not None:
        options["top_k"] = a.top_k
    return options, MemoryKernelCache() if a.no_cache else FileKernelCache(a.cache_dir)


def cmd_compile(a: argparse.Namespace) -> int:
    from compiler.pipeline import compile_model
    from compiler.schedule.tilegraph.report import fusion_summary

    options, cache = _compile_inputs(a)
    options["validate"] = not a.no_validate
    t0 = time.perf_counter()
    r = compile_model(Path(a.model), _target(a.target), options, cache=cache, progress=_ProgressLine(),
                      output=Path(a.output))
    total = time.perf_counter() - t0
    v = r.validation
    print(f"artifact   {a.output}  (sha256 {r.artifact_sha256[:16]}...)")
    print(f"kernels    {len(r.kernels)}  cache hits {r.cache_hits}, misses {r.cache_misses}")
    if v.get("passed") is None and v:
        print(f"validation {v.get('skipped', 'not run')}")
    elif v:
        print(f"validation max abs error {v['max_abs_error']:.3g}, relative L2 error "
              f"{v['rel_l2_error']:.3g} ({'passed' if v['passed'] else 'FAILED'})"
              + (f" on {v['validated_on']}" if v.get("validated_on") else "")
              + (f", against {v['reference']}" if v.get("reference") else ""))
    if v.get("warning"):
        print(f"warning    {v['warning']}")
    for i, line in enumerate(fusion_summary(r.report["fusion"])):
        print(f"{'fusion' if i == 0 else '':<10} {line}")
    for i, line in enumerate(choice_lines(r.report.get("choices", []))):
        print(f"{'choices' if i == 0 else '':<10} {line}")
    print("stages     " + ", ".join(f"{k} {s:.2f}s" for k, s in r.stage_seconds.items())
          + f"; total {total:.2f}s")
    return 0


def choice_lines(choices: list[dict]) -> list[str]:
    """One line per lowering choice the compile timed (report.json's "choices"): the op, what
    was taken, and both times (or why a lowering could not be timed)."""
    def line(c: dict) -> str:
        taken = c["kind"] if c["taken"] else f"not {c['kind']}"
        if c.get("failed"):
            return f"{c['key']}: {taken} (" + "; ".join(f"{k} failed: {v}" for k, v in c["failed"].items()) + ")"
        return f"{c['key']}: {taken} ({c['ms_with']:.3g} ms with, {c['ms_without']:.3g} ms without)"

    return [line(c) for c in choices]


def cmd_run(a: argparse.Namespace) -> int:
    from compiler.runtime import load

    exe = load(Path(a.artifact))
    with np.load(a.inputs, allow_pickle=False) as z:
        feeds = {k: z[k] for k in z.files}
    outs = exe.run(feeds)
    np.savez(a.output, **outs)
    for k, v in outs.items():
        print(f"{k!r}: {v.dtype}{list(v.shape)}")
    return 0


def cmd_bench(a: argparse.Namespace) -> int:
    from compiler.bench.measure import bench_model
    from compiler.cache import FileKernelCache

    if a.artifact:
        return _bench_artifacts(a)
    r = bench_model(Path(a.model), Path(a.model).stem, _target(a.target), a.threads,
                    {"input_shapes": _input_shapes(a.input_shape)}, FileKernelCache(a.cache_dir))
    if a.json:
        print(json.dumps(r.to_dict(), indent=2))
    else:
        print(f"{r.model}: tileforge {r.tileforge_ms:.3f} ms, onnxruntime {r.onnxruntime_ms:.3f} ms "
              f"(median, {r.threads} thread{'s' * (r.threads > 1)}); speedup {r.speedup:.2f}x{_spread(r.speedup_spread)}; "
              f"rel L2 error {r.rel_l2_error:.2g}; compiled in {r.compile_seconds:.2f}s")
    return 0


def _spread(spread: tuple[float, float] | None) -> str:
    """", rounds 0.95-1.10x (p10-p90)" for a timing's speedup spread (compiler/bench/measure.py)."""
    return f", rounds {spread[0]:.2f}-{spread[1]:.2f}x (p10-p90)" if spread else ""


def _bench_artifacts(a: argparse.Namespace) -> int:
    """`bench --artifact`: artifacts compiled before, checked and timed against onnxruntime
    in alternation, nothing compiled; exit 1 where one disagrees with onnxruntime."""
    from compiler.bench.measure import time_artifacts
    from compiler.options import CompileOptions
    from compiler.pipeline import model_bytes

    CompileOptions.from_dict({"threads": a.threads})  # the thread count checked as a compile's is
    rows = time_artifacts([Path(p) for p in a.artifact], model_bytes(Path(a.model)), a.threads)
    if a.json:
        print(json.dumps([r.to_dict() for r in rows], indent=2))
    else:
        for r in rows:
            check = f"rel L2 error {r.rel_l2_error:.2g}" if r.passed else \
                f"FAILED validation: rel L2 error {r.rel_l2_error:.3g} against onnxruntime"
            print(f"{r.artifact}: {r.tileforge_ms:.3f} ms, {r.speedup:.2f}x onnxruntime's {r.onnxruntime_ms:.3f} ms "
                  f"(medians, alternating, {r.threads} thread{'s' * (r.threads > 1)}){_spread(r.speedup_spread)}; {check}")
    return 0 if all(r.passed for r in rows) else 1


def cmd_profile(a: argparse.Namespace) -> int:
    from compiler.profile import format_profile, profile_model

    options, cache = _compile_inputs(a)
    p = profile_model(Path(a.model), _target(a.target), options, cache).to_dict()
    print(json.dumps(p, indent=2) if a.json else format_profile(p, a.top or None))
    return 0


def cmd_targets(a: argparse.Namespace) -> int:
    from compiler.target import get_target, list_targets

    if a.measure:
        from compiler.build.fma_peak import fma_peak
        from compiler.target import measure_cpu

        print(json.dumps(measure_cpu(fma_peak=fma_peak()), indent=2))
        return 0
    from compiler.target.cpu import host_cannot_run

    rows = []
    for name in list_targets():
        t = get_target(name)
        d = t.describe()
        d["runs_here"] = not host_cannot_run(t) if t.kind == "cpu" else None
        rows.append(d)
    if a.json:
        print(json.dumps(rows, indent=2, default=str))
        return 0
    for d in rows:
        here = {True: "runs here", False: "cross-compiled here", None: ""}[d["runs_here"]]
        print(f"{d['name']:<20} {d['kind']:<5} {d['arch']:<8} {d['extras'].get('simd_isa', ''):<8} "
              f"units {d['units']:<4} {here:<20} {d['fingerprint']}")
    return 0


_CACHE_HELP = "kernel cache folder (default $TILEFORGE_HOME/kernels or ~/.cache/tileforge/kernels)"


def _compile_parser(sub: argparse._SubParsersAction, name: str, help: str) -> argparse.ArgumentParser:
    """A command that compiles a model: the model, target, shapes, threads and cache."""
    p = sub.add_parser(name, help=help)
    p.add_argument("model")
    p.add_argument("--target", default="cpu", help="a preset (see `targets`) or a JSON/YAML target file")
    p.add_argument("--input-shape", action="append", metavar="NAME=D0,D1,...",
                   help="bind an input's symbolic dims (repeatable)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--cache-dir", type=Path, default=_default_cache_dir(), help=_CACHE_HELP)
    p.add_argument("--no-cache", action="store_true", help="use a throw-away in-memory cache")
    p.add_argument("--no-measure", action="store_true",
                   help="take the cost model's first tiling and lowering for every kernel: nothing built "
                        "and timed but the kernels themselves (a cold compile several times faster, the "
                        "artifact slower where the model ranks wrong)")
    p.add_argument("--top-k", type=int, default=None, metavar="K",
                   help="candidates built and timed per kernel, 1-32 (default 5)")
    return p


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register compile / run / bench / profile / targets on a subparsers object."""
    p = _compile_parser(sub, "compile", "compile an ONNX model into an artifact")
    p.add_argument("-o", "--output", required=True, help="artifact path (.tar.gz)")
    p.add_argument("--no-validate", action="store_true", help="skip the onnxruntime check")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("run", help="run an artifact on inputs from an .npz file")
    p.add_argument("artifact")
    p.add_argument("--inputs", required=True)
    p.add_argument("--output", required=True)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("bench", help="compile, validate, and time against onnxruntime")
    p.add_argument("model")
    p.add_argument("--target", default="cpu")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--artifact", action="append", type=Path, metavar="ARTIFACT",
                   help="time this artifact of the model instead of compiling it (repeatable: "
                        "several are timed in alternation with onnxruntime, in one process)")
    p.add_argument("--input-shape", action="append", metavar="NAME=D0,D1,...")
    p.add_argument("--json", action="store_true")
    p.add_argument("--cache-dir", type=Path, default=_default_cache_dir(), help=_CACHE_HELP)
    p.set_defaults(func=cmd_bench)

    p = _compile_parser(sub, "profile", "compile, validate, and time each kernel against its roofline")
    p.add_argument("--json", action="store_true", help="every row, as JSON")
    p.add_argument("--top", type=int, default=20, help="rows to print (0: all; default 20)")
    p.set_defaults(func=cmd_profile)

    p = sub.add_parser("targets", help="list known hardware targets")
    p.add_argument("--json", action="store_true")
    p.add_argument("--measure", action="store_true",
                   help="measure this machine's DRAM bandwidth and peak FLOP/s and store them")
    p.set_defaults(func=cmd_targets)


def run_parsed(a: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Dispatch a parsed command; compiler errors become one clear line and exit 2."""
    if not hasattr(a, "func"):
        parser.print_help()
        return 2
    try:
        return a.func(a)
    except TileforgeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tileforge", description="tileforge compiler")
    add_commands(parser.add_subparsers(dest="command"))
    return run_parsed(parser.parse_args(argv), parser)


if __name__ == "__main__":
    sys.exit(main())
