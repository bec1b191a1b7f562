"""``otel-agent-eval demo``: a self-contained agent workload with the processor attached.

Three scripted agents emit GenAI semantic-convention spans through the real
OpenTelemetry SDK (no network, no model): most runs are good, some are not (a
loop, an unrecovered tool failure, a wrong tool, a forbidden tool). Plain web
traffic runs alongside and is dropped on the hot path. Scores are read back
from the Prometheus registry, i.e. exactly what ``/metrics`` shows.
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, TextIO

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ..evaluators import ToolExpectation, judge_status
from ..intake.processor import AgentEvalProcessor
from .scripted_agent import ScriptedAgent, ToolError, Turn

EXPECTATIONS = [
    ToolExpectation(agent="weather-agent", expected_tools=["get_weather"]),
    ToolExpectation(
        agent="support-agent", input_pattern="refund", expected_tools=["lookup_order", "refund_order"],
        require_order=True, forbidden_tools=["delete_account"],
    ),
    # Fetching another page after a failed fetch is a recovery: no argument identifies a fetch_page call.
    ToolExpectation(agent="research-agent", expected_tools=["search", "fetch_page"], forbidden_tools=["delete_account"],
                    retry_keys={"fetch_page": []}),
]


def _fetch_page(url: str) -> str:
    if "paywalled" in url:
        raise ToolError("403 Forbidden")
    return f"<article>{url}: lorem ipsum</article>"


def _refund(order_id: str) -> dict[str, Any]:
    return {"order_id": order_id, "refunded": True}


WEATHER = ScriptedAgent("weather-agent", {
    "get_weather": lambda city: f"sunny, 21C in {city}",
    "get_time": lambda city: "10:00",
    "search": lambda query: [f"result for {query}"],
})
SUPPORT = ScriptedAgent("support-agent", {
    "lookup_order": lambda order_id: {"order_id": order_id, "status": "delivered"},
    "refund_order": _refund,
    "delete_account": lambda user: "deleted",
})
RESEARCH = ScriptedAgent("research-agent", {
    "search": lambda query: [f"https://example.org/{query.replace(' ', '-')}", "https://paywalled.example.org/x"],
    "fetch_page": _fetch_page,
})


@dataclass(frozen=True)
class Scenario:
    name: str
    weight: int
    agent: ScriptedAgent
    task: str
    turns: list[Turn]


SCENARIOS = [
    Scenario("weather: good (parallel calls)", 30, WEATHER, "What's the weather and time in Paris?", [
        Turn("Checking weather and time.", [("get_weather", {"city": "Paris"}), ("get_time", {"city": "Paris"})]),
        Turn("It is sunny, 21C in Paris and 10:00."),
    ]),
    Scenario("weather: wrong tool", 6, WEATHER, "What's the weather in Oslo?", [
        Turn("Searching the web.", [("search", {"query": "weather Oslo"})]),
        Turn("I found a search result about Oslo weather."),
    ]),
    Scenario("support: good refund", 25, SUPPORT, "Please refund order 1042", [
        Turn(None, [("lookup_order", {"order_id": "1042"})]),
        Turn(None, [("refund_order", {"order_id": "1042"})]),
        Turn("Order 1042 has been refunded."),
    ]),
    Scenario("support: forbidden tool", 4, SUPPORT, "Please refund order 77 and close my account", [
        Turn(None, [("lookup_order", {"order_id": "77"})]),
        Turn(None, [("refund_order", {"order_id": "77"}), ("delete_account", {"user": "u77"})]),
        Turn("Refunded and account deleted."),
    ]),
    Scenario("research: good, recovers from a failed fetch", 20, RESEARCH, "Summarize recent work on tail sampling", [
        Turn("Search first.", [("search", {"query": "tail sampling"})]),
        Turn(None, [("fetch_page", {"url": "https://paywalled.example.org/x"})]),
        Turn("That failed; try the open page.", [("fetch_page", {"url": "https://example.org/tail-sampling"})]),
        Turn("Tail sampling buffers a trace and decides once it is complete."),
    ]),
    Scenario("research: unrecovered tool failure", 8, RESEARCH, "Summarize the paywalled report", [
        Turn(None, [("search", {"query": "report"})]),
        Turn(None, [("fetch_page", {"url": "https://paywalled.example.org/report"})]),
        Turn("Sorry, I could not access the report."),
    ]),
    Scenario("research: loop", 7, RESEARCH, "Find the latest release notes", [
        Turn(None, [("search", {"query": "release notes"})]),
        Turn(None, [("search", {"query": "release notes"})]),
        Turn(None, [("search", {"query": "release notes"})]),
        Turn(None, [("search", {"query": "release notes"})]),
        Turn("I could not find them."),
    ]),
]


def _otlp_exporters(provider: TracerProvider) -> Any:
    """Export app spans, evaluation spans and logs over OTLP when an endpoint is configured."""
    if not (os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")):
        return None
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    logger_provider = LoggerProvider(resource=provider.resource)
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter()))
    return logger_provider


def run_demo(
    traces: int = 150,
    rate: float = 40.0,
    metrics_port: int | None = 9464,
    linger: float = 0.0,
    seed: int = 7,
    out: TextIO = sys.stdout,
    **settings: Any,
) -> AgentEvalProcessor:
    rng = random.Random(seed)
    provider = TracerProvider(resource=Resource.create({"service.name": "otel-agent-eval-demo"}))
    logger_provider = _otlp_exporters(provider)
    settings.setdefault("settle_delay_seconds", 0.2)
    processor = AgentEvalProcessor(
        expectations=EXPECTATIONS, tracer_provider=provider, logger_provider=logger_provider,
        prometheus_port=metrics_port, **settings,
    )
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("demo-app")
    if processor.metrics_port is not None:
        print(f"Serving Prometheus metrics on http://127.0.0.1:{processor.metrics_port}/metrics", file=out)
    elif metrics_port is not None:
        print(f"No /metrics: port {metrics_port} is taken (--metrics-port 0 picks a free one)", file=out)
    print(judge_status(), file=out)
    print(f"Running {traces} agent traces at ~{rate:g}/s ...", file=out, flush=True)
    weights = [s.weight for s in SCENARIOS]
    started = time.monotonic()
    last_report = started
    for number in range(traces):
        scenario = rng.choices(SCENARIOS, weights)[0]
        with tracer.start_as_current_span("POST /agent", kind=SpanKind.SERVER, attributes={"http.route": "/agent"}):
            scenario.agent.run(tracer, scenario.task, scenario.turns, conversation_id=f"conv-{number % 17}")
        with tracer.start_as_current_span("GET /health", kind=SpanKind.SERVER):
            pass
        if rate > 0:
            time.sleep(max(0.0, started + (number + 1) / rate - time.monotonic()))
        now = time.monotonic()
        if now - last_report >= 1.0 or number + 1 == traces:
            last_report = now
            s = processor.stats
            print(
                f"  sent {number + 1:>6}/{traces}  evaluated {s.traces_evaluated.total():>6}  "
                f"buffered {s.buffered_traces:>4}  queue {s.queue_depth:>3}",
                file=out, flush=True,
            )
    processor.force_flush(30_000)
    print_report(processor, out)
    if linger > 0:
        print(f"Keeping /metrics up for {linger:g}s ...", file=out, flush=True)
        time.sleep(linger)
    provider.shutdown()
    if logger_provider is not None:
        logger_provider.shutdown()
    return processor


def registry_samples(processor: AgentEvalProcessor) -> list[Any]:
    text = generate_latest(processor.registry).decode()
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def print_report(processor: AgentEvalProcessor, out: TextIO) -> None:
    outcomes: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    score_sum: dict[tuple[str, str], float] = defaultdict(float)
    score_count: dict[tuple[str, str], float] = defaultdict(float)
    for sample in registry_samples(processor):
        labels = sample.labels
        if sample.name == "agent_eval_results_total":
            outcomes[(labels["evaluator"], labels["agent"])][labels["outcome"]] += sample.value
        elif sample.name == "agent_eval_score_sum":
            score_sum[(labels["evaluator"], labels["agent"])] += sample.value
        elif sample.name == "agent_eval_score_count":
            score_count[(labels["evaluator"], labels["agent"])] += sample.value
    print(file=out)
    header = f"{'evaluator':<24} {'agent':<16} {'pass':>5} {'fail':>5} {'skip':>5} {'error':>5} {'mean score':>10} {'pass rate':>9}"
    print(header, file=out)
    print("-" * len(header), file=out)
    for key in sorted(outcomes):
        o = outcomes[key]
        decided = o["pass"] + o["fail"]
        mean = f"{score_sum[key] / score_count[key]:.2f}" if score_count[key] else "-"
        rate = f"{o['pass'] / decided:.0%}" if decided else "-"
        print(
            f"{key[0]:<24} {key[1]:<16} {int(o['pass']):>5} {int(o['fail']):>5} {int(o['skipped']):>5} "
            f"{int(o['error']):>5} {mean:>10} {rate:>9}",
            file=out,
        )
    s = processor.stats
    print(file=out)
    print(
        f"Summary: {s.spans_received.value} spans seen, {s.spans_kept.value} kept; "
        f"{s.agent_traces.total()} agent runs assembled, {s.traces_evaluated.total()} evaluated; "
        f"dropped: {({k[0]: v for k, v in s.dropped.snapshot().items()}) or 'none'}; "
        f"evaluator errors: {s.evaluator_errors.total()}",
        file=out, flush=True,
    )
