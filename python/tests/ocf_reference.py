"""The reference the OCF tests compare gobatch with: ocf-data-sampler 1.0.24 itself, run in a
child process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import pytest


def run_ocf(script: str, args: Sequence[str], cwd: Path, payload: Any = None, timeout: float = 300,
            env: Optional[Mapping[str, str]] = None) -> Any:
    """Runs ``script`` (which imports ocf-data-sampler 1.0.24 and prints one JSON document as its
    last line, ``{"missing": ...}`` when the import fails) with ``args`` in ``cwd``, ``payload``
    as JSON on its stdin, and returns that document. It runs in a child process, because
    ocf-data-sampler's YAML loader (pyaml_env) changes PyYAML's SafeLoader for the whole
    process, with this interpreter or the one GOBATCH_OCF_PYTHON names; without
    ocf-data-sampler there, the test is skipped."""
    python = os.environ.get("GOBATCH_OCF_PYTHON", sys.executable)
    r = subprocess.run([python, "-c", script, *args], cwd=cwd, input=None if payload is None else json.dumps(payload),
                       capture_output=True, text=True, timeout=timeout,
                       env=None if env is None else {**os.environ, **env})
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    if isinstance(out, dict) and "missing" in out:
        pytest.skip(f"ocf-data-sampler 1.0.24 is not installed for {python} (set GOBATCH_OCF_PYTHON): {out['missing']}")
    return out
