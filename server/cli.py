"""`tileforge`: the compiler's commands plus serve, worker, db upgrade, token and tenant.

Every command reads the same settings (DATABASE_URL, CELERY_BROKER_URL / REDIS_URL,
TILEFORGE_HOME, ...), so a token created here works against a server started with
the same environment.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys

from compiler.cli import add_commands, run_parsed
from server.admin_cli import add_admin_commands
from server.cache_cli import add_cache_commands
from tileforge.cli import add_remote_commands


def cmd_db_upgrade(a: argparse.Namespace) -> int:
    from server.core.config import get_settings
    from server.db.migrate import upgrade

    settings = get_settings()
    upgrade(settings.db_url, a.revision)
    print(f"database migrated to {a.revision}")
    return 0


def cmd_worker(a: argparse.Namespace) -> int:
    env = dict(os.environ)
    if a.queues:
        env["TILEFORGE_WORKER_QUEUES"] = a.queues
    argv = [sys.executable, "-m", "worker", "--loglevel", a.loglevel, "--concurrency", str(a.concurrency)]
    if a.hostname:
        argv += ["--hostname", a.hostname]
    # The worker by name, in this process's place (same pid: signals reach it directly).
    os.execve(sys.executable, argv, env)
    return 0  # not reached


def cmd_serve(a: argparse.Namespace) -> int:
    import uvicorn

    from server.core.config import get_settings
    from server.core.logging_setup import configure_logging
    from server.db.migrate import upgrade
    from server.jobs.queue import create_celery
    from server.local_token import local_token, local_token_path
    from server.main import create_app

    settings = get_settings()
    configure_logging(settings.log_format)
    settings.home.mkdir(parents=True, exist_ok=True)
    upgrade(settings.db_url)
    token = None if a.no_token else local_token(settings, a.tenant)
    with create_celery(settings).connection_for_write() as conn:
        conn.ensure_connection(max_retries=3)  # creates the embedded broker's tables before the worker races for them
        conn.default_channel  # noqa: B018
    worker = None
    if a.with_worker:
        worker = subprocess.Popen([sys.executable, "-m", "server.cli", "worker"],
                                  env=os.environ | settings.to_env())
    url = f"http://{a.host}:{a.port}"
    print(f"tileforge serving on {url}  (API docs: {url}/docs)")
    if token is not None:
        print(f"token for tenant {a.tenant!r}: {token}  (kept in {local_token_path(settings)}, reused at "
              "every start; `tileforge token revoke` it to get a new one)")
        print(f"try: curl -H 'Authorization: Bearer {token}' {url}/v1/models")
    sys.stdout.flush()
    # uvicorn re-raises SIGTERM after its graceful shutdown; as SystemExit it still runs the
    # `finally` below, so the worker never outlives the server.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        # log_config=None: uvicorn's lines go to the root logger, in the service's format
        uvicorn.run(create_app(settings), host=a.host, port=a.port, log_level="info", log_config=None)
    finally:
        if worker is not None:
            worker.terminate()
            try:
                worker.wait(timeout=20)
            except subprocess.TimeoutExpired:
                worker.kill()
    return 0


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def add_service_commands(sub: argparse._SubParsersAction) -> None:
    """Register serve / worker / db / token / tenant."""
    p = sub.add_parser("serve", help="migrate, then run the API (and a worker with --with-worker)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--with-worker", action="store_true", help="also start a compile worker")
    p.add_argument("--tenant", default="local", help="tenant of the token printed at start")
    p.add_argument("--no-token", action="store_true", help="print no token (deployments: use `token create`)")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("worker", help="run a Celery compile worker")
    p.add_argument("--queues", help="target kinds to take, e.g. 'cuda' (default TILEFORGE_WORKER_QUEUES)")
    p.add_argument("--concurrency", type=int, default=1, help="jobs run at once")
    p.add_argument("--hostname", help="worker name (Celery's -n)")
    p.add_argument("--loglevel", default="INFO")
    p.set_defaults(func=cmd_worker)

    db = sub.add_parser("db", help="database commands").add_subparsers(dest="db_command", required=True)
    p = db.add_parser("upgrade", help="apply migrations")
    p.add_argument("revision", nargs="?", default="head")
    p.set_defaults(func=cmd_db_upgrade)

    add_admin_commands(sub)


def build_parser() -> argparse.ArgumentParser:
    """The `tileforge` parser: the compiler's commands, the service's, and the client's."""
    parser = argparse.ArgumentParser(prog="tileforge", description="tileforge: ONNX in, tiled kernels out")
    sub = parser.add_subparsers(dest="command")
    add_commands(sub)
    add_service_commands(sub)
    add_remote_commands(sub)
    add_cache_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse and run one command; compiler errors become one line and exit status 2."""
    parser = build_parser()
    return run_parsed(parser.parse_args(argv), parser)


if __name__ == "__main__":
    sys.exit(main())
