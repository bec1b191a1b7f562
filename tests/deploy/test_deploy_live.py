"""Live: a real Prometheus scrapes the running demo; every dashboard and rule query runs.

Starts ``python -m otel_agent_eval demo`` serving /metrics and a Prometheus server
(temp config and data dir, 1s scrape and rule evaluation, the project's rules
loaded, all groups at 1s) on free 127.0.0.1 ports, then runs every PromQL expression through
/api/v1/query: each must be valid, and the core ones must return data.

The demo runs with LLM-judge evaluators against the local fake OpenAI-compatible
server (tests/openai_server.py) in this process: a price (cost), a small
token budget (spent within seconds: budget skips, remaining ratio 0) and an
unusable answer to every third request (judge errors), so every judge series has
data too. Without the ``judge`` extra (openai) the demo runs without a judge and
judge expressions only have to be valid (under CI=true that fails instead).
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.test_deploy_assets import (
    CONTRACT_LABELS,
    CONTRACT_METRICS,
    JUDGE_METRICS,
    RULES_FILE,
    dashboard_expressions,
    metric_names,
    require_binary,
    rule_expressions,
    substitute,
    yaml_module,
)
from tests.openai_server import FakeOpenAI, answer

STARTUP_TIMEOUT = 60.0
DATA_TIMEOUT = 90.0

# Labelled metrics a healthy demo may never increment: no series, no data.
# Expressions reading them only have to be valid. Everything else from the
# dashboards and the recording rules is expected to return data.
MAY_BE_EMPTY = {"agent_eval_dropped_total", "agent_eval_evaluator_errors_total", "agent_eval_sink_errors_total"}

# Series of the judge's metrics (histograms expanded): empty when the demo runs without a judge.
JUDGE_SERIES = {
    f"{name}{suffix}"
    for name in JUDGE_METRICS
    for suffix in (("_bucket", "_sum", "_count") if CONTRACT_METRICS[name] == "histogram" else ("",))
}
JUDGE_MODEL = "fake-judge"
# Small enough that the demo spends it within seconds (a judge request is a few hundred tokens).
JUDGE_BUDGET_TOKENS = 2000


def _judge_available() -> bool:
    """Whether the demo can run judge evaluators (the ``judge`` extra)."""
    if importlib.util.find_spec("openai") is not None:
        return True
    if os.environ.get("CI") == "true":
        pytest.fail("openai is required for the judge part of the live test (the judge extra)")
    return False


def _fake_judge() -> FakeOpenAI:
    """The fake endpoint: yes to every question, except an unusable answer to every third request."""
    lock = threading.Lock()
    calls = itertools.count()

    def answers(ids: list[str], body: dict[str, Any]) -> dict[str, Any]:
        with lock:
            number = next(calls)
        return {ids[0]: "maybe"} if ids and number % 3 == 2 else {}

    return FakeOpenAI(answer(answers))


def _judge_env(base_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_AGENT_EVAL_JUDGE_")}
    env.update(
        {
            "OTEL_AGENT_EVAL_JUDGE_MODEL": JUDGE_MODEL,
            "OTEL_AGENT_EVAL_JUDGE_BASE_URL": base_url,
            "OTEL_AGENT_EVAL_JUDGE_API_KEY": "test",
            "OTEL_AGENT_EVAL_JUDGE_EVALUATORS": "task_completion,tool_call_necessity",
            "OTEL_AGENT_EVAL_JUDGE_PRICES": f"{JUDGE_MODEL}=0.15/0.6",
            "OTEL_AGENT_EVAL_JUDGE_BUDGET_TOKENS_PER_HOUR": str(JUDGE_BUDGET_TOKENS),
        }
    )
    return env


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


def _start(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)


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


class Stack:
    """The running demo and a Prometheus scraping it."""

    def __init__(self, prom: Prom, metrics_url: str, judge: FakeOpenAI | None) -> None:
        self.prom = prom
        self.metrics_url = metrics_url
        self.judge = judge

    def may_be_empty(self) -> set[str]:
        """Series an expression may read and still return no data."""
        return MAY_BE_EMPTY if self.judge is not None else MAY_BE_EMPTY | JUDGE_SERIES


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The running demo (with a fake judge when possible) and a Prometheus scraping it."""
    prometheus = require_binary("prometheus")
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
    judge = _fake_judge().start() if _judge_available() else None
    try:
        demo_cmd = [sys.executable, "-m", "otel_agent_eval", "demo", "--traces", "100000", "--rate", "30"]
        env = _judge_env(judge.base_url) if judge is not None else None
        procs.append(_start([*demo_cmd, "--metrics-port", str(demo_port)], tmp / "demo.log", env))
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
        yield Stack(prom, metrics_url, judge)
    finally:
        for proc in reversed(procs):
            _stop(proc)
        if judge is not None:
            judge.stop()


def _all_expressions(may_be_empty: set[str]) -> list[tuple[str, str, bool]]:
    """(where, concrete PromQL, expected to return data)."""
    out = []
    for where, expr in dashboard_expressions():
        concrete = substitute(expr)
        out.append((where, concrete, not (metric_names(concrete) & may_be_empty)))
    for where, expr, kind in rule_expressions():
        out.append((where, expr, kind == "record" and not (metric_names(expr) & may_be_empty)))
    return out


def test_every_expression_is_valid_and_core_ones_return_data(stack: Stack) -> None:
    prom = stack.prom
    expressions = _all_expressions(stack.may_be_empty())
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


def test_live_metrics_match_the_contract(stack: Stack) -> None:
    text = _get(stack.metrics_url)[1].decode()
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE))
    missing = []
    for name, kind in CONTRACT_METRICS.items():
        if stack.judge is None and name in JUDGE_METRICS:
            continue  # no judge configured: the judge's metrics are not registered
        base = name.removesuffix("_total") if kind == "counter" else name
        if types.get(name) != kind and types.get(base) != kind:
            missing.append(f"{name} ({kind})")
    assert not missing, "contract metrics missing from /metrics: " + ", ".join(missing)
    unknown = sorted(
        f"{name}: {label}"
        for name, label in _exposed_labels(text)
        if label not in CONTRACT_LABELS[name] | {"le"}
    )
    assert not unknown, "labels the dashboards and rules do not know (add them to CONTRACT_LABELS): " + ", ".join(unknown)


def _exposed_labels(text: str) -> set[tuple[str, str]]:
    """(metric, label name) of every sample of the CONTRACT_LABELS metrics on a /metrics page."""
    out = set()
    for m in re.finditer(r"^(agent_eval_\w+?)(?:_bucket|_sum|_count|_created)?\{([^}]*)\}", text, re.MULTILINE):
        name = m.group(1)
        if name not in CONTRACT_LABELS:
            continue
        out |= {(name, label) for label in re.findall(r'(\w+)="', m.group(2))}
    return out


def test_judge_series_have_data(stack: Stack) -> None:
    """The demo ran its judge evaluators against the fake endpoint: every judge series is scraped."""
    if stack.judge is None:
        pytest.skip("openai (the judge extra) is not installed: the demo ran without a judge")
    assert stack.judge.request_count > 0, "the demo never called the fake judge"
    prom = stack.prom
    checks = {
        "tokens by type": f'sum by (type) (agent_eval_judge_tokens_total{{model="{JUDGE_MODEL}"}}) > 0',
        "cost": f'agent_eval_judge_cost_usd_total{{model="{JUDGE_MODEL}"}} > 0',
        "latency": f'agent_eval_judge_request_duration_seconds_count{{model="{JUDGE_MODEL}"}} > 0',
        "ok requests": f'agent_eval_judge_requests_total{{model="{JUDGE_MODEL}", outcome="ok"}} > 0',
        "errors": 'agent_eval_judge_errors_total{reason="ambiguous_answer"} > 0',
        "budget skips": "agent_eval_judge_budget_skips_total > 0",
        "cache hits": "agent_eval_judge_cache_hits_total > 0",
        "budget spent": "agent_eval_judge_budget_remaining_ratio == 0",
    }
    pending = dict(checks)
    deadline = time.monotonic() + DATA_TIMEOUT
    while pending and time.monotonic() < deadline:
        pending = {what: expr for what, expr in pending.items() if not prom.has_data(expr)}
        if pending:
            time.sleep(2)
    assert not pending, "no judge data:\n" + "\n".join(f"{w}\n  {e}" for w, e in pending.items())


def test_score_exemplars_carry_trace_id(stack: Stack) -> None:
    prom = stack.prom
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
