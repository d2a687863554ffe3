"""Admission to the database pool for the API process.

A blocking endpoint runs in a worker thread, and FastAPI serializes its response in
another: between the two, a request holds its session's connection while it waits
for a thread. With more requests in flight than connections, threads fill up with
requests waiting for a connection while the connections belong to requests waiting
for a thread; nothing moves until the pool's timeout (100 concurrent requests on
PostgreSQL: 80 answered 500 after 30 s, and /healthz took 58 s).

The gate admits at most as many requests to the database as the pool has connections,
and those that wait, wait in the event loop, holding neither a thread nor a connection.
Every database use of the API process goes through it (request sessions, the upload
token check, the event streams' polls, readiness, the reaper), so an admitted request
always finds a free connection and a thread only ever waits for the database itself.
A session is closed (its connection handed back) in a thread of its own, outside the
worker threads' limit, so handing back never waits for a thread either.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

import anyio
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool

T = TypeVar("T")


class ConnectionGate:
    """At most `capacity` holders of a connection from `sessions`' pool at once."""

    def __init__(self, sessions: sessionmaker[Session], capacity: int) -> None:
        self.sessions, self._capacity = sessions, capacity
        self._slots: anyio.Semaphore | None = None

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Admission for work that opens its own sessions (one at a time)."""
        if self._slots is None:  # created on first use, inside the event loop that serves
            self._slots = anyio.Semaphore(self._capacity)
        async with self._slots:
            yield

    @asynccontextmanager
    async def session(self) -> AsyncIterator[Session]:
        """An admitted session, closed on exit without waiting for a worker thread."""
        async with self.slot():
            session = self.sessions()
            try:
                yield session
            finally:
                # A private limiter: closing hands a connection back and must not queue
                # behind threads that may be waiting for it.
                await anyio.to_thread.run_sync(session.close, limiter=anyio.CapacityLimiter(1))

    async def run(self, work: Callable[[Session], T]) -> T:
        """`work(session)` in a worker thread, on an admitted session."""
        async with self.session() as session:
            return await run_in_threadpool(work, session)
