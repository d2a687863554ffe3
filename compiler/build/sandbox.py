"""Toolchain commands run as sandboxed subprocesses.

Never through a shell; in a fresh temporary folder that holds only the files
the command needs; with a wall-clock timeout (the whole process group is
killed, so cc1 / cicc children do not linger), an address-space limit and a
cap on file sizes (set by `prlimit`), a cap on captured output, and a
minimal environment. Every failure becomes a `BuildError` whose message is
the tool's own (truncated) complaint, never a Python traceback.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from compiler.errors import BuildError
from compiler.target.toolchain import TOOL_PATH, find_tool

MAX_MESSAGE = 4000


@dataclass(frozen=True)
class Limits:
    """Resource limits of one toolchain run."""

    timeout_s: float = 120.0
    memory_bytes: int = 4 << 30
    file_bytes: int = 1 << 30
    output_bytes: int = 64 << 10


@dataclass(frozen=True)
class ToolRun:
    """What a successful run left behind: the requested output files and its stdout."""

    files: dict[str, bytes]
    stdout: str


def resolve_tool(name: str) -> str:
    """Absolute path of a toolchain executable on the sandbox's PATH (BuildError if absent)."""
    path = find_tool(name)
    if path is None:
        raise BuildError(f"toolchain program {name!r} not found on {TOOL_PATH}")
    return path


def _limited(argv: Sequence[str], limits: Limits) -> list[str]:
    """`argv` run under util-linux `prlimit`, which sets the limits and execs it.

    (Not `preexec_fn`: Python code between fork and exec can deadlock when, as
    here, several threads start toolchains at once.)
    """
    return [resolve_tool("prlimit"), f"--as={limits.memory_bytes}", f"--fsize={limits.file_bytes}",
            "--core=0", "--", *argv]


def _read_capped(path: Path, cap: int) -> str:
    with path.open("rb") as f:
        data = f.read(cap + 1)
    text = data[:cap].decode("utf-8", "replace")
    return text + "\n[... output truncated]" if len(data) > cap else text


def _truncate(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE] + "\n[... truncated]"


def _wait(proc: subprocess.Popen, timeout_s: float) -> int:
    """`proc`'s exit status, the moment it exits; TimeoutExpired after `timeout_s`.

    Popen.wait with a timeout polls, sleeping up to 50 ms between looks, which added
    about 25 ms to every gcc run (a tenth of a small model's build). A pidfd becomes
    readable when the process exits, so waiting on it wakes at once; where the kernel
    has no pidfd_open (before Linux 5.3) the polling wait remains.
    """
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return proc.wait(timeout=timeout_s)
    try:
        exited = select.poll()  # not select.select: a worker's descriptors may number past 1024
        exited.register(pidfd, select.POLLIN)
        if not exited.poll(timeout_s * 1000):
            raise subprocess.TimeoutExpired(proc.args, timeout_s)
    finally:
        os.close(pidfd)
    return proc.wait()


def run_tool(
    argv: Sequence[str],
    files: Mapping[str, str | bytes],
    outputs: Sequence[str],
    limits: Limits = Limits(),
) -> ToolRun:
    """Run `argv` in a fresh folder holding `files`; return the bytes of `outputs` and stdout.

    `argv[0]` is resolved on a fixed PATH; file names are plain names inside
    the folder. Raises BuildError on a non-zero exit, a timeout, or a missing
    output, with the tool's stderr (truncated) in the message.
    """
    for name in (*files, *outputs):
        if not name or "/" in name or name.startswith(("-", ".")):
            raise BuildError(f"sandbox file name {name!r} is not a plain file name")
    exe = resolve_tool(argv[0])
    tool = Path(exe).name
    with tempfile.TemporaryDirectory(prefix="tf-build-") as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        for name, content in files.items():
            data = content.encode() if isinstance(content, str) else content
            (work / name).write_bytes(data)
        out_path, err_path = Path(tmp) / "stdout", Path(tmp) / "stderr"
        env = {"PATH": TOOL_PATH, "LANG": "C", "LC_ALL": "C", "TMPDIR": str(work),
               "HOME": str(work), "OMP_NUM_THREADS": "1"}
        with out_path.open("wb") as out_f, err_path.open("wb") as err_f:
            proc = subprocess.Popen(  # an argv list: no shell ever parses it
                _limited([exe, *argv[1:]], limits), cwd=work, env=env, stdin=subprocess.DEVNULL,
                stdout=out_f, stderr=err_f, shell=False, start_new_session=True,
            )
            try:
                code = _wait(proc, limits.timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise BuildError(f"{tool} timed out after {limits.timeout_s:g} s") from None
        stderr = _read_capped(err_path, limits.output_bytes)
        stdout = _read_capped(out_path, limits.output_bytes)
        if code != 0:
            why = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
            detail = _truncate(stderr or stdout) or "(no output)"
            raise BuildError(f"{tool} failed ({why}):\n{detail}")
        result = {}
        for name in outputs:
            p = work / name
            if not p.is_file():
                raise BuildError(f"{tool} produced no {name}:\n{_truncate(stderr) or '(no output)'}")
            result[name] = p.read_bytes()
        return ToolRun(result, stdout)
