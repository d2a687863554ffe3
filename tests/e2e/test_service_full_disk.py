"""A full artifact store: on the embedded default with a real `celery worker`, the store is a
small tmpfs filled to the last byte; the compile job fails with a message that says so,
no partial blob is left, and an upload answers 507. Nothing is restarted."""

import contextlib
import subprocess
from pathlib import Path

import pytest
from service_kit import ServiceFlow, auth, make_token

pytestmark = [pytest.mark.slow]


@contextlib.contextmanager
def small_filesystem(path: Path, size: str = "512k"):
    """A tmpfs of `size` at `path` (needs the right to mount: skip otherwise)."""
    path.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tileforge-test", str(path)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs for the store: {done.stderr.strip() or done.returncode}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(folder: Path) -> None:
    """Write a file until the filesystem refuses another byte."""
    with (folder / "filler").open("wb", buffering=0) as f:
        for chunk in (64 * 1024, 4096, 512, 1):
            try:
                while True:
                    f.write(b"\0" * chunk)
            except OSError:
                continue


def test_a_full_artifact_store_fails_the_job_clearly_and_leaves_no_partial_blob(
        embedded_settings, start_worker, onnx_models, tmp_path):
    from fastapi.testclient import TestClient

    from server.main import create_app

    with small_filesystem(tmp_path / "store") as store:
        settings = embedded_settings.model_copy(update={"storage_dir": store})
        with TestClient(create_app(settings)) as client:
            token = make_token(settings, "alice")
            flow = ServiceFlow(client, token)
            model = flow.upload(onnx_models.mlp(seed=91, hidden=24))
            fill(store)
            refused = client.post("/v1/models", files={"file": ("m.onnx", onnx_models.mlp(seed=92))},
                                  headers=auth(token))
            assert refused.status_code == 507, refused.text
            assert "the blob store is full (No space left on device)" in refused.json()["detail"]
            start_worker(settings, "w-full-disk")
            done = flow.wait(flow.submit(model["id"])["id"])
        assert done["status"] == "failed", done
        assert done["error"].startswith("the artifact could not be stored: the blob store is full "
                                        "(No space left on device)"), done["error"]
        assert done["artifact_id"] is None
        left = sorted(p.relative_to(store).as_posix() for p in store.rglob("*") if p.is_file())
        assert left == sorted(["filler", f"{model['sha256'][:2]}/{model['sha256']}"])  # no partial blob
