"""How a CPU kernel shares its work among threads: Rammer's vEUs on the CPU.

Every kernel is written as `<symbol>_team(...)`: its tasks go to the threads of the
enclosing OpenMP team through an orphaned `omp for ... nowait` (a kernel too small
to be worth splitting runs on whichever thread reaches it first: `omp single
nowait`). The entry point runs all kernels inside one parallel region, wave by
wave, with one barrier per wave: the kernels of a wave are independent, so a
thread done with its share of one goes on to the next (co-scheduling), and the
region is opened once per run instead of once per kernel (at 2 threads, libgomp's
fork and join cost about 1 us a kernel, a barrier about half that).
`<symbol>(...)` runs the same work on its own, in a region of its own: what the
candidate timer and the kernel tests call.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from compiler.codegen.csource import CSource
from compiler.ir.dtypes import dtype
from compiler.ir.te import Compute

TEAM_SUFFIX = "_team"


def team_symbol(symbol: str) -> str:
    """The name of the kernel's team function."""
    return f"{symbol}{TEAM_SUFFIX}"


@contextmanager
def shared_tasks(src: CSource, parallel: bool) -> Iterator[None]:
    """Around a kernel's task loop: split among the team (`parallel`; the loop must be the
    first statement written inside), or run whole by one of its threads."""
    if parallel:
        src.line("#pragma omp for schedule(static) nowait")
        yield
        return
    src.line("#pragma omp single nowait")
    with src.block(""):
        yield


def kernel_params(c: Compute) -> list[str]:
    """The kernel ABI's parameters (compiler/schedule/plan.py): the output, then each input."""
    return [f"{dtype(c.dtype).c_type}* restrict out"] + [
        f"const {dtype(t.dtype).c_type}* restrict in{k}" for k, t in enumerate(c.inputs)]


def mark_used(src: CSource, params: Sequence[str]) -> None:
    """`(void)p;` for every parameter: a kernel may read none of some of them."""
    src.extend([f"(void){p.rsplit(' ', 1)[1]};" for p in params])


def write_standalone(src: CSource, symbol: str, params: Sequence[str], parallel: bool) -> None:
    """`symbol(params)`: the team function run in a parallel region of its own (a kernel
    not worth splitting runs on the calling thread)."""
    args = ", ".join(p.rsplit(" ", 1)[1] for p in params)
    with src.block(f"void {symbol}({', '.join(params)})"):
        if parallel:
            src.line("#pragma omp parallel")
        src.line(f"{team_symbol(symbol)}({args});")


@contextmanager
def thread_scratch(src: CSource, split: bool, name: str, floats: int) -> Iterator[None]:
    """A block every thread of the team runs (one thread alone where the tasks are not
    `split`), with `float* name`: `floats` floats of 64-byte-aligned scratch of its own
    (the micro-kernels' vector loads assume the alignment), freed at the block's end."""
    if not split:
        src.line("#pragma omp single nowait")
    with src.block(""):
        src.line(f"float* const {name} = (float*)aligned_alloc(64, {4 * floats}UL);")
        src.line(f"if (!{name}) abort();")
        yield
        src.line(f"free({name});")
