"""Virtualenvs of their own for frameworks whose dependencies conflict with the main test venv.

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
import os
import shutil
import subprocess
import sys
from pathlib import Path

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
        capture_output=True, text=True,
    )
    if result.returncode != 0:
        shutil.rmtree(building, ignore_errors=True)
        raise RuntimeError(f"creating the {name} venv failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}")
    (building / STAMP).write_text(digest + "\n")
    shutil.rmtree(venv, ignore_errors=True)
    building.rename(venv)
    return python
