"""The receiver's own counters (``ServerStats``) and their Prometheus collector, read at scrape time."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..pipeline.stats import LabelledCounts

if TYPE_CHECKING:
    from .server import EvalServer


class ServerStats:
    def __init__(self) -> None:
        self.requests = LabelledCounts()  # (transport, signal, outcome)
        self.spans_rejected = LabelledCounts()  # partial success: a request larger than the whole intake
        self.own_spans = LabelledCounts()  # our own evaluation spans sent back to us: ignored
        self.log_records = LabelledCounts()  # (outcome,)
        self.auth_failures = LabelledCounts()  # (transport, reason)


class ServerCollector(Collector):
    def __init__(self, server: EvalServer) -> None:
        self.server = server

    def collect(self) -> Iterator[Metric]:
        s = self.server.server_stats
        requests = CounterMetricFamily(
            "agent_eval_server_requests", "OTLP export requests, by outcome (ok, partial, overloaded, draining, invalid, too_large, unsupported, unauthenticated, incomplete, connection_limit, invalid_http, rpc_limit)",
            labels=["transport", "signal", "outcome"],
        )
        for labels, value in sorted(s.requests.snapshot().items()):
            requests.add_metric(list(labels), value)
        yield requests
        yield CounterMetricFamily(
            "agent_eval_server_spans_rejected", "Spans rejected in partial-success responses (a request larger than the whole intake)",
            value=s.spans_rejected.total(),
        )
        yield CounterMetricFamily(
            "agent_eval_server_own_spans", "Spans of scope otel_agent_eval received back and ignored", value=s.own_spans.total()
        )
        logs = CounterMetricFamily(
            "agent_eval_server_log_records", "Log records received, by outcome (accepted, not_genai, no_span, own, intake_full)",
            labels=["outcome"],
        )
        for labels, value in sorted(s.log_records.snapshot().items()):
            logs.add_metric(list(labels), value)
        yield logs
        auth = CounterMetricFamily(
            "agent_eval_server_auth_failures", "Requests refused for want of a valid bearer token, by reason (missing, malformed, invalid)",
            labels=["transport", "reason"],
        )
        for labels, value in sorted(s.auth_failures.snapshot().items()):
            auth.add_metric(list(labels), value)
        yield auth
        yield GaugeMetricFamily("agent_eval_server_intake_spans", "Spans waiting for the collector thread", value=len(self.server.pipeline.intake))
        yield GaugeMetricFamily("agent_eval_server_ready", "1 when the server accepts data", value=1 if self.server.ready()[0] else 0)
