"""Live progress of several jobs at once, one line per job: redrawn in place on a
terminal, printed as a new line per change otherwise (logs, pipes, tests)."""

from __future__ import annotations

import sys
import threading
from typing import TextIO

from tileforge.job import Job

BAR_WIDTH = 20


def job_line(job: Job) -> str:
    """`<id> <target> [####----]  40%  running build` for one job."""
    filled = "#" * int(job.progress * BAR_WIDTH)
    where = f" {job.stage}" if job.stage and not job.finished else ""
    return f"{job.id[:12]}  {job.target:<14} [{filled:<{BAR_WIDTH}}] {job.progress * 100:3.0f}%  {job.data['status']}{where}"


class ProgressBoard:
    """Shows `jobs`; `update(job)` is safe to call from one thread per job."""

    def __init__(self, jobs: list[Job], stream: TextIO | None = None) -> None:
        self.jobs, self.stream = jobs, stream or sys.stderr
        self.live = self.stream.isatty()
        self._lock, self._drawn = threading.Lock(), False

    def update(self, job: Job) -> None:
        """Show `job`'s new state."""
        with self._lock:
            if not self.live:
                self.stream.write(job_line(job) + "\n")
            else:
                if self._drawn:  # back to the first line of the board, then draw it again
                    self.stream.write(f"\x1b[{len(self.jobs)}F")
                self.stream.write("".join(f"\x1b[2K{job_line(j)}\n" for j in self.jobs))
                self._drawn = True
            self.stream.flush()
