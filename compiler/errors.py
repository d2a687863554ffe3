"""The compiler's errors. `ModelError`s are the user's to fix (HTTP 4xx, no retry);
everything else is ours."""

from __future__ import annotations


class TileforgeError(Exception):
    """Base of every error the compiler raises on purpose."""


class ModelError(TileforgeError):
    """The model (or its options) cannot be compiled as given: bad bytes, refused
    content, an unsupported op. The message names the problem."""


class UnsupportedOpError(ModelError):
    """An operator, attribute or dtype combination the compiler does not handle."""

    def __init__(self, op: str, node: str, why: str) -> None:
        self.op, self.node, self.why = op, node, why
        super().__init__(f"unsupported {op} (node {node!r}): {why}")


class OptionsError(ModelError):
    """A compile option is unknown or invalid."""


class TargetError(ModelError):
    """An unknown or malformed hardware target."""


class BuildError(TileforgeError):
    """A toolchain failed on generated code (a compiler bug, not the user's)."""


class ValidationError(TileforgeError):
    """The compiled artifact disagrees with the reference beyond tolerance."""


class ArtifactError(TileforgeError):
    """An artifact is malformed, tampered with, or run with wrong inputs."""


class HostMismatchError(ArtifactError):
    """An artifact built for a processor this host is not (another machine or ISA)."""
