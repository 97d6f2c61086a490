"""A real S3 server on 127.0.0.1 for the object-store tests: versitygw (SigV4-checking) with its
posix backend, each bucket a link to a directory. It is found as internal/s3test finds it:
$GOBATCH_VERSITYGW, the repository's .tools/bin/versitygw (``make tools``, which ``make test``
runs), or versitygw on PATH; a missing binary raises an error saying how to install it, which
fails a test (never skips it). benchmarks/objstore_bench.py uses it too."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    import pytest

REPO = Path(__file__).resolve().parents[2]
ACCESS_KEY = "gobatchtest"
SECRET_KEY = "gobatch-test-secret"
INSTALL_HINT = ("versitygw is not installed: run `make tools` (go install "
                "github.com/versity/versitygw/cmd/versitygw@v1.8.0 into .tools/bin)")


def binary() -> str:
    """The versitygw binary; RuntimeError (saying how to install it) when there is none."""
    env = os.environ.get("GOBATCH_VERSITYGW")
    if env and not os.path.exists(env):
        raise RuntimeError(f"GOBATCH_VERSITYGW={env} does not exist; {INSTALL_HINT}")
    for p in (env, str(REPO / ".tools" / "bin" / "versitygw"), shutil.which("versitygw")):
        if p and os.path.exists(p):
            return p
    raise RuntimeError(INSTALL_HINT)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve(buckets: dict[str, Path]) -> Iterator[str]:
    """Runs versitygw over ``buckets`` (name -> directory) and yields its URL."""
    exe = binary()
    with tempfile.TemporaryDirectory(prefix="gobatch-s3-") as root:
        for name, d in buckets.items():
            os.symlink(Path(d).resolve(), Path(root) / name)
        port = _free_port()
        log = open(Path(root).parent / f"gobatch-versitygw-{port}.log", "wb")
        proc = subprocess.Popen([exe, "--access", ACCESS_KEY, "--secret", SECRET_KEY, "--port", f"127.0.0.1:{port}",
                                 "--quiet", "--keep-alive", "posix", "--nometa", "--bucketlinks", root],
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 20
            while True:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"versitygw did not listen on 127.0.0.1:{port} (see {log.name})")
                time.sleep(0.05)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.kill()
            proc.wait()
            log.close()
            os.unlink(log.name)


ENV_UNSET = ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_NO_SIGN_REQUEST", "AWS_ENDPOINT_URL_S3")


def env_for(endpoint: str) -> dict[str, str]:
    """The environment that points s3:// stores at ``endpoint`` with the server's credentials
    (ENV_UNSET must be unset as well)."""
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": "us-east-1"}


def s3_env(monkeypatch: "pytest.MonkeyPatch", endpoint: str) -> None:
    """Points s3:// stores at ``endpoint`` for the test (the environment the shmloader processes
    inherit)."""
    for k, v in env_for(endpoint).items():
        monkeypatch.setenv(k, v)
    for k in ENV_UNSET:
        monkeypatch.delenv(k, raising=False)
