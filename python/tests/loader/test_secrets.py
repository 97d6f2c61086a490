"""Secrets are never printed (issue 29): a canary planted in each place a secret can enter a
Loader's configuration (a store URL's password, a presigned URL's signature, an environment
variable an ocf-data-sampler YAML takes with !ENV) appears in no error, warning, log record,
plan or stats() the Loader and gobatch.plan produce, while the messages still name the store.

The store is served over HTTP on 127.0.0.1 by a plain file server (which ignores the
credentials), every chunk of it missing, with missing_chunks = "error": the first batch fails
naming the store, the chunk and the URL."""

from __future__ import annotations

import functools
import http.server
import logging
import threading
import warnings
from pathlib import Path
from typing import Iterator

import pytest

import gobatch
from test_chunk_faults import T, config, source, write_satellite

pytestmark = pytest.mark.timeout(120)

CANARY = "CANARY0b7e42"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A plain HTTP file server on 127.0.0.1 over a store whose chunks are all gone."""
    root = tmp_path_factory.mktemp("served")
    write_satellite(root / "sat.zarr")
    for t in range(T):
        (root / "sat.zarr" / "data" / f"{t}.0.0").unlink()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def outputs(run, caplog: pytest.LogCaptureFixture) -> str:  # type: ignore[no-untyped-def]
    """Every text the call produced: its exception, its warnings and its log records."""
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.DEBUG):
        warnings.simplefilter("always")
        try:
            result = run()
            text = repr(result)
        except gobatch.GobatchError as e:
            text = f"{type(e).__name__}: {e} {getattr(e, 'stderr', '')}"
    return "\n".join([text, *(str(w.message) for w in caught), *(r.getMessage() for r in caplog.records)])


@pytest.mark.parametrize("url", [
    f"http://reader:{CANARY}@{{host}}/sat.zarr",
    f"http://{CANARY}@{{host}}/sat.zarr",
])
def test_store_url_credentials_are_not_printed(server: str, url: str, caplog: pytest.LogCaptureFixture) -> None:
    store = url.format(host=server)
    cfg = config(source(store=store, missing_chunks="error"))

    def first_batch() -> object:
        with gobatch.Loader(cfg, framework="numpy") as loader:
            return next(iter(loader))

    text = outputs(first_batch, caplog)
    assert "LoaderError" in text and "chunk not stored" in text, text  # the read failed, naming the chunk
    assert f"http://REDACTED@{server}/sat.zarr" in text, text  # and the store, redacted
    assert CANARY not in text, text
    text = outputs(lambda: gobatch.plan(cfg), caplog)
    assert f"REDACTED@{server}" in text and CANARY not in text, text


def test_env_values_are_not_printed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """An ocf-data-sampler YAML whose zarr_path comes from the environment: the path is the
    secret, and the messages show the variable's name."""
    monkeypatch.setenv("GOBATCH_TEST_SECRET", CANARY)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pvnet.yaml").write_text(
        "input_data:\n"
        "  satellite:\n"
        "    zarr_path: !ENV /nowhere/${GOBATCH_TEST_SECRET}/sat.zarr\n"
        "    time_resolution_minutes: 5\n    interval_start_minutes: -10\n    interval_end_minutes: 0\n"
        "    image_size_pixels_height: 4\n    image_size_pixels_width: 4\n"
        "    channels: [IR_016]\n    normalisation_constants: {IR_016: {mean: 0.0, std: 1.0}}\n")
    for run in (lambda: gobatch.plan("pvnet.yaml", batch_size=2), lambda: gobatch.Loader("pvnet.yaml", batch_size=2)):
        text = outputs(run, caplog)
        assert "ConfigError" in text and "${GOBATCH_TEST_SECRET}" in text, text
        assert CANARY not in text, text
