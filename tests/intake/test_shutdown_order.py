"""What is still buffered when the app stops is evaluated and its results exported, however the app stops.

A provider shuts its processors down in the order they were added, and the app's exporting processors
are added first (the README's own example): the processor drained at its turn, emitting its last
evaluation spans and result records into batch processors already shut down, and they were lost (0 of 7
spans). Each case is a real interpreter that exits (exit handlers are the point), with the SDK's batch
processors and counting exporters, and a settle delay long enough that nothing is evaluated before the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from otel_agent_eval.cli.demo import SCENARIOS

ROOT = Path(__file__).resolve().parents[2]
APP = '''
import json, sys
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogExporter, LogExportResult
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind
from otel_agent_eval import AgentEvalProcessor, install
from otel_agent_eval.cli.demo import SCENARIOS

COUNTS = {"evaluation_spans": 0, "results": 0}

class Spans(SpanExporter):
    def export(self, spans):
        COUNTS["evaluation_spans"] += sum(s.instrumentation_scope.name == "otel_agent_eval" for s in spans)
        return SpanExportResult.SUCCESS
    def shutdown(self):  # each exporter says what it sent once its provider has shut it down
        sys.stdout.write(json.dumps({"evaluation_spans": COUNTS["evaluation_spans"]}) + "\\n")

class Logs(LogExporter):
    def export(self, batch):
        COUNTS["results"] += sum(d.log_record.event_name == "gen_ai.evaluation.result" for d in batch)
        return LogExportResult.SUCCESS
    def force_flush(self, timeout_millis=30000):
        return True
    def shutdown(self):
        sys.stdout.write(json.dumps({"results": COUNTS["results"]}) + "\\n")

provider, logger_provider = TracerProvider(), LoggerProvider()
provider.add_span_processor(BatchSpanProcessor(Spans()))
logger_provider.add_log_record_processor(BatchLogRecordProcessor(Logs()))
settings = dict(sample_rate=1.0, settle_delay_seconds=600, max_evaluations_per_second=0)
how = sys.argv[1]
if how == "added_by_hand":
    provider.add_span_processor(AgentEvalProcessor(tracer_provider=provider, logger_provider=logger_provider, **settings))
else:
    install(provider, logger_provider, **settings)
tracer = provider.get_tracer("app")
for scenario in SCENARIOS:
    with tracer.start_as_current_span("POST /agent", kind=SpanKind.SERVER):
        scenario.agent.run(tracer, scenario.task, scenario.turns)
if how == "tracer_provider_first":
    provider.shutdown()
    logger_provider.shutdown()
elif how == "logger_provider_first":
    logger_provider.shutdown()
    provider.shutdown()
'''


@pytest.mark.parametrize("how", ["exit", "tracer_provider_first", "logger_provider_first", "added_by_hand"])
def test_what_is_buffered_at_the_end_is_evaluated_and_exported(how: str, tmp_path: Path) -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PYTHON"))}, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", APP, how], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    counts = {k: v for line in done.stdout.splitlines() for k, v in json.loads(line).items()}
    runs = len(SCENARIOS)
    assert counts == {"evaluation_spans": runs, "results": 4 * runs}, (counts, done.stderr[-2000:])
