"""An ocf-data-sampler YAML configuration is a gobatch configuration (issue 18, item 1).

The reference is ocf-data-sampler 1.0.24's own ``load_yaml_configuration``, never gobatch's
code: every YAML file written here is given to it and to ``shmloader plan --config FILE.yaml``.
A file ocf-data-sampler refuses must be refused by gobatch, naming the file, the line of the key
at fault and the key; a file it accepts must plan (gobatch opens the stores written here with
xarray in ocf's layout, the relative ``zarr_path``s resolved from the working directory as
ocf-data-sampler resolves them).

ocf-data-sampler is a test dependency only (requirements-dev.txt). It runs in a child process
(pyaml_env changes PyYAML's SafeLoader for the whole process) of this interpreter, or of the one
GOBATCH_OCF_PYTHON names (a venv of its own); without it the tests skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import pyproj
import pytest
import xarray as xr
from geostationary import GEOS, area
from ocf_reference import run_ocf

pytestmark = pytest.mark.timeout(300)

T0 = np.datetime64("2023-06-01T06:00")

# The base configuration: every case edits one of its lines. The line numbers in the cases
# below are 1-based lines of this text.
BASE = textwrap.dedent("""\
    general:
      name: test
      description: gobatch's reading of an ocf-data-sampler configuration
    input_data:
      generation:
        zarr_path: gen.zarr
        time_resolution_minutes: 30
        interval_start_minutes: -60
        interval_end_minutes: 120
      nwp:
        ukv:
          provider: ukv
          zarr_path: ukv.zarr
          time_resolution_minutes: 60
          interval_start_minutes: -60
          interval_end_minutes: 120
          image_size_pixels_height: 4
          image_size_pixels_width: 6
          channels: [t, dswrf, tp]
          accum_channels: [tp]
          normalisation_constants:
            t: {mean: 280.0, std: 10.0}
            dswrf: {mean: 100.0, std: 50.0, clip_min: 0.0}
            diff_tp: {mean: 0.0, std: 1.0}
      satellite:
        zarr_path: sat.zarr
        time_resolution_minutes: 5
        interval_start_minutes: -30
        interval_end_minutes: 0
        image_size_pixels_height: 8
        image_size_pixels_width: 10
        channels: [IR_016, VIS006]
        normalisation_constants:
          IR_016: {mean: 1.0, std: 2.0}
          VIS006: {mean: 1.0, std: 2.0}
      solar_position:
        time_resolution_minutes: 30
        interval_start_minutes: -60
        interval_end_minutes: 120
""")


def edit(line: int, text: str) -> str:
    """BASE with line `line` (1-based) replaced by text (which may hold several lines)."""
    lines = BASE.splitlines()
    assert 1 <= line <= len(lines)
    lines[line - 1] = text
    return "\n".join(lines) + "\n"


def append_to(line: int, text: str) -> str:
    """BASE with text inserted after line `line`."""
    lines = BASE.splitlines()
    lines.insert(line, text)
    return "\n".join(lines) + "\n"


# Files ocf-data-sampler accepts (gobatch must plan them).
VALID = {
    "base": BASE,
    "env-path": edit(26, "    zarr_path: !ENV ${GOBATCH_TEST_SAT:sat.zarr}"),
    "env-unset-default": edit(13, "      zarr_path: !ENV ${GOBATCH_TEST_UNSET_VAR:ukv.zarr}"),
    "int-as-string": edit(27, '    time_resolution_minutes: "5"'),
    "int-as-float": edit(14, "      time_resolution_minutes: 60.0"),
    "yaml11-bool": append_to(12, "      public: yes"),
    "provider-upper-case": edit(12, "      provider: UKV"),
    "dropout": append_to(31, "    dropout_timedeltas_minutes: [-10, -5]\n    dropout_fraction: 0.5"),
    "dropout-list": append_to(31, "    dropout_timedeltas_minutes: [-10, -5]\n    dropout_fraction: [0.25, 0.5]"),
    "nwp-dropout": append_to(16, "      dropout_timedeltas_minutes: [-180]\n      dropout_fraction: 1.0"),
    "max-staleness-null": append_to(16, "      max_staleness_minutes: null"),
    "t0-embedding": append_to(39, "  t0_embedding:\n    embeddings: [[1h, cyclic], [24h, linear], [1y, cyclic]]"),
    "clip": edit(22, "        t: {mean: 280.0, std: 10.0, clip_min: 200, clip_max: 330}"),
    "underscore-int": edit(7, '    time_resolution_minutes: "3_0"'),
    "yaml11-exponent-string": edit(34, "      IR_016: {mean: 1.0, std: 1e5}"),  # PyYAML: the string "1e5"
    "env-int-default": edit(27, "    time_resolution_minutes: !ENV ${GOBATCH_TEST_UNSET_RES:5}"),
    "merge-keys": edit(34, "      IR_016: &norm {mean: 1.0, std: 2.0}").replace(
        "      VIS006: {mean: 1.0, std: 2.0}", "      VIS006: {<<: *norm, std: 3.0}"),
    "empty-nwp": "\n".join(BASE.splitlines()[:9] + ["  nwp: {}"] + BASE.splitlines()[24:]) + "\n",
    "no-nwp": "\n".join(BASE.splitlines()[:9] + BASE.splitlines()[24:]) + "\n",
}

# Files ocf-data-sampler refuses: (text, line, key gobatch must name).
INVALID = {
    "gobatch-section": (BASE + "gobatch:\n  batch_size: 32\n", 40, "gobatch"),
    "unknown-satellite-key": (append_to(26, "    variable: data"), 27, "input_data.satellite.variable"),
    "unknown-norm-key": (edit(35, "      VIS006: {mean: 1.0, std: 2.0, scale: 3}"), 35, "input_data.satellite.normalisation_constants.VIS006.scale"),
    "start-not-multiple": (edit(28, "    interval_start_minutes: -32"), 28, "input_data.satellite.interval_start_minutes"),
    "end-not-multiple": (edit(9, "    interval_end_minutes: 100"), 9, "input_data.generation.interval_end_minutes"),
    "start-after-end": (edit(15, "      interval_start_minutes: 180"), 15, "input_data.nwp.ukv.interval_start_minutes"),
    "resolution-zero": (edit(27, "    time_resolution_minutes: 0"), 27, "input_data.satellite.time_resolution_minutes"),
    "negative-crop": (edit(30, "    image_size_pixels_height: -2"), 30, "input_data.satellite.image_size_pixels_height"),
    "fractional-int": (edit(31, "    image_size_pixels_width: 10.5"), 31, "input_data.satellite.image_size_pixels_width"),
    "missing-channel-norm": (edit(35, "      IR_108: {mean: 1.0, std: 2.0}"), 33, "input_data.satellite.normalisation_constants"),
    "missing-diff-norm": (edit(24, "        tp: {mean: 0.0, std: 1.0}"), 21, "input_data.nwp.ukv.normalisation_constants"),
    "accum-not-a-channel": (edit(20, "      accum_channels: [tp, sd]"), 20, "input_data.nwp.ukv.accum_channels"),
    "bad-provider": (edit(12, "      provider: metoffice"), 12, "input_data.nwp.ukv.provider"),
    "std-zero": (edit(34, "      IR_016: {mean: 1.0, std: 0}"), 34, "input_data.satellite.normalisation_constants.IR_016.std"),
    "clip-reversed": (edit(23, "        dswrf: {mean: 100.0, std: 50.0, clip_min: 5, clip_max: 1}"), 23,
                      "input_data.nwp.ukv.normalisation_constants.dswrf.clip_min"),
    "dropout-above-one": (append_to(31, "    dropout_timedeltas_minutes: [-10]\n    dropout_fraction: 1.5"), 33, "input_data.satellite.dropout_fraction"),
    "dropout-positive": (append_to(31, "    dropout_timedeltas_minutes: [10]\n    dropout_fraction: 0.5"), 32, "input_data.satellite.dropout_timedeltas_minutes[0]"),
    "dropout-no-timedeltas": (append_to(9, "    dropout_fraction: 0.5"), 10, "input_data.generation.dropout_fraction"),
    "timedeltas-no-fraction": (append_to(9, "    dropout_timedeltas_minutes: [-30]"), 10, "input_data.generation.dropout_timedeltas_minutes"),
    "dropout-list-sum": (append_to(31, "    dropout_timedeltas_minutes: [-10, -5]\n    dropout_fraction: [0.75, 0.5]"), 33, "input_data.satellite.dropout_fraction"),
    "dropout-list-empty": (append_to(31, "    dropout_timedeltas_minutes: [-10]\n    dropout_fraction: []"), 33, "input_data.satellite.dropout_fraction"),
    "t0-embedding-period": (append_to(39, "  t0_embedding:\n    embeddings: [[25h, cyclic]]"), 41, "input_data.t0_embedding.embeddings[0][0]"),
    "t0-embedding-kind": (append_to(39, "  t0_embedding:\n    embeddings: [[1h, sine]]"), 41, "input_data.t0_embedding.embeddings[0][1]"),
    "missing-zarr-path": (edit(26, "    channels_note: none"), 25, "input_data.satellite.zarr_path"),
    "channel-not-a-string": (edit(32, "    channels: [IR_016, 5]"), 32, "input_data.satellite.channels[1]"),
    "general-not-a-mapping": (edit(1, "general: 3\nold_general:"), 1, "general"),
    "input-data-null": ("general:\n  name: x\ninput_data: null\n", 3, "input_data"),
    "provider-not-a-string": (edit(12, "      provider: 5"), 12, "input_data.nwp.ukv.provider"),
    "public-not-a-bool": (append_to(9, "    public: 2"), 10, "input_data.generation.public"),
    "dropout-fraction-string": (append_to(31, "    dropout_timedeltas_minutes: [-10]\n    dropout_fraction: lots"), 33,
                                "input_data.satellite.dropout_fraction"),
    "env-unset-int": (edit(27, "    time_resolution_minutes: !ENV ${GOBATCH_TEST_UNSET_RES}"), 27,
                      "input_data.satellite.time_resolution_minutes"),
    "syntax-error": (edit(19, "      channels: [t, dswrf, tp"), 0, ""),
}


# ------------------------------------------------------------------------------ reference

_REF_SCRIPT = """
import json, sys
try:
    from ocf_data_sampler.config import load_yaml_configuration
except ImportError as e:
    print(json.dumps({"missing": str(e)})); sys.exit(0)
out = {}
for path in sys.argv[1:]:
    try:
        load_yaml_configuration(path)
        out[path] = None
    except Exception as e:  # ValidationError, OSError (provider), yaml errors
        out[path] = type(e).__name__ + ": " + str(e)[:300]
print(json.dumps(out))
"""


def ocf_reference(paths: list[Path], cwd: Path) -> dict[str, str | None]:
    """ocf-data-sampler's verdict on each file: None (accepted) or its error."""
    return dict(run_ocf(_REF_SCRIPT, [str(p) for p in paths], cwd, timeout=240, env={"GOBATCH_TEST_SAT": "sat.zarr"}))


# ------------------------------------------------------------------------------- fixtures


def write_stores(root: Path) -> None:
    """Small stores in ocf-data-sampler's layouts around a point in England."""
    rng = np.random.default_rng(18)
    to_geos = pyproj.Transformer.from_crs("EPSG:27700", GEOS, always_xy=True)
    gx, gy = to_geos.transform(420000.0, 330000.0)
    x = gx + 3000.0 * (24 - np.arange(48))  # descending, as archives often are
    y = gy + 3000.0 * (np.arange(40) - 20)
    times = T0 - np.timedelta64(60, "m") + np.arange(72) * np.timedelta64(5, "m")
    sat = xr.Dataset(
        {"data": (("variable", "time", "y_geostationary", "x_geostationary"),
                  rng.normal(size=(2, len(times), len(y), len(x))).astype(np.float32), {"area": area(48, 40)})},
        coords={"variable": ["IR_016", "VIS006"], "time": times, "y_geostationary": y, "x_geostationary": x})
    sat.to_zarr(root / "sat.zarr", zarr_format=2, consolidated=True)

    xo = np.arange(300000.0, 540000.0, 2000.0)
    yo = np.arange(420000.0, 220000.0, -2000.0)
    init = T0 - np.timedelta64(6, "h") + np.arange(4) * np.timedelta64(3, "h")
    step = np.arange(10) * np.timedelta64(1, "h")
    ukv = xr.Dataset(
        {"UKV": (("init_time", "step", "variable", "x", "y"),
                 rng.normal(size=(len(init), len(step), 3, len(xo), len(yo))).astype(np.float32))},
        coords={"init_time": init, "step": step, "variable": ["t", "dswrf", "tp"], "x": xo, "y": yo})
    ukv.to_zarr(root / "ukv.zarr", zarr_format=2, consolidated=True)

    to_ll = pyproj.Transformer.from_crs("EPSG:27700", "EPSG:4326", always_xy=True)
    lon, lat = to_ll.transform(np.array([400000.0, 430000.0, 445000.0]), np.array([320000.0, 335000.0, 300000.0]))
    gtimes = T0 - np.timedelta64(3, "h") + np.arange(16) * np.timedelta64(30, "m")
    gen = xr.Dataset(
        {"generation_mw": (("time_utc", "location_id"), rng.uniform(0, 5, (len(gtimes), 3)).astype(np.float32)),
         "capacity_mwp": (("time_utc", "location_id"), np.full((len(gtimes), 3), 10.0, np.float32))},
        coords={"time_utc": gtimes, "location_id": np.array([1, 2, 3]),
                "longitude": ("location_id", lon), "latitude": ("location_id", lat)})
    gen.to_zarr(root / "gen.zarr", zarr_format=2, consolidated=True)


@dataclass
class Case:
    name: str
    path: Path
    text: str


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    r = tmp_path_factory.mktemp("ocf")
    write_stores(r)
    yield r


@pytest.fixture(scope="module")
def verdicts(root: Path) -> dict[str, str | None]:
    paths = []
    for name, text in list(VALID.items()) + [(n, t[0]) for n, t in INVALID.items()]:
        p = root / f"{name}.yaml"
        p.write_text(text)
        paths.append(p)
    v = ocf_reference(paths, root)
    return {Path(k).stem: e for k, e in v.items()}


def shmloader() -> str:
    b = os.environ.get("GOBATCH_SHMLOADER")
    if b:
        return b
    return str(Path(__file__).resolve().parents[3] / "bin" / "shmloader")


def plan(root: Path, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([shmloader(), "plan", "--config", f"{name}.yaml", "--batch-size", "2", *args], cwd=root,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "GOBATCH_TEST_SAT": "sat.zarr"})


# ---------------------------------------------------------------------------------- tests


@pytest.mark.parametrize("name", sorted(VALID))
def test_files_ocf_accepts_are_planned(root: Path, verdicts: dict[str, str | None], name: str) -> None:
    assert verdicts[name] is None, f"the reference refuses {name}: {verdicts[name]}"
    r = plan(root, name, "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    names = [s["name"] for s in rep["sources"]]
    # the generation store's capacity_mwp divides the generation (docs/OCF.md)
    assert names[0] == "satellite" and names[-2:] == ["generation", "generation_capacity"], names


@pytest.mark.parametrize("name", sorted(INVALID))
def test_files_ocf_refuses_are_refused_naming_line_and_key(root: Path, verdicts: dict[str, str | None], name: str) -> None:
    _, line, key = INVALID[name]
    assert verdicts[name] is not None, f"the reference accepts {name}"
    r = plan(root, name)
    assert r.returncode != 0, f"gobatch accepts {name}, which ocf-data-sampler refuses: {verdicts[name]}"
    where = f"{name}.yaml:{line}: {key}:" if line else f"{name}.yaml:"
    assert where in r.stderr, f"expected {where!r} in:\n{r.stderr}\n(reference: {verdicts[name]})"


# Files ocf-data-sampler accepts that gobatch cannot run (docs/OCF.md): (text, what gobatch says).
GOBATCH_REFUSES = {
    # ocf-data-sampler's loader accepts an odd crop, then fails on every sample.
    "odd-crop": (edit(31, "    image_size_pixels_width: 9"),
                 "odd-crop.yaml:31: input_data.satellite.image_size_pixels_width: 9; gobatch needs an even crop"),
    # Nothing to centre the examples on (PVNetDataset needs a generation in any case).
    "nwp-only": ("\n".join(BASE.splitlines()[:4] + BASE.splitlines()[9:24]) + "\n",
                 "nwp-only.yaml:4: input_data: neither a satellite nor a generation"),
    # Several zarr_paths are one store read along time (docs/OCF.md); the same one twice would
    # repeat every time, which ocf-data-sampler's loader refuses as it opens the stores.
    "zarr-path-twice": (edit(26, "    zarr_path: [sat.zarr, sat.zarr]"),
                        'zarr-path-twice.yaml:26: input_data.satellite.zarr_path: "sat.zarr" is listed twice'),
    # ocf-data-sampler's NWP selection fails on every sample with a list or a zero timedelta.
    "nwp-dropout-list": (append_to(16, "      dropout_timedeltas_minutes: [-180]\n      dropout_fraction: [1.0]"),
                         "nwp-dropout-list.yaml:18: input_data.nwp.ukv.dropout_fraction: a list; an NWP takes one number"),
    "nwp-dropout-zero": (append_to(16, "      dropout_timedeltas_minutes: [0, -60]\n      dropout_fraction: 0.5"),
                         "nwp-dropout-zero.yaml:17: input_data.nwp.ukv.dropout_timedeltas_minutes: 0; an NWP's timedeltas must be negative"),
}


@pytest.mark.parametrize("name", sorted(GOBATCH_REFUSES))
def test_valid_for_ocf_but_gobatch_refuses_naming_the_key(root: Path, name: str) -> None:
    text, want = GOBATCH_REFUSES[name]
    (root / f"{name}.yaml").write_text(text)
    assert ocf_reference([root / f"{name}.yaml"], root)[str(root / f"{name}.yaml")] is None
    r = plan(root, name)
    assert r.returncode != 0 and want in r.stderr, r.stderr


def test_flags_set_the_batch_and_batch_size_is_required(root: Path) -> None:
    (root / "flags.yaml").write_text(BASE)
    r = subprocess.run([shmloader(), "plan", "--config", "flags.yaml"], cwd=root, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "flags.yaml: batch.size: missing" in r.stderr and "--batch-size" in r.stderr, r.stderr
    r = plan(root, "flags", "--json")
    assert r.returncode == 0, r.stderr
    whole = json.loads(r.stdout)
    r = plan(root, "flags", "--json", "--seed", "7", "--order", "epochs", "--t0-start", "2023-06-01T06:00",
             "--t0-end", "2023-06-01T06:30")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert whole["order"] == "stream" and rep["order"] == "epochs"
    assert all(t["shape"][0] == 2 for t in rep["tensors"]), rep["tensors"]
    # The t0 range keeps some of ocf's (t0, location) pairs (those from 06:00 to 06:30).
    assert 0 < rep["sample_space"]["pairs"] < whole["sample_space"]["pairs"], (whole["sample_space"], rep["sample_space"])


def test_relative_paths_resolve_from_the_working_directory_and_data_root_overrides(root: Path, tmp_path: Path) -> None:
    (root / "cwd.yaml").write_text(BASE)
    # From another directory the relative zarr_paths are not found...
    r = subprocess.run([shmloader(), "plan", "--config", str(root / "cwd.yaml"), "--batch-size", "2"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and f"cwd.yaml:26: input_data.satellite.zarr_path: open zarr store {tmp_path}/sat.zarr" in r.stderr, r.stderr
    # ...unless --data-root says where they are.
    r = subprocess.run([shmloader(), "plan", "--config", str(root / "cwd.yaml"), "--batch-size", "2", "--data-root", str(root)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_loader_and_plan_take_the_yaml_with_keywords(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gobatch.Loader("pvnet.yaml", batch_size=..., order=...): the batch options come as
    keywords, the relative zarr_paths from the working directory."""
    import gobatch

    (root / "pvnet.yaml").write_text(BASE)
    monkeypatch.chdir(root)
    with pytest.raises(gobatch.ConfigError, match="batch.size: missing"):
        gobatch.plan("pvnet.yaml")
    rep = gobatch.plan("pvnet.yaml", batch_size=3, order="epochs", seed=5)
    assert rep["order"] == "epochs" and all(t["shape"][0] == 3 for t in rep["tensors"])
    with gobatch.Loader("pvnet.yaml", batch_size=3, order="epochs", seed=5, framework="numpy") as loader:
        assert len(loader) == rep["epoch_batches"] > 0
        for epoch in range(2):  # the second epoch is a new child: the keywords must carry over
            n = 0
            for batch in loader:
                # ocf-data-sampler's batch layout (test_ocf_layout.py): (B, T, C, W, H)
                assert batch["satellite_actual"].shape == (3, 7, 2, 10, 8)  # -30..0 at 5 minutes
                assert batch["nwp"]["ukv"]["nwp"].shape == (3, 4, 3, 6, 4)  # steps -60..120 hourly
                assert batch["generation"].shape == (3, 7)
                assert set(np.asarray(batch["location_id"]).tolist()) <= {1, 2, 3}
                n += 1
            assert n == len(loader), f"epoch {epoch}: {n} batches, len {len(loader)}"
