"""Check a loaded artifact against onnxruntime on the same random inputs.

Inputs are drawn with a fixed seed: floats standard normal, booleans fair
coins, integers small and non-negative (in [0, 4), or below the size of the
axis they index when the model feeds them to a Gather), so index inputs stay
in range. Every output is compared: relative L2 error ||ours - ref|| /
max(||ref||, tiny) and the largest absolute difference, with NaN positions
required to match (equal infinities count as equal); a half-precision
output passes within its own precision when the tolerance asks for less.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

from compiler.errors import ModelError
from compiler.onnx_shapes import infer_shapes
from compiler.runtime.executable import Executable, TensorSpec

if TYPE_CHECKING:  # imported where a session is made (0.12 s): a recorded reference needs none
    import onnxruntime as ort

INT_HIGH = 4  # integer inputs are drawn from [0, INT_HIGH) unless an index bound is smaller
TINY = 1e-30
# No output is asked to agree more closely than its own precision: two correct half-precision
# results differ in last bits (another summation order, another exp), up to 2**-10 relative.
PRECISION_FLOOR = {np.dtype(np.float16): 2.0 ** -10}
GATHER_OPS = {"Gather", "GatherElements"}


@dataclass(frozen=True)
class Reference:
    """What an artifact is compared with: the model, parsed, and an onnxruntime session of it."""

    proto: onnx.ModelProto
    session: ort.InferenceSession


@dataclass(frozen=True)
class ReferenceRun:
    """onnxruntime's outputs on the validation's inputs, by name: what an artifact's own
    outputs on the same inputs are compared with (`check`)."""

    inputs: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray]


def reference_for(model: onnx.ModelProto | bytes) -> Reference:
    """Parse the model and load it in onnxruntime (ModelError where onnxruntime refuses it):
    the slow part of a validation (1 s of a 209 MB model's), which a caller may start
    before the artifact exists."""
    proto = model if isinstance(model, onnx.ModelProto) else onnx.load_from_string(model)
    data = model if isinstance(model, bytes) else model.SerializeToString()
    return Reference(proto, reference_session(proto, data))


def validate(
    model: onnx.ModelProto | bytes,
    executable: Executable,
    seed: int = 0,
    tolerance: float = 1e-4,
    inputs: Mapping[str, np.ndarray] | None = None,
    reference: Reference | None = None,
) -> dict[str, Any]:
    """Run `executable` and onnxruntime (CPU) on the same inputs and compare every output.

    `inputs` overrides the random ones; `reference`, `reference_for(model)` where the
    caller has made it already. Returns max_abs_error, rel_l2_error (the worst over
    outputs), passed, tolerance, seed and per-output details.
    """
    ref = reference if reference is not None else reference_for(model)
    return {**check(executable, reference_run(executable, ref, seed, inputs), tolerance), "seed": seed}


def reference_run(executable: Executable, reference: Reference, seed: int = 0,
                  inputs: Mapping[str, np.ndarray] | None = None) -> ReferenceRun:
    """onnxruntime's outputs for every output of `executable`, on `inputs` or on random
    ones drawn with `seed` for its inputs."""
    feeds = dict(inputs) if inputs is not None else random_inputs(executable.input_specs, reference.proto, seed)
    names = [s.name for s in executable.output_specs]
    try:
        outputs = reference.session.run(names, feeds)
    except Exception as e:  # onnxruntime raises its own exception types
        why = (str(e).splitlines() or [type(e).__name__])[0][:400]
        raise ModelError(f"onnxruntime, the reference, cannot run the model: {why}") from None
    return ReferenceRun(feeds, {n: np.asarray(o) for n, o in zip(names, outputs, strict=True)})


def check(executable: Executable, run: ReferenceRun, tolerance: float = 1e-4) -> dict[str, Any]:
    """Run `executable` on the reference run's inputs and compare each of its outputs with
    onnxruntime's: max_abs_error, rel_l2_error (the worst over outputs), passed, tolerance
    and per-output details."""
    ours = executable.run(run.inputs)
    names = [s.name for s in executable.output_specs]
    per_output = {n: compare(ours[n], run.outputs[n]) for n in names}
    max_abs = max((r["max_abs_error"] for r in per_output.values()), default=0.0)
    rel_l2 = max((r["rel_l2_error"] for r in per_output.values()), default=0.0)
    limit = {n: max(tolerance, PRECISION_FLOOR.get(run.outputs[n].dtype, 0.0)) for n in names}
    passed = all(r["nan_match"] and r["shape_match"] and r["rel_l2_error"] <= limit[n]
                 for n, r in per_output.items())
    result = {"max_abs_error": max_abs, "rel_l2_error": rel_l2, "passed": passed,
              "tolerance": tolerance, "outputs": per_output}
    vanished = [n for n in names if vanishing(run.outputs[n])] if passed else []
    if vanished:
        names_said = ", ".join(vanished[:3]) + (" and more" if len(vanished) > 3 else "")
        result["warning"] = (f"onnxruntime's {names_said} {'holds' if len(vanished) == 1 else 'hold'} no normal "
                             "number (all zero, subnormal or not finite) on the random inputs: agreeing there "
                             "checks little of the model (weights that make the activations vanish?)")
    return result


def vanishing(ref: np.ndarray) -> bool:
    """Whether a floating-point reference output holds no normal number (only zeros,
    subnormals, infinities or NaN), which kernels that flush or overflow would match too. A
    model left at its default initialisation can give them (an exported MobileViT's did)."""
    if ref.dtype.kind != "f" or ref.size == 0:
        return False
    finite = np.abs(ref[np.isfinite(ref)])
    return not bool(np.any(finite >= np.finfo(ref.dtype).tiny))


def reference_session(proto: onnx.ModelProto, data: bytes) -> ort.InferenceSession:
    """An onnxruntime CPU session for the model, running each node as the ONNX spec says.

    Graph optimizations are off: onnxruntime rewrites a quantized model's
    DequantizeLinear -> Conv -> QuantizeLinear into integer kernels with a
    requantized bias, which are not the model's arithmetic (0.25% off on an
    exported fake-quantized conv, whose exact result the compiled one matches).
    A model saved by a newer onnx than onnxruntime reads is stamped with an IR
    version onnxruntime refuses although its operators are fine; it is retried
    stamped with the lowest IR version that its opsets need. A model onnxruntime
    still refuses (an exporter's type error, say) is a ModelError quoting it.

    Its pool threads do not spin for work after a run (onnxruntime's default is 50-60 ms
    of it): the reference runs beside the compilation, which then times kernels on the
    cores those threads would hold.
    """
    import onnxruntime as ort

    providers = ["CPUExecutionProvider"]
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        try:
            return ort.InferenceSession(data, options, providers=providers)
        except Exception as e:  # onnxruntime raises its own exception types
            if "IR version" not in str(e):
                raise
            older = onnx.ModelProto()
            older.CopyFrom(proto)
            older.ir_version = min(proto.ir_version,
                                   onnx.helper.find_min_ir_version_for(proto.opset_import, ignore_unknown=True))
            return ort.InferenceSession(older.SerializeToString(), options, providers=providers)
    except Exception as e:
        why = (str(e).splitlines() or [type(e).__name__])[0][:400]
        raise ModelError(f"onnxruntime, the reference, cannot load the model: {why}") from None


def _l2(x: np.ndarray) -> float:
    """The L2 norm without BLAS: np.linalg.norm calls OpenBLAS, whose threads then spin for
    about 0.1 s of CPU, time taken from the kernels timed next in the same process."""
    return float(np.sqrt(np.sum(np.square(x))))


def compare(ours: np.ndarray, ref: np.ndarray) -> dict[str, Any]:
    """Errors of one output against its reference."""
    if ours.shape != ref.shape:
        return {"max_abs_error": float("inf"), "rel_l2_error": float("inf"),
                "nan_match": True, "shape_match": False}
    a, b = ours.astype(np.float64), ref.astype(np.float64)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    with np.errstate(invalid="ignore"):
        agree = (a == b) | nan_a | nan_b  # equal values (infinities included); NaNs judged apart
        diff = np.where(agree, 0.0, a - b)
    ref_norm = _l2(np.where(np.isfinite(b), b, 0.0))
    return {
        "max_abs_error": float(np.max(np.abs(diff), initial=0.0)),
        "rel_l2_error": _l2(diff) / max(ref_norm, TINY),
        "nan_match": bool(np.array_equal(nan_a, nan_b)),
        "shape_match": True,
    }


def random_inputs(specs: list[TensorSpec], model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    """Seeded inputs for every spec, integer ones kept valid as indices."""
    rng = np.random.default_rng(seed)
    bounds = index_bounds(model)
    feeds = {}
    for s in specs:
        dt = s.np_dtype
        if dt == np.bool_:
            feeds[s.name] = rng.random(s.shape) < 0.5
        elif dt.kind in "iu":
            feeds[s.name] = rng.integers(0, bounds.get(s.name, INT_HIGH), s.shape).astype(dt)
        else:
            feeds[s.name] = rng.standard_normal(s.shape).astype(dt)
    return feeds


def index_bounds(model: onnx.ModelProto) -> dict[str, int]:
    """Graph inputs used as Gather indices -> the smallest extent (at most INT_HIGH) they index."""
    graph_inputs = {i.name for i in model.graph.input}
    gathers = [n for n in model.graph.node
               if n.op_type in GATHER_OPS and len(n.input) >= 2 and n.input[1] in graph_inputs]
    if not gathers:
        return {}
    shapes = {t.name: list(t.dims) for t in model.graph.initializer}  # embeddings: no inference
    if any(n.input[0] not in shapes for n in gathers):
        shapes = _static_shapes(model)
    bounds: dict[str, int] = {}
    for node in gathers:
        shape = shapes.get(node.input[0])
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        if shape is None or not -len(shape) <= axis < len(shape) or shape[axis] is None:
            continue
        extent = max(1, shape[axis])
        bounds[node.input[1]] = min(bounds.get(node.input[1], INT_HIGH), extent)
    return bounds


def _static_shapes(model: onnx.ModelProto) -> dict[str, list[int | None]]:
    """Known shapes of initializers, inputs and (after shape inference) intermediates."""
    try:
        inferred = infer_shapes(model).graph
    except Exception:  # inference is a best-effort hint; the default bound still applies
        inferred = model.graph
    shapes: dict[str, list[int | None]] = {}
    for vi in [*inferred.input, *inferred.value_info, *inferred.output]:
        dims = vi.type.tensor_type.shape.dim
        shapes[vi.name] = [d.dim_value if d.HasField("dim_value") else None for d in dims]
    for init in model.graph.initializer:
        shapes[init.name] = list(init.dims)
    return shapes
