"""``collector/`` configs: YAML parses and names are consistent.

The Collector binary is not available here, so ``otelcol-contrib validate`` is not run; these
checks cover what a typo would break: every component a pipeline names is defined, the
evaluation pipelines route by trace id to the replicas, and the backend pipelines stay untouched.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

COLLECTOR = Path(__file__).resolve().parents[2] / "collector"
CONFIGS = sorted(COLLECTOR.glob("*.yaml"))


def test_configs_exist() -> None:
    assert {p.name for p in CONFIGS} >= {"loadbalancing-static.yaml", "loadbalancing-dns.yaml", "loadbalancing-k8s.yaml"}


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_config_is_consistent(path: Path) -> None:
    config = yaml.safe_load(path.read_text())
    pipelines = config["service"]["pipelines"]
    for name, pipeline in pipelines.items():
        for kind in ("receivers", "processors", "exporters"):
            for component in pipeline.get(kind, []):
                assert component in (config.get(kind) or {}), f"{path.name}: {name} uses undefined {kind[:-1]} {component}"
    used = {c for p in pipelines.values() for kind in ("receivers", "processors", "exporters") for c in p.get(kind, [])}
    for kind in ("receivers", "processors", "exporters"):
        assert set(config.get(kind) or {}) <= used, f"{path.name}: unused {kind}"

    balancers = [name for name in config["exporters"] if name.split("/")[0] in ("loadbalancing", "load_balancing")]
    assert len(balancers) == 1
    balancer = config["exporters"][balancers[0]]
    assert balancer["routing_key"] == "traceID"
    assert len(balancer["resolver"]) == 1, "exactly one resolver"
    (resolver, settings), = balancer["resolver"].items()
    ports = {
        "static": lambda s: {int(h.rsplit(":", 1)[1]) for h in s["hostnames"]},
        "dns": lambda s: {s["port"]},
        "k8s": lambda s: set(s["ports"]),
    }[resolver](settings)
    assert ports == {4317}, "replicas listen for OTLP/gRPC on 4317 (otel-agent-eval serve default)"

    # Traces and logs of a trace go to the same replica; the user's backend pipelines stay as they were.
    evaluation = {n: p for n, p in pipelines.items() if balancers[0] in p["exporters"]}
    assert {n.split("/")[0] for n in evaluation} == {"traces", "logs"}
    for name, pipeline in pipelines.items():
        if name in evaluation:
            assert pipeline["exporters"] == [balancers[0]]
            assert "otlp/results" not in pipeline["receivers"], "results must never loop back to the evaluators"
            assert "filter/results-never-loop" in pipeline["processors"]
        else:
            assert "otlp" in pipeline["receivers"] and balancers[0] not in pipeline["exporters"]
    main_receivers = {r for n, p in pipelines.items() if n in evaluation for r in p["receivers"]}
    backend_receivers = {r for n, p in pipelines.items() if n not in evaluation for r in p["receivers"]}
    assert main_receivers <= backend_receivers, "one receiver feeds both the backend and the evaluators"


def test_readme_names_every_config() -> None:
    readme = (COLLECTOR / "README.md").read_text()
    for path in CONFIGS:
        assert path.name in readme
