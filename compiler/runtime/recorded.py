"""onnxruntime's answers kept beside the kernels: a model compiled again (warm, for another
thread count or target) is validated against the outputs onnxruntime gave for the same
model bytes and inputs, without loading onnxruntime again.

Loading a 209 MB BERT into onnxruntime took 0.45-0.6 s of a warm compile's 3 s on 2 cores
(130,000-170,000 page faults, on a thread beside the compilation), parsing it again for
the random inputs 0.06-0.12 s, running it 0.06-0.09 s and importing onnxruntime 0.12 s.

A record is keyed, like a kernel (compiler/cache.py), by everything its numbers depend on:
the model's sha256, the input shapes asked for, the seed, onnxruntime's version and this
host's CPU and widest SIMD (onnxruntime's kernels round as the ISA they pick does), and the
compiler's fingerprint. Its arrays are stored by position, in the executable's order (no
model-derived string names anything stored), and checked against the executable's inputs
and outputs when recalled: a record that does not fit, or cannot be read, is a miss.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import json
from collections.abc import Mapping

import numpy as np

from compiler.cache import (
    KernelCache,
    KernelEntry,
    KernelSignature,
    compiler_fingerprint,
    exact_hit,
)
from compiler.runtime.executable import Executable
from compiler.runtime.validate import ReferenceRun
from compiler.target.cpu import read_cpu_facts, simd_isa

RECORD_LIMIT = 64 << 20  # bytes of inputs and outputs beyond which a run is not kept (an LLM's logits)
REFERENCE_PATTERN = "reference:onnxruntime"  # the records' op pattern among the cache's kernels


def reference_signature(model_sha256: str, input_shapes: Mapping[str, object], seed: int) -> KernelSignature:
    """The cache signature of onnxruntime's run of this model on the validation's inputs.
    Only a hash of what it is keyed by is stored: a shared cache's listing does not show
    which model it was."""
    facts = read_cpu_facts()
    key = json.dumps({"model_sha256": model_sha256, "input_shapes": dict(input_shapes), "seed": seed,
                      "onnxruntime": importlib.metadata.version("onnxruntime")}, sort_keys=True, default=str)
    return KernelSignature(op_pattern=REFERENCE_PATTERN, shapes="", dtypes="",
                           te_hash=hashlib.sha256(key.encode()).hexdigest(),
                           target_fingerprint=f"host:{facts.model}, {facts.machine}, {simd_isa(facts.features)[0]}",
                           compiler_fingerprint=compiler_fingerprint(), options="{}")


def recall(cache: KernelCache, signature: KernelSignature) -> bytes | None:
    """The recorded run's stored bytes (`fitting` reads them for an executable), or None."""
    entry = exact_hit(cache.get(signature), signature)
    return None if entry is None else entry.binary


def fitting(stored: bytes, executable: Executable) -> ReferenceRun | None:
    """The recorded run as `executable`'s inputs and outputs, or None where it does not fit
    them (another count, shape or dtype) or cannot be read."""
    try:
        with np.load(io.BytesIO(stored), allow_pickle=False) as z:
            arrays = {name: z[name] for name in z.files}
    except (ValueError, OSError, EOFError, KeyError):
        return None
    specs = {"i": executable.input_specs, "o": executable.output_specs}
    if len(arrays) != sum(len(s) for s in specs.values()):
        return None
    named: dict[str, dict[str, np.ndarray]] = {"i": {}, "o": {}}
    for side, side_specs in specs.items():
        for k, spec in enumerate(side_specs):
            a = arrays.get(f"{side}{k}")
            if a is None or a.dtype != spec.np_dtype or list(a.shape) != list(spec.shape):
                return None
            named[side][spec.name] = a
    return ReferenceRun(named["i"], named["o"])


def record(cache: KernelCache, signature: KernelSignature, executable: Executable, run: ReferenceRun) -> bool:
    """Keep `run` (onnxruntime's, on `executable`'s inputs) under `signature`; False where
    it is too large to keep."""
    arrays = {f"i{k}": np.asarray(run.inputs[s.name]) for k, s in enumerate(executable.input_specs)}
    arrays |= {f"o{k}": np.asarray(run.outputs[s.name]) for k, s in enumerate(executable.output_specs)}
    if sum(a.nbytes for a in arrays.values()) > RECORD_LIMIT:
        return False
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    cache.put(KernelEntry(signature, {}, "/* onnxruntime's outputs on the validation inputs */\n", buffer.getvalue()))
    return True
