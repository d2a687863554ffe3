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
from them is the plan made without them. It also names the groups that compile timed slower
than their parts (`PlanRecord`): the kernel cache holds their parts and not them, which would
split them back again after a first plan.
"""

from __future__ import annotations

import dataclasses
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
    options_key,
)
from compiler.cost.model import Estimate
from compiler.target.base import Target

PRICES_PATTERN = "prices:cost-model"


def prices_signature(model_sha256: str, input_shapes: Mapping[str, object], target: Target,
                     tuned: bool) -> KernelSignature:
    """The cache signature of the record of this model's plan on `target`, made by a compile
    that timed things (`tuned`: its groups split back are known) or one that did not."""
    key = json.dumps({"model_sha256": model_sha256, "input_shapes": dict(input_shapes),
                      "target": target.describe()}, sort_keys=True, default=str)
    return KernelSignature(op_pattern=PRICES_PATTERN, shapes="", dtypes="",
                           te_hash=hashlib.sha256(key.encode()).hexdigest(),
                           target_fingerprint=target.fingerprint(),
                           compiler_fingerprint=compiler_fingerprint(), options=options_key({}, tuned))


@dataclasses.dataclass(frozen=True)
class PlanRecord:
    """What an earlier compile of a model kept for the next: the estimates it constructed, by
    Compute hash, and the report entries (`Group.to_json`) of the groups it timed slower than
    their parts, which the next plan leaves apart from the start instead of fusing them,
    scheduling and finding them split back by the cache (a second plan: 0.7 s of a warm
    ResNet-50 compile's 5.4, Zen 3)."""

    prices: dict[str, Estimate] = dataclasses.field(default_factory=dict)
    split_back: tuple[dict, ...] = ()
    # per kernel (cache key and tile), the report's FLOPs, compulsory and predicted DRAM bytes
    figures: dict[str, tuple[int, int, int]] = dataclasses.field(default_factory=dict)
    # per convolution chain group (Compute hash), its price and its members' (`Pricer.price`)
    chains: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)

    def split_ids(self) -> list[frozenset[int]]:
        """The lowered node ids of each group split back."""
        return [frozenset(g["nodes"]) for g in self.split_back]


def recall_record(cache: KernelCache, signature: KernelSignature) -> PlanRecord:
    """The record kept under `signature`; empty where none is, or where it cannot be read."""
    entry = exact_hit(cache.get(signature), signature)
    if entry is None:
        return PlanRecord()
    try:
        stored = json.loads(entry.binary)
        prices = {key: Estimate(**{**fields, "violations": tuple(fields["violations"])})
                  for key, fields in stored["prices"].items()}
        split_back = tuple(dict(g) for g in stored["split_back"])
        figures = {key: (int(a), int(b), int(c)) for key, (a, b, c) in stored["figures"].items()}
        chains = {key: (float(a), float(b)) for key, (a, b) in stored["chains"].items()}
        if not all(isinstance(n, int) for g in split_back for n in g["nodes"]):
            return PlanRecord()
        return PlanRecord(prices, split_back, figures, chains)
    except (ValueError, TypeError, KeyError, AttributeError):
        return PlanRecord()


def keep_record(cache: KernelCache, signature: KernelSignature, record: PlanRecord) -> None:
    """Keep `record` under `signature`."""
    blob = json.dumps({"prices": {key: asdict(e) for key, e in sorted(record.prices.items())},
                       "split_back": list(record.split_back), "figures": record.figures,
                       "chains": record.chains},
                      separators=(",", ":"))
    cache.put(KernelEntry(signature, {}, "/* the cost model's estimates, by Compute hash, and the groups split back */\n",
                          blob.encode()))
