"""Virtualenvs of their own for frameworks whose dependencies conflict with the main test venv, and for
the declared dependency floors (``floors.txt``, ``tests/test_dependency_floors.py``).

``framework_python("llamaindex")`` returns the interpreter of ``.venvs/llamaindex`` (under the
repository root, or ``$OTEL_AGENT_EVAL_VENVS``), created from the pinned, fully frozen
``tests/frameworks/envs/llamaindex.txt`` on first use and reused while that file is unchanged (its
SHA-256 is stored in the venv). Creation goes to a temporary directory renamed into place, so an
interrupted install never leaves a half-built venv behind. The framework then runs there as a
subprocess that writes its spans to an OTLP file; the checks stay in the main test process.

Set ``OTEL_AGENT_EVAL_SKIP_FRAMEWORK_VENVS=1`` to skip these tests instead (offline machines).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENVS = Path(__file__).resolve().parent / "envs"
STAMP = "requirements.sha256"


def venvs_dir() -> Path:
    return Path(os.environ.get("OTEL_AGENT_EVAL_VENVS") or ROOT / ".venvs")


def framework_python(name: str) -> Path:
    """The interpreter of the venv for ``tests/frameworks/envs/{name}.txt``, created if missing or stale."""
    if os.environ.get("OTEL_AGENT_EVAL_SKIP_FRAMEWORK_VENVS") == "1":
        pytest.skip("OTEL_AGENT_EVAL_SKIP_FRAMEWORK_VENVS=1")
    requirements = ENVS / f"{name}.txt"
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()
    venv = venvs_dir() / name
    python = venv / "bin" / "python"
    stamp = venv / STAMP
    if python.exists() and stamp.exists() and stamp.read_text().strip() == digest:
        return python
    building = venv.with_name(f"{name}.building-{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    building.parent.mkdir(parents=True, exist_ok=True)
    # Built next to its final path, then renamed: scripts in bin/ keep the path they were built
    # at, so only ``bin/python`` is used from it. The main venv's pip installs into it.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(building)], check=True)
    pip = [sys.executable, "-m", "pip", "--python", str(building / "bin" / "python")]
    result = subprocess.run(
        [*pip, "install", "--quiet", "--disable-pip-version-check", "--no-deps", "-r", str(requirements)],
        capture_output=True, text=True, check=False,
    )
    if result.returncode != 0:
        shutil.rmtree(building, ignore_errors=True)
        raise RuntimeError(f"creating the {name} venv failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}")
    (building / STAMP).write_text(digest + "\n")
    shutil.rmtree(venv, ignore_errors=True)
    building.rename(venv)
    return python


def run_in_venv(python: Path, runner: Path, script: dict[str, Any], out: Path, *args: str) -> tuple[Any, list[Any], list[Any]]:
    """Run a framework scenario (``runner SCENARIO BASE_URL OUT [ARGS]``, its ``args[0]`` the scenario)
    in its virtualenv against a scripted local model server. Returns the ``output`` the runner printed
    last (JSON), the spans it wrote to ``out`` (OTLP protobuf) in start order, and the requests the
    server received. The run must succeed and the server must have seen only what it was scripted for."""
    from otel_agent_eval.formats.otlp import read_trace_file
    from tests.openai_server import scripted

    scenario, *rest = args
    with scripted(script) as server:
        done = subprocess.run([str(python), str(runner), scenario, server.base_url, str(out), *rest],
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr[-4000:]
        assert server.errors == []
        requests = list(server.requests)
    spans = sorted(read_trace_file(out), key=lambda r: r.start_time_unix_nano)
    return json.loads(done.stdout.strip().splitlines()[-1])["output"], spans, requests
