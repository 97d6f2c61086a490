"""tools/install_proj.sh (``make sysdeps``) says, before apt-get installs PROJ, which packages are
new and which installed ones it upgrades (issue 30: make demo's apt-get step had upgraded curl,
zstd and others without a word). Checked on a recorded ``apt-get -s install pkg-config
libproj-dev proj-data`` plan of a Debian 12 machine, without installing anything."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

PLAN = """NOTE: This is only a simulation!
Reading package lists...
Inst libcurl4 [7.88.1-10+deb12u8] (7.88.1-10+deb12u14 Debian-Security:12/stable-security [amd64]) []
Inst curl [7.88.1-10+deb12u8] (7.88.1-10+deb12u14 Debian-Security:12/stable-security [amd64])
Inst libsqlite3-dev (3.40.1-2+deb12u1 Debian:12.11/stable [amd64])
Inst proj-data (9.1.1-1 Debian:12.11/stable [all])
Inst libproj-dev (9.1.1-1+b1 Debian:12.11/stable [amd64])
Conf libcurl4 (7.88.1-10+deb12u14 Debian-Security:12/stable-security [amd64])
Conf proj-data (9.1.1-1 Debian:12.11/stable [all])
"""


def explain(tmp_path: Path, plan: str) -> str:
    f = tmp_path / "plan.txt"
    f.write_text(plan)
    out = subprocess.run(["sh", str(REPO / "tools" / "install_proj.sh"), "--explain", str(f)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_names_new_and_upgraded_packages(tmp_path: Path) -> None:
    lines = explain(tmp_path, PLAN).splitlines()
    assert lines[0] == "installing PROJ (pkg-config libproj-dev proj-data) with apt-get:"
    assert lines[1] == "  new packages: libsqlite3-dev proj-data libproj-dev"
    assert lines[2] == ("  installed packages upgraded to the versions libproj-dev needs: "
                        "libcurl4 7.88.1-10+deb12u8 -> 7.88.1-10+deb12u14, curl 7.88.1-10+deb12u8 -> 7.88.1-10+deb12u14")


def test_nothing_to_do_says_none(tmp_path: Path) -> None:
    lines = explain(tmp_path, "Reading package lists...\n").splitlines()
    assert lines[1:] == ["  new packages: none", "  installed packages upgraded to the versions libproj-dev needs: none"]
