"""Helpers for the ``otel-agent-eval serve`` tests (no tests here).

- ``ServerProcess``: ``otel-agent-eval serve`` as a subprocess on free 127.0.0.1 ports (port 0;
  the server prints the ports it bound as its first stdout line), always killed at the end; this
  interpreter's by default, or another venv's (``python=``) with this checkout on ``PYTHONPATH``;
- ``Receiver``: a tiny OTLP/HTTP receiver (http.server) standing in for the user's backend: it
  decodes the ``ExportTraceServiceRequest`` / ``ExportLogsServiceRequest`` the server exports;
- ``run_scenarios``: the demo's scripted agents through an SDK ``TracerProvider`` whose spans go
  out through an official OTLP exporter (HTTP or gRPC).
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest, ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client.parser import text_string_to_metric_families

import otel_agent_eval
from otel_agent_eval.cli.demo import SCENARIOS, Scenario
from otel_agent_eval.formats.otlp import any_value_to_python, attributes_to_dict

EXPECTATIONS = [
    {"agent": "weather-agent", "expected_tools": ["get_weather"]},
    {"agent": "support-agent", "input_pattern": "refund", "expected_tools": ["lookup_order", "refund_order"],
     "require_order": True, "forbidden_tools": ["delete_account"]},
    {"agent": "research-agent", "expected_tools": ["search", "fetch_page"], "forbidden_tools": ["delete_account"]},
]
SCENARIO_BY_NAME = {s.name: s for s in SCENARIOS}


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


# --------------------------------------------------------------------------- receiver


class Receiver:
    """OTLP/HTTP receiver for what the server exports: evaluation spans and result log records.

    ``delay``: seconds each request waits, once recorded, before it is answered (a slow backend).
    """

    def __init__(self, delay: float = 0.0) -> None:
        self.lock = threading.Lock()
        self.spans: list[dict[str, Any]] = []
        self.logs: list[dict[str, Any]] = []
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        """Every request as received: path, headers (lower-case names), body (decompressed)."""
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                with receiver.lock:
                    receiver.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                if self.path == "/v1/traces":
                    receiver._traces(ExportTraceServiceRequest.FromString(body))
                    reply = ExportTraceServiceResponse().SerializeToString()
                elif self.path == "/v1/logs":
                    receiver._logs(ExportLogsServiceRequest.FromString(body))
                    reply = ExportLogsServiceResponse().SerializeToString()
                else:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                time.sleep(delay)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.httpd.server_port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()

    def _traces(self, request: ExportTraceServiceRequest) -> None:
        out = []
        for rs in request.resource_spans:
            resource = attributes_to_dict(rs.resource.attributes)
            for ss in rs.scope_spans:
                for span in ss.spans:
                    out.append({
                        "service": resource.get("service.name"), "scope": ss.scope.name, "name": span.name,
                        "trace_id": span.trace_id.hex(), "parent_span_id": span.parent_span_id.hex(),
                        "attributes": attributes_to_dict(span.attributes),
                    })
        with self.lock:
            self.spans.extend(out)

    def _logs(self, request: ExportLogsServiceRequest) -> None:
        out = []
        for rl in request.resource_logs:
            resource = attributes_to_dict(rl.resource.attributes)
            for sl in rl.scope_logs:
                for record in sl.log_records:
                    out.append({
                        "service": resource.get("service.name"), "scope": sl.scope.name, "event_name": record.event_name,
                        "trace_id": record.trace_id.hex(), "span_id": record.span_id.hex(),
                        "attributes": attributes_to_dict(record.attributes),
                        "body": any_value_to_python(record.body) if record.HasField("body") else None,
                    })
        with self.lock:
            self.logs.extend(out)

    def evaluation_spans(self) -> list[dict[str, Any]]:
        with self.lock:
            return [s for s in self.spans if s["scope"] == "otel_agent_eval"]

    def results(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.logs if r["event_name"] == "gen_ai.evaluation.result"]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class GrpcReceiver(Receiver):
    """The same receiver over OTLP/gRPC (``requests`` keep the call's metadata as headers)."""

    def __init__(self) -> None:  # no HTTP server: Receiver's state and decoding only
        from concurrent import futures

        import grpc
        from opentelemetry.proto.collector.logs.v1 import logs_service_pb2_grpc
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

        self.lock = threading.Lock()
        self.spans, self.logs, self.requests = [], [], []
        receiver = self

        def record(path: str, request: Any, context: Any) -> None:
            with receiver.lock:
                receiver.requests.append((path, dict(context.invocation_metadata()), request.SerializeToString()))

        class Traces(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                record("/v1/traces", request, context)
                receiver._traces(request)
                return ExportTraceServiceResponse()

        class Logs(logs_service_pb2_grpc.LogsServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                record("/v1/logs", request, context)
                receiver._logs(request)
                return ExportLogsServiceResponse()

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), self.server)
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(Logs(), self.server)
        self.endpoint = f"http://127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        self.server.start()

    def close(self) -> None:
        self.server.stop(0)


# --------------------------------------------------------------------------- server process


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        # The server runs in a temporary directory: import this checkout's package, not an installed one.
        PYTHONPATH=os.pathsep.join(filter(None, [str(Path(otel_agent_eval.__file__).resolve().parents[1]), env.get("PYTHONPATH")])),
        PYTHONUNBUFFERED="1",
        OTEL_AGENT_EVAL_SETTLE_DELAY_SECONDS="0.2",
        OTEL_AGENT_EVAL_MAX_EVALUATIONS_PER_SECOND="0",
        OTEL_BSP_SCHEDULE_DELAY="100",
        OTEL_BLRP_SCHEDULE_DELAY="100",
    )
    env.update(extra)
    return env


class ServerProcess:
    """``otel-agent-eval serve`` in a subprocess; ``ports`` from its first stdout line."""

    def __init__(self, workdir: Path, *args: str, env: dict[str, str] | None = None, name: str = "server",
                 receiver: Receiver | None = None, startup_timeout: float = 20.0, python: str | Path = sys.executable) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        expectations = workdir / "expectations.json"
        expectations.write_text(json.dumps(EXPECTATIONS))
        extra = {"OTEL_AGENT_EVAL_EXPECTATIONS_FILE": str(expectations), "OTEL_SERVICE_NAME": name}
        if receiver is not None:
            extra.update(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf")
        full_env = clean_env(**extra)
        full_env.update(env or {})
        self.stdout_path = workdir / f"{name}.out"
        self.stderr_path = workdir / f"{name}.err"
        # Open for the server's lifetime, closed by ``kill``.
        self._stdout = open(self.stdout_path, "wb")  # noqa: SIM115
        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115
        command = [str(python), "-m", "otel_agent_eval", "serve", "--host", "127.0.0.1",
                   "--http-port", "0", "--grpc-port", "0", "--admin-port", "0", *args]
        self.proc = subprocess.Popen(command, env=full_env, stdout=self._stdout, stderr=self._stderr, cwd=str(workdir))
        try:
            self.ports = wait_for(self._listening, startup_timeout, f"{name} to listen")
        except AssertionError:
            self.kill()
            raise AssertionError(f"{name} did not start: {self.stderr_path.read_text()[-2000:]}") from None

    def _lines(self) -> list[dict[str, Any]]:
        lines = []
        for line in self.stdout_path.read_text().splitlines():
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError:
                pass
        return lines

    def _listening(self) -> dict[str, int] | None:
        if self.proc.poll() is not None:
            raise AssertionError(f"server exited with {self.proc.returncode}: {self.stderr_path.read_text()[-2000:]}")
        for line in self._lines():
            if line.get("event") == "listening":  # the ports, by name (the line also says which decoder runs)
                return {k: v for k, v in line.items() if k != "event" and isinstance(v, int)}
        return None

    @property
    def http_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['http']}"

    @property
    def grpc_endpoint(self) -> str:
        return f"127.0.0.1:{self.ports['grpc']}"

    def get(self, path: str, accept: str | None = None) -> tuple[int, Message, bytes]:
        request = urllib.request.Request(f"http://127.0.0.1:{self.ports['admin']}{path}")
        if accept:
            request.add_header("Accept", accept)
        return answer_to(request)

    def metrics(self) -> Metrics:
        status, _, body = self.get("/metrics")
        assert status == 200
        return Metrics(body.decode())

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> dict[str, Any]:
        """Signal the server, wait for it to exit, return its ``stopped`` summary."""
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout)
        finally:
            self.kill()
        assert self.proc.returncode == 0, f"exit {self.proc.returncode}: {self.stderr_path.read_text()[-2000:]}"
        stopped = [line for line in self._lines() if line.get("event") == "stopped"]
        assert stopped, f"no stopped line: {self.stdout_path.read_text()}"
        return stopped[-1]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._stdout.close()
        self._stderr.close()


class Metrics:
    """One /metrics scrape: sums of samples by name and label subset."""

    def __init__(self, text: str) -> None:
        self.samples = [s for family in text_string_to_metric_families(text) for s in family.samples]

    def sum(self, name: str, **labels: str) -> float:
        return sum(s.value for s in self.samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


# --------------------------------------------------------------------------- traffic


def run_scenarios(exporter: SpanExporter, scenarios: Sequence[Scenario], *, before_flush: Callable[[], None] | None = None,
                  tracer_provider: TracerProvider | None = None) -> list[str]:
    """Run each scenario once under an HTTP span; export through ``exporter``; return the trace ids (hex)."""
    provider = tracer_provider or TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=100))
    tracer = provider.get_tracer("test-app")
    trace_ids = []
    for scenario in scenarios:
        with tracer.start_as_current_span("POST /agent", kind=SpanKind.SERVER) as root:
            scenario.agent.run(tracer, scenario.task, scenario.turns)
        trace_ids.append(format(root.get_span_context().trace_id, "032x"))
    if before_flush is not None:
        before_flush()
    assert provider.force_flush(10_000)
    provider.shutdown()
    return trace_ids


def post_body(url: str, body: bytes, content_type: str, encoding: str | None = None) -> tuple[int, Message, bytes]:
    """POST ``body`` as it is (already encoded and compressed): status, headers and body of the answer."""
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": content_type})
    if encoding:
        request.add_header("Content-Encoding", encoding)
    return answer_to(request)


def answer_to(request: urllib.request.Request) -> tuple[int, Message, bytes]:
    """Status, headers and body of the answer to ``request``, an HTTP error's too."""
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def send_compressed_runs(server: ServerProcess) -> None:
    """One agent run in each compression the Collector's otlphttp exporter offers besides gzip, zlib and zstd (snappy
    in the block format, what it sends since v0.125, and framed, what it sent before under the same name;
    x-snappy-framed; lz4 frames), each answered 200 and assembled."""
    import cramjam
    import lz4.frame

    sent = [("snappy", cramjam.snappy.compress_raw), ("snappy", cramjam.snappy.compress),
            ("x-snappy-framed", cramjam.snappy.compress), ("lz4", lz4.frame.compress)]
    for n, (encoding, compress) in enumerate(sent):
        agent = f"{encoding}-{n}-agent"
        doc = {"resourceSpans": [{"scopeSpans": [{"spans": [{
            "traceId": f"{n + 0xC0:02x}f7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331",
            "name": f"invoke_agent {agent}", "startTimeUnixNano": "1", "endTimeUnixNano": "2",
            "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}},
                           {"key": "gen_ai.agent.name", "value": {"stringValue": agent}}]}]}]}]}
        status, _, answer = post_body(f"{server.http_endpoint}/v1/traces", bytes(compress(json.dumps(doc).encode())),
                                      "application/json", encoding)
        assert status == 200, (encoding, answer)
        wait_for(lambda agent=agent: server.metrics().sum("agent_eval_agent_traces_total", agent=agent) == 1, 10,
                 f"{agent} assembled")
