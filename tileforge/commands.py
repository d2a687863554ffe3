"""The remote commands' work (`tileforge login`, submit, jobs, job, download, submit-profile,
infer) on the client library; tileforge/cli.py builds their parser and imports this module
only when one of them runs (httpx and the client are not loaded for the compiler's commands)."""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from tileforge.client import Client
from tileforge.config import save_config
from tileforge.errors import ClientError
from tileforge.job import Job
from tileforge.profile_table import format_profile_result
from tileforge.progress import ProgressBoard, job_line


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
        elif job.validation_warning:
            print(f"{job.id} ({job.target}) warning: {job.validation_warning}", file=sys.stderr)
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
