"""What the plan records of a CUDA kernel: its kernel shape, the geometry of that shape
(block and register tiles, threads, shared-memory depth) and its launch (`CudaLaunch`).

The decisions are made in compiler/schedule/cuda_tile.py when the plan is built; the
CUDA renderer (compiler/codegen/cuda/) reads them and decides nothing, and the launch
table in the manifest is the recorded grid and block. A `TileConfig` carries its
kernel's `CudaLaunch` (`TileConfig.launch`) into the manifest, the report and the
kernel cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from compiler.ir.te import Compute
from compiler.schedule.plan_json import as_json, tuples

# Blocks in a 1-D grid: far below the hardware's 2^31-1, enough to fill any GPU
# many times over; larger index spaces are covered by grid-stride loops.
MAX_GRID = 1 << 20
MAX_THREADS = 1024
WARP = 32
# Elements per thread up to which a GEMM operand is prefetched through registers: beyond
# it, unrolled copies of the index arithmetic would swamp nvcc and the registers.
MAX_PREFETCH = 16

Dim3 = tuple[int, int, int]


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def prefetches(bk: int, span: int, threads: int) -> bool:
    """Whether a GEMM operand's `bk x span` slice, staged by `threads` threads, is
    prefetched through registers (at most `MAX_PREFETCH` elements per thread) rather than
    copied straight to shared memory: compiler/schedule/cuda_tile.py's decision, and the
    one a geometry's JSON leaves unwritten."""
    return ceil_div(bk * span, threads) <= MAX_PREFETCH


@dataclass(frozen=True)
class GemmGeometry:
    """Shared-memory tiled GEMM: block tile (bm x bn outputs, bk deep), register tile
    (tm x tn) per thread, and whether the rows operand (`prefetch_a`) and the cols
    operand (`prefetch_b`) are prefetched one step ahead through registers or copied
    straight to shared memory (compiler/codegen/cuda/gemm_stage.py)."""

    bm: int
    bn: int
    bk: int
    tm: int
    tn: int
    prefetch_a: bool
    prefetch_b: bool

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)

    def to_json(self) -> dict[str, Any]:
        """The sizes, and a prefetch only where it departs from `prefetches` (so a plan
        made before the prefetches were recorded reads the same)."""
        j = as_json(self)
        for name, prefetch, span in (("prefetch_a", self.prefetch_a, self.bm), ("prefetch_b", self.prefetch_b, self.bn)):
            if prefetch == prefetches(self.bk, span, self.threads):
                del j[name]
        return j

    @staticmethod
    def from_json(j: dict[str, Any]) -> GemmGeometry:
        bm, bn, bk, tm, tn = (int(j[f]) for f in ("bm", "bn", "bk", "tm", "tn"))
        threads = (bm // tm) * (bn // tn)
        return GemmGeometry(bm, bn, bk, tm, tn, bool(j.get("prefetch_a", prefetches(bk, bm, threads))),
                            bool(j.get("prefetch_b", prefetches(bk, bn, threads))))


@dataclass(frozen=True)
class RowGeometry:
    """Row reduction: threads per output row (a power-of-two multiple of 32) and rows per block."""

    per_row: int
    rows: int

    @property
    def threads(self) -> int:
        return self.per_row * self.rows


@dataclass(frozen=True)
class RowGroupGeometry:
    """Fused row group: threads per block (one block per row at a time), the rows to walk,
    and the stages its readers recompute rather than keep in shared memory
    (compiler/ir/recompute.py)."""

    threads: int
    rows: int
    recomputed: tuple[int, ...] = ()


@dataclass(frozen=True)
class GeneralGeometry:
    """General kernel: threads and register tile per spatial axis."""

    threads: tuple[int, ...]
    regs: tuple[int, ...]

    def tiles(self, c: Compute) -> tuple[int, ...]:
        """Block tiles along each spatial axis."""
        return tuple(ceil_div(max(1, a.extent), t * r)
                     for a, t, r in zip(c.axes, self.threads, self.regs, strict=True))


@dataclass(frozen=True)
class AttentionGeometry:
    """Fused attention (compiler/ir/attention.py): `bq` query rows per block, `bk` keys per
    step, `team` threads per query row (lanes of one warp: a row's max and sum are warp
    shuffles) and `rows` query rows per thread; a thread holds `bk / team` scores of each
    of its rows and every `team`-th value column of their outputs."""

    bq: int
    bk: int
    team: int
    rows: int

    @property
    def threads(self) -> int:
        return self.bq // self.rows * self.team

    def smem(self, head_dim: int, value_dim: int) -> dict[str, tuple[int, int]]:
        """The block's shared arrays (name -> rows, columns of float32): the queries `sq`,
        the key block then, in the same space, the value block `skv`, and the block's
        probabilities `sp`; rows the threads read across are padded one column so that
        neighbouring rows start on different banks."""
        return {"sq": (self.bq, head_dim + 1), "skv": (self.bk, max(head_dim + 1, value_dim)),
                "sp": (self.bq, self.bk + 1)}


Geometry = GemmGeometry | RowGeometry | RowGroupGeometry | GeneralGeometry | AttentionGeometry
GEOMETRIES: dict[str, type] = {"gemm": GemmGeometry, "rowreduce": RowGeometry,
                               "rowgroup": RowGroupGeometry, "general": GeneralGeometry,
                               "attention": AttentionGeometry}


@dataclass(frozen=True)
class CudaLaunch:
    """One CUDA kernel's shape (`kind`: "gemm" | "rowreduce" | "rowgroup" | "general" |
    "attention"), its geometry and its launch on a 1-D grid (`grid` blocks of `block`
    threads)."""

    kind: str
    geometry: Geometry
    grid: Dim3
    block: Dim3

    def to_json(self) -> dict[str, Any]:
        j = as_json(self)
        if isinstance(self.geometry, GemmGeometry):
            j["geometry"] = self.geometry.to_json()
        return j

    @staticmethod
    def from_json(j: dict[str, Any]) -> CudaLaunch:
        kind = j["kind"]
        if kind == "gemm":
            geometry: Geometry = GemmGeometry.from_json(j["geometry"])
        else:
            geometry = GEOMETRIES[kind](**{f: tuples(v) for f, v in j["geometry"].items()})
        return CudaLaunch(kind, geometry, _dim3(j["grid"]), _dim3(j["block"]))


def _dim3(v: list[int]) -> Dim3:
    x, y, z = (int(d) for d in v)
    return x, y, z
