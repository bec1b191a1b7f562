"""Live: a real Prometheus scrapes the running demo; every dashboard and rule query runs.

Starts ``python -m otel_agent_eval demo`` serving /metrics and a Prometheus server
(temp config and data dir, 1s scrape and rule evaluation, the project's rules
loaded, all groups at 1s) on free 127.0.0.1 ports, then runs every PromQL expression through
/api/v1/query: each must be valid, and the core ones must return data.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from test_deploy_assets import (
    CONTRACT_METRICS,
    RULES_FILE,
    dashboard_expressions,
    metric_names,
    require_binary,
    rule_expressions,
    substitute,
    yaml_module,
)

STARTUP_TIMEOUT = 60.0
DATA_TIMEOUT = 90.0

# Labelled metrics a healthy demo may never increment: no series, no data.
# Expressions reading them only have to be valid. Everything else from the
# dashboards and the recording rules is expected to return data.
MAY_BE_EMPTY = {"agent_eval_dropped_total", "agent_eval_evaluator_errors_total", "agent_eval_sink_errors_total"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _wait_for(what: str, check: Callable[[], bool], timeout: float, procs: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in procs:
            assert proc.poll() is None, f"{proc.args[0]} exited with {proc.returncode} while waiting for {what}"
        try:
            if check():
                return
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(0.5)
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


def _start(cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


class Prom:
    """A Prometheus HTTP API client."""

    def __init__(self, base: str) -> None:
        self.base = base

    def query(self, expr: str) -> dict[str, Any]:
        status, body = _get(f"{self.base}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        payload = json.loads(body)
        payload["http_status"] = status
        return payload

    def has_data(self, expr: str) -> bool:
        result = self.query(expr)
        return result["status"] == "success" and bool(result["data"]["result"])


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Prom, str]]:
    """The running demo and a Prometheus scraping it: (client, demo /metrics URL)."""
    prometheus = require_binary("prometheus")
    if importlib.util.find_spec("otel_agent_eval.__main__") is None:
        pytest.skip("the demo (python -m otel_agent_eval demo) is not implemented yet")
    tmp = tmp_path_factory.mktemp("live")
    demo_port, prom_port = _free_port(), _free_port()
    metrics_url = f"http://127.0.0.1:{demo_port}/metrics"
    # Every group at the global 1s interval (the 7d baseline group has 5m), so
    # each recorded series exists within seconds.
    groups = yaml_module().safe_load(RULES_FILE.read_text())["groups"]
    for group in groups:
        group.pop("interval", None)
    rules_copy = tmp / "rules.yml"
    rules_copy.write_text(json.dumps({"groups": groups}))
    config = tmp / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"rule_files:\n  - {rules_copy}\n"
        "scrape_configs:\n  - job_name: agent-eval\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{demo_port}']\n"
    )
    procs: list[subprocess.Popen[bytes]] = []
    try:
        demo_cmd = [sys.executable, "-m", "otel_agent_eval", "demo", "--traces", "100000", "--rate", "30"]
        procs.append(_start([*demo_cmd, "--metrics-port", str(demo_port)], tmp / "demo.log"))
        _wait_for("demo /metrics", lambda: b"agent_eval_" in _get(metrics_url)[1], STARTUP_TIMEOUT, procs)
        procs.append(
            _start(
                [
                    prometheus,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={tmp / 'data'}",
                    f"--web.listen-address=127.0.0.1:{prom_port}",
                    "--enable-feature=exemplar-storage",
                ],
                tmp / "prometheus.log",
            )
        )
        prom = Prom(f"http://127.0.0.1:{prom_port}")
        _wait_for("Prometheus ready", lambda: _get(f"{prom.base}/-/ready")[0] == 200, STARTUP_TIMEOUT, procs)
        _wait_for(
            "rates over scraped samples",
            lambda: prom.has_data("rate(agent_eval_spans_received_total[1m]) > 0"),
            DATA_TIMEOUT,
            procs,
        )
        yield prom, metrics_url
    finally:
        for proc in reversed(procs):
            _stop(proc)


def _all_expressions() -> list[tuple[str, str, bool]]:
    """(where, concrete PromQL, expected to return data)."""
    out = []
    for where, expr in dashboard_expressions():
        concrete = substitute(expr)
        out.append((where, concrete, not (metric_names(concrete) & MAY_BE_EMPTY)))
    for where, expr, kind in rule_expressions():
        out.append((where, expr, kind == "record" and not (metric_names(expr) & MAY_BE_EMPTY)))
    return out


def test_every_expression_is_valid_and_core_ones_return_data(stack: tuple[Prom, str]) -> None:
    prom, _ = stack
    expressions = _all_expressions()
    assert any(expect for _, _, expect in expressions)
    invalid = []
    for where, expr, _ in expressions:
        result = prom.query(expr)
        if result["status"] != "success":
            invalid.append(f"{where}: {result.get('error')}\n  {expr}")
    assert not invalid, "invalid PromQL:\n" + "\n".join(invalid)

    pending = [(w, e) for w, e, expect in expressions if expect]
    deadline = time.monotonic() + DATA_TIMEOUT
    while pending and time.monotonic() < deadline:
        pending = [(w, e) for w, e in pending if not prom.has_data(e)]
        if pending:
            time.sleep(2)
    assert not pending, "no data:\n" + "\n".join(f"{w}\n  {e}" for w, e in pending)


def test_live_metrics_match_the_contract(stack: tuple[Prom, str]) -> None:
    _, metrics_url = stack
    text = _get(metrics_url)[1].decode()
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    missing = []
    for name, kind in CONTRACT_METRICS.items():
        base = name.removesuffix("_total") if kind == "counter" else name
        if types.get(name) != kind and types.get(base) != kind:
            missing.append(f"{name} ({kind})")
    assert not missing, "contract metrics missing from /metrics: " + ", ".join(missing)


def test_score_exemplars_carry_trace_id(stack: tuple[Prom, str]) -> None:
    prom, _ = stack
    now = time.time()

    def exemplars() -> list[dict[str, Any]]:
        query = urllib.parse.urlencode({"query": "agent_eval_score_bucket", "start": now - 600, "end": time.time()})
        status, body = _get(f"{prom.base}/api/v1/query_exemplars?{query}")
        assert status == 200, body
        return [e for series in json.loads(body)["data"] for e in series["exemplars"]]

    deadline = time.monotonic() + DATA_TIMEOUT
    found: list[dict[str, Any]] = []
    while not found and time.monotonic() < deadline:
        found = exemplars()
        if not found:
            time.sleep(2)
    assert found, "no exemplars on agent_eval_score_bucket"
    assert all("trace_id" in e["labels"] for e in found)
