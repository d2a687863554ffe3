"""A tiny syntax highlighter for the C and CUDA C the compiler generates.

Tokens become `<span class="tok-KIND">` with their text escaped; the result is one
`<span class="line">` per source line so the stylesheet can number lines.
"""

from __future__ import annotations

import re

from markupsafe import Markup, escape


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


KEYWORDS = _words("""
    if else for while do return break continue switch case default goto sizeof
    static const volatile restrict inline extern struct union enum typedef
    __restrict__ __global__ __device__ __host__ __shared__ __constant__ __forceinline__
    __launch_bounds__ __syncthreads __syncwarp
""")
TYPES = _words("""
    void char short int long float double unsigned signed bool _Bool size_t ptrdiff_t
    int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t
    half __half __nv_bfloat16 float2 float4 int4 dim3
""")
BUILTINS = _words("threadIdx blockIdx blockDim gridDim warpSize")

_TOKEN = re.compile(r"""
    (?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))
  | (?P<preproc>^[ \t]*\#[^\n]*)
  | (?P<string>"(?:\\.|[^"\\\n])*"?|'(?:\\.|[^'\\\n])*'?)
  | (?P<number>(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)[fFuUlL]*)
  | (?P<word>[A-Za-z_]\w*)
""", re.VERBOSE | re.MULTILINE | re.DOTALL)


def _kind_of_word(word: str) -> str | None:
    if word in KEYWORDS:
        return "keyword"
    if word in TYPES:
        return "type"
    if word in BUILTINS:
        return "builtin"
    return None


def tokens(source: str) -> list[tuple[str | None, str]]:
    """(kind, text) pieces that concatenate back to `source`; kind None is plain text."""
    out: list[tuple[str | None, str]] = []
    pos = 0
    for m in _TOKEN.finditer(source):
        if m.start() > pos:
            out.append((None, source[pos:m.start()]))
        kind = m.lastgroup
        out.append((_kind_of_word(m.group()) if kind == "word" else kind, m.group()))
        pos = m.end()
    if pos < len(source):
        out.append((None, source[pos:]))
    return out


def highlight(source: str) -> Markup:
    """`source` as escaped HTML with highlighted tokens, one `<span class="line">` per line."""
    lines: list[list[str]] = [[]]
    for kind, text in tokens(source):
        for i, piece in enumerate(text.split("\n")):
            if i:
                lines.append([])
            if not piece:
                continue
            escaped = str(escape(piece))
            lines[-1].append(f'<span class="tok-{kind}">{escaped}</span>' if kind else escaped)
    if len(lines) > 1 and not lines[-1]:
        lines.pop()  # a final newline does not start another line
    return Markup("\n".join(f'<span class="line">{"".join(parts)}</span>' for parts in lines))
