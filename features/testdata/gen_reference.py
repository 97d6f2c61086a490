"""Writes the reference values the Go tests of package features compare with, computed by
ocf-data-sampler 1.0.24's own functions (so pvlib's nrel_numpy for the sun).

Run from the repository root with the project's venv:
    .venv/bin/python features/testdata/gen_reference.py
"""

import numpy as np
import pandas as pd
from ocf_data_sampler.numpy_sample.datetime_features import encode_datetimes, get_t0_embedding
from ocf_data_sampler.numpy_sample.sun_position import make_sun_position_numpy_sample

rng = np.random.default_rng(18)
HERE = "features/testdata/"

# The sun: random sites over Great Britain (49-61 N, 8 W - 2 E) at random 5-minute times of
# 2016-2026 (leap years included), each row one (t, lon, lat).
with open(HERE + "sun_ocf.csv", "w") as f:
    f.write("unix_s,lon,lat,solar_azimuth,solar_elevation\n")
    for _ in range(3000):
        t = pd.Timestamp("2016-01-01") + pd.Timedelta(minutes=5 * int(rng.integers(0, 11 * 365 * 288)))
        lon, lat = float(rng.uniform(-8, 2)), float(rng.uniform(49, 61))
        s = make_sun_position_numpy_sample(pd.DatetimeIndex([t]), lon, lat)
        f.write(f"{t.value // 10**9},{lon!r},{lat!r},{float(s['solar_azimuth'][0])!r},{float(s['solar_elevation'][0])!r}\n")

# Datetime encodings and the t0 embedding at random minutes, plus the ends of a leap year.
embeddings = [("1h", "cyclic"), ("6h", "linear"), ("24h", "cyclic"), ("1y", "cyclic"), ("2y", "linear"), ("4y", "cyclic")]
times = [pd.Timestamp("2016-01-01") + pd.Timedelta(minutes=int(m)) for m in rng.integers(0, 11 * 365 * 1440, 500)]
times += [pd.Timestamp(s) for s in ["2024-12-31 23:59", "2024-02-29 12:30", "2023-12-31 00:00", "2024-01-01 00:00"]]
with open(HERE + "datetime_ocf.csv", "w") as f:
    f.write("unix_s,date_sin,date_cos,time_sin,time_cos," + ",".join(f"e{i}" for i in range(10)) + "\n")
    for t in times:
        d = encode_datetimes(pd.DatetimeIndex([t]))
        e = get_t0_embedding(t, embeddings)["t0_embedding"]
        vals = [d[k][0] for k in ("date_sin", "date_cos", "time_sin", "time_cos")] + [float(v) for v in e]
        f.write(f"{t.value // 10**9}," + ",".join(repr(float(v)) for v in vals) + "\n")
