"""What the plan records of a CPU GEMM kernel: its blocking, micro-kernel, orientation,
the operand read in place and the operands packed at load (`GemmBlocking`).

The decisions are made in compiler/schedule/cpu_gemm.py (and, for an operand read in
place, compiler/schedule/in_place.py) when the plan is built; the C renderer
(compiler/codegen/c/gemm.py) reads them and decides nothing. A `TileConfig` carries its
kernel's `GemmBlocking` (`TileConfig.gemm`) into the manifest, the report and the kernel
cache, so a cached kernel is placed with the blocking it was rendered with.

The blocking refers to the Compute as the GEMM path sees it: with its mergeable axes
merged (compiler/schedule/merge_axes.py).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

from compiler.ir.contraction import Contraction, match_contraction
from compiler.ir.te import Compute, Load
from compiler.schedule.plan_json import as_json, tuples


@dataclass(frozen=True)
class MicroKernel:
    """An MR x NR register block: `rows` x (`vectors` x `lanes`) float32 accumulators."""

    lanes: int
    rows: int
    vectors: int

    @property
    def cols(self) -> int:
        return self.vectors * self.lanes


@dataclass(frozen=True)
class DirectOperand:
    """A GEMM side (`side`: "a" rows, "b" columns) read in place from `pad`, a copy of
    input `input` covering the indices the windows reach: dimension d holds input
    indices lo[d] ... lo[d] + extents[d] - 1 (compiler/schedule/in_place.py lays it out)."""

    side: str
    input: int
    lo: tuple[int, ...]
    extents: tuple[int, ...]
    pad_value: float  # the value of the indices outside the input
    inner: int  # position (in the Compute's axes) of the output axis the panels walk
    width: int  # its extent
    panel: int  # positions per panel (NR for B, MR for A)
    step: int  # elements of `pad` between consecutive positions
    fold: tuple[int, int, int] | None  # the axis a line also spans: (position, extent, period)
    outer: tuple[tuple[int, int, int], ...]  # other walked axes: (position, extent, offset per step)
    base: int  # offset in `pad` of every index's constant part
    k_steps: tuple[tuple[int, int], ...]  # per reduce axis: (extent, offset in `pad` per step)
    # per batch axis the patches move with (a grouped convolution's group): (position, offset per step)
    batch: tuple[tuple[int, int], ...] = ()
    # whether `pad` is a copy; else the input itself (its layout, and every read inside it)
    copied: bool = True
    # Polyphase columns (a convolution strided along its rows' axis, read as B): each line
    # of `pad` holds the box's columns x split by phase, x at (x % phases) * phase_width
    # + x // phases, so consecutive output positions read consecutive elements. A tap's
    # column within the box is phase_first + sum(r * s) over the reduce indices r and
    # `phase_steps` (their coefficients along that axis); `k_steps` then leave it out.
    phases: int = 1
    phase_width: int = 0
    phase_first: int = 0
    phase_steps: tuple[int, ...] = ()

    def koff(self) -> list[int]:
        """Offset in `pad` of each flat (row-major) reduce index."""
        offsets = []
        for index in itertools.product(*(range(e) for e, _ in self.k_steps)):
            offset = sum(r * step for r, (_, step) in zip(index, self.k_steps, strict=True))
            if self.phases > 1:
                x = self.phase_first + sum(r * s for r, s in zip(index, self.phase_steps, strict=True))
                offset += x % self.phases * self.phase_width + x // self.phases
            offsets.append(offset)
        return offsets

    def max_koff(self) -> int:
        """The largest of `koff`'s offsets; without listing them where no phases interleave
        the columns (each reduce index then adds its own step): a 3x3 convolution over 512
        channels lists 4608, and the layout search asks for every candidate's."""
        if self.phases > 1:
            return max(self.koff())
        return sum(max(0, (e - 1) * step) for e, step in self.k_steps)

    @property
    def stored(self) -> tuple[int, ...]:
        """Shape of the box in `pad`: `extents`, its lines whole phases wide."""
        if self.phases == 1:
            return self.extents
        return (*self.extents[:-1], self.phases * self.phase_width)

    @property
    def line(self) -> int:
        """Positions in a line: an output row, or a plane at the period."""
        if self.fold is None:
            return self.width
        _, rows, period = self.fold
        return (rows - 1) * period + self.width

    @property
    def line_panels(self) -> int:
        return -(-self.line // self.panel)

    @property
    def positions(self) -> int:
        """The side's extent in the GEMM: the panels of every line."""
        return math.prod(e for _, e, _ in self.outer) * self.line_panels * self.panel

    @property
    def floats(self) -> int:
        """Size of `pad`: the padded input and one panel of slack (a last panel's overrun)."""
        return math.prod(self.stored) + self.step * self.panel

    @property
    def copy_floats(self) -> int:
        """Floats copied per call: `floats`, or none where the input is read itself."""
        return self.floats if self.copied else 0


@dataclass(frozen=True)
class PackedOperand:
    """A constant operand packed once at load: input position, GEMM side ("a": rows,
    "b": cols), panels of `width` (MR or NR) over the whole K, `copies` batch copies."""

    input: int
    side: str
    width: int
    panels: int
    k: int
    copies: int

    @property
    def copy_floats(self) -> int:
        return self.panels * self.width * self.k

    @property
    def nbytes(self) -> int:
        return 4 * self.copies * self.copy_floats


@dataclass(frozen=True)
class GemmBlocking:
    """The GEMM of one batch index (M x N x K, `batch` of them) and how it is blocked:
    tasks of `mc` rows x `nc` columns, K walked `kc` deep, micro-kernel `mk`. `swapped`:
    computed with the matched contraction's sides swapped (A the columns operand);
    `direct`: a side read in place; `packed`: the constant operands packed at load.
    `tile_stores`: where positions are read in place as B, the task's C tile is stored
    after its last K block, not each block as soon as it is done (a timed variant).
    `prefetch_in_place`: whether the micro-kernel prefetches the operand read in place
    ahead of its reads (compiler/codegen/c/gemm.py `_prefetch_in_place`)."""

    mk: MicroKernel
    m: int
    n: int
    k: int
    batch: int
    mc: int
    nc: int
    kc: int
    swapped: bool = False
    direct: DirectOperand | None = None
    packed: tuple[PackedOperand, ...] = ()
    tile_stores: bool = False
    prefetch_in_place: bool = True

    @property
    def blocks(self) -> tuple[int, int]:
        """Row blocks and column blocks of one batch index."""
        return -(-self.m // self.mc), -(-self.n // self.nc)

    @property
    def tasks(self) -> int:
        """Tasks in all: every block of every batch index."""
        return self.batch * math.prod(self.blocks)

    def contraction(self, c: Compute) -> Contraction:
        """The contraction of `c` (axes merged) as computed: the matched one, or with its
        sides swapped."""
        m = match_contraction(c)
        if m is None:
            raise ValueError(f"a GEMM blocking was planned for {c.label}, which is not a contraction")
        return Contraction(m.rhs, m.lhs, m.batch, m.cols, m.rows) if self.swapped else m

    def read_in_place(self, c: Compute) -> Load:
        """The load of the operand read in place (`direct`, which must be set)."""
        assert self.direct is not None
        m = self.contraction(c)
        load = m.lhs if self.direct.side == "a" else m.rhs
        assert isinstance(load, Load)  # compiler/schedule/in_place.py lays out loads only
        return load

    def to_json(self) -> dict[str, Any]:
        return as_json(self)

    @staticmethod
    def from_json(j: dict[str, Any]) -> GemmBlocking:
        direct = j.get("direct")
        return GemmBlocking(
            MicroKernel(**j["mk"]), *(int(j[f]) for f in ("m", "n", "k", "batch", "mc", "nc", "kc")),
            swapped=bool(j.get("swapped", False)),
            direct=None if direct is None else DirectOperand(**{f: tuples(v) for f, v in direct.items()}),
            packed=tuple(PackedOperand(**p) for p in j.get("packed", ())),
            tile_stores=bool(j.get("tile_stores", False)),
            prefetch_in_place=bool(j.get("prefetch_in_place", True)))


def micro_tails(mk: MicroKernel, m: int, n: int) -> tuple[int, int]:
    """(rows, vectors) of the micro-kernels for the last row panel and the last column
    panel of an M x N GEMM: M and N rarely fill whole panels (ResNet's 14 x 14 = 196
    columns fill 7 panels of 32 to 224), and a kernel cut to what is valid does none
    of the padding's FMAs. 0 where the panel is whole or no vector would be saved."""
    rows = m % mk.rows
    vectors = -(-(n % mk.cols) // mk.lanes)
    return rows, (vectors if vectors < mk.vectors else 0)
