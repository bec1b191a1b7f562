"""Offline evaluation of exported traces: files -> AgentTraces -> results -> report and gates.

The same assembly and evaluators as the live pipeline, without sampling (every
agent run is evaluated) or emission. Deterministic evaluators run inline; judge
evaluators (``needs_judge``) run on ``judge_concurrency`` threads, as many as
the judge client lets be in flight (``OTEL_AGENT_EVAL_JUDGE_CONCURRENCY``).
"""

from __future__ import annotations

import functools
import gc
import json
import pickle
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TextIO

from pydantic import TypeAdapter
from typing_extensions import TypedDict

from ..assembly import assemble
from ..evaluators.base import Evaluator, safe_evaluate
from ..metadata import NO_RESOURCE
from ..model import AgentTrace, EvalResult
from ..pipeline.completion import flatten
from ..pipeline.conversations import stitch
from ..records import LogRecordData, SpanRecord

if TYPE_CHECKING:
    from ..experiments.stats_ci import Gate


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


def evaluate_traces(
    agent_traces: Sequence[AgentTrace], traces_read: int, evaluators: Sequence[Evaluator], gates: Sequence[Gate] = (),
    *, judge_concurrency: int = 1,
) -> Report:
    """Assembled runs (of ``traces_read`` traces) stitched into conversations and evaluated."""
    agent_traces = flatten(stitch(agent_traces))
    with_agent = {t.trace_id for t in agent_traces}
    pairs = [(trace, evaluator) for trace in agent_traces for evaluator in evaluators]
    with ThreadPoolExecutor(max_workers=max(1, judge_concurrency), thread_name_prefix="otel-agent-eval-judge") as pool:
        futures = {(id(t), id(e)): pool.submit(safe_evaluate, e, t) for t, e in pairs if e.needs_judge}
        # the deterministic ones meanwhile, on this thread
        outcomes = {(id(t), id(e)): safe_evaluate(e, t)[0] for t, e in pairs if not e.needs_judge}
        outcomes.update({key: future.result()[0] for key, future in futures.items()})
    evaluated = [(t, [r for e in evaluators for r in outcomes[id(t), id(e)]]) for t in agent_traces]
    return Report(evaluated, traces_read, traces_read - len(with_agent), list(gates))


# --------------------------------------------------------------------------- reading at scale

DEFAULT_MAX_BUFFERED_RECORDS = 50_000
"""Span and log records held in memory while reading, grouped by trace; beyond, spilled to disk."""
_BUCKET_BITS = 6  # 64 spill files per level, chosen by successive 6-bit slices of the trace id
_MASK = (1 << _BUCKET_BITS) - 1


@dataclass
class ReadStats:
    """What reading saw: every span and log record is in a trace or counted here."""

    spans: int = 0
    log_records: int = 0
    spilled_records: int = 0
    """Records written to the spill files (more than ``max_buffered_records`` were read)."""
    log_records_without_trace: int = 0
    """Log records with no trace id, or whose trace has no span in the input: joined to nothing."""


def _spill_row(record: SpanRecord | LogRecordData) -> tuple[Any, ...]:
    """A record as a picklable tuple (``resource`` is a read-only mapping proxy)."""
    if type(record) is LogRecordData:
        return (False, record.trace_id, record.span_id, record.time_unix_nano, record.event_name,
                dict(record.attributes), record.body)
    r = record
    return (True, r.trace_id, r.span_id, r.parent_span_id, r.name, r.start_time_unix_nano, r.end_time_unix_nano,
            r.attributes, r.events, r.status_code, r.status_message, r.kind, r.scope_name, r.parent_is_remote,
            dict(r.resource), r.dropped_attributes_count, r.dropped_events_count)


def _from_spill_row(row: tuple[Any, ...], resources: dict[tuple[Any, ...], Mapping[str, Any]]) -> SpanRecord | LogRecordData:
    if not row[0]:
        return LogRecordData(*row[1:])
    key = tuple(sorted(row[14].items()))
    resource = resources.get(key)
    if resource is None:  # one shared mapping per resource again, as decoding gives
        resource = resources[key] = MappingProxyType(row[14]) if row[14] else NO_RESOURCE
    return SpanRecord(*row[1:14], resource=resource, dropped_attributes_count=row[15], dropped_events_count=row[16])


class TraceGroups:
    """Span and log records grouped by trace id until the input ends, in bounded memory.

    Up to ``max_buffered_records`` records are held in memory. Beyond, everything buffered
    and everything read after is spilled to 64 temporary files by trace id; at the end each
    file is read back in turn (and split 64 ways again if it is itself over the bound), so
    every trace is still assembled whole, whatever the order of the input, in memory
    bounded by the bound plus the largest single trace. Log records are joined to their
    trace's spans (``pipeline/completion.py``, ``join_log_records``).
    """

    def __init__(self, max_buffered_records: int = DEFAULT_MAX_BUFFERED_RECORDS, spill_dir: str | Path | None = None) -> None:
        self.max_buffered_records = max(1, max_buffered_records)
        self.stats = ReadStats()
        self._spill_dir = spill_dir
        self._spans: dict[int, list[SpanRecord]] = defaultdict(list)
        self._logs: dict[int, list[LogRecordData]] = defaultdict(list)
        self._buffered = 0
        self._spill: _Spill | None = None

    def add(self, spans: Sequence[SpanRecord], logs: Sequence[LogRecordData] = ()) -> None:
        self.stats.spans += len(spans)
        self.stats.log_records += len(logs)
        traced = [log for log in logs if log.trace_id is not None] if logs else logs
        self.stats.log_records_without_trace += len(logs) - len(traced)
        if self._spill is not None:
            self._spill.write(spans, traced)
            self.stats.spilled_records += len(spans) + len(traced)
            return
        by_trace = self._spans
        for span in spans:
            by_trace[span.trace_id].append(span)
        for log in traced:
            self._logs[log.trace_id].append(log)  # type: ignore[index]
        self._buffered += len(spans) + len(traced)
        if self._buffered > self.max_buffered_records:
            self._spill = _Spill(self._spill_dir, level=0)
            for records in self._spans.values():
                self._spill.write(records, ())
            for logs_of_trace in self._logs.values():
                self._spill.write((), logs_of_trace)
            self.stats.spilled_records += self._buffered
            self._spans, self._logs, self._buffered = defaultdict(list), defaultdict(list), 0

    def traces(self) -> Iterator[list[SpanRecord]]:
        """Each trace's span records (log records joined), once the input has ended."""
        if self._spill is None:
            spans, logs = self._spans, self._logs
            self._spans, self._logs, self._buffered = defaultdict(list), defaultdict(list), 0
            yield from _joined(spans, logs, self.stats)
            return
        spill, self._spill = self._spill, None
        yield from spill.read_back(self.max_buffered_records, self.stats)


def _joined(spans: dict[int, list[SpanRecord]], logs: dict[int, list[LogRecordData]], stats: ReadStats) -> Iterator[list[SpanRecord]]:
    from ..pipeline.completion import join_log_records

    for trace_id, mine in logs.items():
        if trace_id not in spans:
            stats.log_records_without_trace += len(mine)
    for trace_id, records in spans.items():
        mine = logs.get(trace_id)
        yield join_log_records(records, mine) if mine else records


class _Spill:
    """Records in 64 temporary files by a 6-bit slice of the trace id (``level`` chooses the slice)."""

    def __init__(self, directory: str | Path | None, level: int) -> None:
        self._shift = level * _BUCKET_BITS
        self._dir = tempfile.TemporaryDirectory(prefix="otel-agent-eval-spill-", dir=directory)
        # Open for the spill's lifetime, closed by ``close``.
        self._files = [open(Path(self._dir.name) / f"{i:02d}", "w+b") for i in range(_MASK + 1)]  # noqa: SIM115
        self._counts = [0] * (_MASK + 1)
        self.level = level

    def write(self, spans: Sequence[SpanRecord], logs: Sequence[LogRecordData]) -> None:
        self.write_rows([_spill_row(record) for record in (*spans, *logs)])

    def write_rows(self, rows: Sequence[tuple[Any, ...]]) -> None:
        by_bucket: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
        for row in rows:
            by_bucket[(row[1] >> self._shift) & _MASK].append(row)
        for bucket, chunk in by_bucket.items():
            pickle.dump(chunk, self._files[bucket], protocol=pickle.HIGHEST_PROTOCOL)
            self._counts[bucket] += len(chunk)

    def _rows(self, bucket: int) -> Iterator[list[tuple[Any, ...]]]:
        f = self._files[bucket]
        f.seek(0)
        while True:
            try:
                yield pickle.load(f)
            except EOFError:
                return

    def read_back(self, bound: int, stats: ReadStats) -> Iterator[list[SpanRecord]]:
        try:
            for bucket, count in enumerate(self._counts):
                if count > bound and self._shift + _BUCKET_BITS < 128:  # too big for memory: split it again
                    inner = _Spill(self._dir.name, self.level + 1)
                    try:
                        for rows in self._rows(bucket):
                            inner.write_rows(rows)
                    except BaseException:
                        inner.close()
                        raise
                    yield from inner.read_back(bound, stats)
                    continue
                resources: dict[tuple[Any, ...], Mapping[str, Any]] = {}
                spans: dict[int, list[SpanRecord]] = defaultdict(list)
                logs: dict[int, list[LogRecordData]] = defaultdict(list)
                for rows in self._rows(bucket) if count else ():
                    for row in rows:
                        record = _from_spill_row(row, resources)
                        (spans if row[0] else logs)[record.trace_id].append(record)  # type: ignore[index]
                yield from _joined(spans, logs, stats)
        finally:
            self.close()

    def close(self) -> None:
        for f in self._files:
            f.close()
        self._dir.cleanup()


def read_traces(paths: Sequence[str | Path], groups: TraceGroups) -> Iterator[list[SpanRecord]]:
    """Stream the files into ``groups``; then each trace's records, whole."""
    from ..formats.otlp import iter_trace_file

    for path in paths:
        for spans, logs in iter_trace_file(path):
            groups.add(spans, logs)
    yield from groups.traces()


def evaluate_files(
    paths: Sequence[str | Path], evaluators: Sequence[Evaluator], gates: Sequence[Gate] = (), *,
    judge_concurrency: int = 1, max_buffered_records: int = DEFAULT_MAX_BUFFERED_RECORDS,
) -> tuple[Report, ReadStats]:
    """Read and group in bounded memory, assemble trace by trace, then evaluate every run.

    The report keeps every assembled run (its output lists them); the span records, the
    bulk of the input, are held only up to the bound.
    """
    groups = TraceGroups(max_buffered_records)
    agent_traces: list[AgentTrace] = []
    traces_read = 0
    with _collector_paused():
        for records in read_traces(paths, groups):
            traces_read += 1
            agent_traces.extend(assemble(records))
    report = evaluate_traces(agent_traces, traces_read, evaluators, gates, judge_concurrency=judge_concurrency)
    return report, groups.stats


def batch_collector() -> None:
    """The cyclic collector's thresholds for a batch process (the command, a ``--jobs`` worker): it
    allocates millions of long-lived objects and makes no cycles of note, so the collector's
    passes would cost up to a third of the run at the default thresholds."""
    gc.set_threshold(100_000, 50, 1000)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic collection while reading and assembling; what they made then joins the oldest
    generation untraversed (``gc.freeze`` then ``gc.unfreeze``).

    The records and runs they make live until the report is written, so every pass of the
    collector traverses them all again for nothing (7 % of the command on a 5,000-run export,
    even at ``batch_collector``'s thresholds). Reading makes no reference cycles; assembly
    makes few (none on that export, 11,000 objects over the 9,000 traces of the test corpus,
    less than the runs the report keeps anyway): they wait for a full collection. Left alone
    when the process has frozen objects of its own (``unfreeze`` would release them).
    """
    if gc.get_freeze_count():
        yield
        return
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        if enabled:
            gc.enable()


JUDGE_BUDGET_VARIABLES = ("OTEL_AGENT_EVAL_JUDGE_BUDGET_TOKENS_PER_HOUR", "OTEL_AGENT_EVAL_JUDGE_BUDGET_USD_PER_HOUR")


def budget_share(env: Mapping[str, str], jobs: int) -> dict[str, str]:
    """The judge budget variables of ``env`` divided among ``jobs`` processes (only those set)."""
    shares: dict[str, str] = {}
    for name in JUDGE_BUDGET_VARIABLES:
        text = env.get(name, "").strip()
        if not text:
            continue
        try:
            total = float(text)
        except ValueError:
            continue  # left as it is: the worker's settings report it
        if name.endswith("TOKENS_PER_HOUR"):
            shares[name] = str(max(1, int(total) // jobs) if total > 0 else 0)
        else:
            shares[name] = repr(total / jobs)
    return shares


def split_files(paths: Sequence[str | Path], jobs: int) -> list[list[str]]:
    """Files dealt to at most ``jobs`` shares, largest first to the lightest share."""
    sized = sorted(((_size(p), str(p)) for p in paths), reverse=True)
    shares: list[tuple[int, list[str]]] = [(0, []) for _ in range(max(1, min(jobs, len(sized))))]
    for size, path in sized:
        lightest = min(range(len(shares)), key=lambda i: shares[i][0])
        total, files = shares[lightest]
        shares[lightest] = (total + size, [*files, path])
    return [files for _, files in shares if files]


def _size(path: str | Path) -> int:
    try:
        return Path(path).stat().st_size
    except OSError:
        return 0  # reading reports it


def _evaluate_share(
    paths: Sequence[str], build: Callable[[], tuple[list[Evaluator], Any]], budget: Mapping[str, str], max_buffered_records: int,
) -> tuple[list[tuple[AgentTrace, list[EvalResult]]], int, ReadStats]:
    """One worker process: its files, with its share of the judge budget."""
    import os

    os.environ.update(budget)
    batch_collector()
    evaluators, judge = build()
    try:
        concurrency = judge.settings.concurrency if judge is not None else 1
        report, stats = evaluate_files(paths, evaluators, judge_concurrency=concurrency, max_buffered_records=max_buffered_records)
    finally:
        if judge is not None:
            judge.close()
    return report.evaluated, report.traces_read, stats


def evaluate_files_parallel(
    paths: Sequence[str | Path], jobs: int, build: Callable[[], tuple[list[Evaluator], Any]], gates: Sequence[Gate] = (), *,
    max_buffered_records: int = DEFAULT_MAX_BUFFERED_RECORDS,
) -> tuple[Report, ReadStats]:
    """``evaluate_files`` over ``jobs`` processes, files dealt among them, merged into one report.

    ``build`` (picklable: a module-level function or a ``functools.partial`` of one) makes
    each process's evaluators and judge; each process gets ``1/jobs`` of the judge budget
    (``OTEL_AGENT_EVAL_JUDGE_BUDGET_*``). A file is the unit: a trace whose spans are split
    over files in different shares is assembled in parts, and conversations are stitched
    within a share only.
    """
    import multiprocessing
    import os
    from concurrent.futures import ProcessPoolExecutor

    shares = split_files(paths, jobs)
    budget = budget_share(os.environ, len(shares))
    context = multiprocessing.get_context("spawn")  # no state of this process (threads, locks) carried over
    with ProcessPoolExecutor(max_workers=len(shares), mp_context=context) as pool:
        futures = [pool.submit(_evaluate_share, share, build, budget, max_buffered_records) for share in shares]
        parts = [future.result() for future in futures]
    stats = ReadStats()
    evaluated: list[tuple[AgentTrace, list[EvalResult]]] = []
    traces_read = 0
    for part_evaluated, part_read, part_stats in parts:
        evaluated.extend(part_evaluated)
        traces_read += part_read
        for name in vars(stats):
            setattr(stats, name, getattr(stats, name) + getattr(part_stats, name))
    with_agent = len({trace.trace_id for trace, _ in evaluated})
    return Report(evaluated, traces_read, traces_read - with_agent, list(gates)), stats


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
    print(file=out)
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


class _Run(TypedDict):
    trace: AgentTrace
    results: list[EvalResult]


class _ReportDocument(TypedDict):
    traces_read: int
    traces_without_agent: int
    agent_runs: list[_Run]
    totals: dict[str, dict[str, Any]]
    failed_gates: list[str]


@functools.cache
def _report_adapter() -> TypeAdapter[_ReportDocument]:
    return TypeAdapter(_ReportDocument)


def report_json(report: Report) -> bytes:
    """The report as indented JSON (UTF-8), every run with its results.

    Written by pydantic's serializer in one pass over the models, without the intermediate
    Python objects of ``model_dump`` (a third cheaper than those dumped with orjson, and the
    same bytes), whether orjson is installed or not.
    """
    document: _ReportDocument = {
        "traces_read": report.traces_read,
        "traces_without_agent": report.traces_without_agent,
        "agent_runs": [{"trace": trace, "results": results} for trace, results in report.evaluated],
        "totals": {
            name: {**dict(t.counts), "pass_rate": t.pass_rate, "mean_score": t.mean_score}
            for name, t in sorted(report.totals().items())
        },
        "failed_gates": report.failed_gates(),
    }
    return _report_adapter().dump_json(document, indent=2)
