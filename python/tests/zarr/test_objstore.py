"""End to end over object storage: a Loader whose stores are s3:// URLs on a real S3 server
(versitygw on 127.0.0.1) delivers the batches an independent xarray reference computes from
the same stores on disk, and the batches a Loader reading the disk delivers."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

import gobatch
from nowcast_ref import NowcastReference, generated_nowcast
from s3_server import s3_env, serve
from test_sampler_loader import check_examples, preset, same, source, take

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with generated_nowcast(tmp_path_factory.mktemp("nowcast"), "quarter-day", days=0.25, pixels=128, seed=5) as out:
        yield out


def test_s3_loader_equals_reference_and_disk(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = preset()
    ref = NowcastReference(data, sat_channels=source(cfg, "satellite").get("channels"),
                           nwp_variables=source(cfg, "nwp").get("channels"))
    with serve({"nowcast": data}) as endpoint:
        s3_env(monkeypatch, endpoint)
        remote = take(3, cfg, data="s3://nowcast")  # type: ignore[arg-type]
        # Store keys as URLs too, not only the data root.
        cfg_urls = preset()
        for s in cfg_urls["source"]:
            s["store"] = "s3://nowcast/" + s["store"]
        remote_urls = take(3, cfg_urls)
    nans = check_examples(ref, remote)
    assert nans["satellite"] > 0, "the check saw no NaN"
    assert same(remote, take(3, cfg, data=data)), "batches through S3 differ from the batches from disk"
    assert same(remote_urls, remote)


def test_s3_errors_name_the_bucket_and_credentials(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with serve({"nowcast": data}) as endpoint:
        s3_env(monkeypatch, endpoint)
        with pytest.raises(gobatch.ConfigError) as err:
            gobatch.plan(preset(), data_root="s3://no-such-bucket")
        assert 'bucket "no-such-bucket" does not exist' in str(err.value) and "source[0].store" in str(err.value)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
        with pytest.raises(gobatch.ConfigError) as err:
            gobatch.plan(preset(), data_root="s3://nowcast")
        assert "access denied" in str(err.value) and "AWS_ACCESS_KEY_ID gobatchtest from the environment" in str(err.value)
