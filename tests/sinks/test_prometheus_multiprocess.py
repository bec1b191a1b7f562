"""prometheus-client's multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``): every worker's evaluation metrics in one
``/metrics``, as prometheus-client's own metrics are there.

prometheus-client decides the mode when it is imported, so each case runs in interpreters of its own: one
that compares the files with the registry sample for sample, and real gunicorn with three workers."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from otel_agent_eval.cli.demo import SCENARIOS
from tests.openai_server import FakeOpenAI, answer
from tests.serve.server_process import wait_for

ROOT = Path(__file__).resolve().parents[2]
EVALUATORS = 4  # the default deterministic set

COMPARE = textwrap.dedent("""
    import json, os
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import SpanKind
    from prometheus_client import CollectorRegistry
    from otel_agent_eval import install
    from otel_agent_eval.cli.demo import SCENARIOS
    from otel_agent_eval.sinks.prometheus_multiprocess import multiprocess_mode, multiprocess_registry

    def samples(registry):
        out = {}
        for family in registry.collect():
            for s in family.samples:
                if not s.name.endswith("_created"):
                    labels = {k: v for k, v in s.labels.items() if k != "pid"}
                    out[s.name + json.dumps(labels, sort_keys=True)] = s.value
        return out

    provider, registry = TracerProvider(), CollectorRegistry()
    processor = install(provider, registry=registry, sample_rate=1.0, settle_delay_seconds=0.05,
                        max_evaluations_per_second=0)
    tracer = provider.get_tracer("compare")
    for scenario in SCENARIOS * 2:
        with tracer.start_as_current_span("GET /agent", kind=SpanKind.SERVER):
            scenario.agent.run(tracer, scenario.task, scenario.turns)
    assert processor.force_flush(30_000)
    ours = {k: v for k, v in samples(registry).items() if k.startswith("agent_eval_")}
    files = {k: v for k, v in samples(multiprocess_registry()).items() if k.startswith("agent_eval_")}
    print(json.dumps({"mode": multiprocess_mode(), "registry": ours, "files": files}))
    processor.shutdown()
""")


def test_the_files_hold_what_the_registry_holds(tmp_path: Path) -> None:
    """Every counter, histogram bucket, sum and count, and gauge the processor exposes is in the multiprocess
    files with the same value (one process: nothing to add up), and nothing else of ours is there."""
    directory = tmp_path / "multiproc"
    directory.mkdir()
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", COMPARE], env=env, capture_output=True, text=True, timeout=120, check=True)
    seen = json.loads(out.stdout)
    assert seen["mode"] is True
    registry, files = seen["registry"], seen["files"]
    runs = 2 * len(SCENARIOS)
    assert sum(v for k, v in registry.items() if k.startswith("agent_eval_traces_evaluated_total")) == runs
    assert sum(v for k, v in registry.items() if k.startswith("agent_eval_results_total")) == EVALUATORS * runs
    assert any(k.startswith("agent_eval_score_bucket") for k in registry)
    assert any(k.startswith("agent_eval_buffered_bytes") for k in registry)
    assert files == registry


JUDGE_GAUGES = textwrap.dedent("""
    import json
    from prometheus_client import CollectorRegistry
    from otel_agent_eval.config import Settings
    from otel_agent_eval.pipeline.build import build_pipeline
    from otel_agent_eval.sinks.prometheus_multiprocess import multiprocess_registry

    NAMES = ("agent_eval_judge_breaker_state", "agent_eval_judge_budget_remaining_ratio")

    def gauges():
        return {s.name: [s.value, sorted(s.labels)] for family in multiprocess_registry().collect()
                for s in family.samples if s.name in NAMES}

    env = {"OTEL_AGENT_EVAL_JUDGE_MODEL": "judge-1", "OTEL_AGENT_EVAL_JUDGE_BASE_URL": "http://127.0.0.1:9/v1"}
    built = build_pipeline(Settings.load(env), env=env, registry=CollectorRegistry(), global_providers=False,
                           multiprocess=True)
    judge = built.evaluation.judge
    for _ in range(judge.settings.breaker_failures):
        judge.breaker.record(False)
    built.pipeline.start()
    opened_before_publish = gauges()
    assert built.pipeline.flush(10)
    print(json.dumps({"before": opened_before_publish, "after": gauges(), "state": judge.breaker.current()}))
    built.shutdown(5)
""")


def test_the_judge_gauges_read_at_scrape_time_are_written_to_the_files(tmp_path: Path) -> None:
    """The judge's budget and breaker gauges are read by a function at scrape time, which prometheus-client's
    multiprocess files never see: an open breaker showed as closed (0) for ever. The pipeline's publish writes
    them, each combined over the live workers (the most spent budget, any open breaker), without a pid label."""
    directory = tmp_path / "multiproc"
    directory.mkdir()
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", JUDGE_GAUGES], env=env, capture_output=True, text=True, timeout=120,
                         check=True)
    seen = json.loads(out.stdout)
    assert seen["state"] == 1  # open
    assert seen["before"]["agent_eval_judge_breaker_state"][0] == 0  # what the files said before publishing
    assert seen["after"] == {"agent_eval_judge_breaker_state": [1.0, []],
                             "agent_eval_judge_budget_remaining_ratio": [1.0, []]}


def test_a_missing_directory_is_said_and_the_app_starts(tmp_path: Path) -> None:
    """``PROMETHEUS_MULTIPROC_DIR`` naming no directory: ``MultiProcessCollector`` raised ValueError from the
    processor's constructor, stopping the app. Now an ERROR names the variable, and the port serves this
    process's metrics."""
    missing = tmp_path / "not-made"
    script = textwrap.dedent("""
        import urllib.request
        from opentelemetry.sdk.trace import TracerProvider
        from otel_agent_eval import install
        processor = install(TracerProvider(), prometheus_port=0, prometheus_host="127.0.0.1")
        text = urllib.request.urlopen(f"http://127.0.0.1:{processor.metrics_port}/metrics").read().decode()
        print("agent_eval_spans_received_total" in text)
        processor.shutdown()
    """)
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(missing), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", script], check=False, env=env, capture_output=True, text=True,
                         timeout=60)
    assert (out.returncode, out.stdout.strip()) == (0, "True"), out.stderr
    assert f"PROMETHEUS_MULTIPROC_DIR={str(missing)!r} is not a directory" in out.stderr


def test_a_missing_directory_with_a_judge_configured_leaves_the_judge_working(tmp_path: Path) -> None:
    """The same with a judge: its metrics are prometheus-client objects, which raise FileNotFoundError in that state,
    so making them at construction stopped the app. Now they are off (said in the ERROR) and the judge judges."""
    missing = tmp_path / "not-made"
    script = textwrap.dedent("""
        from opentelemetry.sdk.trace import TracerProvider
        from otel_agent_eval import install
        from otel_agent_eval.cli.demo import SCENARIOS
        provider = TracerProvider()
        processor = install(provider, prometheus_port=0, prometheus_host="127.0.0.1", settle_delay_seconds=0.05)
        scenario = SCENARIOS[0]
        scenario.agent.run(provider.get_tracer("app"), scenario.task, scenario.turns)
        assert processor.force_flush(30_000)
        print(processor.stats.traces_judged.total())
        processor.shutdown()
    """)
    with FakeOpenAI(answer()) as judge:
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(missing), "PYTHONPATH": str(ROOT),
               "OTEL_AGENT_EVAL_JUDGE_MODEL": "judge-1", "OTEL_AGENT_EVAL_JUDGE_BASE_URL": judge.base_url,
               "OTEL_AGENT_EVAL_JUDGE_API_KEY": "test", "OTEL_AGENT_EVAL_JUDGE_EVALUATORS": "task_completion"}
        out = subprocess.run([sys.executable, "-c", script], check=False, env=env, capture_output=True, text=True,
                             timeout=120)
        requests = len(judge.requests)
    assert (out.returncode, out.stdout.strip()) == (0, "1"), out.stderr
    assert requests == 1
    assert "is not a directory" in out.stderr and "the judge's metrics are off" in out.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(port: int, path: str) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10).read().decode()


def _answers(port: int) -> bool:
    """The app answers (its first request: ``/?0``, the first scenario)."""
    try:
        return bool(_get(port, "/?0"))
    except OSError:
        return False


def _metrics(port: int) -> dict[str, float]:
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    except OSError:  # between a worker serving the port exiting and the next one binding it
        return {}
    totals: Counter[str] = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            totals[sample.name] += sample.value
    return dict(totals)


@pytest.mark.parametrize("preload", [False, True], ids=["each-worker-installs", "preload-app"])
def test_gunicorn_workers_add_up_on_one_port(tmp_path: Path, preload: bool) -> None:
    """Three gunicorn workers, each evaluating the runs of the requests it served, all given the same
    ``prometheus_port`` as the README's example does. Before, whichever process bound the port served its own
    counts only (a third of the runs, or none: the master with ``--preload``); with ``PROMETHEUS_MULTIPROC_DIR``
    set, that port serves every worker's, and counters keep a worker's counts after it is gone."""
    directory = tmp_path / "multiproc"
    directory.mkdir()
    http_port, metrics_port = _free_port(), _free_port()
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory), "PYTHONPATH": str(ROOT),
           "MULTIPROCESS_APP_METRICS_PORT": str(metrics_port)}
    command = [sys.executable, "-m", "gunicorn", "--workers", "3", "--bind", f"127.0.0.1:{http_port}",
               "--graceful-timeout", "20", *(["--preload"] if preload else []), "tests.multiprocess_app:app"]
    log = (tmp_path / "gunicorn.log").open("w+")
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        def get(path: str) -> str:
            return _get(http_port, path)

        wait_for(lambda: _answers(http_port), 60, "gunicorn serving")
        requests = 60
        with ThreadPoolExecutor(6) as clients:  # six at a time: a sync worker serves one
            pids = Counter(answer.split()[0] for answer in clients.map(lambda i: get(f"/?{i}"), range(1, requests + 1)))
        runs = requests + 1  # and the first request
        wait_for(lambda: _metrics(metrics_port).get("agent_eval_traces_evaluated_total", 0) >= runs, 30,
                 f"{runs} runs counted on the one metrics port")
        time.sleep(1.5)  # another publish round: nothing more than the runs served may appear
        metrics = _metrics(metrics_port)
        assert len(pids) >= 2, f"gunicorn gave every request to one worker: {pids}"
        assert metrics["agent_eval_traces_evaluated_total"] == runs
        assert metrics["agent_eval_agent_traces_total"] == runs
        assert metrics["agent_eval_results_total"] == EVALUATORS * runs
        assert metrics["agent_eval_evaluation_duration_seconds_count"] == EVALUATORS * runs
        assert metrics["agent_eval_spans_received_total"] > 0
        assert metrics["agent_eval_buffered_traces"] == 0 and metrics["agent_eval_queue_depth"] == 0

        # A worker that exits keeps its counts (its files stay); the one gunicorn starts in its place adds to them.
        os.kill(int(next(iter(pids))), signal.SIGTERM)
        time.sleep(3)  # gunicorn starts another worker in its place
        get("/?1")
        wait_for(lambda: _metrics(metrics_port).get("agent_eval_traces_evaluated_total", 0) >= runs + 1, 30,
                 "the run after a worker was replaced")
        time.sleep(1.5)
        assert _metrics(metrics_port)["agent_eval_traces_evaluated_total"] == runs + 1
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.seek(0)
        output = log.read()
    assert "Traceback" not in output, output


@pytest.mark.parametrize("multiprocess", [False, True], ids=["one-process-metrics", "multiprocess-dir"])
def test_under_werkzeugs_reloader(tmp_path: Path, multiprocess: bool) -> None:
    """Flask's debug mode: werkzeug's watching parent imports the app (installing the processor, which binds
    ``prometheus_port``) and runs it again in a child that serves the requests, whose port is then taken. The
    child says so, naming the reloader and what to do; with ``PROMETHEUS_MULTIPROC_DIR`` the parent's port
    serves the child's evaluations."""
    http_port, metrics_port = _free_port(), _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RELOADER_APP_PORT": str(http_port),
           "MULTIPROCESS_APP_METRICS_PORT": str(metrics_port)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    if multiprocess:
        (tmp_path / "multiproc").mkdir()
        env["PROMETHEUS_MULTIPROC_DIR"] = str(tmp_path / "multiproc")
    log = (tmp_path / "werkzeug.log").open("w+")
    server = subprocess.Popen([sys.executable, "-m", "tests.reloader_run"], cwd=ROOT, env=env, stdout=log,
                              stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def get(path: str) -> str:
            return _get(http_port, path)

        wait_for(lambda: _answers(http_port), 60, "werkzeug serving")
        served_by = {get(f"/?{i}").split()[0] for i in range(1, 5)}
        assert served_by != {str(server.pid)}, "the reloader's parent served the requests"
        if multiprocess:
            wait_for(lambda: _metrics(metrics_port).get("agent_eval_traces_evaluated_total", 0) >= 5, 30,
                     "the child's runs on the parent's port")
            time.sleep(1.5)
            assert _metrics(metrics_port)["agent_eval_traces_evaluated_total"] == 5
        else:
            def said() -> bool:
                log.seek(0)
                return "runs under a reloader" in log.read()

            wait_for(said, 10, "the child saying why it serves no metrics")
            assert _metrics(metrics_port).get("agent_eval_traces_evaluated_total", 0) == 0  # the parent's: none
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.seek(0)
        output = log.read()
    assert "Traceback" not in output, output
    assert ("runs under a reloader" in output) is not multiprocess, output


def test_a_file_caught_between_its_creation_and_its_sizing_does_not_fail_the_scrape(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """prometheus-client creates a process's file, then sizes it (client_python#1199): a scrape in between found
    it empty and failed whole, every process's metrics with it, and a process killed in between left the empty
    file for good, failing every later scrape. (The gunicorn test above met it about once in 30 runs.)"""
    from prometheus_client import generate_latest
    from prometheus_client.mmap_dict import MmapedDict

    from otel_agent_eval.sinks.prometheus_multiprocess import multiprocess_registry

    written = MmapedDict(str(tmp_path / "counter_101.db"))
    written.write_value(json.dumps(["agent_eval_spans_kept", "agent_eval_spans_kept_total", {}, "Spans kept"]), 7.0, 0)
    written.close()
    (tmp_path / "counter_102.db").touch()  # the other process, between the two steps
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    text = generate_latest(multiprocess_registry()).decode()
    assert "agent_eval_spans_kept_total 7.0" in text
