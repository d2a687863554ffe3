"""The embedded default's broker transport: kombu's SQLAlchemy transport, polled at an
interval from the settings.

kombu's virtual transports sleep `polling_interval` (1 s unless told) whenever every queue
they consume is empty, so a worker on the database-table broker picks small jobs up about
one a second. The usual way to change it, the `polling_interval` transport option, does not
work for this transport: its Channel hands every transport option to `create_engine`, which
refuses that one. So the interval is a class attribute of a subclass instead, and
`create_celery` names that class as Celery's `broker_transport`.
"""

from __future__ import annotations

from kombu.transport import sqlalchemy

# A `sqla+URL` broker: kombu takes the part before `+` as its transport's alias.
EMBEDDED_SCHEME_PREFIX = "sqla+"


def embedded_transport(polling_interval: float) -> type[sqlalchemy.Transport]:
    """kombu's SQLAlchemy transport, looking for messages every `polling_interval` seconds
    while its queues are empty."""
    return type("EmbeddedTransport", (sqlalchemy.Transport,), {
        "polling_interval": polling_interval,
        "__module__": __name__,
        "__doc__": f"kombu's SQLAlchemy transport, polled every {polling_interval} s.",
    })


def engine_url(broker_url: str) -> str:
    """The database URL of an `sqla+` broker URL (what the transport's engine connects to)."""
    return broker_url.removeprefix(EMBEDDED_SCHEME_PREFIX)
