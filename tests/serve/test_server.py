"""``otel-agent-eval serve`` end to end: a real server process, real OTLP traffic from the official
exporters, results read back from a second OTLP endpoint (``Receiver``) and from ``/metrics``."""

from __future__ import annotations

import gzip
import json
import signal
import time
import urllib.error
import urllib.request
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import zstandard
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from otel_agent_eval.formats import otlp
from tests.openai_server import FakeOpenAI, user_text
from tests.serve.server_process import (
    SCENARIO_BY_NAME,
    SCENARIOS,
    Receiver,
    ServerProcess,
    post_body,
    run_scenarios,
    send_compressed_runs,
    wait_for,
)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def servers() -> Iterator[list[ServerProcess]]:
    started: list[ServerProcess] = []
    yield started
    for server in started:
        server.kill()


def _evaluations_by_trace(receiver: Receiver) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for span in receiver.evaluation_spans():
        out.setdefault(span["trace_id"], []).append(span)
    return out


def _genai_request(count: int, trace_byte: int = 1) -> ExportTraceServiceRequest:
    """``count`` GenAI (chat) spans of one trace, as a raw OTLP request."""
    spans = [
        Span(trace_id=bytes([trace_byte]) * 16, span_id=(i + 1).to_bytes(8, "big"), parent_span_id=b"\x00" * 7 + b"\x99",
             name="chat m", start_time_unix_nano=1, end_time_unix_nano=2,
             attributes=[KeyValue(key="gen_ai.operation.name", value=AnyValue(string_value="chat"))])
        for i in range(count)
    ]
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])])


# --------------------------------------------------------------------------- end to end


def test_http_protobuf_gzip_results_exported_and_on_metrics(tmp_path: Path, receiver: Receiver, servers: list) -> None:
    server = ServerProcess(tmp_path, receiver=receiver)
    servers.append(server)
    exporter = HttpSpanExporter(endpoint=f"{server.http_endpoint}/v1/traces", compression=Compression.Gzip, timeout=5)
    trace_ids = run_scenarios(exporter, SCENARIOS)

    evaluations = wait_for(lambda: len(receiver.evaluation_spans()) >= len(SCENARIOS) and _evaluations_by_trace(receiver),
                           20, "evaluation spans")
    assert sorted(evaluations) == sorted(trace_ids)
    assert all(len(spans) == 1 for spans in evaluations.values()), "each agent trace is evaluated exactly once"
    by_scenario = {s.name: evaluations[t][0]["attributes"] for s, t in zip(SCENARIOS, trace_ids)}
    assert by_scenario["research: loop"]["agent_eval.loop_detection.label"] == "fail"
    assert by_scenario["support: forbidden tool"]["agent_eval.tool_call_accuracy.score"] == 0.0
    assert by_scenario["weather: good (parallel calls)"]["agent_eval.tool_call_accuracy.label"] == "pass"
    assert by_scenario["research: unrecovered tool failure"]["agent_eval.tool_failure_recovery.label"] == "fail"
    assert {s["service"] for s in receiver.evaluation_spans()} == {"server"}

    results = wait_for(lambda: len(receiver.results()) >= 4 * len(SCENARIOS) and receiver.results(), 10, "result logs")
    ids = [r["attributes"]["agent_eval.result_id"] for r in results]
    assert len(ids) == len(set(ids)) == 4 * len(SCENARIOS)
    assert {r["trace_id"] for r in results} == set(trace_ids)
    assert {r["attributes"]["gen_ai.evaluation.name"] for r in results} == {
        "tool_call_accuracy", "tool_failure_recovery", "loop_detection", "step_budget"}

    metrics = server.metrics()
    assert metrics.sum("agent_eval_traces_evaluated_total") == len(SCENARIOS)
    assert metrics.sum("agent_eval_results_total", evaluator="loop_detection", outcome="fail") == 1
    assert metrics.sum("agent_eval_spans_received_total") >= metrics.sum("agent_eval_spans_kept_total") > 0
    assert metrics.sum("agent_eval_server_requests_total", transport="http", signal="traces", outcome="ok") >= 1
    assert metrics.sum("agent_eval_server_spans_rejected_total") == 0


def test_two_services_whose_agents_share_a_name_stay_apart(tmp_path: Path, receiver: Receiver, servers: list) -> None:
    """The same agent name from two services: its metrics are per service, and the results say which."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    server = ServerProcess(tmp_path, receiver=receiver, env={"OTEL_AGENT_EVAL_MAX_SERVICE_LABELS": "2"})
    servers.append(server)
    looping, good = SCENARIO_BY_NAME["research: loop"], SCENARIO_BY_NAME["research: good, recovers from a failed fetch"]
    agent = looping.agent.name
    assert good.agent.name == agent
    runs = {"shop-eu": [looping], "shop-us": [good, good], "shop-asia": [good]}  # the third service is over the limit
    for service, scenarios in runs.items():
        provider = TracerProvider(resource=Resource.create({"service.name": service, "deployment.environment": "prod"}))
        run_scenarios(HttpSpanExporter(endpoint=f"{server.http_endpoint}/v1/traces", timeout=5), scenarios, tracer_provider=provider)

    wait_for(lambda: server.metrics().sum("agent_eval_traces_evaluated_total") == 4, 20, "four runs evaluated")
    metrics = server.metrics()
    evaluated = {s.labels["service"]: s.value for s in metrics.samples if s.name == "agent_eval_traces_evaluated_total"}
    assert evaluated == {"shop-eu": 1, "shop-us": 2, "other": 1}
    assert metrics.sum("agent_eval_agent_traces_total", agent=agent, service="shop-us") == 2
    loop = {"evaluator": "loop_detection", "agent": agent, "reason": ""}
    assert metrics.sum("agent_eval_results_total", **loop, service="shop-eu", outcome="fail") == 1
    assert metrics.sum("agent_eval_results_total", **loop, service="shop-us", outcome="pass") == 2
    assert metrics.sum("agent_eval_results_total", **loop, service="shop-us", outcome="fail") == 0
    assert metrics.sum("agent_eval_score_count", evaluator="loop_detection", agent=agent, service="shop-eu") == 1

    spans = wait_for(lambda: len(receiver.evaluation_spans()) >= 4 and receiver.evaluation_spans(), 10, "evaluation spans")
    assert Counter(s["attributes"]["agent_eval.service.name"] for s in spans) == {"shop-eu": 1, "shop-us": 2, "shop-asia": 1}
    results = wait_for(lambda: len(receiver.results()) >= 16 and receiver.results(), 10, "result logs")
    assert {r["attributes"]["agent_eval.service.name"] for r in results} == set(runs)


DETAILS_EVENT = "gen_ai.client.inference.operation.details"


def _event_only_run(tracer: Any, content_logger: Any, mark: str) -> str:
    """A weather-agent run as an instrumentation in event-only content mode records it: spans without
    any content, prompts and completions in one details log record per model call; every text carries
    ``mark``. Returns the trace id (hex)."""
    from opentelemetry._logs import LogRecord
    from opentelemetry.trace import set_span_in_context

    def chat(inputs: list, outputs: list) -> None:
        with tracer.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat"}) as span:
            content_logger.emit(LogRecord(context=set_span_in_context(span), event_name=DETAILS_EVENT, attributes={
                "gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(inputs),
                "gen_ai.output.messages": json.dumps(outputs)}))

    question = [{"role": "user", "parts": [{"type": "text", "content": f"Weather in Paris? {mark}-question"}]}]
    call = {"type": "tool_call", "id": f"{mark}-call", "name": "get_weather", "arguments": {"city": f"Paris {mark}-argument"}}
    with tracer.start_as_current_span("invoke_agent weather-agent", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather-agent"}) as agent:
        chat(question, [{"role": "assistant", "parts": [{"type": "text", "content": f"{mark}-thought"}, call]}])
        with tracer.start_as_current_span("execute_tool get_weather", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather", "gen_ai.tool.call.id": f"{mark}-call"}):
            pass
        chat(question, [{"role": "assistant", "parts": [{"type": "text", "content": f"Sunny. {mark}-answer"}]}])
    return format(agent.get_span_context().trace_id, "032x")


def test_grpc_traces_and_genai_logs_joined(tmp_path: Path, receiver: Receiver, servers: list, server: FakeOpenAI) -> None:
    """Spans and event-only content log records over gRPC: the assembled steps carry what only the log
    records had (the judge is shown each run's question, thought, call arguments and answer, and no
    other run's), and the log records are counted."""
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    judge = server  # the fake OpenAI endpoint of tests/conftest.py, answering "yes"
    serve = ServerProcess(tmp_path, receiver=receiver, env={
        "OTEL_AGENT_EVAL_JUDGE_MODEL": "judge-1", "OTEL_AGENT_EVAL_JUDGE_BASE_URL": judge.base_url,
        "OTEL_AGENT_EVAL_JUDGE_API_KEY": "test", "OTEL_AGENT_EVAL_JUDGE_EVALUATORS": "task_completion"})
    servers.append(serve)
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(
        SimpleLogRecordProcessor(GrpcLogExporter(endpoint=serve.grpc_endpoint, insecure=True, timeout=5)))
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(
        GrpcSpanExporter(endpoint=serve.grpc_endpoint, insecure=True, compression=grpc.Compression.Gzip, timeout=5)))
    tracer = tracer_provider.get_tracer("test-app")
    marks = ["RUNONE", "RUNTWO"]
    trace_ids = [_event_only_run(tracer, logger_provider.get_logger("genai-content"), mark) for mark in marks]
    logger_provider.shutdown()
    tracer_provider.shutdown()

    evaluations = wait_for(lambda: len(receiver.evaluation_spans()) >= 4 and _evaluations_by_trace(receiver), 20, "evaluations")
    assert sorted(evaluations) == sorted(trace_ids)
    assert {e["name"] for spans in evaluations.values() for e in spans} == {"evaluate_agent weather-agent", "judge_agent weather-agent"}
    prompts = [user_text(request.body) for request in judge.requests]
    assert len(prompts) == 2
    for mark in marks:
        (prompt,) = [p for p in prompts if mark in p]  # the other run's content is not in its prompt
        for part in ("question", "thought", "argument", "answer"):
            assert f"{mark}-{part}" in prompt, (mark, part, prompt)
    metrics = serve.metrics()
    model_calls = 2 * len(marks)
    assert metrics.sum("agent_eval_server_log_records_total", outcome="accepted") == model_calls
    assert metrics.sum("agent_eval_log_records_kept_total") == model_calls
    assert metrics.sum("agent_eval_server_requests_total", transport="grpc", signal="logs", outcome="ok") == model_calls
    assert metrics.sum("agent_eval_server_requests_total", transport="grpc", signal="traces", outcome="ok") >= 1
    assert metrics.sum("agent_eval_traces_evaluated_total") == 2


def test_json_gzip_errors_and_health(tmp_path: Path, servers: list) -> None:
    server = ServerProcess(tmp_path)
    servers.append(server)
    url = f"{server.http_endpoint}/v1/traces"
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [{
        "traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331", "name": "invoke_agent a",
        "startTimeUnixNano": "1", "endTimeUnixNano": "2",
        "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}},
                       {"key": "gen_ai.agent.name", "value": {"stringValue": "json-agent"}}]}]}]}]}
    status, headers, body = post_body(url, gzip.compress(json.dumps(doc).encode()), "application/json", "gzip")
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert json.loads(body) == {}
    wait_for(lambda: server.metrics().sum("agent_eval_agent_traces_total", agent="json-agent") == 1, 10, "json trace assembled")

    logs = {"resourceLogs": [{"scopeLogs": [{"logRecords": [{"eventName": "gen_ai.user.message", "body": {"stringValue": "hi"},
                                                               "traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203332"}]}]}]}
    assert post_body(f"{server.http_endpoint}/v1/logs", json.dumps(logs).encode(), "application/json")[0] == 200
    assert post_body(url, b"{not json", "application/json")[0] == 400
    assert post_body(url, b"\xff\xff\xff", "application/x-protobuf")[0] == 400
    assert post_body(url, b"x", "text/plain")[0] == 415
    assert post_body(url, b"x", "application/json", "br")[0] == 415
    assert post_body(f"{server.http_endpoint}/v2/traces", b"{}", "application/json")[0] == 404
    assert post_body(url, b"not gzip", "application/json", "gzip")[0] == 400
    # The Collector's otlphttp exporter offers compression: zstd.
    zstd_doc = json.loads(json.dumps(doc).replace("json-agent", "zstd-agent").replace("0af76519", "1af76519"))
    assert post_body(url, zstandard.ZstdCompressor().compress(json.dumps(zstd_doc).encode()), "application/json", "zstd")[0] == 200
    wait_for(lambda: server.metrics().sum("agent_eval_agent_traces_total", agent="zstd-agent") == 1, 10, "zstd trace assembled")
    # ... and compression: zlib, sent as Content-Encoding: zlib (was a 415, which the exporter does not retry).
    zlib_doc = json.loads(json.dumps(doc).replace("json-agent", "zlib-agent").replace("0af76519", "2af76519"))
    assert post_body(url, zlib.compress(json.dumps(zlib_doc).encode()), "application/json", "zlib")[0] == 200
    wait_for(lambda: server.metrics().sum("agent_eval_agent_traces_total", agent="zlib-agent") == 1, 10, "zlib trace assembled")
    # ... and its others (were a 415 too): snappy (block and framed), x-snappy-framed, lz4.
    send_compressed_runs(server)

    assert server.get("/healthz")[0] == 200
    status, _, body = server.get("/readyz")
    assert (status, body) == (200, b"ready\n")
    status, headers, body = server.get("/metrics", accept="application/openmetrics-text; version=1.0.0")
    assert status == 200 and headers["Content-Type"].startswith("application/openmetrics-text")
    metrics = server.metrics()
    assert metrics.sum("agent_eval_server_requests_total", outcome="invalid") == 3
    assert metrics.sum("agent_eval_server_log_records_total", outcome="accepted") == 1
    assert metrics.sum("agent_eval_log_records_kept_total") == 1
    assert metrics.sum("agent_eval_server_ready") == 1


# --------------------------------------------------------------------------- backpressure


def test_http_partial_success_then_429(tmp_path: Path, servers: list) -> None:
    server = ServerProcess(tmp_path, "--high-water", "0.2", "--retry-after", "2",
                           env={"OTEL_AGENT_EVAL_MAX_INTAKE_SPANS": "5"})
    servers.append(server)
    url = f"{server.http_endpoint}/v1/traces"
    status, _, body = post_body(url, _genai_request(50).SerializeToString(), "application/x-protobuf")
    assert status == 200
    response = ExportTraceServiceResponse.FromString(body)
    rejected = response.partial_success.rejected_spans
    assert 40 <= rejected <= 45, rejected
    assert "intake full" in response.partial_success.error_message
    # Above the high-water mark (1 span) the whole request is refused until the collector thread drains.
    seen = None
    for attempt in range(200):
        status, headers, _ = post_body(url, _genai_request(5, trace_byte=2 + attempt % 200).SerializeToString(), "application/x-protobuf")
        if status == 429:
            seen = headers
            break
    assert seen is not None, "never refused with 429"
    assert seen["Retry-After"] == "2"
    metrics = server.metrics()
    assert metrics.sum("agent_eval_server_spans_rejected_total") >= rejected
    assert metrics.sum("agent_eval_spans_dropped_total", reason="intake_full") == metrics.sum("agent_eval_server_spans_rejected_total")
    assert metrics.sum("agent_eval_server_requests_total", transport="http", outcome="overloaded") >= 1
    assert metrics.sum("agent_eval_server_requests_total", transport="http", outcome="partial") >= 1


def test_grpc_partial_success_then_resource_exhausted(tmp_path: Path, servers: list) -> None:
    from google.rpc.error_details_pb2 import RetryInfo

    server = ServerProcess(tmp_path, "--high-water", "0.2", env={"OTEL_AGENT_EVAL_MAX_INTAKE_SPANS": "5"})
    servers.append(server)
    with grpc.insecure_channel(server.grpc_endpoint) as channel:
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)
        response = stub.Export(_genai_request(50), timeout=5)
        assert 40 <= response.partial_success.rejected_spans <= 45
        error = None
        for attempt in range(200):
            try:
                stub.Export(_genai_request(5, trace_byte=2 + attempt % 200), timeout=5)
            except grpc.RpcError as exc:
                error = exc
                break
        assert error is not None, "never refused"
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        retry = RetryInfo.FromString(dict(error.trailing_metadata())["google.rpc.retryinfo-bin"])
        assert retry.retry_delay.seconds == 1
        assert "grpc-status-details-bin" in dict(error.trailing_metadata())


# --------------------------------------------------------------------------- shutdown


def test_sigterm_drains_buffered_traces_and_exports_them(tmp_path: Path, receiver: Receiver, servers: list) -> None:
    # A long settle delay keeps completed-but-settling traces buffered until the signal.
    server = ServerProcess(tmp_path, "--drain-seconds", "20", receiver=receiver,
                           env={"OTEL_AGENT_EVAL_SETTLE_DELAY_SECONDS": "300"})
    servers.append(server)
    exporter = HttpSpanExporter(endpoint=f"{server.http_endpoint}/v1/traces", timeout=5)
    trace_ids = run_scenarios(exporter, SCENARIOS[:5])
    wait_for(lambda: server.metrics().sum("agent_eval_buffered_traces") == 5, 10, "5 buffered traces")
    assert receiver.evaluation_spans() == []

    started = time.monotonic()
    summary = server.stop(signal.SIGTERM, timeout=25)
    assert time.monotonic() - started < 20
    assert summary["drained"] is True and summary["exported"] is True
    assert summary["at_stop"]["buffered_traces"] == 5
    assert summary["evaluated_during_drain"] == 5
    assert summary["dropped_shutdown"] == 0
    assert sorted(_evaluations_by_trace(receiver)) == sorted(trace_ids), "results exported before exit"


def test_sigterm_with_no_drain_time_counts_the_loss(tmp_path: Path, servers: list) -> None:
    server = ServerProcess(tmp_path, "--drain-seconds", "0", env={"OTEL_AGENT_EVAL_SETTLE_DELAY_SECONDS": "300"})
    servers.append(server)
    exporter = HttpSpanExporter(endpoint=f"{server.http_endpoint}/v1/traces", timeout=5)
    run_scenarios(exporter, SCENARIOS[:5])
    wait_for(lambda: server.metrics().sum("agent_eval_buffered_traces") == 5, 10, "5 buffered traces")
    summary = server.stop(signal.SIGTERM, timeout=15)
    assert summary["at_stop"]["buffered_traces"] == 5
    # Every buffered trace is either evaluated or counted as lost: none disappears silently.
    assert summary["evaluated_during_drain"] + summary["dropped_shutdown"] == 5, summary


def test_draining_server_refuses_with_503(tmp_path: Path, servers: list) -> None:
    from otel_agent_eval.config import Settings
    from otel_agent_eval.serve.server import EvalServer, ServeOptions

    server = EvalServer(Settings.load(env={}), ServeOptions(host="127.0.0.1", http_port=0, grpc_port=None, admin_port=0))
    server.start()
    try:
        server._draining = True
        status, headers, _ = post_body(f"http://127.0.0.1:{server.ports['http']}/v1/traces",
                                   _genai_request(1).SerializeToString(), "application/x-protobuf")
        assert status == 503 and headers["Retry-After"] == "1"
        with urllib.request.urlopen(f"http://127.0.0.1:{server.ports['admin']}/healthz", timeout=5) as r:
            assert r.status == 200
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(f"http://127.0.0.1:{server.ports['admin']}/readyz", timeout=5)
        assert info.value.code == 503
    finally:
        server._draining = False
        summary = server.stop(drain_seconds=2)
    assert summary["drained"] is True
    assert Counter(k[2] for k in server.server_stats.requests.snapshot()) == Counter({"draining": 1})


def test_connections_beyond_the_cap_get_503_and_idle_ones_are_closed() -> None:
    """A crowd of clients (or stalled, idle ones) must not pile up: beyond ``max_http_connections``
    a request is answered 503 + ``Retry-After`` and counted (``connection_limit``); a connection idle past
    ``http_idle_seconds``, even one that never sent a byte, is closed by the server, which frees its slot."""
    import socket

    from otel_agent_eval.config import Settings
    from otel_agent_eval.serve.server import EvalServer, ServeOptions

    server = EvalServer(Settings.load(env={}), ServeOptions(host="127.0.0.1", http_port=0, grpc_port=None, admin_port=None,
                                                            max_http_connections=2, http_idle_seconds=0.5))
    server.start()
    url = f"http://127.0.0.1:{server.ports['http']}/v1/traces"
    connections = server._http.server.server_state.connections  # type: ignore[union-attr]
    idle = [socket.create_connection(("127.0.0.1", server.ports["http"]), timeout=10) for _ in range(2)]
    try:
        wait_for(lambda: len(connections) == 2, 10, "both slots taken")
        request = _genai_request(1).SerializeToString()
        with socket.create_connection(("127.0.0.1", server.ports["http"]), timeout=10) as refused:
            refused.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                            b"Content-Length: %d\r\n\r\n%s" % (len(request), request))
            answer = refused.recv(4096)
        assert answer.startswith(b"HTTP/1.1 503 ") and b"retry-after: 1" in answer.lower(), answer
        # the server closes the silent connections (recv returns b"" at EOF), which frees the slots
        for sock in idle:
            assert sock.recv(1024) == b""
        wait_for(lambda: len(connections) == 0, 10, "slots freed")
        status, _, _ = post_body(url, request, "application/x-protobuf")
        assert status == 200
    finally:
        for sock in idle:
            sock.close()
        server.stop(drain_seconds=1)
    outcomes = Counter(k[2] for k in server.server_stats.requests.snapshot())
    assert outcomes == Counter({"ok": 1, "connection_limit": 1}), outcomes


def test_start_and_stop_are_logged_once_without_uvicorns_lines(tmp_path: Path, servers: list) -> None:
    """serve runs two uvicorn servers (OTLP/HTTP, admin): uvicorn's own start and stop lines came twice each,
    naming neither, with CTRL+C hints; serve's own lines say it once."""
    server = ServerProcess(tmp_path)
    servers.append(server)
    assert server.stop()["drained"] is True
    log = server.stderr_path.read_text()
    for uvicorn_line in ("Started server process", "Finished server process", "Shutting down", "CTRL+C"):
        assert uvicorn_line not in log, log
    assert log.count("signal received: draining") == 1, log
    assert [line["event"] for line in server._lines()] == ["listening", "stopped"]


@pytest.mark.parametrize("pure", [False, True])
def test_the_listening_line_says_which_protobuf_decoder_runs(pure: bool, tmp_path: Path, receiver: Receiver,
                                                            servers: list) -> None:
    """An install without a C compiler decodes through upb: serve says so when it starts, and reads the same."""
    env = {"OTEL_AGENT_EVAL_PURE_PYTHON": "true"} if pure else None
    server = ServerProcess(tmp_path, env=env, receiver=receiver)
    servers.append(server)
    expected = "upb" if pure or otlp._NATIVE is None else "c"
    assert server._lines()[0]["protobuf_decoder"] == expected
    assert ("OTLP protobuf decoded through upb" in server.stderr_path.read_text()) == (expected == "upb")
    trace_ids = run_scenarios(HttpSpanExporter(endpoint=f"{server.http_endpoint}/v1/traces", timeout=10), SCENARIOS)
    evaluations = wait_for(lambda: len(receiver.evaluation_spans()) >= len(SCENARIOS) and _evaluations_by_trace(receiver),
                           20, "evaluation spans")
    by_scenario = {s.name: evaluations[t][0]["attributes"] for s, t in zip(SCENARIOS, trace_ids)}
    assert by_scenario["research: loop"]["agent_eval.loop_detection.label"] == "fail"
    assert by_scenario["weather: good (parallel calls)"]["agent_eval.tool_call_accuracy.label"] == "pass"
    assert by_scenario["research: unrecovered tool failure"]["agent_eval.tool_failure_recovery.label"] == "fail"


@pytest.mark.parametrize("flag", ["--http-port", "--grpc-port", "--admin-port"])
def test_a_port_in_use_is_refused_naming_its_flag(flag: str, tmp_path: Path) -> None:
    """serve binds three ports: the error says which (a taken gRPC port was grpcio's RuntimeError traceback)."""
    import socket
    import subprocess
    import sys

    from tests.serve.server_process import clean_env

    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    try:
        port = held.getsockname()[1]
        ports = {"--http-port": "0", "--grpc-port": "0", "--admin-port": "0", flag: str(port)}
        run = subprocess.run([sys.executable, "-m", "otel_agent_eval", "serve", "--host", "127.0.0.1",
                              *[a for pair in ports.items() for a in pair]],
                             capture_output=True, text=True, env=clean_env(), cwd=tmp_path, timeout=60, check=False)
    finally:
        held.close()
    assert run.returncode == 2, run.stderr[-2000:]
    assert f"otel-agent-eval serve: {flag} {port}: cannot listen on 127.0.0.1:{port}" in run.stderr, run.stderr[-2000:]
    assert "Traceback" not in run.stderr


def test_results_sent_back_to_serve_are_not_evaluated_again(tmp_path: Path, receiver: Receiver, servers: list) -> None:
    """The loop topology: serve exports its results to a Collector that routes every trace to serve again.
    The evaluation spans and the result records come back, are counted as serve's own and set aside; nothing
    more is evaluated, even once the drain has completed every buffered trace."""
    server = ServerProcess(tmp_path, receiver=receiver)
    servers.append(server)
    exporter = HttpSpanExporter(endpoint=f"{server.http_endpoint}/v1/traces", timeout=5)
    trace_ids = run_scenarios(exporter, SCENARIOS)
    wait_for(lambda: len(receiver.evaluation_spans()) == len(trace_ids) and len(receiver.results()) == 4 * len(trace_ids),
             20, "results")
    received = server.metrics().sum("agent_eval_spans_received_total")
    for path, _, body in list(receiver.requests):
        status, _, _ = post_body(f"{server.http_endpoint}{path}", body, "application/x-protobuf")
        assert status == 200, path
    metrics = server.metrics()  # answered: the requests were taken in whole
    assert metrics.sum("agent_eval_server_own_spans_total") == len(trace_ids)
    assert metrics.sum("agent_eval_server_log_records_total", outcome="own") == 4 * len(trace_ids)
    assert metrics.sum("agent_eval_spans_received_total") == received, "set aside before the intake"
    stopped = server.stop()
    assert stopped["traces_evaluated"] == len(trace_ids), stopped
    assert len(receiver.evaluation_spans()) == len(trace_ids)
    assert len(receiver.results()) == 4 * len(trace_ids)
