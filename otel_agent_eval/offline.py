"""Offline evaluation of exported traces: files -> AgentTraces -> results -> report and gates.

The same assembly and evaluators as the live pipeline, without sampling (every
agent run is evaluated) or emission. Deterministic evaluators run inline; judge
evaluators (``needs_judge``) run on ``judge_concurrency`` threads, as many as
the judge client lets be in flight (``OTEL_AGENT_EVAL_JUDGE_CONCURRENCY``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .assemble import assemble
from .conversations import stitch
from .evaluators.base import Evaluator, safe_evaluate
from .model import AgentTrace, EvalResult
from .pipeline import flatten
from .records import SpanRecord
from .stats_ci import Gate


@dataclass
class Totals:
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    score_sum: float = 0.0
    scored: int = 0

    @property
    def pass_rate(self) -> float | None:
        decided = self.counts["pass"] + self.counts["fail"]
        return self.counts["pass"] / decided if decided else None

    @property
    def mean_score(self) -> float | None:
        return self.score_sum / self.scored if self.scored else None


@dataclass
class Report:
    evaluated: list[tuple[AgentTrace, list[EvalResult]]]
    traces_read: int
    traces_without_agent: int
    gates: list[Gate]

    def totals(self) -> dict[str, Totals]:
        totals: dict[str, Totals] = defaultdict(Totals)
        for _, results in self.evaluated:
            for r in results:
                t = totals[r.evaluator]
                t.counts[r.label] += 1
                if r.score is not None:
                    t.score_sum += r.score
                    t.scored += 1
        return dict(totals)

    def failed_gates(self) -> list[str]:
        totals = self.totals()
        failures = []
        for gate in self.gates:
            counts = totals[gate.evaluator].counts if gate.evaluator in totals else {}
            failure = gate.failure(counts.get("pass", 0), counts.get("pass", 0) + counts.get("fail", 0))
            if failure:
                failures.append(failure)
        return failures


def evaluate_records(
    records: Iterable[SpanRecord], evaluators: Sequence[Evaluator], gates: Sequence[Gate] = (), *, judge_concurrency: int = 1
) -> Report:
    """Every agent run through every evaluator; results per run in the evaluators' order."""
    records = list(records)
    trace_ids = {r.trace_id for r in records}
    agent_traces = flatten(stitch(assemble(records)))
    with_agent = {t.trace_id for t in agent_traces}
    pairs = [(trace, evaluator) for trace in agent_traces for evaluator in evaluators]
    with ThreadPoolExecutor(max_workers=max(1, judge_concurrency), thread_name_prefix="otel-agent-eval-judge") as pool:
        futures = {(id(t), id(e)): pool.submit(safe_evaluate, e, t) for t, e in pairs if e.needs_judge}
        # the deterministic ones meanwhile, on this thread
        outcomes = {(id(t), id(e)): safe_evaluate(e, t)[0] for t, e in pairs if not e.needs_judge}
        outcomes.update({key: future.result()[0] for key, future in futures.items()})
    evaluated = [(t, [r for e in evaluators for r in outcomes[id(t), id(e)]]) for t in agent_traces]
    return Report(evaluated, len(trace_ids), len(trace_ids) - len(with_agent), list(gates))


def read_files(paths: Sequence[str | Path]) -> list[SpanRecord]:
    from .otlp import read_trace_file

    records: list[SpanRecord] = []
    for path in paths:
        records.extend(read_trace_file(path))
    return records


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def print_text(report: Report, out: TextIO) -> None:
    for trace, results in report.evaluated:
        print(f"trace {trace.trace_id}  agent {trace.agent_name}  {len(trace.steps)} steps  {trace.status}", file=out)
        for step in trace.steps:
            calls = "; ".join(
                f"{c.name}({_short(c.arguments, 40)})" + (f" !{_short(c.error, 40)}" if c.error else f" -> {_short(c.result, 40)}")
                for c in step.tool_calls
            )
            text = step.output or step.thought
            print(f"  step {step.index}: {calls or _short(text or '')}", file=out)
        for r in results:
            score = f"{r.score:.2f}" if r.score is not None else "  - "
            print(f"    {r.evaluator:<24} {r.label:<7} {score}  {_short(r.explanation, 70)}", file=out)
    print("", file=out)
    print(f"{report.traces_read} traces read, {len(report.evaluated)} agent runs evaluated, "
          f"{report.traces_without_agent} traces without agent data", file=out)
    print(f"{'evaluator':<24} {'pass':>5} {'fail':>5} {'skip':>5} {'error':>5} {'pass rate':>9} {'mean':>6}", file=out)
    for name, t in sorted(report.totals().items()):
        rate = f"{t.pass_rate:.0%}" if t.pass_rate is not None else "-"
        mean = f"{t.mean_score:.2f}" if t.mean_score is not None else "-"
        print(f"{name:<24} {t.counts['pass']:>5} {t.counts['fail']:>5} {t.counts['skipped']:>5} "
              f"{t.counts['error']:>5} {rate:>9} {mean:>6}", file=out)
    for failure in report.failed_gates():
        print(f"GATE FAILED: {failure}", file=out)


def to_json(report: Report) -> dict[str, Any]:
    return {
        "traces_read": report.traces_read,
        "traces_without_agent": report.traces_without_agent,
        "agent_runs": [
            {"trace": trace.model_dump(mode="json"), "results": [r.model_dump(mode="json") for r in results]}
            for trace, results in report.evaluated
        ],
        "totals": {
            name: {**dict(t.counts), "pass_rate": t.pass_rate, "mean_score": t.mean_score}
            for name, t in sorted(report.totals().items())
        },
        "failed_gates": report.failed_gates(),
    }
