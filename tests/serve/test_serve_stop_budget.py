"""SIGTERM with a result endpoint that stalls: the whole stop (drain, export flush, provider
shutdown) fits in ``--drain-seconds``, and every result is either exported or counted.

``serve`` runs as a subprocess with the real OTLP exporters sending its results to a real
endpoint that accepts connections and never answers (or answers slowly); the exporters' own
timeout is set well above the drain budget, so only a stop that stops waiting at the deadline
ends in time.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from tests.serve.server_process import Receiver, ServerProcess, wait_for
from tests.serve.test_serve_drain import EVALUATORS, send_agent_runs

TRACES = 200
DRAIN_SECONDS = 2.0
MARGIN_SECONDS = 6.0
"""Generous: the admin port's stop, uvicorn's forced exit and interpreter exit on a loaded machine."""
EXPORTER_TIMEOUT_SECONDS = 40
"""Each OTLP export waits this long for an answer: without the bound, the stop would take at least as long."""


class StalledEndpoint:
    """A TCP endpoint that accepts every connection, reads what it is sent, and never answers."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections: list[socket.socket] = []
        self.bytes_read = 0
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections.append(conn)
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        try:
            while chunk := conn.recv(65536):
                self.bytes_read += len(chunk)
        except OSError:
            pass

    def close(self) -> None:
        self._closed = True
        self.listener.close()
        for conn in self.connections:
            conn.close()


def stop_timed(server: ServerProcess) -> tuple[dict, float]:
    started = time.monotonic()
    report = server.stop(timeout=EXPORTER_TIMEOUT_SECONDS * 4)
    return report, time.monotonic() - started


ENV = {"OTEL_EXPORTER_OTLP_TIMEOUT": str(EXPORTER_TIMEOUT_SECONDS), "OTEL_AGENT_EVAL_MAX_TRACES_PER_SECOND": "0"}


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_stop_fits_the_drain_budget_when_the_result_endpoint_never_answers(tmp_path: Path, protocol: str) -> None:
    endpoint = StalledEndpoint()
    env = {**ENV, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint.endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol}
    server = ServerProcess(tmp_path, "--drain-seconds", str(DRAIN_SECONDS), env=env)
    try:
        send_agent_runs(server.http_endpoint, TRACES)
        wait_for(lambda: server.metrics().sum("agent_eval_traces_evaluated_total") == TRACES, 60, "every trace evaluated")
        report, elapsed = stop_timed(server)
    finally:
        server.kill()
        endpoint.close()

    assert elapsed < DRAIN_SECONDS + MARGIN_SECONDS, (elapsed, report)
    evaluated = report["traces_evaluated"]
    assert evaluated == TRACES and report["drained"] is True, report
    # nothing was answered: every result is counted as not exported, in the report and in the metric
    assert report["not_exported"] == {"spans": evaluated, "log_records": EVALUATORS * evaluated}, report
    assert report["sink_errors"] == {"otlp": (1 + EVALUATORS) * evaluated}, report
    assert report["exported"] is False


def test_stop_fits_the_drain_budget_with_a_slow_endpoint_and_accounts_for_every_result(tmp_path: Path) -> None:
    receiver = Receiver(delay=1.5)
    env = {**ENV, "OTEL_AGENT_EVAL_EXPORT_MAX_QUEUED_LOG_RECORDS": "100000"}
    server = ServerProcess(tmp_path, "--drain-seconds", str(DRAIN_SECONDS), receiver=receiver, env=env)
    try:
        send_agent_runs(server.http_endpoint, TRACES)
        wait_for(lambda: server.metrics().sum("agent_eval_traces_evaluated_total") == TRACES, 60, "every trace evaluated")
        report, elapsed = stop_timed(server)
        time.sleep(2 * 1.5)  # requests the server gave up on are still recorded by the receiver
        spans, results = len(receiver.evaluation_spans()), len(receiver.results())
    finally:
        server.kill()
        receiver.close()

    assert elapsed < DRAIN_SECONDS + MARGIN_SECONDS, (elapsed, report)
    evaluated = report["traces_evaluated"]
    assert evaluated == TRACES, report
    not_exported = report["not_exported"]
    # confirmed by the endpoint + not confirmed = emitted; the endpoint may hold some it never confirmed
    assert evaluated - not_exported["spans"] <= spans <= evaluated, (spans, report)
    assert EVALUATORS * evaluated - not_exported["log_records"] <= results <= EVALUATORS * evaluated, (results, report)
    assert report["sink_errors"].get("otlp", 0) == sum(not_exported.values()), report
    assert report["exported"] is (not any(not_exported.values()))
