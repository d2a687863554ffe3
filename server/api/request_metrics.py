"""Request latency by route template, method and status, as a Prometheus histogram.

This is the one per-process measure /metrics reports: each API process times the requests
it served. Scraped one process at a time (each its own target), Prometheus's `instance`
label tells them apart; with `PROMETHEUS_MULTIPROC_DIR` set for every process of one host
(prometheus-client's multiprocess mode), any of them reports the sum of all.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram
from starlette.types import Scope

# Labels are route templates (`/v1/models/{model_id}`), never raw paths: one series per
# route, whatever ids clients send. Paths no route matches share one label.
UNMATCHED = "<unmatched>"

REGISTRY = CollectorRegistry(auto_describe=True)
REQUEST_SECONDS = Histogram(
    "tileforge_http_request_duration_seconds",
    "Time from a request's arrival to the end of its response, in this API process "
    "(all of this host's processes in multiprocess mode)",
    ("route", "method", "status"), registry=REGISTRY,
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0))


def route_template(scope: Scope) -> str:
    """The path template of the route that served the request, its routers' prefixes included."""
    route, path = scope.get("route"), scope["path"]
    if route is None or not hasattr(route, "path_regex"):
        return UNMATCHED
    # An included router's route knows only its own part (`/models/{model_id}`); the prefix
    # is what of the path lies before the part it matches.
    for i, char in enumerate(path):
        if char == "/" and route.path_regex.match(path[i:]):
            return path[:i] + route.path_format
    return route.path_format
