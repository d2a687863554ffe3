"""The remote commands of `tileforge`: login, submit, jobs, job, download, submit-profile and
infer, all on the client library (they work with only `tileforge[client]` installed:
`python -m tileforge`).
Errors are one line on stderr and exit status 2; a job that did not succeed, 1."""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from tileforge.client import Client
from tileforge.config import save_config
from tileforge.errors import ClientError
from tileforge.job import Job
from tileforge.profile_table import format_profile_result
from tileforge.progress import ProgressBoard, job_line


def input_shape(text: str) -> tuple[str, list[int]]:
    """An argparse type: `NAME=D0,D1,...` as (name, dims)."""
    name, _, dims = text.rpartition("=")
    parts = dims.split(",")
    if not name or not all(p.strip().isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"expected NAME=D0,D1,... with integer dims, got {text!r}")
    return name, [int(p) for p in parts]


def cmd_login(a: argparse.Namespace) -> int:
    token = a.token or os.environ.get("TILEFORGE_TOKEN")
    if token is None and sys.stdin.isatty():
        token = getpass.getpass("token (from `tileforge token create`): ") or None
    with Client(a.url, token) as client:
        if token is not None:
            client.jobs(limit=1)  # the token is checked now, not at the first real command
        path = save_config(client.url, token)
    print(f"logged in to {client.url}{'' if token else ' (no token)'}; saved in {path}")
    return 0


def cmd_submit(a: argparse.Namespace) -> int:
    if a.output and not a.wait:
        raise ClientError("-o/--output needs --wait (the artifacts exist once the jobs succeed)")
    with Client() as client:
        model = client.upload(a.model)
        jobs = client.compile(model, a.target or ["cpu"], input_shapes=dict(a.input_shape or []))
        for job in jobs:
            print(f"submitted {job.id} ({job.target})", flush=True)
        if not a.wait:
            return 0
        _wait_all(jobs, a.timeout)
        return _report(jobs, a.output)


def _wait_all(jobs: list[Job], timeout: float | None) -> None:
    """Wait for every job at once, each on its own event stream, with one progress line each."""
    board = ProgressBoard(jobs)
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        for done in [pool.submit(job.wait, timeout, board.update) for job in jobs]:
            done.result()


def _report(jobs: list[Job], output: str | None) -> int:
    for job in jobs:
        if job.data["status"] != "succeeded":
            print(f"{job.id} ({job.target}) {job.data['status']}: {job.error or 'no artifact'}", file=sys.stderr)
            continue
        if job.validated is False:
            print(f"{job.id} ({job.target}) NOT VALIDATED: {job.validation_note}", file=sys.stderr)
        if output:
            Path(output).mkdir(parents=True, exist_ok=True)
            print(f"{job.id} ({job.target}) -> {job.download(output)}")
        else:
            print(f"{job.id} ({job.target}) succeeded: artifact {job.artifact_id}")
    return 0 if all(job.data["status"] == "succeeded" for job in jobs) else 1


def cmd_jobs(a: argparse.Namespace) -> int:
    with Client() as client:
        for job in client.jobs(status=a.status, limit=a.limit):
            print(f"{job_line(job)}  {job.data['created_at'][:19]}")
    return 0


def cmd_job(a: argparse.Namespace) -> int:
    with Client() as client:
        data = client.job(a.job_id).data
    if a.json:
        print(json.dumps(data, indent=2))
        return 0
    for key in ("id", "model_id", "target", "status", "stage", "progress", "attempts", "worker", "error",
                "validated", "validation_note", "cache_hits", "cache_misses", "artifact_id", "artifact_sha256",
                "created_at", "finished_at"):
        if data.get(key) is not None:
            print(f"{key + ':':<17}{data[key]}")
    if data.get("stage_seconds"):
        print(f"{'stages:':<17}" + ", ".join(f"{k} {v:.2f}s" for k, v in data["stage_seconds"].items()))
    return 0


def cmd_download(a: argparse.Namespace) -> int:
    Path(a.output).mkdir(parents=True, exist_ok=True)
    with Client() as client:
        print(client.job(a.job_id).download(a.output))
    return 0


def cmd_submit_profile(a: argparse.Namespace) -> int:
    with Client() as client:
        job = client.profile(a.artifact_id, runs=a.runs, threads=a.threads)
        print(f"submitted profile {job.id}", flush=True)
        job.wait(a.timeout)
        if job.data["status"] != "succeeded":
            print(f"profile {job.id} {job.data['status']}: {job.error or 'no result'}", file=sys.stderr)
            return 1
        result = job.result()
    print(json.dumps(result, indent=2) if a.json else format_profile_result(result))
    return 0


def cmd_infer(a: argparse.Namespace) -> int:
    try:
        with np.load(a.inputs, allow_pickle=False) as archive:
            inputs = {name: archive[name] for name in archive.files}
    except (OSError, ValueError) as e:
        raise ClientError(f"cannot read {a.inputs} as an .npz of arrays: {e}") from None
    with Client() as client:
        outputs = client.infer(a.artifact_id, inputs, timeout=a.timeout)
    np.savez(a.output, **outputs)
    print(f"{', '.join(f'{n} {list(v.shape)} {v.dtype}' for n, v in outputs.items())} -> {a.output}")
    return 0


def _one_line_errors(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(a: argparse.Namespace) -> int:
        try:
            return command(a)
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
    p.set_defaults(func=_one_line_errors(cmd_login))

    p = sub.add_parser("submit", help="upload a model and compile it on the server")
    p.add_argument("model", help="an ONNX file")
    p.add_argument("--target", action="append", help="a target from `targets` (repeatable; default cpu)")
    p.add_argument("--input-shape", action="append", type=input_shape, metavar="NAME=D0,D1,...",
                   help="bind an input's symbolic dims (repeatable)")
    p.add_argument("--wait", action="store_true", help="show progress until every job ends")
    p.add_argument("--timeout", type=float, default=None, help="seconds --wait waits at most")
    p.add_argument("-o", "--output", help="with --wait: download the artifacts into this folder")
    p.set_defaults(func=_one_line_errors(cmd_submit))

    p = sub.add_parser("jobs", help="list your compilations on the server, newest first")
    p.add_argument("--status", choices=["queued", "running", "succeeded", "failed", "cancelled"])
    p.add_argument("--limit", type=int, default=20)
    p.set_defaults(func=_one_line_errors(cmd_jobs))

    p = sub.add_parser("job", help="show one compilation on the server")
    p.add_argument("job_id")
    p.add_argument("--json", action="store_true", help="the server's JSON, as is")
    p.set_defaults(func=_one_line_errors(cmd_job))

    p = sub.add_parser("download", help="download a compilation's artifact (sha256 checked)")
    p.add_argument("job_id")
    p.add_argument("-o", "--output", default=".", help="folder (default the current one)")
    p.set_defaults(func=_one_line_errors(cmd_download))

    p = sub.add_parser("submit-profile", help="profile an artifact on a worker of its target (latency, "
                                              "memory, per-kernel roofline)")
    p.add_argument("artifact_id", help="an artifact id (`tileforge job ID` shows a compilation's)")
    p.add_argument("--runs", type=int, default=50, help="timed runs of the whole model (default 50)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default the artifact's)")
    p.add_argument("--timeout", type=float, default=None, help="seconds to wait at most")
    p.add_argument("--json", action="store_true", help="the result as the server's JSON")
    p.set_defaults(func=_one_line_errors(cmd_submit_profile))

    p = sub.add_parser("infer", help="run an artifact on a worker of its target on your inputs (.npz)")
    p.add_argument("artifact_id", help="an artifact id")
    p.add_argument("inputs", help="an .npz with one array per model input, by name")
    p.add_argument("-o", "--output", default="outputs.npz", help="where the outputs go (default outputs.npz)")
    p.add_argument("--timeout", type=float, default=None, help="seconds to wait at most")
    p.set_defaults(func=_one_line_errors(cmd_infer))


def main(argv: list[str] | None = None) -> int:
    """`python -m tileforge`: the remote commands alone (no compiler needed)."""
    parser = argparse.ArgumentParser(prog="tileforge", description="tileforge client: compile on a server")
    add_remote_commands(parser.add_subparsers(dest="command", required=True))
    a = parser.parse_args(argv)
    return a.func(a)
