"""Which faults are worth retrying (the database or broker being briefly unreachable), and
how long to wait before each retry."""

from __future__ import annotations

import random

from kombu.exceptions import OperationalError as BrokerOperationalError
from sqlalchemy.exc import InterfaceError, OperationalError

TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    OperationalError, InterfaceError, BrokerOperationalError, ConnectionError, TimeoutError,
)

FIRST_DELAY_SECONDS = 2.0
LONGEST_DELAY_SECONDS = 60.0


def retry_delay(retries_so_far: int, rng: random.Random | None = None) -> float:
    """Seconds to wait before the next retry: the exponential delay of this retry (2, 4, 8 ...
    s, capped at a minute), of which the first half is always waited and the second half at
    random ("equal jitter").

    Why a floor: an outage (a database restarting) fails every task at once, and fully random
    delays (0 to 2^n s) let a task spend all its retries within a fraction of a second, then
    give up on a job the outage would have spared; the random half still spreads the tasks
    that retry together.
    """
    full = min(LONGEST_DELAY_SECONDS, FIRST_DELAY_SECONDS * 2.0 ** max(retries_so_far, 0))
    return full / 2 + (rng or random).uniform(0.0, full / 2)

