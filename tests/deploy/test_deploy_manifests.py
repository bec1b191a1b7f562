"""deploy/ YAML parses and every file it references exists (Docker cannot run here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.deploy.test_deploy_assets import DEPLOY, ROOT, yaml_module

COMPOSE_DIR = DEPLOY / "compose"
K8S_DIR = DEPLOY / "k8s"
PROVISIONING = DEPLOY / "grafana" / "provisioning"


def _load_all(path: Path) -> list[Any]:
    return [d for d in yaml_module().safe_load_all(path.read_text()) if d is not None]


@pytest.mark.parametrize(
    "path", sorted(p for p in DEPLOY.rglob("*") if p.suffix in {".yml", ".yaml"}), ids=lambda p: str(p.relative_to(DEPLOY))
)
def test_yaml_parses(path: Path) -> None:
    assert _load_all(path), f"{path} is empty"


def _compose() -> dict[str, Any]:
    return _load_all(COMPOSE_DIR / "docker-compose.yml")[0]


def test_compose_has_the_stack() -> None:
    services = _compose()["services"]
    assert {"demo", "otel-collector", "otel-agent-eval", "prometheus", "grafana", "tempo"} <= set(services)
    assert services["demo"]["command"][0] == "demo"
    assert services["otel-agent-eval"]["command"][0] == "serve"


def test_compose_references_existing_files() -> None:
    for name, service in _compose()["services"].items():
        build = service.get("build")
        if build:
            context = (COMPOSE_DIR / build["context"]).resolve()
            assert context == ROOT, name
            assert (context / build["dockerfile"]).is_file(), name
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (COMPOSE_DIR / source).exists(), f"{name}: {source}"


def test_compose_prometheus_loads_the_rules() -> None:
    config = _load_all(COMPOSE_DIR / "prometheus.yml")[0]
    volumes = dict(v.split(":")[:2][::-1] for v in _compose()["services"]["prometheus"]["volumes"])
    for rule_file in config["rule_files"]:
        mount_dir, file_name = rule_file.rsplit("/", 1)
        assert (COMPOSE_DIR / volumes[mount_dir] / file_name).is_file(), rule_file
    assert "--enable-feature=exemplar-storage" in _compose()["services"]["prometheus"]["command"]


def test_compose_grafana_mounts_provisioning_and_dashboards() -> None:
    mounts = {v.split(":")[1]: v.split(":")[0] for v in _compose()["services"]["grafana"]["volumes"]}
    provider = _load_all(PROVISIONING / "dashboards" / "agent-eval.yml")[0]["providers"][0]
    dash_source = mounts[provider["options"]["path"]]
    assert list((COMPOSE_DIR / dash_source).glob("*.json"))
    assert mounts["/etc/grafana/provisioning/datasources"] and mounts["/etc/grafana/provisioning/dashboards"]


def test_collector_fans_out_to_tempo_and_evaluator() -> None:
    config = _load_all(COMPOSE_DIR / "otel-collector.yaml")[0]
    exporters = config["service"]["pipelines"]["traces"]["exporters"]
    assert set(exporters) <= set(config["exporters"])
    endpoints = {config["exporters"][e]["endpoint"].split(":")[0] for e in exporters}
    assert endpoints == {"tempo", "otel-agent-eval"}


def test_datasources_link_exemplars_to_tempo() -> None:
    datasources = {d["type"]: d for d in _load_all(PROVISIONING / "datasources" / "agent-eval.yml")[0]["datasources"]}
    links = datasources["prometheus"]["jsonData"]["exemplarTraceIdDestinations"]
    assert {"name": "trace_id", "datasourceUid": datasources["tempo"]["uid"]}.items() <= links[0].items()


def test_k8s_kustomization_resources_exist() -> None:
    kustomization = _load_all(K8S_DIR / "kustomization.yaml")[0]
    kinds = set()
    for resource in kustomization["resources"]:
        path = K8S_DIR / resource
        assert path.is_file(), resource
        kinds |= {doc["kind"] for doc in _load_all(path)}
    assert {"Deployment", "Service", "ServiceMonitor", "PrometheusRule", "ConfigMap"} <= kinds


def test_k8s_service_ports_match_deployment() -> None:
    deployment = _load_all(K8S_DIR / "deployment.yaml")[0]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    port_names = {p["name"] for p in container["ports"]}
    for service in _load_all(K8S_DIR / "service.yaml"):
        assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= port_names
    monitor = _load_all(K8S_DIR / "servicemonitor.yaml")[0]
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    config_map = _load_all(K8S_DIR / "configmap.yaml")[0]
    assert container["envFrom"][0]["configMapRef"]["name"] == config_map["metadata"]["name"]
