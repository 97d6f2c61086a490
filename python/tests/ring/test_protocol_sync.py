"""The Python side's copies of the C API, held to pybind/gobatch.h.

The protocol's numbers need no such test: gobatch/_protocol.py and pybind/gobatch_protocol.h are
generated from package ring (`go generate ./ring`), whose tests hold them to docs/PROTOCOL.md
and fail when a generated file is stale. What remains written twice is the C library's own
API: its return codes and the structs that ctypes mirrors. These tests compare them with the
header, by name and in both directions."""

from __future__ import annotations

import ctypes
import re
from pathlib import Path
from typing import Dict, List, Tuple

from gobatch import _clib, _protocol

HEADER = Path(__file__).resolve().parents[3] / "pybind" / "gobatch.h"
CLIB = Path(_clib.__file__)


def header_text() -> str:
    text = HEADER.read_text()
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)  # comments may hold '=' and ';'


def header_return_codes() -> Dict[str, int]:
    m = re.search(r"enum\s*\{(.*?)\};", header_text(), re.S)
    assert m, f"no return-code enum in {HEADER}"
    codes = dict((k, int(v)) for k, v in re.findall(r"\bGB_([A-Z]+)\s*=\s*(-?\d+)", m.group(1)))
    assert "OK" in codes and "TIMEOUT" in codes, codes
    return codes


def clib_return_codes() -> Dict[str, int]:
    """The module-level code constants of _clib.py, read from its source block."""
    src = CLIB.read_text()
    block = src[src.index("# Return codes of gobatch.h") :].split("\n\n", 1)[0]
    return {k: int(v) for k, v in re.findall(r"^([A-Z]+) = (-?\d+)$", block, re.M)}


def test_return_codes_match_gobatch_h():
    want = header_return_codes()
    got = clib_return_codes()
    assert got == want
    for name, value in want.items():
        assert getattr(_clib, name) == value, name


C_TYPES = {"uint64_t": ctypes.c_uint64, "uint32_t": ctypes.c_uint32, "char": ctypes.c_char}


def header_struct(name: str) -> List[Tuple[str, object]]:
    """The fields of `typedef struct name {...} name;` as (field, ctypes type)."""
    m = re.search(r"typedef struct %s \{(.*?)\} %s;" % (name, name), header_text(), re.S)
    assert m, f"struct {name} not found in {HEADER}"
    out: List[Tuple[str, object]] = []
    for ctype, field, dim in re.findall(r"(\w+)\s+(\w+)(?:\[(\w+)\])?\s*;", m.group(1)):
        t = C_TYPES[ctype]
        if dim:
            n = int(dim) if dim.isdigit() else getattr(_protocol, dim.removeprefix("GB_"))
            t = t * n
        out.append((field, t))
    return out


def test_ctypes_structs_match_gobatch_h():
    for cname, struct in (("gb_geometry", _clib.Geometry), ("gb_tensor", _clib.Tensor), ("gb_stats_t", _clib.Stats),
                          ("gb_counter", _clib.Counter)):
        want = header_struct(cname)
        got = list(struct._fields_)
        assert [f for f, _ in got] == [f for f, _ in want], cname
        for (field, t_got), (_, t_want) in zip(got, want):
            assert ctypes.sizeof(t_got) == ctypes.sizeof(t_want), f"{cname}.{field}"  # type: ignore[arg-type]
            assert getattr(t_got, "_type_", t_got) == getattr(t_want, "_type_", t_want), f"{cname}.{field}"
