"""SIGTERM drain of a real ``serve`` subprocess holding thousands of traces, sent by the real
Python OTLP/HTTP exporter, results exported to a real OTLP/HTTP receiver: every trace is either
evaluated and exported, or counted (``dropped{reason="shutdown"}``, the stop report's
``not_exported``), and the stop report's figures are the metrics' figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind

from otel_agent_eval.sinks.otlp_export import EXPORT_BATCH
from tests.serve.server_process import Receiver, ServerProcess, wait_for

TRACES = 2500
EVALUATORS = 4  # the default set: one result log record each per run


def send_agent_runs(endpoint: str, count: int) -> set[str]:
    """``count`` traces of an HTTP root over one agent run with one model call, through the real exporter."""
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces", timeout=30),
                                                   max_queue_size=4 * count, max_export_batch_size=512))
    tracer = provider.get_tracer("test-app")
    ids = set()
    for n in range(count):
        with tracer.start_as_current_span("POST /agent", kind=SpanKind.SERVER) as root:
            with tracer.start_as_current_span("invoke_agent calc", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "calc",
                "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": f"add {n} and 2"}]}]),
            }):
                with tracer.start_as_current_span("chat m", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                    "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": str(n + 2)}]}]),
                }):
                    pass
        ids.add(format(root.get_span_context().trace_id, "032x"))
    assert provider.force_flush(60_000)
    provider.shutdown()
    return ids


@pytest.mark.parametrize(("drain_seconds", "export_queue"), [(120, None), (0.5, 64)], ids=["in-time", "deadline-and-small-export-queue"])
def test_sigterm_drain_evaluates_and_exports_every_buffered_trace_or_counts_it(
    tmp_path: Path, drain_seconds: float, export_queue: int | None
) -> None:
    receiver = Receiver()
    env = {
        # every trace stays buffered until SIGTERM; admission off; the default evaluation rate cap (50/s) on
        "OTEL_AGENT_EVAL_SETTLE_DELAY_SECONDS": "3600", "OTEL_AGENT_EVAL_IDLE_TIMEOUT_SECONDS": "3600",
        "OTEL_AGENT_EVAL_MAX_TRACE_AGE_SECONDS": "3600", "OTEL_AGENT_EVAL_MAX_TRACES_PER_SECOND": "0",
        "OTEL_AGENT_EVAL_MAX_EVALUATIONS_PER_SECOND": "50", "OTEL_AGENT_EVAL_MAX_BUFFERED_TRACES": str(2 * TRACES),
        "OTEL_AGENT_EVAL_MAX_INTAKE_SPANS": str(10 * TRACES), "OTEL_AGENT_EVAL_MAX_QUEUED_EVALUATIONS": "50",
    }
    if export_queue is not None:
        env.update(OTEL_AGENT_EVAL_EXPORT_MAX_QUEUED_SPANS=str(export_queue),
                   OTEL_AGENT_EVAL_EXPORT_MAX_QUEUED_LOG_RECORDS=str(export_queue))
    server = ServerProcess(tmp_path, "--drain-seconds", str(drain_seconds), receiver=receiver, env=env)
    try:
        sent = send_agent_runs(server.http_endpoint, TRACES)
        wait_for(lambda: server.metrics().sum("agent_eval_buffered_traces") == TRACES, 60, "every trace buffered")
        report = server.stop(timeout=drain_seconds + 60)
    finally:
        server.kill()
        receiver.close()

    assert report["at_stop"]["buffered_traces"] == TRACES
    evaluated, lost = report["traces_evaluated"], report["dropped_shutdown"]
    assert evaluated + lost == TRACES, report  # one agent run per trace: each evaluated or counted
    assert set(report["dropped"]) <= {"shutdown"}, report  # never queue_full while draining
    if drain_seconds > 10:
        assert lost == 0 and report["drained"] is True and evaluated == TRACES  # the rate cap did not apply
    exported_runs = {s["trace_id"] for s in receiver.evaluation_spans()}
    assert exported_runs <= sent
    assert len(exported_runs) == len(receiver.evaluation_spans())  # each run exported at most once
    not_exported = report["not_exported"]
    # Every emitted result is exported or counted. A request in flight at the drain deadline counts as
    # not exported (its answer came too late) though the receiver may still get it (README, "Result
    # export"): then, and only then, a result is in both figures; one export batch per signal at most.
    in_flight = 0 if export_queue is None else min(EXPORT_BATCH, export_queue)
    for received, missing, emitted in ((len(exported_runs), not_exported["spans"], evaluated),
                                       (len(receiver.results()), not_exported["log_records"], EVALUATORS * evaluated)):
        assert emitted <= received + missing <= emitted + in_flight, report
    assert report["exported"] is (not_exported == {"spans": 0, "log_records": 0})
    if export_queue is None:
        assert report["exported"] is True


def test_result_export_queue_is_bounded_and_its_drops_counted_like_failed_exports() -> None:
    """The SDK batch processor never drops on its own ("Queue full"): the bound in front of it drops
    and counts, so emitted == exported + failed + dropped once the exporter has caught up."""
    import threading

    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    from otel_agent_eval.sinks.otlp_export import ExportTally, bounded_span_processor

    release = threading.Event()

    class Stalled(SpanExporter):
        """An exporter whose endpoint answers only once released (a slow backend)."""

        def export(self, spans):  # type: ignore[no-untyped-def]
            release.wait(30)
            return SpanExportResult.SUCCESS

    failures: list[int] = []
    tally = ExportTally(on_failure=failures.append)
    provider = TracerProvider()
    provider.add_span_processor(bounded_span_processor(Stalled(), tally, max_queued=20))
    tracer = provider.get_tracer("results")
    for _ in range(100):
        tracer.start_span("evaluation").end()
    release.set()
    assert provider.force_flush(30_000)
    provider.shutdown()
    assert tally.emitted["spans"] == 100
    assert tally.dropped["spans"] == sum(failures) == 80
    assert tally.exported["spans"] == 20 and tally.not_exported() == {"spans": 80, "log_records": 0}
