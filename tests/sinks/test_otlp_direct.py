"""serve's results encoded straight to OTLP protobuf are exactly what the SDK path exported.

The same evaluated runs go through both paths (``otlp_providers`` + ``OtelSink``: the SDK's span
and log record objects, batch processors and encoders; ``result_export``: ``DirectOtlpSink``)
into a real local receiver, over http/protobuf and gRPC, and the decoded requests are compared
item by item, normalised only for batching and order, and for what is random or a clock reading
in both paths (the evaluation span's id, a new trace's id, a log record's observed time).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from otel_agent_eval.config import Settings
from otel_agent_eval.model import (
    AgentStep,
    AgentTrace,
    EvalResult,
    EvaluatedTrace,
    ToolCall,
)
from otel_agent_eval.serve.export import otlp_providers, result_export
from otel_agent_eval.sinks.otel import OtelSink
from otel_agent_eval.sinks.otlp_direct import DirectOtlpSink
from otel_agent_eval.sinks.otlp_export import ExportTally, finish_export
from tests.serve.server_process import GrpcReceiver, Receiver


def result(evaluator: str, label: str, score: float | None = None, **extra: Any) -> EvalResult:
    return EvalResult(evaluator=evaluator, label=label, score=score, agent_name="support-agent",
                      result_id=f"{evaluator}-{label}-{score}", trace_id="ab" * 16, **extra)


def evaluated_runs() -> list[EvaluatedTrace]:
    """Runs covering what the sinks treat differently: phases, labels, scores absent, error reasons,
    details (long enough to be shortened), partial runs without an agent span, dropped spans,
    a known service, children, non-ASCII text."""
    step = AgentStep(index=0, tool_calls=[ToolCall(name="lookup_order", arguments={"id": 7})])
    child = AgentTrace(trace_id="ab" * 16, agent_span_id="0f" * 8, agent_name="sub-agent", parent_step_index=0)
    full = AgentTrace(trace_id="ab" * 16, agent_span_id="cd" * 8, agent_name="support-agent", steps=[step],
                      children=[child], metadata={"service.name": "shop"}, start_time_unix_nano=10, end_time_unix_nano=20)
    partial = AgentTrace(trace_id="12" * 16, agent_span_id=None, agent_name="research-agent", partial=True,
                         spans_dropped=3)
    deterministic = [
        result("tool_call_accuracy", "pass", 1.0, explanation="all expected tools called"),
        result("tool_call_accuracy", "fail", 0.25, explanation="x" * 1500, details={"missing": ["refund_order"] * 900}),
        result("loop_detection", "skipped", reason="no_tool_calls", explanation="nothing to check"),
        result("step_budget", "error", details={"reason": "timeout", "elapsed_s": 1.5}, explanation="évalué trop tard ✓"),
    ]
    judged = [result("task_completion", "pass", 0.9, details={"judge": "judge-1", "verdicts": [1, 0, 1]}),
              result("faithfulness", "error", details={"reason": "judge_unavailable"})]
    runs = [
        EvaluatedTrace(trace=full, results=deterministic, durations={}, started_ns=1_700_000_000_000_000_000,
                       ended_ns=1_700_000_000_123_456_789),
        EvaluatedTrace(trace=full, results=judged, durations={}, started_ns=1_700_000_001_000_000_000,
                       ended_ns=1_700_000_002_000_000_000, phase="judge"),
        EvaluatedTrace(trace=partial, results=deterministic[2:], durations={}, started_ns=5, ended_ns=6),
        EvaluatedTrace(trace=child, results=[], durations={}, started_ns=7, ended_ns=8),
    ]
    return runs * 200  # more than one batch of 512 log records


def items(requests: list[tuple[str, dict[str, str], bytes]], since: int, until: int) -> dict[str, list[bytes]]:
    """Every span and log record received, with the resource, scope and schema URLs it came under,
    normalised for what is random or a clock reading, as sorted serialised messages."""
    out: dict[str, list[bytes]] = {"/v1/traces": [], "/v1/logs": []}
    for path, _, body in requests:
        if path == "/v1/traces":
            for rs in trace_service_pb2.ExportTraceServiceRequest.FromString(body).resource_spans:
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        assert len(span.span_id) == 8 and any(span.span_id)
                        span.span_id = b""
                        if not span.parent_span_id:  # no agent span: a new trace, of a random id
                            assert len(span.trace_id) == 16 and any(span.trace_id)
                            span.trace_id = b""
                        level = trace_service_pb2.ExportTraceServiceRequest()
                        added = level.resource_spans.add(resource=rs.resource, schema_url=rs.schema_url)
                        added.scope_spans.add(scope=ss.scope, schema_url=ss.schema_url, spans=[span])
                        out[path].append(level.SerializeToString(deterministic=True))
        else:
            for rl in logs_service_pb2.ExportLogsServiceRequest.FromString(body).resource_logs:
                for sl in rl.scope_logs:
                    for record in sl.log_records:
                        assert since <= record.observed_time_unix_nano <= until
                        record.observed_time_unix_nano = 0
                        level = logs_service_pb2.ExportLogsServiceRequest()
                        added = level.resource_logs.add(resource=rl.resource, schema_url=rl.schema_url)
                        added.scope_logs.add(scope=sl.scope, schema_url=sl.schema_url, log_records=[record])
                        out[path].append(level.SerializeToString(deterministic=True))
    return {path: sorted(found) for path, found in out.items()}


def through(sink: Any, flushed: list[Any], tally: ExportTally, runs: list[EvaluatedTrace],
            received: list[tuple[str, dict[str, str], bytes]]) -> dict[str, list[bytes]]:
    received.clear()
    since = time.time_ns()
    for run in runs:
        sink.emit(run)
    assert finish_export(flushed, tally, 30)
    assert tally.not_exported() == {"spans": 0, "log_records": 0}, tally.not_exported()
    return items(list(received), since, time.time_ns())


@pytest.mark.filterwarnings("ignore:Log record attributes were dropped")
@pytest.mark.parametrize(("protocol", "limits"), [("http/protobuf", False), ("grpc", False), ("http/protobuf", True)])
def test_direct_export_sends_what_the_sdk_path_sent(monkeypatch: pytest.MonkeyPatch, protocol: str, limits: bool) -> None:
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test,replica=2")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    if limits:  # the SDK's attribute limits: fewer attributes kept (the dropped counted), long values cut
        monkeypatch.setenv("OTEL_ATTRIBUTE_COUNT_LIMIT", "7")
        monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "20")
    receiver: Any = Receiver() if protocol == "http/protobuf" else GrpcReceiver()
    settings = Settings.load(env={})
    runs = evaluated_runs()
    try:
        tally = ExportTally()
        tracer_provider, logger_provider = otlp_providers(receiver.endpoint, protocol, settings, tally)
        sdk = through(OtelSink(tracer_provider, logger_provider), [tracer_provider, logger_provider], tally, runs,
                      receiver.requests)
        tally = ExportTally()
        sink, flushed = result_export(receiver.endpoint, protocol, settings, tally)
        assert isinstance(sink, DirectOtlpSink)
        direct = through(sink, flushed, tally, runs, receiver.requests)
    finally:
        receiver.close()
    assert len(sdk["/v1/traces"]) == len(runs) and len(sdk["/v1/logs"]) == 200 * (4 + 2 + 2)
    assert direct["/v1/traces"] == sdk["/v1/traces"]
    assert direct["/v1/logs"] == sdk["/v1/logs"]


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_direct_export_keeps_the_exporters_configuration(monkeypatch: pytest.MonkeyPatch, protocol: str) -> None:
    """Headers and compression from ``OTEL_EXPORTER_OTLP_*`` reach the endpoint: the exporters' transport sends."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=acme,authorization=Bearer%20s3cret")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    receiver: Any = Receiver() if protocol == "http/protobuf" else GrpcReceiver()
    try:
        tally = ExportTally()
        sink, flushed = result_export(receiver.endpoint, protocol, Settings.load(env={}), tally)
        for run in evaluated_runs()[:4]:
            sink.emit(run)  # type: ignore[union-attr]
        assert finish_export(flushed, tally, 30)
    finally:
        receiver.close()
    assert tally.exported == {"spans": 4, "log_records": 8}
    assert {path for path, _, _ in receiver.requests} == {"/v1/traces", "/v1/logs"}
    for _, headers, _ in receiver.requests:
        assert headers["x-tenant"] == "acme" and headers["authorization"] == "Bearer s3cret"
        if protocol == "http/protobuf":
            assert headers["content-encoding"] == "gzip"


def test_attribute_values_encode_as_the_sdk_encodes_them() -> None:
    """Every value type, and values equal across types (``1 == 1.0 == True``) under one key: the
    encoded-field cache must not hand one type's bytes to another, nor 0.0's to -0.0."""
    from opentelemetry.exporter.otlp.proto.common._internal import _encode_attributes
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    from otel_agent_eval.sinks.otlp_direct import attributes

    values: list[Any] = [1, 1.0, True, "1", 0, 0.0, -0.0, False, "", -5, 2**63 - 1, -(2**63), 300, 1e300, "é✓" * 100,
                         "x" * 300, b"raw", [1, "a", 2.5, True], ("t",), {"k": 2, "n": {"m": [1]}}]
    for round_ in range(2):  # the second round from the cache
        for value in values:
            encoded = Span.FromString(attributes(b"\x4a", {"k": value, "": value}))
            expected = Span(attributes=_encode_attributes({"k": value, "": value}))
            assert encoded == expected and encoded.SerializeToString() == expected.SerializeToString(), (round_, value)


def test_a_sampler_keeps_the_sdk_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The direct path exports every evaluation span, as the SDK does under its default sampler; under
    another ``OTEL_TRACES_SAMPLER`` the SDK path stays, so that the sampler applies."""
    settings = Settings.load(env={})
    sink, flushed = result_export("http://127.0.0.1:9", "http/protobuf", settings, ExportTally())
    assert isinstance(sink, DirectOtlpSink)
    for made in flushed:
        made.shutdown()
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "traceidratio")
    sink, flushed = result_export("http://127.0.0.1:9", "http/protobuf", settings, ExportTally())
    assert isinstance(sink, OtelSink) and len(flushed) == 2
    for made in flushed:
        made.shutdown()
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert result_export("http://127.0.0.1:9", "http/protobuf", settings, ExportTally()) == (None, [])


def test_exporters_without_the_seam_are_detected() -> None:
    """An exporter release without the http client or the gRPC hook: no direct sender (serve then
    keeps the SDK path), rather than a failure at the first export."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from otel_agent_eval.serve.export import grpc_sender, http_sender

    class WithoutClient(OTLPSpanExporter):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            del self._client

        def shutdown(self) -> None:
            pass

    assert http_sender(WithoutClient, {"endpoint": "http://127.0.0.1:9/v1/traces"}) is None
    assert grpc_sender(object, trace_service_pb2.ExportTraceServiceRequest, {}) is None


def test_admitting_a_run_s_items_at_once_counts_what_admitting_them_one_by_one_counts() -> None:
    """``ResultQueue.put`` admits a run's records under one lock: the same items fit, the same are dropped and
    reported as failures, whatever the queue already holds, before and after the tally is closed."""
    for queued in range(7):
        for count in range(6):
            for closed in (False, True):
                failures: dict[str, list[int]] = {"one": [], "many": []}
                one, many = ExportTally(failures["one"].append), ExportTally(failures["many"].append)
                for tally in (one, many):
                    for _ in range(queued):
                        tally.admit("log_records", 5)
                    if closed:
                        tally.close()
                fit = sum(one.admit("log_records", 5) for _ in range(count))
                assert many.admit_many("log_records", count, 5) == fit
                assert (one.emitted, one.dropped) == (many.emitted, many.dropped)
                assert sum(failures["one"]) == sum(failures["many"])
