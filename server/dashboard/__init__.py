"""The dashboard served at `/`: the kernel cache, jobs and models as server-rendered pages.

`router` is what server.main mounts.
"""

from server.dashboard.router import router

__all__ = ["router"]
