"""The wheel ``pip`` builds from this checkout is what users install: every module, the PEP 561 marker,
the license, the ``otel-agent-eval`` command, the C decoder compiled, nothing from the tests; and the demo
runs from it alone. Without a C compiler the build still succeeds, into a pure wheel that works the same."""

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


def build_wheel(into: Path, source_root: Path, env: dict[str, str] | None = None) -> Path:
    # From a copy of what the build reads: setuptools builds in the source tree (build/, *.egg-info), and a
    # build/ left there by an earlier build would put modules deleted since into the wheel.
    source = source_root / "source"
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    # Not the checkout's own compiled module (an editable install builds one in place): the build's.
    shutil.copytree(PACKAGE, source / PACKAGE.name, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(into), str(source)],
                           capture_output=True, text=True, timeout=300, check=False, env=env)
    if built.returncode != 0:
        # pip fetches the build backend (setuptools>=77) from the package index: absent offline.
        reason = f"pip could not build the wheel (no package index?): {built.stderr[-1500:]}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    (made,) = into.glob("otel_agent_eval-*.whl")
    return made


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("dist"), tmp_path_factory.mktemp("source"))


def run_demo(wheel: Path, tmp_path: Path) -> str:
    """The demo run from ``wheel``'s files alone; returns ``formats/otlp.py``'s path and its C decoder (or None)."""
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}, "PYTHONPATH": str(site)}
    where = subprocess.run([sys.executable, "-c", "import otel_agent_eval.formats.otlp as o; print(o.__file__, o._NATIVE)"],
                           capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60, check=True)
    assert Path(where.stdout.split()[0]).is_relative_to(site), where.stdout
    demo = subprocess.run([sys.executable, "-m", "otel_agent_eval", "demo", "--traces", "12", "--rate", "0",
                           "--metrics-port", "-1"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
                          check=False)
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "12 agent runs assembled, 12 evaluated" in demo.stdout, demo.stdout[-2000:]
    return where.stdout


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


def test_the_demo_runs_from_the_wheel_alone_with_the_c_decoder(wheel: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        compiled = [n for n in archive.namelist() if n.startswith("otel_agent_eval/formats/_otlp_native.")]
    assert [n.rsplit(".", 1)[-1] for n in compiled] == ["so"], "the C decoder compiled into the wheel, its source not"
    assert "_otlp_native" in run_demo(wheel, tmp_path)


def test_without_a_c_compiler_the_wheel_is_pure_and_works(tmp_path: Path) -> None:
    """``CC=false``: every compile fails, as on a machine without a compiler; the extension is optional."""
    made = build_wheel(tmp_path / "dist", tmp_path, env=dict(os.environ, CC="false"))
    with zipfile.ZipFile(made) as archive:
        assert not [n for n in archive.namelist() if "_otlp_native" in n]
    assert run_demo(made, tmp_path).split()[1] == "None"
