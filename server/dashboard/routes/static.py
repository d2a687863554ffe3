"""The dashboard's own stylesheet and script (no CDN: the pages work offline)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse

STATIC_DIR = Path(__file__).resolve().parents[2] / "static"
MEDIA_TYPES = {".css": "text/css", ".js": "text/javascript", ".svg": "image/svg+xml"}

router = APIRouter()


@router.get("/static/{name}")
def static_file(name: str) -> FileResponse:
    """A file from server/static by its bare name (no folders, so no way out of it)."""
    path = STATIC_DIR / name
    if "/" in name or name.startswith(".") or path.suffix not in MEDIA_TYPES or not path.is_file():
        raise HTTPException(404, f"no static file {name!r}")
    return FileResponse(path, media_type=MEDIA_TYPES[path.suffix],
                        headers={"Cache-Control": "public, max-age=300", "X-Content-Type-Options": "nosniff"})
