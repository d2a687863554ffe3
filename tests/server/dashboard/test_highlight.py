"""The C / CUDA highlighter: lossless, escaped, one line per source line."""

import html
import re

from server.dashboard.highlight import highlight, tokens

SOURCE = '''#include <stdint.h>
/* a block
   comment with <b> */
__global__ void k3(const float* __restrict__ a, float* out) {
  int i = blockIdx.x * 256 + threadIdx.x;  // "<script>"
  out[i] = a[i] > 0.5f ? a[i] : 1e-3f;
  const char* s = "x</span>";
}
'''


def test_tokens_put_the_source_back_together():
    assert "".join(text for _, text in tokens(SOURCE)) == SOURCE


def test_highlight_escapes_and_classifies():
    out = str(highlight(SOURCE))
    assert "<b>" not in out and "<script>" not in out and "x</span>\"" not in out
    assert '<span class="tok-keyword">__global__</span>' in out
    assert '<span class="tok-type">float</span>' in out
    assert '<span class="tok-builtin">threadIdx</span>' in out
    assert '<span class="tok-number">0.5f</span>' in out
    assert '<span class="tok-preproc">#include &lt;stdint.h&gt;</span>' in out
    assert '<span class="tok-string">&#34;x&lt;/span&gt;&#34;</span>' in out


def test_highlight_keeps_one_line_per_source_line():
    out = str(highlight(SOURCE))
    lines = re.findall(r'<span class="line">(.*?)</span>\n?(?=<span class="line">|$)', out, re.S)
    assert len(lines) == SOURCE.count("\n")
    text = html.unescape(re.sub(r"<[^>]+>", "", out))
    assert text == SOURCE.rstrip("\n")
