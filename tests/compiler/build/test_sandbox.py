"""Toolchain commands run without a shell, with time / memory / output limits and a
minimal environment; failures are BuildErrors carrying the tool's message."""

from __future__ import annotations

import os
import time

import pytest

from compiler.build.sandbox import MAX_MESSAGE, Limits, run_tool
from compiler.errors import BuildError


def test_arguments_are_never_interpreted_by_a_shell(tmp_path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    arg = f"$(rm -f {victim}); rm -rf {victim} `touch {tmp_path}/pwned` | cat"
    run = run_tool(["echo", arg], {}, ())
    assert run.stdout == arg + "\n"
    assert victim.exists() and not (tmp_path / "pwned").exists()


def test_runs_in_a_fresh_folder_with_only_the_given_files() -> None:
    run = run_tool(["ls", "-A"], {"a.c": "int x;", "b.bin": b"\0\1"}, ["a.c"])
    assert run.stdout.split() == ["a.c", "b.bin"]
    assert run.files == {"a.c": b"int x;"}


def test_environment_is_minimal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILEFORGE_SECRET_TOKEN", "hunter2")
    env = dict(line.split("=", 1) for line in run_tool(["env"], {}, ()).stdout.splitlines())
    assert "TILEFORGE_SECRET_TOKEN" not in env and "hunter2" not in str(env)
    assert set(env) <= {"PATH", "LANG", "LC_ALL", "TMPDIR", "HOME", "OMP_NUM_THREADS", "PWD"}


@pytest.fixture(params=["pidfd", "polling"])
def waiting(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways the sandbox waits: on a pidfd, and polling where the kernel has no pidfd_open."""
    if request.param == "polling":
        def no_pidfd(pid: int) -> int:
            raise OSError(38, "Function not implemented")

        monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    return request.param


def test_timeout_kills_the_command(waiting: str) -> None:
    start = time.monotonic()
    with pytest.raises(BuildError, match=r"timed out after 0\.5 s"):
        run_tool(["sh", "-c", "sleep 30 & sleep 30"], {}, (), Limits(timeout_s=0.5))
    assert time.monotonic() - start < 10


def test_a_process_holding_over_1024_descriptors_still_waits() -> None:
    """A long-running worker may hold descriptors numbered past select()'s 1024: the pidfd
    the sandbox waits on is then one of them."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1100:
        pytest.skip(f"RLIMIT_NOFILE's hard limit {hard} holds fewer than 1100 descriptors")
    if soft != resource.RLIM_INFINITY and soft < 1100:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1100, hard))
    held = [os.dup(0) for _ in range(1100)]
    try:
        assert max(held) > 1024
        assert run_tool(["sh", "-c", "echo done"], {}, ()).stdout == "done\n"
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_exit_status_is_the_commands(waiting: str) -> None:
    assert run_tool(["sh", "-c", "sleep 0.2; echo done"], {}, ()).stdout == "done\n"
    with pytest.raises(BuildError, match="exit status 7"):
        run_tool(["sh", "-c", "sleep 0.2; exit 7"], {}, ())


def test_memory_limit_is_enforced() -> None:
    with pytest.raises(BuildError, match="python3 failed"):
        run_tool(["python3", "-c", "x = bytearray(1 << 30)"], {}, (), Limits(memory_bytes=256 << 20))


def test_failure_message_is_the_tools_output_truncated() -> None:
    with pytest.raises(BuildError) as err:
        run_tool(["python3", "-c", "import sys; sys.stderr.write('boom ' * 100000); sys.exit(3)"], {}, ())
    message = str(err.value)
    assert "exit status 3" in message and "boom" in message and "Traceback" not in message
    assert len(message) < MAX_MESSAGE + 200


def test_missing_output_and_bad_names_are_build_errors() -> None:
    with pytest.raises(BuildError, match=r"produced no out\.o"):
        run_tool(["true"], {}, ["out.o"])
    for bad in ("../x", "-rf", ".hidden", "a/b"):
        with pytest.raises(BuildError, match="plain file name"):
            run_tool(["true"], {bad: "x"}, ())
    with pytest.raises(BuildError, match="not found"):
        run_tool(["no-such-tool-tileforge"], {}, ())


def test_sandbox_folder_is_removed_afterwards() -> None:
    run = run_tool(["pwd"], {}, ())
    assert not os.path.exists(run.stdout.strip())
