"""Exhaustive accuracy sweep of the inlined vector tanh, erf and log (compiler/codegen/c/
vector_functions.py): every float32 of the range, at 4, 8 and 16 lanes, against glibc's
double-precision function rounded once to float32.

    .venv/bin/python scripts/vector_functions_sweep.py [MARCH]     # default: native

Prints, per function: values compared, the worst distance in ulps and where, how many
values differ between lane counts (0: the same bits at every width), special values
(inf, NaN) that differ from the reference, and a checksum of all results (equal
checksums under two -march values: the same bits on both ISAs). About three minutes;
a plain x86-64 build emulates the wide vectors and takes longer.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compiler.codegen.c.vector_functions import vector_definitions, vector_function

# op -> the largest magnitude swept: beyond it each function is constant (tanh 1, erf 1)
# or, for log, the whole positive range (the negatives give NaN)
RANGES = {"tanh": 10.5, "erf": 4.5, "log": 3.4e38}
LANES = (4, 8, 16)

MAIN = r"""
static int64_t ulps(float a, float b) {
  int32_t x, y;
  memcpy(&x, &a, 4); memcpy(&y, &b, 4);
  if (x < 0) x = (int32_t)0x80000000 - x;
  if (y < 0) y = (int32_t)0x80000000 - y;
  return x > y ? (int64_t)x - y : (int64_t)y - x;
}
int main(void) {
  float bound = BOUNDf, at = 0;
  int64_t worst = 0;
  long n = 0, lane_mismatches = 0, special_mismatches = 0;
  uint64_t sum = 0;
  uint32_t top;
  memcpy(&top, &bound, 4);
  for (uint32_t sign = 0; sign <= 1; ++sign)
    for (uint32_t u = 0; u <= top; u += 16) {
      float in[16], o4[16], o8[16], o16[16];
      for (int j = 0; j < 16; ++j) { uint32_t b = (u + j) | (sign << 31); memcpy(&in[j], &b, 4); }
      for (int j = 0; j < 16; j += 4) { tf_f32x4 v; memcpy(&v, in + j, 16); v = F4(v); memcpy(o4 + j, &v, 16); }
      for (int j = 0; j < 16; j += 8) { tf_f32x8 v; memcpy(&v, in + j, 32); v = F8(v); memcpy(o8 + j, &v, 32); }
      { tf_f32x16 v; memcpy(&v, in, 64); v = F16(v); memcpy(o16, &v, 64); }
      for (int j = 0; j < 16; ++j) {
        uint32_t b;
        memcpy(&b, &o16[j], 4);
        sum = sum * 1000003u + b;
        if (memcmp(&o4[j], &o16[j], 4) || memcmp(&o8[j], &o16[j], 4)) ++lane_mismatches;
        const float want = (float)REF((double)in[j]);
        if (isnan(want) || isinf(want)) {
          if (!(isnan(want) ? isnan(o16[j]) : o16[j] == want)) ++special_mismatches;
          continue;
        }
        const int64_t e = ulps(o16[j], want);
        if (e > worst) { worst = e; at = in[j]; }
        ++n;
      }
    }
  printf("%ld values, worst %lld ulp at %a, lane-count mismatches %ld, special mismatches %ld, checksum %016llx\n",
         n, (long long)worst, at, lane_mismatches, special_mismatches, (unsigned long long)sum);
  return 0;
}
"""


def sweep_source(op: str) -> str:
    """The C program sweeping `op` (its definitions at every lane count, then MAIN)."""
    definitions: dict[str, list[str]] = {}
    for lanes in LANES:
        definitions.update(vector_definitions(op, lanes))
    head = ["#include <math.h>", "#include <stdint.h>", "#include <stdio.h>", "#include <string.h>"]
    main = MAIN.replace("BOUND", repr(RANGES[op])).replace("REF", op)
    for lanes in LANES:
        main = main.replace(f"F{lanes}(", f"{vector_function(op, lanes)}(")
    return "\n".join([*head, *(line for lines in definitions.values() for line in lines), main])


def main() -> None:
    march = sys.argv[1] if len(sys.argv) > 1 else "native"
    with tempfile.TemporaryDirectory() as d:
        for op in RANGES:
            c, exe = Path(d) / f"{op}.c", Path(d) / op
            c.write_text(sweep_source(op))
            subprocess.run(["gcc", "-O2", f"-march={march}", "-fno-math-errno", "-std=gnu11", "-Wno-psabi", str(c), "-o", str(exe),
                            "-lm"], check=True)
            result = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.strip()
            print(f"{op} (-march={march}, |x| <= {RANGES[op]:g}): {result}", flush=True)


if __name__ == "__main__":
    main()
