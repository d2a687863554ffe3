"""The remote commands of `tileforge`: login, submit, jobs, job, download, submit-profile and
infer, all on the client library (they work with only `tileforge[client]` installed:
`python -m tileforge`).
Errors are one line on stderr and exit status 2; a job that did not succeed, 1."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable


def input_shape(text: str) -> tuple[str, list[int]]:
    """An argparse type: `NAME=D0,D1,...` as (name, dims)."""
    name, _, dims = text.rpartition("=")
    parts = dims.split(",")
    if not name or not all(p.strip().isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"expected NAME=D0,D1,... with integer dims, got {text!r}")
    return name, [int(p) for p in parts]


def _remote_command(name: str) -> Callable[[argparse.Namespace], int]:
    """Command `name` of tileforge/commands.py, imported when it runs (the client and httpx
    cost 0.12 s of every `tileforge` command's start otherwise), its errors one line."""
    def run(a: argparse.Namespace) -> int:
        from tileforge.errors import ClientError

        try:
            return getattr(importlib.import_module("tileforge.commands"), name)(a)
        except ClientError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("interrupted (the jobs go on on the server)", file=sys.stderr)
            return 130

    return run


def add_remote_commands(sub: argparse._SubParsersAction) -> None:
    """Register login / submit / jobs / job / download / submit-profile / infer (server and token from TILEFORGE_URL,
    TILEFORGE_TOKEN or `tileforge login`)."""
    p = sub.add_parser("login", help="save the server URL and token for the remote commands")
    p.add_argument("url", help="the server, e.g. http://127.0.0.1:8000")
    p.add_argument("--token", help="an API token (default TILEFORGE_TOKEN, or asked for)")
    p.set_defaults(func=_remote_command("cmd_login"))

    p = sub.add_parser("submit", help="upload a model and compile it on the server")
    p.add_argument("model", help="an ONNX file")
    p.add_argument("--target", action="append", help="a target from `targets` (repeatable; default cpu)")
    p.add_argument("--input-shape", action="append", type=input_shape, metavar="NAME=D0,D1,...",
                   help="bind an input's symbolic dims (repeatable)")
    p.add_argument("--wait", action="store_true", help="show progress until every job ends")
    p.add_argument("--timeout", type=float, default=None, help="seconds --wait waits at most")
    p.add_argument("-o", "--output", help="with --wait: download the artifacts into this folder")
    p.set_defaults(func=_remote_command("cmd_submit"))

    p = sub.add_parser("jobs", help="list your compilations on the server, newest first")
    p.add_argument("--status", choices=["queued", "running", "succeeded", "failed", "cancelled"])
    p.add_argument("--limit", type=int, default=20)
    p.set_defaults(func=_remote_command("cmd_jobs"))

    p = sub.add_parser("job", help="show one compilation on the server")
    p.add_argument("job_id")
    p.add_argument("--json", action="store_true", help="the server's JSON, as is")
    p.set_defaults(func=_remote_command("cmd_job"))

    p = sub.add_parser("download", help="download a compilation's artifact (sha256 checked)")
    p.add_argument("job_id")
    p.add_argument("-o", "--output", default=".", help="folder (default the current one)")
    p.set_defaults(func=_remote_command("cmd_download"))

    p = sub.add_parser("submit-profile", help="profile an artifact on a worker of its target (latency, "
                                              "memory, per-kernel roofline)")
    p.add_argument("artifact_id", help="an artifact id (`tileforge job ID` shows a compilation's)")
    p.add_argument("--runs", type=int, default=50, help="timed runs of the whole model (default 50)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default the artifact's)")
    p.add_argument("--timeout", type=float, default=None, help="seconds to wait at most")
    p.add_argument("--json", action="store_true", help="the result as the server's JSON")
    p.set_defaults(func=_remote_command("cmd_submit_profile"))

    p = sub.add_parser("infer", help="run an artifact on a worker of its target on your inputs (.npz)")
    p.add_argument("artifact_id", help="an artifact id")
    p.add_argument("inputs", help="an .npz with one array per model input, by name")
    p.add_argument("-o", "--output", default="outputs.npz", help="where the outputs go (default outputs.npz)")
    p.add_argument("--timeout", type=float, default=None, help="seconds to wait at most")
    p.set_defaults(func=_remote_command("cmd_infer"))


def main(argv: list[str] | None = None) -> int:
    """`python -m tileforge`: the remote commands alone (no compiler needed)."""
    parser = argparse.ArgumentParser(prog="tileforge", description="tileforge client: compile on a server")
    add_remote_commands(parser.add_subparsers(dest="command", required=True))
    a = parser.parse_args(argv)
    return a.func(a)
