"""Shared test fixtures: in-memory OpenTelemetry traces and logs, and Prometheus samples.

- ``span_exporter`` / ``tracer_provider``: an SDK ``TracerProvider`` exporting synchronously
  (``SimpleSpanProcessor``) to an ``InMemorySpanExporter``;
- ``log_exporter`` / ``logger_provider``: an SDK ``LoggerProvider`` exporting synchronously
  (``SimpleLogRecordProcessor``) to an ``InMemoryLogRecordExporter``;
- ``telemetry_factory``: builds both at once (a ``Telemetry``), for module-scoped fixtures;
- ``metric_samples``: parses a ``CollectorRegistry`` into ``MetricSamples``
  (``text_string_to_metric_families(generate_latest(registry).decode())``; ``openmetrics=True``
  uses the OpenMetrics exposition, the only one that carries exemplars).

And, for every test: each trace assembled in one pass (``semconv_run``) is assembled the
general way too, and the test fails when the two differ.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.openai_server import FakeOpenAI, answer

# ``tests.frameworks`` (scripted agent scenarios) must import under plain ``pytest`` too, not only
# under ``python -m pytest`` (which puts the working directory on sys.path).
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)


# --- Assembly ------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def one_pass_matches_the_general_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Hold ``assemble_semconv_run`` equal to the general path on every trace a test assembles."""
    assembly = importlib.import_module("otel_agent_eval.assemble")  # the package exports ``assemble``, the function
    one_pass = assembly.assemble_semconv_run
    differences: list[str] = []

    def checked(records: Any) -> Any:
        trace = one_pass(records)
        if trace is not None:
            try:
                general = assembly._TraceAssembly(records).run()
            except Exception as exc:  # noqa: BLE001 - reported below, never raised into the pipeline
                general = [repr(exc)]
            if general != [trace]:
                differences.append(f"one pass {trace.model_dump_json()}\n general {general}")
        return trace

    monkeypatch.setattr(assembly, "assemble_semconv_run", checked)
    yield
    assert not differences, "the one-pass assembly differs from the general path:\n" + "\n".join(differences)


# --- OpenTelemetry -------------------------------------------------------------------------------


@dataclass
class Telemetry:
    """A TracerProvider and a LoggerProvider, each with a synchronous in-memory exporter."""

    tracer_provider: TracerProvider
    span_exporter: InMemorySpanExporter
    logger_provider: LoggerProvider
    log_exporter: InMemoryLogRecordExporter

    def spans(self, scope: str | None = None, *, exclude_scope: str | None = None) -> list[ReadableSpan]:
        """Finished spans in start order, optionally only (or all but) one instrumentation scope."""
        spans = sorted(self.span_exporter.get_finished_spans(), key=lambda s: (s.start_time or 0, s.name))
        if scope is not None:
            spans = [s for s in spans if _scope(s) == scope]
        if exclude_scope is not None:
            spans = [s for s in spans if _scope(s) != exclude_scope]
        return spans

    def logs(self) -> list[Any]:
        """Finished log records (SDK ``ReadableLogRecord``s) in emission order."""
        return list(self.log_exporter.get_finished_logs())

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.logger_provider.shutdown()


def _scope(span: ReadableSpan) -> str | None:
    return span.instrumentation_scope.name if span.instrumentation_scope is not None else None


def make_tracing() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def make_logging() -> tuple[LoggerProvider, InMemoryLogRecordExporter]:
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    return provider, exporter


def make_telemetry() -> Telemetry:
    tracer_provider, span_exporter = make_tracing()
    logger_provider, log_exporter = make_logging()
    return Telemetry(tracer_provider, span_exporter, logger_provider, log_exporter)


@pytest.fixture(scope="session")
def telemetry_factory() -> Callable[[], Telemetry]:
    """``make_telemetry`` for fixtures of any scope (the caller shuts the result down)."""
    return make_telemetry


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    t = make_telemetry()
    yield t
    t.shutdown()


@pytest.fixture
def span_exporter(telemetry: Telemetry) -> InMemorySpanExporter:
    return telemetry.span_exporter


@pytest.fixture
def tracer_provider(telemetry: Telemetry) -> TracerProvider:
    return telemetry.tracer_provider


@pytest.fixture
def log_exporter(telemetry: Telemetry) -> InMemoryLogRecordExporter:
    return telemetry.log_exporter


@pytest.fixture
def logger_provider(telemetry: Telemetry) -> LoggerProvider:
    return telemetry.logger_provider


# --- Prometheus ----------------------------------------------------------------------------------


class MetricSamples:
    """Every sample of a registry scrape, with exact look-ups by name and labels."""

    def __init__(self, samples: list[Sample]) -> None:
        self.samples = samples

    def named(self, name: str) -> dict[frozenset[tuple[str, str]], float]:
        """All samples called ``name``: {frozenset(labels.items()): value}."""
        return {frozenset(s.labels.items()): s.value for s in self.samples if s.name == name}

    SUMMABLE = frozenset(("service", "reason"))
    """Labels a look-up may leave out (summed over): where a run came from, why it was skipped."""

    def by_labels(self, name: str, *label_names: str) -> dict[tuple[str, ...], float]:
        """All samples called ``name``, keyed by the values of ``label_names``.

        ``label_names`` must be all its labels but those in ``SUMMABLE``, which are summed over.
        """
        out: dict[tuple[str, ...], float] = {}
        for s in self.samples:
            if s.name != name:
                continue
            rest = set(s.labels) - set(label_names)
            assert set(label_names) <= set(s.labels) and rest <= self.SUMMABLE, (
                f"{name}: labels {sorted(s.labels)} != {sorted(label_names)}"
            )
            key = tuple(s.labels[label] for label in label_names)
            out[key] = out.get(key, 0.0) + s.value
        return out

    def find(self, name: str, **labels: str) -> list[Sample]:
        return [s for s in self.samples if s.name == name and s.labels == labels]

    def value(self, name: str, **labels: str) -> float | None:
        """The value of the one sample with exactly these labels; None when absent."""
        found = self.find(name, **labels)
        assert len(found) <= 1, f"{name}{labels}: {len(found)} samples"
        return found[0].value if found else None


def parse_registry(registry: CollectorRegistry, *, openmetrics: bool = False) -> MetricSamples:
    if openmetrics:
        from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
        from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics

        families = parse_openmetrics(generate_openmetrics(registry).decode())
    else:
        families = text_string_to_metric_families(generate_latest(registry).decode())
    return MetricSamples([sample for family in families for sample in family.samples])


@pytest.fixture(scope="session")
def metric_samples() -> Callable[..., MetricSamples]:
    """``metric_samples(registry, openmetrics=False) -> MetricSamples``."""
    return parse_registry


@pytest.fixture(scope="module")
def _openai_server() -> Iterator[FakeOpenAI]:
    """One fake OpenAI-compatible server per test module (``tests/openai_server.py``)."""
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def server(_openai_server: FakeOpenAI) -> FakeOpenAI:
    """The module's fake OpenAI server, its script and records cleared, answering every question "yes"."""
    _openai_server.reset()
    _openai_server.set_default(answer())
    return _openai_server
