"""Writes docs/CONFORMANCE.md from a junit XML of the node-suite run.

    .venv/bin/python -m pytest -n 2 tests/compiler/conformance --junitxml=test-artifacts/conformance.xml
    .venv/bin/python scripts/conformance_report.py test-artifacts/conformance.xml
"""

from __future__ import annotations

import re
import sys
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import onnx


def main(xml_path: str, out: str = "docs/CONFORMANCE.md") -> int:
    root = ET.parse(xml_path).getroot()
    passed: list[str] = []
    failed: list[str] = []
    skipped: Counter[str] = Counter()
    for case in root.iter("testcase"):
        name = case.get("name", "")
        if not name.endswith("_cpu"):
            continue  # the runner also generates _cuda variants; tileforge's backend is the CPU target
        skip = case.find("skipped")
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(name)
        elif skip is not None:
            reason = re.sub(r"^.*?: ", "", skip.get("message", ""), count=0)
            reason = re.sub(r"^(not supported by tileforge: op )(\w+).*", r"unsupported op \2", reason)
            skipped[reason[:120]] += 1
        else:
            passed.append(name)
    total = len(passed) + len(failed) + sum(skipped.values())
    lines = [
        "# ONNX node-suite conformance",
        "",
        f"The ONNX node test suite of onnx {onnx.__version__}, each test compiled by tileforge for",
        "the CPU target and run from its artifact (`compiler/onnx_backend.py` through",
        "`onnx.backend.test.BackendTest`). Produced on " + time.strftime("%Y-%m-%d") + " by:",
        "",
        "```sh",
        ".venv/bin/python -m pytest -n 2 tests/compiler/conformance --junitxml=test-artifacts/conformance.xml",
        ".venv/bin/python scripts/conformance_report.py test-artifacts/conformance.xml",
        "```",
        "",
        "| result | tests |",
        "| --- | --- |",
        f"| passed | {len(passed)} |",
        f"| failed | {len(failed)} |",
        f"| skipped | {sum(skipped.values())} |",
        f"| total (CPU) | {total} |",
        "",
        "Skipped tests use an op or element type tileforge does not support, or are listed",
        "with a reason in `compiler/frontend/conformance.py` (`KNOWN_GAPS`).",
        "",
        "## Skip reasons",
        "",
        "| reason | tests |",
        "| --- | --- |",
        *[f"| {r} | {n} |" for r, n in skipped.most_common()],
    ]
    if failed:
        lines += ["", "## Failing", "", *[f"- `{n}`" for n in sorted(failed)]]
    Path(out).write_text("\n".join(lines) + "\n")
    print(f"passed {len(passed)}, failed {len(failed)}, skipped {sum(skipped.values())}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
