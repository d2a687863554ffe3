"""Loading and running a CPU artifact: results, input checks, threads, device routing."""

import importlib.util
import threading
from pathlib import Path

import numpy as np
import pytest
from handbuilt import EXTRA, X_NAME, Y_NAME, Z_NAME, graph, reference, whole

from compiler.aligned import ALIGNMENT, aligned_empty
from compiler.errors import ArtifactError
from compiler.package import write_artifact
from compiler.runtime import TensorSpec, load, load_folder
from compiler.runtime.artifact import read_artifact
from compiler.schedule.planner import build_plan, weights_blob
from compiler.target.toolchain import find_tool


def x(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((2, 8)).astype(np.float32)


def test_runs_and_matches_numpy(artifact: Path):
    exe = load(artifact)
    out = exe.run({X_NAME: x()})
    assert list(out) == [Y_NAME, Z_NAME]
    for name, ref in reference(x()).items():
        np.testing.assert_allclose(out[name], ref, rtol=1e-5, atol=1e-6)
    assert exe.input_specs == [TensorSpec(X_NAME, (2, 8), "float32")]
    assert [(s.name, s.shape) for s in exe.output_specs] == [(Y_NAME, (2, 4)), (Z_NAME, (8,))]


def test_outputs_are_fresh_and_inputs_untouched(artifact: Path):
    exe = load(artifact)
    a, b = x(1), x(2)
    a_copy = a.copy()
    first = exe.run({X_NAME: a})
    second = exe.run({X_NAME: b})
    assert first[Y_NAME] is not second[Y_NAME]
    np.testing.assert_array_equal(a, a_copy)
    np.testing.assert_allclose(first[Z_NAME], reference(a)[Z_NAME], rtol=1e-5)
    np.testing.assert_allclose(second[Z_NAME], reference(b)[Z_NAME], rtol=1e-5)


def test_an_output_is_rewritten_only_once_nothing_refers_to_its_memory(artifact: Path):
    exe = load(artifact)
    a, b, c = x(5), x(6), x(7)
    held = exe.run({X_NAME: a})[Y_NAME]
    view = exe.run({X_NAME: b})[Y_NAME][1:]  # the array is dropped, a view of its memory kept
    exported = memoryview(exe.run({X_NAME: c})[Y_NAME])
    for _ in range(3):  # runs that must not write into any of the three
        exe.run({X_NAME: x(8)})
    np.testing.assert_allclose(held, reference(a)[Y_NAME], rtol=1e-5)
    np.testing.assert_allclose(view, reference(b)[Y_NAME][1:], rtol=1e-5)
    np.testing.assert_allclose(np.asarray(exported), reference(c)[Y_NAME], rtol=1e-5)


def test_a_dropped_output_buffer_is_reused(artifact: Path):
    exe = load(artifact)
    first = exe.run({X_NAME: x(1)})[Y_NAME]
    address = first.ctypes.data
    del first  # nothing refers to its memory any more: the next run may write there
    second = exe.run({X_NAME: x(2)})[Y_NAME]
    assert second.ctypes.data == address
    np.testing.assert_allclose(second, reference(x(2))[Y_NAME], rtol=1e-5)
    assert second.ctypes.data % ALIGNMENT == 0


def test_non_contiguous_and_unaligned_inputs_are_copied(artifact: Path):
    exe = load(artifact)
    fortran = np.asfortranarray(x(3))
    raw = np.zeros(2 * 8 * 4 + 64, np.uint8)

    def at(offset: int) -> np.ndarray:
        """x(4) stored `offset` bytes past a 64-byte boundary."""
        start = (-raw.ctypes.data) % 64 + offset
        a = raw[start:start + 64].view(np.float32).reshape(2, 8)
        a[...] = x(4)
        return a

    # 4 bytes past: naturally aligned, used in place; 2 bytes past: not a float's alignment, copied
    for arr in (fortran, at(4), at(2)):
        np.testing.assert_allclose(exe.run({X_NAME: arr})[Y_NAME], reference(arr)[Y_NAME], rtol=1e-5)


def test_read_only_inputs_run_and_outputs_are_aligned(artifact: Path):
    exe = load(artifact)
    a = x(5)
    a.setflags(write=False)  # its address cannot come through a writable buffer
    out = exe.run({X_NAME: a})
    for name, ref in reference(a).items():
        np.testing.assert_allclose(out[name], ref, rtol=1e-5, atol=1e-6)
        assert out[name].ctypes.data % ALIGNMENT == 0 and out[name].flags.c_contiguous
        assert out[name].flags.writeable


@pytest.mark.parametrize(("feeds", "message"), [
    ({}, r"missing \['x'\]"),
    ({X_NAME: np.zeros((2, 8), np.float32), "w": np.zeros(1)}, r"unexpected \['w'\]"),
    ({"w": np.zeros((2, 8), np.float32)}, r"missing \['x'\], unexpected \['w'\]"),
    ({X_NAME: np.zeros((8, 2), np.float32)}, r"shape \[2, 8\], got \[8, 2\]"),
    ({X_NAME: np.zeros((2, 8), np.float64)}, "must be float32, got float64"),
    ({X_NAME: [[0.0] * 8] * 2}, "must be float32, got float64"),
])
def test_wrong_inputs_get_clear_errors(artifact: Path, feeds, message):
    with pytest.raises(ArtifactError, match=message):
        load(artifact).run(feeds)


def test_thread_count_is_settable_and_results_do_not_depend_on_it(artifact: Path):
    exe = load(artifact, threads=1)
    one = exe.run({X_NAME: x()})
    exe.set_threads(2)
    two = exe.run({X_NAME: x()})
    np.testing.assert_array_equal(one[Y_NAME], two[Y_NAME])
    with pytest.raises(ValueError, match="positive"):
        exe.set_threads(0)


def test_concurrent_runs_share_the_arena_safely(artifact: Path):
    exe = load(artifact)
    errors = []

    def worker(seed: int) -> None:
        for _ in range(50):
            out = exe.run({X_NAME: x(seed)})
            if not np.allclose(out[Z_NAME], reference(x(seed))[Z_NAME], rtol=1e-5):
                errors.append(seed)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def rebuilt(tmp_path: Path, kind: str) -> Path:
    """An artifact for another device kind (routing happens before its binary is touched)."""
    g = graph()
    plan = build_plan(g, "cpu:test:0", whole)
    files = {"model.so": b"not a library", "weights.bin": weights_blob(g, plan)}
    path = tmp_path / f"{kind}.tar.gz"
    write_artifact(path, plan, files, {**EXTRA, "target_kind": kind}, {})
    return path


def test_unknown_device_kind_is_refused(tmp_path: Path):
    with pytest.raises(ArtifactError, match="unknown device kind 'tpu'"):
        load(rebuilt(tmp_path, "tpu"))


@pytest.mark.skipif(importlib.util.find_spec("pycuda") is not None, reason="pycuda is installed here")
@pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc not installed")
def test_cuda_artifact_without_pycuda_names_what_is_missing(tmp_path: Path):
    from compiler.bench.models import mlp_gelu
    from compiler.pipeline import compile_model

    r = compile_model(mlp_gelu(batch=1), "cuda:a100", {"validate": False}, output=tmp_path / "c.tar.gz")
    with pytest.raises(ArtifactError, match="pycuda"):
        load(r.artifact_path)



def test_weights_held_in_memory_load_without_their_file(artifact: Path, tmp_path: Path):
    """What the pipeline's validation does: weights.bin's bytes go to the runtime from memory,
    taken as they are where aligned, copied where not."""
    manifest, folder = read_artifact(artifact, tmp_path)
    weights = (folder / "weights.bin").read_bytes()
    (folder / "weights.bin").unlink()
    room = aligned_empty((len(weights) + 1,), np.uint8)
    room[:-1] = np.frombuffer(weights, np.uint8)
    aligned, unaligned = memoryview(room[:-1]).toreadonly(), memoryview(np.roll(room, 1))[1:]
    for given in (aligned, unaligned):
        out = load_folder(manifest, folder, weights=given).run({X_NAME: x()})
        for name, ref in reference(x()).items():
            np.testing.assert_allclose(out[name], ref, rtol=1e-5, atol=1e-6)
    with pytest.raises(ArtifactError, match="must hold"):
        load_folder(manifest, folder, weights=weights[:-4])
