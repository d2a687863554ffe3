"""JobMetrics (read from the database at scrape time) as Prometheus metric families."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from server.core.config import Settings
from server.services.metrics import JobMetrics


class JobMetricsCollector:
    """One scrape's JobMetrics, already read, as metric families (a prometheus-client
    custom collector: `collect` must not touch the database, it runs in the event loop)."""

    def __init__(self, metrics: JobMetrics, settings: Settings) -> None:
        self.metrics, self.settings = metrics, settings

    def collect(self) -> Iterator[Metric]:
        m = self.metrics
        jobs = GaugeMetricFamily("tileforge_jobs", "Jobs in the database by kind and state",
                                 labels=("kind", "state"))
        for (kind, state), n in sorted(m.by_state.items()):
            jobs.add_metric((kind, state), n)
        yield jobs

        depth = GaugeMetricFamily(
            "tileforge_queue_depth", "Queued jobs sent to a target kind's queues and not yet claimed "
            "(the kind's queue and its per-arch / per-CPU-model queues together)", labels=("queue",))
        held = GaugeMetricFamily(
            "tileforge_jobs_held", "Queued jobs that fair dispatch holds back (not in the broker yet)",
            labels=("queue",))
        for kind in sorted({k for k, _ in m.queued} | {"cpu", "cuda"}):
            queue = self.settings.queue_for(kind)
            depth.add_metric((queue,), m.queued.get((kind, False), 0))
            held.add_metric((queue,), m.queued.get((kind, True), 0))
        yield depth
        yield held

        stages = HistogramMetricFamily(
            "tileforge_job_stage_duration_seconds",
            "Seconds each pipeline stage took, over every job in the database that recorded it",
            labels=("stage",))
        for stage, hist in sorted(m.stages.items()):
            stages.add_metric((stage,), hist.cumulative(), hist.total)
        yield stages

        yield CounterMetricFamily("tileforge_kernel_cache_hits", "Kernels compile jobs found in the cache",
                                  value=m.cache_hits)
        yield CounterMetricFamily("tileforge_kernel_cache_misses", "Kernels compile jobs had to build",
                                  value=m.cache_misses)


def exposition(metrics: JobMetrics, settings: Settings) -> bytes:
    """The text format of one scrape's job metrics."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(JobMetricsCollector(metrics, settings))
    return generate_latest(registry)
