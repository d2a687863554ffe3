"""Compile time in `make bench`: `tileforge compile` (the CLI, validation included) timed
cold (empty kernel cache: every kernel constructed, its top-k candidates built and timed)
and then warm (every kernel a cache hit), on the zoo's transformer encoder layer and on
real models of at least 100 MB of weights (BIG_MODELS; issue 17: cold within 20 s, warm within 3 s on
2 cores).

Each compile runs in a fresh process, as a user's would. Its wall clock is reported with
the CPU seconds it and its children (gcc) used: on a shared machine the wall clock grows
with the load, the CPU time much less.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from compiler.bench.models import ZOO
from compiler.bench.sections import machine_description

# real models of 100 MB or more: BERT-base widths with 4 layers (209 MB of float32 weights),
# GPT-2's (271 MB), the suite's largest, and ResNet-50 (102 MB), a CNN: many distinct
# convolutions to construct and time, and Winograd choices
BIG_MODELS = ("bert", "gpt2", "resnet50")
GOAL_COLD_S, GOAL_WARM_S = 20.0, 3.0


@dataclass(frozen=True)
class CompileTimes:
    """Seconds of one cold and one warm CLI compile of one model: wall clock and CPU."""

    cold_wall: float
    warm_wall: float
    cold_cpu: float
    warm_cpu: float

    def to_dict(self) -> dict[str, float]:
        return {k: round(v, 3) for k, v in self.__dict__.items()}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cli_compile_times(model: Path) -> CompileTimes:
    """`tileforge compile` of the ONNX file `model` into a fresh kernel cache, then again
    into the cache the first filled."""
    walls, cpus = [], []
    with tempfile.TemporaryDirectory() as d:
        for i in range(2):
            t0, c0 = time.perf_counter(), _children_cpu()
            subprocess.run([sys.executable, "-m", "compiler.cli", "compile", str(model), "-o",
                            str(Path(d) / f"{i}.tar.gz"), "--cache-dir", str(Path(d) / "kernels")],
                           check=True, capture_output=True, timeout=1800)
            walls.append(time.perf_counter() - t0)
            cpus.append(_children_cpu() - c0)
    return CompileTimes(walls[0], walls[1], cpus[0], cpus[1])


def _zoo_times(name: str = "transformer_encoder") -> CompileTimes:
    import onnx

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"{name}.onnx"
        onnx.save(ZOO[name](), path)
        return cli_compile_times(path)


def _big_model(name: str) -> tuple[Path | None, str]:
    """Real model `name`'s cached export (exported now where it is not cached yet), or
    None and why not."""
    try:
        from compiler.bench.real_export import cache_path, exported
        from compiler.bench.real_models import DYNAMO, MODELS
    except ImportError as e:
        return None, f"torch is not installed here ({e})"
    model = MODELS[name]
    try:
        exported(model, DYNAMO)
    except Exception as e:  # an export failure is a result to report, not a crash
        return None, f"its export failed ({type(e).__name__}: {e})"
    return cache_path(model, DYNAMO), ""


def _line(label: str, t: CompileTimes) -> str:
    return f"| {label} | {t.cold_wall:.2f} | {t.cold_cpu:.2f} | {t.warm_wall:.2f} | {t.warm_cpu:.2f} |"


def compile_time_section() -> tuple[list[str], dict]:
    """The markdown section and its JSON."""
    zoo = _zoo_times()
    lines = ["", "## Compile time (CLI, validation included)", "",
             "`tileforge compile` in a fresh process: cold (empty kernel cache, top-k candidates built",
             "and timed), then warm (every kernel a cache hit, and the validation against the onnxruntime",
             "outputs the cold compile recorded, without loading onnxruntime). CPU s: the process and its children",
             f"(gcc). Issue 17's goal for a model of 100 MB or more: cold within {GOAL_COLD_S:.0f} s, warm "
             f"within {GOAL_WARM_S:.0f} s on 2 cores.", "",
             f"Measured on {machine_description()} (`--section compile` reruns this section alone).", "",
             "| model | cold s | cold CPU s | warm s | warm CPU s |", "| --- | --- | --- | --- | --- |",
             _line("transformer_encoder (zoo: hidden 256, 4 heads, seq 64)", zoo)]
    data: dict = {"transformer_encoder": zoo.to_dict()}
    untimed = []
    for name in BIG_MODELS:
        path, why = _big_model(name)
        if path is None:
            untimed.append(f"The {name} real model was not timed: {why}.")
            continue
        mb = path.stat().st_size / 1e6
        big = cli_compile_times(path)
        lines.append(_line(f"{name} (real model, {mb:.0f} MB ONNX)", big))
        data[name] = {**big.to_dict(), "onnx_mb": round(mb, 1)}
    return lines + [x for why in untimed for x in ("", why)], data
