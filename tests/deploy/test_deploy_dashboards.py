"""Generated assets are in sync with their sources."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from tests.deploy.test_deploy_assets import DASHBOARD_DIR, DEPLOY, RULES_FILE, yaml_module


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_deploy_{path.parent.name}_{path.stem}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dashboards_regenerate_identically() -> None:
    pytest.importorskip("grafana_foundation_sdk")
    generated = _load(DEPLOY / "grafana" / "generate.py").generate()
    committed = {p.name: p.read_text() for p in DASHBOARD_DIR.glob("*.json")}
    assert set(generated) == set(committed)
    stale = [name for name, text in generated.items() if committed[name] != text]
    assert not stale, f"run: python deploy/grafana/generate.py  (stale: {stale})"


def test_k8s_generated_manifests_are_in_sync() -> None:
    generated = _load(DEPLOY / "k8s" / "generate.py").generate()
    stale = [n for n, text in generated.items() if (DEPLOY / "k8s" / n).read_text() != text]
    assert not stale, f"run: python deploy/k8s/generate.py  (stale: {stale})"


def test_prometheus_rule_carries_the_rules_file() -> None:
    yaml = yaml_module()
    manifest = yaml.safe_load((DEPLOY / "k8s" / "prometheusrule.yaml").read_text())
    assert manifest["kind"] == "PrometheusRule"
    assert manifest["spec"] == yaml.safe_load(RULES_FILE.read_text())
