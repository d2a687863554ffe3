"""The cost model's prices kept beside the kernels: a model compiled again (warm) reads the
estimates its fusion rules asked for from the first compile instead of constructing the
rTiles again. BERT-base (4 layers, 209 MB) asked 528 times for 48 constructions: 0.4-0.5 s
of a warm compile of 2.1-3.1 s on 2 cores, the largest stage left once every kernel hits.

A record is one cache entry per model and target (`PRICES_PATTERN` among the cache's
kernels, as onnxruntime's recorded outputs are), keyed like a kernel by everything its
numbers depend on: the model's sha256 and the input shapes asked for, the whole target
description (its measured peak and bandwidth price the tiles; a kernel key holds only
what changes code) and the compiler's fingerprint (any change to the cost model). Only
hashes name anything: each estimate is stored under the sha256 of its Compute's canonical
form, and the key under a hash of what it is keyed by. A record that cannot be read is a
miss, never an error; the estimates it holds are what `construct` gave, so a plan made
from them is the plan made without them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict

from compiler.cache import (
    KernelCache,
    KernelEntry,
    KernelSignature,
    compiler_fingerprint,
    exact_hit,
)
from compiler.cost.model import Estimate
from compiler.target.base import Target

PRICES_PATTERN = "prices:cost-model"


def prices_signature(model_sha256: str, input_shapes: Mapping[str, object], target: Target) -> KernelSignature:
    """The cache signature of the prices asked for while planning this model on `target`."""
    key = json.dumps({"model_sha256": model_sha256, "input_shapes": dict(input_shapes),
                      "target": target.describe()}, sort_keys=True, default=str)
    return KernelSignature(op_pattern=PRICES_PATTERN, shapes="", dtypes="",
                           te_hash=hashlib.sha256(key.encode()).hexdigest(),
                           target_fingerprint=target.fingerprint(),
                           compiler_fingerprint=compiler_fingerprint(), options="{}")


def recall_prices(cache: KernelCache, signature: KernelSignature) -> dict[str, Estimate]:
    """The estimates recorded under `signature`, by Compute hash; empty where none are, or
    where the record cannot be read."""
    entry = exact_hit(cache.get(signature), signature)
    if entry is None:
        return {}
    try:
        stored = json.loads(entry.binary)
        return {key: Estimate(**{**fields, "violations": tuple(fields["violations"])})
                for key, fields in stored.items()}
    except (ValueError, TypeError, KeyError, AttributeError):
        return {}


def record_prices(cache: KernelCache, signature: KernelSignature, prices: Mapping[str, Estimate]) -> None:
    """Keep `prices` (by Compute hash) under `signature`."""
    blob = json.dumps({key: asdict(e) for key, e in sorted(prices.items())}, separators=(",", ":"))
    cache.put(KernelEntry(signature, {}, "/* the cost model's estimates, by Compute hash */\n", blob.encode()))
