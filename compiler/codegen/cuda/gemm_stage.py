"""Staging one GEMM operand's `bk x span` slice into shared memory, one step ahead.

Thread `tid` owns the slice elements `tid + q * threads`. It loads them from
global memory into registers for step k+1 while the block computes on step k
(software pipelining through registers, so the loads' latency overlaps the
FMAs), and stores them to shared memory `smem[k][s]` at the top of the next
step; operands the plan does not prefetch (`GemmGeometry.prefetch_a` / `prefetch_b`,
compiler/schedule/cuda_tile.py) are copied straight to shared memory instead. Consecutive threads walk the operand's contiguous dimension (K or the
side), so global reads coalesce. Operands that are plain row-major float32
tensors whose innermost index is the contiguous dimension's only axis are read
with 128-bit loads when their base pointer is 16-byte aligned (tested once per
kernel; scalar loads otherwise).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

from compiler.codegen.cuda.expr import emit, value_ctype
from compiler.codegen.cuda.parts import decompose, linear
from compiler.ir.contraction import Contraction, expr_vars, plain_load, side_extent
from compiler.ir.te import Compute, Const, Expr, Load, Var
from compiler.schedule.cuda_launch import GemmGeometry, ceil_div


class OperandStaging:
    """The statements that move one operand into shared memory.

    `origin` is the C name of the side's first index in this block tile. With
    `prefetch` (the plan's), `fetch` reads the step starting at reduce index `kn` into
    registers and `fill` stores them; without it, `fill` copies the step starting at `kd`
    straight from global to shared memory in a rolled loop and `fetch` does
    nothing.
    """

    def __init__(self, c: Compute, m: Contraction, g: GemmGeometry, operand: Expr,
                 side: tuple[int, ...], smem: str, origin: str, span: int, tag: str,
                 prefetch: bool) -> None:
        self.c, self.m, self.g = c, m, g
        self.operand, self.side, self.smem, self.origin, self.span = operand, side, smem, origin, span
        self.tag = tag
        self.fast_k = _k_is_contiguous(c, operand, side)
        self.vector_input = _vector_input(c, operand, side, self.fast_k, span, g.bk)
        self.count = g.bk * span
        self.size = ceil_div(self.count, g.threads)
        if self.vector_input is not None:
            self.size = max(self.size, 4 * ceil_div(self.count // 4, g.threads))
        self.prefetch = prefetch

    def declare(self, ind: str) -> list[str]:
        """The register buffer (and the alignment test), once per tile."""
        lines = []
        if self.prefetch:
            lines.append(f"{ind}{value_ctype(self.c.acc_dtype)} {self.tag}r[{self.size}];")
        if self.vector_input is not None:
            lines.append(f"{ind}const bool {self.tag}v = (reinterpret_cast<unsigned long long>"
                         f"(in{self.vector_input}) & 15ULL) == 0;")
        return lines

    def fetch(self, ind: str, counter: Iterator[int]) -> list[str]:
        """Global memory -> registers for the step starting at `kn` (prefetching only)."""
        if not self.prefetch:
            return []
        return self._branches(ind, lambda i, w: self._unrolled(i, w, counter))

    def fill(self, ind: str, counter: Iterator[int]) -> list[str]:
        """Shared memory gets the current step: from the registers, or from `kd` directly."""
        if self.prefetch:
            return self._branches(ind, lambda i, w: self._unrolled(i, w, None))
        return self._branches(ind, lambda i, w: self._rolled(i, w, counter))

    def _branches(self, ind: str, loop: Callable[[str, int], list[str]]) -> list[str]:
        if self.vector_input is None:
            return loop(ind, 1)
        return [f"{ind}if ({self.tag}v) {{", *loop(ind + "  ", 4), f"{ind}}} else {{",
                *loop(ind + "  ", 1), f"{ind}}}"]

    def _coordinates(self, ind: str, width: int) -> list[str]:
        per = (self.g.bk if self.fast_k else self.span) // width
        fast, slow = ("kk", "ss") if self.fast_k else ("ss", "kk")
        return [f"{ind}const int {fast} = e % {per} * {width};", f"{ind}const int {slow} = e / {per};"]

    def _cells(self, width: int) -> list[str]:
        if width == 1:
            return [f"{self.smem}[kk][ss]"]
        return [f"{self.smem}[kk + {j}][ss]" if self.fast_k else f"{self.smem}[kk][ss + {j}]"
                for j in range(4)]

    def _unrolled(self, ind: str, width: int, counter: Iterator[int] | None) -> list[str]:
        """The thread's elements, `width` at a time, in an unrolled loop: into the registers
        from step `kn` when `counter` is given (it names the temporaries), else out of them."""
        g = self.g
        count = self.count // width
        inner = ind + "  "
        lines = [f"{ind}#pragma unroll",
                 f"{ind}for (int q = 0; q < {ceil_div(count, g.threads)}; ++q) {{",
                 f"{inner}const int e = tid + q * {g.threads};"]
        if count % g.threads:
            lines.append(f"{inner}if (e < {count}) {{")
            inner += "  "
        lines += self._coordinates(inner, width)
        regs = [f"{self.tag}r[q]"] if width == 1 else [f"{self.tag}r[4 * q + {j}]" for j in range(4)]
        if counter is None:
            lines += [f"{inner}{cell} = {r};" for cell, r in zip(self._cells(width), regs, strict=True)]
        else:
            lines += self._read(inner, width, regs, "kn", counter)
        if count % g.threads:
            lines.append(f"{ind}  }}")
        lines.append(f"{ind}}}")
        return lines

    def _rolled(self, ind: str, width: int, counter: Iterator[int]) -> list[str]:
        """The thread's elements from step `kd` straight into shared memory."""
        g = self.g
        inner = ind + "  "
        cells = self._cells(width)
        values = ["v"] if width == 1 else [f"v[{j}]" for j in range(4)]
        lines = [f"{ind}for (int e = tid; e < {self.count // width}; e += {g.threads}) {{",
                 *self._coordinates(inner, width),
                 f"{inner}{value_ctype(self.c.acc_dtype)} v[{width}];"]
        lines += self._read(inner, width, ["v[0]"] if width == 1 else values, "kd", counter)
        lines += [f"{inner}{cell} = {v};" for cell, v in zip(cells, ["v[0]"] if width == 1 else values,
                                                             strict=True)]
        lines.append(f"{ind}}}")
        return lines

    def _read(self, ind: str, width: int, targets: list[str], step: str,
              counter: Iterator[int]) -> list[str]:
        """Statements setting `targets` to the element(s) at (ss, kk) of the step starting
        at `step` (zero outside the operand)."""
        c = self.c
        big_s, big_k = side_extent(c, self.side), math.prod(a.extent for a in c.reduce_axes)
        body = ind + "  "
        names = {c.axes[d].name: f"s{d}" for d in (*self.m.batch, *self.side)}
        names |= {a.name: f"k{d}" for d, a in enumerate(c.reduce_axes)}
        lines = [f"{ind}const long long sv = {self.origin} + ss;",
                 f"{ind}const long long kv = {step} + kk;"]
        lines += [f"{ind}{r} = 0;" for r in targets]
        lines.append(f"{ind}if (sv < {big_s}LL && kv < {big_k}LL) {{")
        lines += decompose("sv", [f"s{d}" for d in self.side], [c.axes[d].extent for d in self.side],
                           body)
        lines += decompose("kv", [f"k{d}" for d in range(len(c.reduce_axes))],
                           [a.extent for a in c.reduce_axes], body)
        if width == 1:
            lines.append(f"{body}{targets[0]} = {emit(c.inputs, names, counter, self.operand, lines, body)};")
        else:
            ld = self.operand
            assert isinstance(ld, Load)
            index = [names[i.name] if isinstance(i, Var) else f"{int(i.value)}L"  # type: ignore[attr-defined]
                     for i in ld.indices]
            lines.append(f"{body}const float4 f4 = *reinterpret_cast<const float4*>(in{ld.input} + "
                         f"{linear(index, c.inputs[ld.input].shape)});")
            lines += [f"{body}{r} = f4.{comp};" for r, comp in zip(targets, "xyzw", strict=True)]
        lines.append(f"{ind}}}")
        return lines


def _k_is_contiguous(c: Compute, operand: Expr, side: tuple[int, ...]) -> bool:
    """Whether the operand's innermost index moves with K rather than with its side's axes."""
    ld = plain_load(operand)
    assert ld is not None
    if not ld.indices:
        return True
    inner = expr_vars(ld.indices[-1])
    return not any(c.axes[d].name in inner for d in side)


def _vector_input(c: Compute, operand: Expr, side: tuple[int, ...], fast_k: bool, span: int,
                  bk: int) -> int | None:
    """The input number when the operand can be staged with float4 loads, else None.

    Needs a bare float32 load (no cast, no padding) indexed by axis variables and
    constants, whose innermost index is a variable used nowhere else in the load and
    the only axis of the contiguous dimension (K or the side), with that extent, the
    tensor's row and the staged tile all multiples of 4.
    """
    if not isinstance(operand, Load) or operand.pad is not None or operand.dtype != "float32":
        return None
    if not operand.indices or not all(isinstance(i, Var | Const) for i in operand.indices):
        return None
    last = operand.indices[-1]
    if not isinstance(last, Var) or last in operand.indices[:-1]:
        return None
    axes, tile = (list(c.reduce_axes), bk) if fast_k else ([c.axes[d] for d in side], span)
    if len(axes) != 1 or axes[0].name != last.name:
        return None
    if axes[0].extent % 4 or c.inputs[operand.input].shape[-1] % 4 or tile % 4:
        return None
    return operand.input
