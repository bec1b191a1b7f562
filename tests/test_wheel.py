"""The wheel ``pip`` builds from this checkout is what users install: every module, the PEP 561 marker,
the license, the ``otel-agent-eval`` command, nothing from the tests; and the demo runs from it alone."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "otel_agent_eval"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # From a copy of what the build reads: setuptools builds in the source tree (build/, *.egg-info), and a
    # build/ left there by an earlier build would put modules deleted since into the wheel.
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(PACKAGE, source / PACKAGE.name, ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp_path_factory.mktemp("dist")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(dist), str(source)],
                           capture_output=True, text=True, timeout=300, check=False)
    if built.returncode != 0:
        # pip fetches the build backend (setuptools>=77) from the package index: absent offline.
        reason = f"pip could not build the wheel (no package index?): {built.stderr[-1500:]}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    (made,) = dist.glob("otel_agent_eval-*.whl")
    return made


def test_the_wheel_holds_every_module_the_type_marker_and_the_command(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        commands = archive.read(entry_points).decode()
    modules = {p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*.py")}
    assert modules | {"otel_agent_eval/py.typed"} <= names
    assert not {n for n in names if not n.startswith(("otel_agent_eval/", "otel_agent_eval-"))}, "only the package"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), "the Apache-2.0 text travels with it"
    assert "otel-agent-eval = otel_agent_eval.cli:main" in commands


def test_the_demo_runs_from_the_wheel_alone(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}, "PYTHONPATH": str(site)}
    where = subprocess.run([sys.executable, "-c", "import otel_agent_eval; print(otel_agent_eval.__file__)"],
                           capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60, check=True)
    assert Path(where.stdout.strip()).is_relative_to(site), where.stdout
    demo = subprocess.run([sys.executable, "-m", "otel_agent_eval", "demo", "--traces", "12", "--rate", "0",
                           "--metrics-port", "-1"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
                          check=False)
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "12 agent runs assembled, 12 evaluated" in demo.stdout, demo.stdout[-2000:]
