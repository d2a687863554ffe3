"""An uploaded model as the client sees it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Model:
    """A model on the server (content-addressed: the same bytes are the same model)."""

    id: str
    sha256: str
    filename: str
    size: int
    inputs: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[dict[str, Any]] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Model:
        """The model of a `ModelOut` body."""
        return cls(data["id"], data["sha256"], data["filename"], data["size"], data.get("inputs", []),
                   data.get("outputs", []), data)
