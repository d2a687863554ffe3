"""The CUDA runtime: artifacts of generated kernels (model.cubin + launch table) load and
run through pycuda and match the references (the hand-built model's numpy reference,
onnxruntime for the zoo models). Those tests are marked `gpu` and skip with the reason
when no GPU or pycuda is present; without them, a CUDA artifact must be refused with an
error that says what is missing. The runtime's own logic (buffers, offsets, launch
order, copies) also runs here, through a stand-in driver over the CPU kernel emulator."""

from __future__ import annotations

import ctypes
import shutil
import sys
import types
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import onnx
import pytest
from handbuilt import X_NAME, graph, reference
from onnx import TensorProto, helper, numpy_helper

from compiler import frontend
from compiler.abi import MANIFEST_LAUNCHES
from compiler.aligned import aligned_empty
from compiler.bench.measure import ort_session
from compiler.bench.models import ZOO, small_map_head, transformer_encoder
from compiler.build.nvcc import compile_cubin
from compiler.codegen.cuda.kernel import launch_table, render_module
from compiler.errors import ArtifactError
from compiler.ir.graph import Graph
from compiler.package import write_artifact
from compiler.runtime import load
from compiler.runtime.cuda import _check_arch
from compiler.schedule.cuda_tile import plan_cuda_tile
from compiler.schedule.plan import ExecutionPlan
from compiler.schedule.planner import build_plan, weights_blob
from compiler.schedule.rtile import construct
from compiler.schedule.split_k import split_contractions
from compiler.schedule.tilegraph.registers import fuse
from compiler.target.registry import get_target

# The kernel emulator and the device probe live with the codegen tests.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
from cuda_device import device_arch
from cuda_emulator import EmulatedKernels

H100 = get_target("cuda:h100")
ARCH, WHY_NOT = device_arch()


def cuda_artifact(g: Graph, path: Path, arch: str, build: bool = True) -> tuple[Path, ExecutionPlan]:
    """Plan `g` with Roller's tiles for the H100 preset, build it for `arch` (unless `build`
    is False: the emulator needs no cubin), write the artifact."""
    plan = build_plan(g, f"cuda:{arch}:test", lambda c, _constants: plan_cuda_tile(c, construct(c, H100)[0].tile))
    source = render_module(plan)
    cubin = compile_cubin(source, arch) if build else b"\x7fELF not built"
    files = {"model.cubin": cubin, "weights.bin": weights_blob(g, plan), "src/model.cu": source.encode()}
    extra = {"target": f"cuda:{arch}", "target_kind": "cuda", "toolchain": "nvcc test",
             "model_sha256": "0" * 64, MANIFEST_LAUNCHES: launch_table(plan)}
    write_artifact(path, plan, files, extra, {"kernels": len(plan.kernels)})
    return path, plan


@pytest.mark.skipif(ARCH is not None, reason="a GPU is present: the artifact runs instead")
def test_without_gpu_or_pycuda_loading_says_what_is_missing(tmp_path: Path) -> None:
    artifact, _ = cuda_artifact(graph(), tmp_path / "m.tar.gz", "sm_80", build=False)
    with pytest.raises(ArtifactError, match=r"pycuda|GPU"):
        load(artifact)


def test_cubin_compatibility_follows_compute_capability() -> None:
    _check_arch("cuda:sm_80:0", (8, 6))
    _check_arch("cuda:sm_90:0", (9, 0))
    with pytest.raises(ArtifactError, match="sm_90"):
        _check_arch("cuda:sm_90:0", (8, 9))
    with pytest.raises(ArtifactError, match="sm_86"):
        _check_arch("cuda:sm_86:0", (8, 0))
    with pytest.raises(ArtifactError, match="no CUDA arch"):
        _check_arch("cpu:x86_64:0", (9, 0))


@pytest.mark.gpu
@pytest.mark.skipif(ARCH is None, reason=WHY_NOT)
def test_handbuilt_model_runs_on_the_gpu(tmp_path: Path) -> None:
    assert ARCH is not None
    exe = load(cuda_artifact(graph(), tmp_path / "m.tar.gz", ARCH)[0])
    x = np.random.default_rng(1).standard_normal((2, 8)).astype(np.float32)
    got = exe.run({X_NAME: x})
    for name, want in reference(x).items():
        np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ArtifactError, match="shape"):
        exe.run({X_NAME: x[:1]})


@pytest.mark.gpu
@pytest.mark.skipif(ARCH is None, reason=WHY_NOT)
@pytest.mark.parametrize("name", sorted(ZOO))
def test_zoo_model_runs_on_the_gpu_and_matches_onnxruntime(tmp_path: Path, name: str) -> None:
    assert ARCH is not None
    model = ZOO[name]()
    g = fuse(frontend.import_model(model.SerializeToString()))
    artifact, plan = cuda_artifact(g, tmp_path / "m.tar.gz", ARCH)
    exe = load(artifact)
    assert exe.graph_note == ""  # the launch table replays as one CUDA graph
    rng = np.random.default_rng(7)
    for _ in range(2):  # fresh inputs: the replayed graph reads the input buffers anew
        feeds = {s.name: rng.standard_normal(s.shape).astype(s.dtype) for s in exe.input_specs}
        ours = exe.run(feeds)
        refs = ort_session(model.SerializeToString(), 1).run(None, feeds)
        for out, ref in zip(model.graph.output, refs, strict=True):
            err = np.linalg.norm(ours[out.name] - ref) / max(np.linalg.norm(ref), 1e-30)
            assert err <= 1e-4, f"{name} output {out.name}: relative L2 error {err:.3g}"
    profile = exe.kernel_times(feeds, runs=3)
    launches = Counter(launch["symbol"] for wave in launch_table(plan) for launch in wave)
    assert {s: len(t) for s, t in profile.items()} == {s: 3 * n for s, n in launches.items()}
    assert all(min(t) >= 0 for t in profile.values())  # events tick in ~0.5 us
    assert all(t > 0 for t in exe.device_times(feeds, runs=3))


@pytest.mark.gpu
@pytest.mark.skipif(ARCH is None, reason=WHY_NOT)
def test_split_k_model_compiles_validated_on_the_gpu(tmp_path: Path) -> None:
    """The pipeline on this GPU (candidates timed, the artifact checked against onnxruntime):
    the small map's convolution and classifier are each timed split and whole, the faster
    runs, and the model agrees."""
    from compiler.pipeline import compile_model
    from compiler.runtime.cuda import device_target
    from compiler.schedule.split_k import SPLIT_LABEL

    result = compile_model(small_map_head(), device_target(), {"validate": True}, output=tmp_path / "m.tar.gz")
    assert result.validation["passed"] is True
    verdicts = result.report["split_k"]
    assert len(verdicts) == 2 and all(v["by"] in ("timed", "cache") for v in verdicts)
    kept_split = sum(v["kept"] == "split" for v in verdicts)
    assert sum(1 for k in result.plan.kernels if k.compute.label.startswith(SPLIT_LABEL)) == kept_split


def split_k_variety() -> onnx.ModelProto:
    """Contractions split-K cuts, of other shapes than `small_map_head`'s: a grouped 3x3
    convolution (2 groups of 64 channels, K = 576 each), a MatMul of a 3-D activation by a
    [1024, 32] weight, and a Gemm of a transposed activation with alpha, beta and a bias."""
    rng = np.random.default_rng(11)

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32), name)

    f = TensorProto.FLOAT
    nodes = [
        helper.make_node("Conv", ["x", "wc"], ["c"], group=2, kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("MatMul", ["a", "wm"], ["m"]),
        helper.make_node("Gemm", ["g", "wg", "bg"], ["y"], transA=1, alpha=0.5, beta=2.0),
    ]
    graph = helper.make_graph(
        nodes, "split_k_variety",
        [helper.make_tensor_value_info("x", f, [1, 128, 4, 4]), helper.make_tensor_value_info("a", f, [1, 4, 1024]),
         helper.make_tensor_value_info("g", f, [1024, 2])],
        [helper.make_tensor_value_info(n, f, None) for n in ("c", "m", "y")],
        [weight("wc", 128, 64, 3, 3), weight("wm", 1024, 32), weight("wg", 1024, 8), weight("bg", 8)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


class _EmulatedDriver(types.ModuleType):
    """The part of pycuda.driver the runtime uses, over host memory and the CPU emulator:
    "device" allocations are aligned host buffers, a launch runs the g++-built kernel."""

    Error = RuntimeError

    def __init__(self, kernels: EmulatedKernels) -> None:
        super().__init__("pycuda.driver")
        self.kernels = kernels
        self.launched: list[tuple[str, tuple[int, ...], tuple[int, ...]]] = []
        self.allocations: list[np.ndarray] = []
        driver = self

        class Device:
            @staticmethod
            def count() -> int:
                return 1

            def __init__(self, index: int) -> None:
                assert index == 0

            def compute_capability(self) -> tuple[int, int]:
                return (8, 0)

            def retain_primary_context(self) -> SimpleNamespace:
                return SimpleNamespace(push=lambda: None)

        class Function:
            def __init__(self, symbol: str) -> None:
                self.symbol = symbol

            def prepare(self, fmt: str) -> None:
                self.fmt = fmt

            def prepared_async_call(self, grid: tuple[int, ...], block: tuple[int, ...],
                                    stream: Stream, *ptrs: int) -> None:
                assert len(ptrs) == len(self.fmt) and isinstance(stream, Stream)
                driver.launched.append((self.symbol, grid, block))
                driver.kernels.launch(self.symbol, grid[0], block[0], [int(p) for p in ptrs])

        class Stream:
            """Runs its work at once: in-order, like any stream, and trivially after every
            event it is asked to wait for. Its handle is the legacy default stream's, which
            CUDA cannot capture into a graph (and without libcuda there is none to try)."""

            handle = 0

            def wait_for_event(self, event: Event) -> None:
                assert event.recorded

        class Event:
            def __init__(self, flags: int) -> None:
                self.recorded = False

            def record(self, stream: Stream) -> None:
                self.recorded = True

        self.Device, self.Stream, self.Event = Device, Stream, Event
        self.event_flags = SimpleNamespace(DISABLE_TIMING=2)
        self.Context = SimpleNamespace(pop=lambda: None, synchronize=lambda: None)
        self.module_from_buffer = lambda cubin: SimpleNamespace(get_function=Function)

    def init(self) -> None:
        pass

    def mem_alloc(self, nbytes: int) -> int:
        buf = aligned_empty((nbytes,), np.uint8)
        buf.fill(0xA5)  # garbage: a kernel reading what nobody wrote shows
        self.allocations.append(buf)
        return buf.ctypes.data

    def memcpy_htod(self, dst: int, src: bytes | np.ndarray) -> None:
        view = memoryview(src).cast("B")
        ctypes.memmove(dst, (ctypes.c_char * len(view)).from_buffer_copy(view), len(view))

    def memcpy_dtoh(self, dst: np.ndarray, src: int) -> None:
        ctypes.memmove(dst.ctypes.data, src, dst.nbytes)


@pytest.mark.skipif(shutil.which("g++") is None, reason="the CUDA emulator needs g++")
@pytest.mark.parametrize("model", ["handbuilt", "transformer_encoder", "small_map_head", "split_k_variety"])
def test_runtime_runs_the_launch_table_on_emulated_kernels(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str) -> None:
    if model == "handbuilt":
        g, onnx_model = graph(), None
    elif model == "transformer_encoder":
        onnx_model = transformer_encoder(seq=8, hidden=32, heads=2, ffn=64)
        g = fuse(frontend.import_model(onnx_model.SerializeToString()))
    else:  # its contractions cut by split-K, as the CUDA backend plans them
        onnx_model = small_map_head() if model == "small_map_head" else split_k_variety()
        g = frontend.import_model(onnx_model.SerializeToString())
        assert len(split_contractions(g, H100.units)) == (2 if model == "small_map_head" else 3)
        fuse(g)
    artifact, plan = cuda_artifact(g, tmp_path / "m.tar.gz", "sm_80", build=False)
    if model in ("handbuilt", "transformer_encoder"):  # the others are chains: one kernel a wave
        assert max(len(w) for w in plan.waves) > 1  # some wave runs kernels on several streams
    kernels = {k.symbol: (k.compute, k.tile) for k in plan.kernels}
    driver = _EmulatedDriver(EmulatedKernels(kernels, tmp_path))
    monkeypatch.setitem(sys.modules, "pycuda", types.ModuleType("pycuda"))
    monkeypatch.setitem(sys.modules, "pycuda.driver", driver)
    exe = load(artifact)
    # No graph for the stand-in (its streams are the legacy default stream, not capturable,
    # and without libcuda there is no driver to ask): the kernel-by-kernel path, said so.
    assert exe.graph_note.startswith("launching kernel by kernel")
    rng = np.random.default_rng(5)
    feeds = {s.name: rng.standard_normal(s.shape).astype(s.dtype) for s in exe.input_specs}
    got = exe.run(feeds)
    if onnx_model is None:
        want = reference(feeds[X_NAME])
    else:
        refs = ort_session(onnx_model.SerializeToString(), 1).run(None, feeds)
        want = {o.name: r for o, r in zip(onnx_model.graph.output, refs, strict=True)}
    for name, ref in want.items():
        np.testing.assert_allclose(got[name], ref, rtol=1e-4, atol=1e-4)
    assert [s for s, _, _ in driver.launched] == [
        launch["symbol"] for wave in launch_table(plan) for launch in wave]
