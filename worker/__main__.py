"""`python -m worker`: a Celery worker on the queues this host serves (its target kinds',
and those of the named CPU models it runs). `tileforge worker` execs this, so the server's
CLI never imports the worker."""

from __future__ import annotations

import argparse
import sys

from server.core.config import get_settings
from worker.capabilities import worker_queues
from worker.celery_app import app


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m worker", description=__doc__)
    p.add_argument("--loglevel", default="INFO")
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--hostname", default=None)
    a = p.parse_args(argv)
    settings = get_settings()
    args = ["worker", "--loglevel", a.loglevel, "--concurrency", str(a.concurrency),
            "--queues", ",".join(worker_queues(settings))]
    if a.hostname:
        args += ["--hostname", a.hostname]
    if settings.is_embedded_broker:
        args += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
    app.worker_main(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
