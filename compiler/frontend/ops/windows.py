"""Sliding-window geometry shared by Conv and pooling: output sizes and padding."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compiler.frontend.exprs import idx
from compiler.frontend.registry import OpContext
from compiler.ir.te import Expr


@dataclass(frozen=True)
class Window:
    """Per spatial dim: kernel, stride, dilation, padding before/after and output size."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pad_begin: tuple[int, ...]
    pad_end: tuple[int, ...]
    out: tuple[int, ...]

    @property
    def padded(self) -> bool:
        return any(self.pad_begin) or any(self.pad_end)

    def position(self, d: int, o: Expr, k: Expr) -> Expr:
        """The input coordinate output `o` reads with kernel offset `k` on spatial dim `d`."""
        return o * idx(self.strides[d]) + k * idx(self.dilations[d]) - idx(self.pad_begin[d])

    def taps(self, spatial: Sequence[int]) -> tuple[int, ...]:
        """Per spatial dim, the kernel offsets that can land inside the input: the first window
        starts leftmost, so offsets past its reach read padding in every window. A pool
        reduces over these only (a ceil_mode AveragePool of kernel 1280 on a 7x7 input is a
        7x7 mean; its divisor still counts from the whole kernel)."""
        return tuple(min(k, (n - 1 + b) // d + 1)
                     for k, n, b, d in zip(self.kernel, spatial, self.pad_begin, self.dilations, strict=True))

    def reads_outside(self, spatial: Sequence[int]) -> bool:
        """Whether any window reaches outside the input (so loads need padding)."""
        return any(self.pad_begin[d] > 0 or (self.out[d] - 1) * self.strides[d]
                   + (self.kernel[d] - 1) * self.dilations[d] - self.pad_begin[d] >= spatial[d]
                   for d in range(len(spatial)))


def window_of(cx: OpContext, spatial: Sequence[int], kernel: Sequence[int], ceil_mode: bool = False) -> Window:
    """The window geometry of a Conv/pool node from its attributes and input spatial shape."""
    nd = len(spatial)
    strides = tuple(cx.attr("strides", [1] * nd))
    dilations = tuple(cx.attr("dilations", [1] * nd))
    pads = list(cx.attr("pads", [0] * (2 * nd)))
    auto_pad = cx.attr("auto_pad", "NOTSET")
    if len(strides) != nd or len(dilations) != nd or len(pads) != 2 * nd or len(kernel) != nd:
        raise cx.error(f"strides/dilations/pads/kernel do not match {nd} spatial dims")
    if min(strides, default=1) < 1 or min(dilations, default=1) < 1 or min(pads, default=0) < 0:
        raise cx.error("strides and dilations must be positive and pads non-negative")
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = [-(-n // s) for n, s in zip(spatial, strides, strict=True)]
        total = [max(0, (o - 1) * s + w - n) for o, s, w, n in zip(out, strides, span, spatial, strict=True)]
        small = [t // 2 for t in total]
        big = [t - t // 2 for t in total]
        begin, end = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
    elif auto_pad in ("NOTSET", "VALID"):
        if auto_pad == "VALID":
            pads = [0] * (2 * nd)
        begin, end = pads[:nd], pads[nd:]
        out = []
        for d in range(nd):
            room = spatial[d] + begin[d] + end[d] - span[d]
            # ONNX's ceil((room) / stride + 1): with ceil_mode one window may overhang the
            # input (HF EfficientNet pools with a kernel of 1280 over 7x7)
            o = (-(-room // strides[d]) if ceil_mode else room // strides[d]) + 1
            if o < 1:
                raise cx.error(f"kernel extent {span[d]} exceeds padded input {spatial[d] + begin[d] + end[d]}")
            if ceil_mode and (o - 1) * strides[d] >= spatial[d] + begin[d]:
                o -= 1  # the last window would start in the end padding
            out.append(o)
    else:
        raise cx.unsupported(f"auto_pad {auto_pad!r}")
    return Window(tuple(kernel), strides, dilations, tuple(begin), tuple(end), tuple(out))
