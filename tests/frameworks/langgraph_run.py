"""A LangGraph scenario run under the OpenInference LangChain instrumentation, with the processor installed.

What the LangGraph acceptance tests share: one module-scoped run of a scripted scenario
(``langgraph_scenarios``) through a real TracerProvider and LoggerProvider, every
evaluated agent trace recorded, the processor flushed before the tests look.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.sdk.trace import ReadableSpan
from prometheus_client import CollectorRegistry

from otel_agent_eval import ToolExpectation, install
from tests.conftest import Telemetry, make_telemetry
from tests.frameworks.harness import OWN_SCOPE, RecordingSink


@dataclass
class LangGraphRun:
    telemetry: Telemetry
    output: str
    recorder: RecordingSink
    registry: CollectorRegistry
    flushed: bool

    @property
    def spans(self) -> list[ReadableSpan]:
        return self.telemetry.spans(exclude_scope=OWN_SCOPE)


def instrumented_run(scenario: Callable[[], str], expectations: Sequence[ToolExpectation]) -> Iterator[LangGraphRun]:
    """Yield the run of ``scenario`` (for a module-scoped fixture); shut telemetry down afterwards."""
    telemetry = make_telemetry()
    tp, lp = telemetry.tracer_provider, telemetry.logger_provider
    registry = CollectorRegistry()
    processor = install(tp, lp, registry=registry, settle_delay_seconds=0.05, expectations=list(expectations))
    recorder = RecordingSink()
    processor.pipeline.sinks.append(recorder)
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=tp)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # create_react_agent moved to langchain.agents
            output = scenario()
    finally:
        instrumentor.uninstrument()
    flushed = processor.force_flush(10_000)
    try:
        yield LangGraphRun(telemetry, output, recorder, registry, flushed)
    finally:
        telemetry.shutdown()
