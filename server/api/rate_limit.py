"""Per-tenant request rate limits: a token bucket per tenant holding one minute's worth of
requests and refilled at the tenant's rate. With Redis configured the buckets live there,
so every API process draws on the same ones; on the embedded default (or while Redis is
unreachable) each process keeps its own."""

from __future__ import annotations

import logging
import threading
import time
from typing import Protocol

from server.core.config import Settings

log = logging.getLogger(__name__)


class RateLimiter(Protocol):
    def take(self, tenant_id: str, per_minute: int) -> float:
        """Take one request from the tenant's bucket: 0 when allowed, else the seconds until
        a request would be."""
        ...


def _refill(tokens: float, elapsed: float, per_minute: int) -> float:
    return min(float(per_minute), tokens + max(elapsed, 0.0) * per_minute / 60.0)


class LocalBuckets:
    """Buckets in this process's memory."""

    def __init__(self) -> None:
        self._buckets: dict[str, tuple[float, float]] = {}  # tenant -> (tokens, when)
        self._lock = threading.Lock()

    def take(self, tenant_id: str, per_minute: int) -> float:
        now = time.monotonic()
        with self._lock:
            tokens, when = self._buckets.get(tenant_id, (float(per_minute), now))
            tokens = _refill(tokens, now - when, per_minute)
            wait = 0.0 if tokens >= 1 else (1 - tokens) * 60.0 / per_minute
            self._buckets[tenant_id] = (tokens - 1 if wait == 0 else tokens, now)
            return wait


# Atomic in Redis, on Redis's own clock (API processes on other machines may disagree on time).
_TAKE = """
local cap = tonumber(ARGV[1])
local rate = cap / 60.0
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(b[1]) or cap
local ts = tonumber(b[2]) or now
tokens = math.min(cap, tokens + math.max(0, now - ts) * rate)
local wait = 0
if tokens >= 1 then tokens = tokens - 1 else wait = (1 - tokens) / rate end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('EXPIRE', KEYS[1], 61)
return tostring(wait)
"""


class RedisBuckets:
    """Buckets in Redis, shared by every API process on it; falls back to this process's
    own buckets while Redis is unreachable (a limit held loosely beats refusing everyone)."""

    def __init__(self, url: str, prefix: str) -> None:
        import redis

        self._redis = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        self._script = self._redis.register_script(_TAKE)
        self._prefix = prefix
        self._fallback = LocalBuckets()

    def take(self, tenant_id: str, per_minute: int) -> float:
        import redis

        try:
            return float(self._script(keys=[f"{self._prefix}:rate:{tenant_id}"], args=[per_minute]))
        except redis.RedisError as e:
            log.warning("rate limit in Redis unavailable (%s); counting in this process", e)
            return self._fallback.take(tenant_id, per_minute)


def rate_limiter(settings: Settings) -> RateLimiter:
    """Redis buckets when the settings name a Redis, else in-process ones."""
    url = settings.rate_limit_redis_url
    return LocalBuckets() if url is None else RedisBuckets(url, settings.queue_prefix)
