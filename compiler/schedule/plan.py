"""The scheduler's output: what runs, on which buffers, in which order.

Codegen renders an `ExecutionPlan`, build compiles it, the runtime executes it.
Kernel ABI (CPU and CUDA alike): one function per kernel named by its cache key,
`void tf_<key[:20]>(T_out* restrict out, const T_in0* restrict in0, ...)`: the
output first, then the Compute's inputs in order, each a typed pointer to a
dense row-major buffer (an input the kernel reads packed: the packed region,
see `Prepack`). A CPU kernel also defines `tf_<key[:20]>_team` with the same
parameters, for callers inside an OpenMP team (compiler/codegen/c/team.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from compiler.ir.te import Compute
from compiler.schedule.chain_tiling import ChainTiling
from compiler.schedule.cuda_launch import CudaLaunch
from compiler.schedule.gemm_blocking import GemmBlocking
from compiler.schedule.per_channel import PerChannel, per_channel_from_json

# Vectors per row that a pass of a CPU attention group's products keeps in registers (scores
# of query rows, or values): each loaded vector serves every register row of the pass. The
# tile step sizes the rows by it (compiler/schedule/attention_tile.py `register_rows`) and
# the kernel walks by it (compiler/codegen/c/attention.py).
ATTENTION_VECTORS_PER_PASS = 4


@dataclass(frozen=True)
class TileConfig:
    """How one kernel is tiled.

    `block`: per spatial axis, the outputs one task computes (an OpenMP
    iteration on the CPU, a thread block on CUDA). `thread`: per spatial axis,
    the register tile (outputs per CUDA thread; the CPU micro-kernel's
    register block). `reduce_step`: per reduce axis, the chunk staged per step
    (shared-memory / L1 tile depth). `vector`: elements per vector access on
    the innermost axis.

    The levels below the rTile, decided by the backend's tile step when the plan is
    built and only read by codegen: `gemm`, a CPU contraction's packed-GEMM blocking
    (compiler/schedule/cpu_gemm.py; None: the kernel is not computed as one);
    `members`, a CPU row group's member tiles, per block of rows the group's tasks run
    (`ir.rows.block_rows`), one per member in order (compiler/schedule/row_members.py);
    `launch`, a CUDA kernel's shape, geometry and launch (compiler/schedule/cuda_tile.py);
    and a CPU kernel's loops (compiler/schedule/cpu_tile.py): `chunk`, the steps of the
    first reduce axis per pass over a tile (compiler/schedule/reduce_chunk.py; 0: all at
    once); `stage`, the task block over which a reduction stages its padded windows in
    scratch (compiler/schedule/stage_block.py; (): it stages none); `serial`, whether the
    kernel runs on the calling thread alone (compiler/schedule/parallel.py);
    `row_softmax`, whether a row group takes the softmax row kernel rather than its
    members (compiler/schedule/row_softmax.py); `row_reduction`, whether a reduction
    folds each output's contiguous row rather than running micro-tiles
    (compiler/schedule/row_reduction.py); `plane`, a per-channel convolution's layout, plane by
    plane or channels in lanes (compiler/schedule/per_channel.py; None: micro-tiles); `attention`, an attention group's (query rows,
    keys, register rows) per block (compiler/schedule/attention_tile.py; on CUDA the
    register rows are query rows per thread, compiler/schedule/cuda_attention_tile.py); `chain`, a convolution chain
    group's split, tile rows and order (compiler/schedule/partition.py; its `members` then hold each task
    kind's member tiles, compiler/schedule/chain_members.py). Each is serialized only when set.
    """

    block: tuple[int, ...]
    thread: tuple[int, ...]
    reduce_step: tuple[int, ...]
    vector: int = 1
    gemm: GemmBlocking | None = None
    members: tuple[tuple[TileConfig, ...], ...] = ()
    launch: CudaLaunch | None = None
    chunk: int = 0
    stage: tuple[int, ...] = ()
    serial: bool = False
    row_softmax: bool = False
    row_reduction: bool = False
    plane: PerChannel | None = None
    attention: tuple[int, ...] = ()
    chain: ChainTiling | None = None

    def to_json(self) -> dict:
        j = {"block": list(self.block), "thread": list(self.thread),
             "reduce_step": list(self.reduce_step), "vector": self.vector}
        if self.gemm is not None:
            j["gemm"] = self.gemm.to_json()
        if self.members:
            j["members"] = [[t.to_json() for t in block] for block in self.members]
        if self.launch is not None:
            j["launch"] = self.launch.to_json()
        if self.chunk:
            j["chunk"] = self.chunk
        if self.stage:
            j["stage"] = list(self.stage)
        if self.serial:
            j["serial"] = True
        if self.row_softmax:
            j["row_softmax"] = True
        if self.row_reduction:
            j["row_reduction"] = True
        if self.plane is not None:
            j["plane"] = self.plane.to_json()
        if self.attention:
            j["attention"] = list(self.attention)
        if self.chain is not None:
            j["chain"] = self.chain.to_json()
        return j

    @staticmethod
    def from_json(j: dict) -> TileConfig:
        gemm, launch = j.get("gemm"), j.get("launch")
        return TileConfig(tuple(j["block"]), tuple(j["thread"]), tuple(j["reduce_step"]),
                          int(j.get("vector", 1)), None if gemm is None else GemmBlocking.from_json(gemm),
                          tuple(tuple(TileConfig.from_json(t) for t in block) for block in j.get("members", ())),
                          None if launch is None else CudaLaunch.from_json(launch),
                          chunk=int(j.get("chunk", 0)), stage=tuple(j.get("stage", ())),
                          serial=bool(j.get("serial", False)), row_softmax=bool(j.get("row_softmax", False)),
                          row_reduction=bool(j.get("row_reduction", False)),
                          plane=None if "plane" not in j else per_channel_from_json(j["plane"]),
                          attention=tuple(j.get("attention", ())),
                          chain=ChainTiling.from_json(j["chain"]) if "chain" in j else None)


class BufferKind(StrEnum):
    INPUT = "input"
    OUTPUT = "output"
    WEIGHT = "weight"
    ARENA = "arena"  # an intermediate placed in the arena at `offset`


@dataclass
class Buffer:
    """A dense tensor's storage. `offset` is into the arena (ARENA) or the weights blob (WEIGHT)."""

    id: int
    shape: tuple[int, ...]
    dtype: str
    kind: BufferKind
    nbytes: int
    offset: int = 0
    name: str = ""  # user-facing name for inputs/outputs: manifest only, never in source


@dataclass
class Kernel:
    """One generated function: a (fused) Compute, its tiling, and the buffers it runs on."""

    id: int
    compute: Compute
    tile: TileConfig
    args: tuple[int, ...]  # buffer ids: output first, then the Compute's inputs
    key: str = ""  # kernel cache key (sha256 hex)
    constant_inputs: tuple[int, ...] = ()  # input positions (not args positions) read from weights
    ops: tuple[str, ...] = ()  # ONNX op types fused into it, for people
    estimated_us: float | None = None
    measured_us: float | None = None
    cache_hit: bool = False

    @property
    def symbol(self) -> str:
        """The generated function name: derived from the key, never from model strings."""
        return f"tf_{self.key[:20]}" if self.key else f"tf_k{self.id}"


@dataclass(frozen=True)
class Prepack:
    """A kernel input packed once, at load, from a weight into `nbytes` of the arena at
    `offset` (a region no intermediate shares); the kernel is passed that region instead."""

    kernel: int  # kernel id
    input: int  # position among the kernel's Compute inputs
    offset: int
    nbytes: int


@dataclass
class ExecutionPlan:
    """Buffers, kernels and the launch order (Rammer waves of mutually independent kernels)."""

    target: str  # target fingerprint
    buffers: dict[int, Buffer] = field(default_factory=dict)
    kernels: list[Kernel] = field(default_factory=list)
    waves: list[list[int]] = field(default_factory=list)  # kernel ids
    inputs: list[int] = field(default_factory=list)  # buffer ids, in the model's input order
    outputs: list[int] = field(default_factory=list)  # buffer ids, in the model's output order
    arena_bytes: int = 0  # intermediates, then the prepacked region
    weights_bytes: int = 0
    prepacked: list[Prepack] = field(default_factory=list)

    def kernel_map(self) -> dict[int, Kernel]:
        """Kernel id -> kernel (waves and prepacked regions name kernels by id)."""
        return {k.id: k for k in self.kernels}

    def prepack_of(self, kernel: int, input_pos: int) -> Prepack | None:
        """The prepacked region kernel `kernel` reads at input `input_pos`, if any."""
        return next((p for p in self.prepacked if p.kernel == kernel and p.input == input_pos), None)
