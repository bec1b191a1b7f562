"""The in-memory reading and evaluation the streaming ``evaluate`` is checked against (tests only)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from otel_agent_eval.assembly import assemble
from otel_agent_eval.cli.evaluate import Report, evaluate_traces
from otel_agent_eval.evaluators.base import Evaluator
from otel_agent_eval.experiments.stats_ci import Gate
from otel_agent_eval.formats.otlp import read_trace_file
from otel_agent_eval.records import SpanRecord


def evaluate_records(
    records: Iterable[SpanRecord], evaluators: Sequence[Evaluator], gates: Sequence[Gate] = (), *, judge_concurrency: int = 1
) -> Report:
    """Every agent run through every evaluator; results per run in the evaluators' order."""
    records = list(records)
    trace_ids = {r.trace_id for r in records}
    return evaluate_traces(assemble(records), len(trace_ids), evaluators, gates, judge_concurrency=judge_concurrency)


def read_files(paths: Sequence[str | Path]) -> list[SpanRecord]:
    """Every span of the files, in memory; ``read_traces`` streams."""
    records: list[SpanRecord] = []
    for path in paths:
        records.extend(read_trace_file(path))
    return records
