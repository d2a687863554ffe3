"""Which faults are worth retrying: the database or broker being briefly unreachable."""

from __future__ import annotations

from kombu.exceptions import OperationalError as BrokerOperationalError
from sqlalchemy.exc import InterfaceError, OperationalError

TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    OperationalError, InterfaceError, BrokerOperationalError, ConnectionError, TimeoutError,
)
