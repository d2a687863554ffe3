"""This CPU's fused multiply-add peak, measured: the roofline's compute bound.

`tileforge targets --measure` took it from numpy's matmul, and a BLAS without kernels for
the host's vector width reports a fraction of it: OpenBLAS ran at 128 GFLOP/s a thread on a
Zen 5 core whose AVX-512 FMAs reach about twice that, and tileforge's own convolutions then
showed at 170% of "peak". This probe runs independent chains of vector FMAs (more chains
than the FMA latency times the FMA pipes keeps every pipe busy) at the host's full vector
width, built with the kernels' gcc flags, on one thread and on every thread.
"""

from __future__ import annotations

import ctypes
import functools
import tempfile
import time
from pathlib import Path

from compiler.build.gcc import c_flags, compile_objects, link_shared
from compiler.target.cpu import detect_cpu
from compiler.target.measure import child_stdout, timed

CHAINS = 12  # independent accumulators: 2 pipes x 4-5 cycles of latency, with room to spare
_SECONDS = 0.05  # per timed run


def _source(lanes: int) -> str:
    init = ", ".join(f"{k + 1}.0f" for k in range(lanes))
    return f"""
#include <omp.h>
typedef float tf_v __attribute__((vector_size({4 * lanes})));
static float chains(long steps) {{
  tf_v acc[{CHAINS}];
  const tf_v m = {{{", ".join(["0.999999f"] * lanes)}}}, a = {{{", ".join(["1e-7f"] * lanes)}}};
  for (int k = 0; k < {CHAINS}; ++k) acc[k] = (tf_v){{{init}}} * (float)(k + 1);
  for (long s = 0; s < steps; ++s) {{
    #pragma GCC unroll {CHAINS}
    for (int k = 0; k < {CHAINS}; ++k) acc[k] = acc[k] * m + a;
  }}
  tf_v sum = acc[0];
  for (int k = 1; k < {CHAINS}; ++k) sum += acc[k];
  float out = 0;
  for (int l = 0; l < {lanes}; ++l) out += sum[l];
  return out;
}}
float tf_fma_one(long steps) {{ return chains(steps); }}
int tf_fma_all(long steps) {{
  int threads = 1;
  float keep = 0;
  #pragma omp parallel reduction(+:keep)
  {{
    keep += chains(steps);
    #pragma omp single
    threads = omp_get_num_threads();
  }}
  return keep == 12345.0f ? -threads : threads;  /* the sum is used: the loops stay */
}}
"""


def fma_peak() -> tuple[float, float]:
    """FLOP/s of this CPU's FMAs (a multiply-add counting 2) on one thread and on all
    threads (OpenMP's default count), each the best of three runs of about 50 ms.

    Measured in a child process: with the probe's library loaded in the caller, a bench
    that went on to time models there ran ResNet-18 at 2 threads 10% slower (9.6 against
    8.6 ms, onnxruntime unchanged) for as long as the process lived."""
    one, every = child_stdout("compiler.build.fma_peak").split()[-2:]
    return float(one), float(every)


def _measure() -> tuple[float, float]:
    """`fma_peak`, in this process."""
    lanes = detect_cpu().lanes
    flags = c_flags()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "fma.so"
        path.write_bytes(link_shared(list(compile_objects({"fma": _source(lanes)}, flags).values()), {}, flags))
        lib = ctypes.CDLL(str(path))
        lib.tf_fma_one.argtypes = lib.tf_fma_all.argtypes = [ctypes.c_long]
        lib.tf_fma_one.restype, lib.tf_fma_all.restype = ctypes.c_float, ctypes.c_int
        per_step = 2.0 * lanes * CHAINS
        steps = 1000
        while timed(functools.partial(lib.tf_fma_one, steps)) < _SECONDS / 4:  # sized for ~50 ms a run
            steps *= 4
        one = per_step * steps / min(timed(functools.partial(lib.tf_fma_one, steps)) for _ in range(3))
        runs = [_timed_all(lib, steps) for _ in range(3)]
        best = min(runs, key=lambda r: r[0])
        return one, per_step * steps * abs(best[1]) / best[0]


def _timed_all(lib: ctypes.CDLL, steps: int) -> tuple[float, int]:
    start = time.perf_counter()
    threads = lib.tf_fma_all(steps)
    return time.perf_counter() - start, threads


if __name__ == "__main__":
    print(*_measure())
